"""One Spark driver of the multi-process metadata tests: serves commands from the test process.

Run as ``python worker.py DIR`` (by path, like ``tests/spark/append_worker.py``). Starting a
driver costs 10-20 s on a busy 2-core machine, so a worker starts once and then runs commands
for several tests:

* it writes ``DIR/ready`` once its Spark session is up;
* the test writes command ``n`` as ``DIR/cmd-<n>.json`` (n = 0, 1, ...); the worker runs them in
  order and answers each with ``DIR/res-<n>.json``: ``{"ok": true, "result": ...}`` or
  ``{"ok": false, "error": "<traceback>"}``; files appear atomically (write, then rename);
* a command with a ``race`` directory opens its warehouse, says ``RACE/ready-<worker>`` and polls
  for ``RACE/go`` every 10 ms (``tests/multiprocess_support.py``), so that several workers act
  at the same moment; its operations' wall-clock start and end go to ``RACE/times-<worker>.json``
  (``<worker>`` = the name of DIR), from which the test checks that they overlapped;
* ``open_after_barrier`` opens the command's warehouse only after the barrier, so that
  several workers create a new warehouse at once;
* ``hold`` takes a lock, answers, then sleeps forever: the test kills the worker;
* it exits on ``DIR/stop``, when its parent (the test process) goes away, or after idling long.

Spark's own logs go to stdout/stderr, which the test points at ``DIR/log.txt``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.spark import spark_session
from tests.multiprocess_support import OpTimes, driver_conf, signal_ready, wait_for_go

POLL_S = 0.02
BARRIER_TIMEOUT_S = 600.0
IDLE_TIMEOUT_S = 1800.0


def now_ms() -> int:
    return int(time.time() * 1000)


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` so that a reader never sees a partial file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    tmp.rename(path)


class Worker:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.parent = os.getppid()
        self.spark = spark_session(
            app_name=f"metadata-worker-{directory.name}",
            master="local[1]",
            quiet_progress=True,
            extra_conf=driver_conf(),
        )
        self.lakes: dict[tuple[str, float], Lake] = {}
        self.times: OpTimes | None = None
        self.warm_up()

    def warm_up(self) -> None:
        """Run one metadata commit on a scratch warehouse before saying ready. A fresh JVM
        spends 5-15 s (varying by worker) on its first Delta read and MERGE: cold workers
        released by one barrier would reach the metadata table seconds apart, not together."""
        scratch = Lake(self.spark, str(self.dir / "scratch"))
        day = Interval.parse("2000-01-01/P1D")
        scratch.actions.allocate("warmup", [AllocateRequest(day, "warmup")], group_id="warmup")

    def lake(self, command: dict[str, Any]) -> Lake:
        key = (command["warehouse"], float(command.get("lease_seconds", 60.0)))
        if key not in self.lakes:
            self.lakes[key] = Lake(self.spark, key[0], lease_seconds=key[1])
        return self.lakes[key]

    def serve(self) -> None:
        (self.dir / "ready").write_text(str(os.getpid()))
        seq = 0
        idle_since = time.monotonic()
        while not (self.dir / "stop").exists():
            if not self.parent_alive() or time.monotonic() - idle_since > IDLE_TIMEOUT_S:
                return
            path = self.dir / f"cmd-{seq}.json"
            if not path.exists():
                time.sleep(POLL_S)
                continue
            command = json.loads(path.read_text())
            try:
                answer = {"ok": True, "result": self.run(seq, command)}
            except Exception:
                answer = {"ok": False, "error": traceback.format_exc()}
            write_json(self.dir / f"res-{seq}.json", answer)
            if command["op"] == "hold" and answer["ok"]:
                # A task that holds its lock and then hangs: never heartbeats, never releases.
                # The test kills it; an orphan (the test process is gone) goes by itself.
                while self.parent_alive():
                    time.sleep(1)
                return
            seq += 1
            idle_since = time.monotonic()

    def parent_alive(self) -> bool:
        return os.getppid() == self.parent

    def run(self, seq: int, command: dict[str, Any]) -> Any:
        # Opened before the barrier unless the race is about opening (creating) a warehouse.
        lake = None if command.get("open_after_barrier") else self.lake(command)
        race = command.get("race")
        if not race:
            self.times = None
            return getattr(self, "op_" + command["op"])(lake or self.lake(command), command)
        race_dir = Path(race)
        self.times = OpTimes(race_dir, self.dir.name)
        signal_ready(race_dir, self.dir.name, seq=seq)
        wait_for_go(race_dir, BARRIER_TIMEOUT_S, keep_waiting=self.parent_alive)
        if lake is None:  # the race is about opening: that is part of the operation
            with self.timed("open"):
                lake = self.lake(command)
        return getattr(self, "op_" + command["op"])(lake, command)

    def timed(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """Time the block as one operation of a race (nothing outside a race)."""
        return self.times.op(name) if self.times else contextlib.nullcontext()

    # -- operations --------------------------------------------------------------------------

    def op_allocate(self, lake: Lake, command: dict[str, Any]) -> list[dict[str, Any]]:
        """One ``allocate`` call (one commit) per sequence name, in order."""
        day = Interval.parse(command["interval"])
        out = []
        for name in command["sequences"]:
            with self.timed("allocate"):
                [pending] = lake.actions.allocate(
                    command["ds"], [AllocateRequest(day, name)], group_id=command["group"]
                )
            sid = pending.segment_id
            out.append(
                {
                    "sequence": name,
                    "id": str(sid),
                    "version": sid.version,
                    "partition": sid.partition_num,
                }
            )
        return out

    def op_try_lock(self, lake: Lake, command: dict[str, Any]) -> dict[str, Any]:
        asked_ms = now_ms()
        with self.timed("try_lock"):
            result = lake.actions.try_lock(
                command["ds"], command["interval"], group_id=command["group"]
            )
        return {
            "granted": result.granted,
            "version": result.lock.version if result.lock else None,
            "conflicting": [lk.group_id for lk in result.conflicting],
            "asked_ms": asked_ms,
            "answered_ms": now_ms(),
        }

    def op_lock(self, lake: Lake, command: dict[str, Any]) -> dict[str, Any]:
        """``lake.lock``: wait up to ``timeout_s`` for the interval to be free."""
        lock = lake.actions.lock(
            command["ds"],
            command["interval"],
            group_id=command["group"],
            timeout_s=float(command.get("timeout_s", 30.0)),
        )
        return {
            "version": lock.version,
            "acquired_ms": lock.acquired_millis,
            "expires_ms": lock.expires_millis,
            "answered_ms": now_ms(),
        }

    # ``hold`` is ``lock``, after which :meth:`serve` hangs instead of taking more commands.
    op_hold = op_lock

    def op_publish(self, lake: Lake, command: dict[str, Any]) -> list[str]:
        """Lock an interval exclusively, then publish ``count`` segments in it in one
        transactional publish, which releases the lock."""
        ds, group, count = command["ds"], command["group"], int(command["count"])
        day = Interval.parse(command["interval"])
        with self.timed("lock"):
            lock = lake.actions.lock(ds, day, group_id=group, timeout_s=120)
        segments = [
            DataSegment(
                ds,
                day,
                lock.version,
                NumberedShardSpec(p, count),
                load_spec={"type": "delta", "segment": f"{group}-{p}"},
                num_rows=10 + p,
                size=1000 + p,
            )
            for p in range(count)
        ]
        with self.timed("publish"):
            result = lake.actions.publish(ds, segments, group_id=group)
        if result.segments != count or result.locks_released != 1:
            raise AssertionError(f"unexpected publish result {result}")
        return [str(seg.id) for seg in segments]


def main(directory: Path) -> None:
    worker = Worker(directory)
    try:
        worker.serve()
    finally:
        worker.spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
