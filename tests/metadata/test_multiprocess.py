"""The metadata layer across separate Spark drivers on one local warehouse.

Each worker (``worker.py``) is its own Spark driver (``local[1]``) serving commands from this
test; a module-wide pool of three keeps their ~10-20 s start-up out of every test. Each test
has its own warehouse (``tmp_path``) and datasource. Races follow ``tests/multiprocess_support``:
warm workers (Spark up, one scratch commit done, the warehouse opened) say they are ready, the
test releases them all at once, and checks from their own clocks that the operations it calls
concurrent did overlap.

What is checked: allocation gives unique, gap-free ids in one chunk version; exactly one of
concurrent exclusive lock requests wins; concurrent publishes all land; a holder SIGKILLed
with its JVM blocks another worker only until its lease ends, and can no longer publish (that
one is sequential by design: the successor acts after the holder is dead).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from segmentlake.core.interval import Interval
from segmentlake.core.locks import LockGranularity
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.errors import LockRefused
from segmentlake.lake import Lake
from segmentlake.metadata.records import PENDING
from tests.multiprocess_support import (
    Overlap,
    assert_overlapped,
    go,
    overlap_of,
    read_all_times,
    wait_ready,
)

# Three JVMs on a 2-core machine shared with other jobs; every metadata commit costs seconds.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.multiprocess,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
WORKERS = 3
ALLOCATIONS = 4  # per worker (K)
SEGMENTS = 3  # published per worker (M)
# The killed holder's lease. It runs from the moment the lockbox decides, and commits take
# seconds here: measured, the holder answered 2.6 s into its lease and the successor's refusal
# came 4.3 s in. A 5 s lease would leave well under a second of margin on a loaded machine;
# 15 s keeps "refused while the lease lasts" observable without flakiness.
LEASE_S = 15.0
DAY = Interval.parse("2024-01-01/P1D")
START_TIMEOUT_S = 300.0
RESULT_TIMEOUT_S = 480.0


class WorkerProcess:
    """A running ``worker.py``: its own process group (Python driver + JVM), its command
    directory and its log."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True)
        self.dir = directory
        self.log = directory / "log.txt"
        self.seq = 0
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(WORKER_SCRIPT), str(directory)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 6000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.dir.name} (exit {self.proc.poll()}) log tail ---\n{text[-chars:]}"

    def wait_for(self, name: str, timeout_s: float = RESULT_TIMEOUT_S) -> Path:
        path = self.dir / name
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            if not self.alive and not path.exists():
                pytest.fail(f"worker {self.dir.name} died waiting for {name}\n{self.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"worker {self.dir.name}: no {name} in {timeout_s:.0f}s\n{self.tail()}")
            time.sleep(0.02)
        return path

    def send(self, op: str, **fields: Any) -> int:
        seq, self.seq = self.seq, self.seq + 1
        tmp = self.dir / f"cmd-{seq}.json.tmp"
        tmp.write_text(json.dumps({"op": op, **fields}))
        tmp.rename(self.dir / f"cmd-{seq}.json")
        return seq

    def result(self, seq: int) -> Any:
        answer = json.loads(self.wait_for(f"res-{seq}.json").read_text())
        if not answer["ok"]:
            pytest.fail(f"worker {self.dir.name} failed:\n{answer['error']}\n{self.tail()}")
        return answer["result"]

    def kill(self) -> None:
        """SIGKILL the driver and its JVM at once: a crash, no cleanup of any kind."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        """Ask the worker to stop its Spark session and exit; kill what is left after 30 s."""
        (self.dir / "stop").touch()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self.kill()


class Pool:
    """Warm workers shared by the module's tests; dead ones (killed by a test) are replaced."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started = 0
        self.workers: list[WorkerProcess] = []

    def spawn(self, n: int) -> None:
        """Start workers until ``n`` are alive, without waiting for them."""
        self.workers = [w for w in self.workers if w.alive]
        while len(self.workers) < n:
            self.workers.append(WorkerProcess(self.root / f"w{self.started}"))
            self.started += 1

    def get(self, n: int) -> list[WorkerProcess]:
        """``n`` live, ready workers."""
        self.spawn(n)
        chosen = self.workers[:n]
        for worker in chosen:
            worker.wait_for("ready", START_TIMEOUT_S)
        return chosen

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []


@pytest.fixture(scope="session")
def worker_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    # Session-scoped only to be set up before the session's own Spark (fixtures of wider scope
    # come first), so that the workers start while it does.
    workers = Pool(tmp_path_factory.mktemp("workers"))
    try:
        workers.spawn(WORKERS)
        yield workers
    finally:
        # A failed or timed-out test must not leave drivers committing behind it.
        workers.close()


@pytest.fixture(scope="module")
def pool(worker_pool: Pool) -> Iterator[Pool]:
    yield worker_pool
    # Done: don't leave three idle drivers behind for the rest of the run.
    worker_pool.close()


@pytest.fixture
def warehouse_lake(spark: SparkSession, tmp_path: Path) -> Lake:
    """This test's warehouse, created here so that workers only open it."""
    return Lake(spark, str(tmp_path / "warehouse"))


def race(
    workers: list[WorkerProcess],
    commands: list[dict[str, Any]],
    race_dir: Path,
    *,
    together: bool = False,
    proven: bool = True,
) -> tuple[list[Any], Overlap]:
    """Hand each worker its command, wait until all are ready in ``race_dir``, release them,
    check that their operations overlapped (``together``: all at one instant; not
    ``proven``: measure only), and return their results in order with the overlap figures."""
    race_dir.mkdir()
    seqs = [w.send(race=str(race_dir), **c) for w, c in zip(workers, commands, strict=True)]
    names = [w.dir.name for w in workers]
    by_name = {w.dir.name: w for w in workers}
    try:
        wait_ready(
            race_dir,
            {w.dir.name: w.proc for w in workers},
            timeout_s=START_TIMEOUT_S,
            tail=lambda name: by_name[name].tail(),
        )
    finally:
        # Even when one failed: the others must not sit at this barrier while later tests
        # queue commands behind it.
        go(race_dir)
    results = [w.result(seq) for w, seq in zip(workers, seqs, strict=True)]
    times = read_all_times(race_dir, names)
    overlap = assert_overlapped(times, together=together) if proven else overlap_of(times)
    return results, overlap


def race_until_together(
    workers: list[WorkerProcess],
    commands: Callable[[int], list[dict[str, Any]]],
    race_dir: Path,
    check: Callable[[int, list[Any]], None],
    *,
    rounds: int = 5,
) -> int:
    """:func:`race` ``commands(round)`` until a round has every worker busy at one instant,
    checking each round's results with ``check(round, results)``; the round that did. An
    operation of ~10 ms can end before a worker that saw the go one poll (10 ms) later
    starts: the proof of a race then takes another round, not a failed test."""
    race_dir.mkdir()
    for attempt in range(rounds):
        results, overlap = race(workers, commands(attempt), race_dir / str(attempt), proven=False)
        check(attempt, results)
        print(f"round {attempt}: {overlap.summary()}")
        if overlap.common > 0:
            return attempt
    pytest.fail(f"in {rounds} rounds the workers were never all busy at once")


def test_concurrent_allocations_get_unique_gap_free_ids_in_one_version(
    pool: Pool, warehouse_lake: Lake, tmp_path: Path
) -> None:
    lake = warehouse_lake
    ds = "alloc"
    commands = [
        {
            "op": "allocate",
            "warehouse": lake.warehouse,
            "ds": ds,
            "interval": str(DAY),
            "group": f"g{i}",
            "sequences": [f"p{i}-{k}" for k in range(ALLOCATIONS)],
            # Commits take seconds here: with the default 60 s lease the first segment locks
            # could expire (and be cleaned up) before the last allocation.
            "lease_seconds": 600,
        }
        for i in range(WORKERS)
    ]
    results, _ = race(pool.get(WORKERS), commands, tmp_path / "race")

    rows = lake.metadata.rows(ds, pc.field("kind") == PENDING)
    total = WORKERS * ALLOCATIONS
    context = f"rows: {sorted((r['partition_num'], r['id']) for r in rows)}\nresults: {results}"
    assert sorted(r["partition_num"] for r in rows) == list(range(total)), context
    assert len({r["version"] for r in rows}) == 1, context
    assert {(r["start_ms"], r["end_ms"]) for r in rows} == {DAY.key}, context
    assert {(r["group_id"], r["sequence_name"]) for r in rows} == {
        (f"g{i}", f"p{i}-{k}") for i in range(WORKERS) for k in range(ALLOCATIONS)
    }, context
    # What each process was told is what the table holds, and its own ids only grew.
    assert sorted(a["id"] for answer in results for a in answer) == sorted(
        r["payload"] for r in rows
    ), context
    for answer in results:
        partitions = [a["partition"] for a in answer]
        assert partitions == sorted(partitions), context
    # Each id came with its segment lock, in the same commit.
    locks = lake.locks(ds, include_expired=True)
    assert all(lk.granularity is LockGranularity.SEGMENT for lk in locks)
    assert sorted((lk.group_id, lk.partition_num, lk.version) for lk in locks) == sorted(
        (r["group_id"], r["partition_num"], r["version"]) for r in rows
    ), context


def test_processes_creating_one_warehouse_at_once_all_commit(pool: Pool, tmp_path: Path) -> None:
    def commands(attempt: int) -> list[dict[str, Any]]:
        # Nobody has opened it: the workers create it.
        warehouse = str(tmp_path / f"fresh{attempt}")
        return [
            {
                "op": "allocate",
                "warehouse": warehouse,
                "ds": "fresh",
                "interval": str(DAY),
                "group": f"g{i}",
                "sequences": [f"p{i}"],
                "open_after_barrier": True,
            }
            for i in range(WORKERS)
        ]

    def check(attempt: int, results: list[Any]) -> None:
        partitions = sorted(a["partition"] for answer in results for a in answer)
        assert partitions == list(range(WORKERS)), results

    race_until_together(pool.get(WORKERS), commands, tmp_path / "race", check)


def test_exactly_one_of_concurrent_exclusive_requests_wins(
    pool: Pool, warehouse_lake: Lake, tmp_path: Path
) -> None:
    lake = warehouse_lake

    def commands(attempt: int) -> list[dict[str, Any]]:
        return [
            {
                "op": "try_lock",
                "warehouse": lake.warehouse,
                "ds": f"exclusive{attempt}",
                "interval": str(DAY),
                "group": f"x{i}",
            }
            for i in range(WORKERS)
        ]

    def check(attempt: int, results: list[Any]) -> None:
        winners = [f"x{i}" for i, r in enumerate(results) if r["granted"]]
        assert len(winners) == 1, results
        [winner] = winners
        for i, answer in enumerate(results):
            if f"x{i}" != winner:
                assert answer["conflicting"] == [winner], results
        held = lake.locks(f"exclusive{attempt}")
        assert [(lk.group_id, lk.interval) for lk in held] == [(winner, DAY)], results
        assert held[0].version == results[int(winner[1:])]["version"]

    race_until_together(pool.get(WORKERS), commands, tmp_path / "race", check)


def test_concurrent_publishes_all_land(pool: Pool, warehouse_lake: Lake, tmp_path: Path) -> None:
    lake = warehouse_lake
    ds = "publish"
    days = [Interval.parse(f"2024-01-0{i + 1}/P1D") for i in range(WORKERS)]
    commands = [
        {
            "op": "publish",
            "warehouse": lake.warehouse,
            "ds": ds,
            "interval": str(days[i]),
            "group": f"pub{i}",
            "count": SEGMENTS,
        }
        for i in range(WORKERS)
    ]
    results, _ = race(pool.get(WORKERS), commands, tmp_path / "race", together=True)

    used = lake.used_segments(ds)
    assert sorted(str(s.id) for s in used) == sorted(sid for r in results for sid in r), results
    assert len(used) == WORKERS * SEGMENTS
    for day in days:
        in_day = [s for s in used if s.interval == day]
        assert [s.shard_spec.partition_num for s in in_day] == list(range(SEGMENTS)), used
        assert len({s.version for s in in_day}) == 1, used
    visible = lake.timeline(ds).lookup(Interval(days[0].start, days[-1].end))
    assert [(h.interval, len(h.segments)) for h in visible] == [(d, SEGMENTS) for d in days]
    assert lake.locks(ds, include_expired=True) == []  # each publish released its lock


def test_killed_holder_is_taken_over_after_its_lease(pool: Pool, warehouse_lake: Lake) -> None:
    lake = warehouse_lake
    ds = "takeover"
    holder, successor = pool.get(2)
    where = {"warehouse": lake.warehouse, "ds": ds, "interval": str(DAY)}
    held = holder.result(holder.send("hold", group="doomed", lease_seconds=LEASE_S, **where))
    # The lock is committed and the holder now sleeps without heartbeats: crash it.
    holder.kill()

    refused = successor.result(successor.send("try_lock", group="successor", **where))
    timing = f"asked {held['expires_ms'] - refused['asked_ms']} ms before the lease end: {held}"
    assert not refused["granted"], timing
    assert refused["conflicting"] == ["doomed"], timing

    taken = successor.result(successor.send("lock", group="successor", timeout_s=30, **where))
    assert taken["acquired_ms"] >= held["expires_ms"], (held, taken)
    assert taken["version"] > held["version"]
    assert [(lk.group_id, lk.version) for lk in lake.locks(ds)] == [("successor", taken["version"])]

    # The dead task's publish, had it only been slow: refused, nothing published.
    dead = DataSegment(ds, DAY, held["version"], NumberedShardSpec(0, 1), num_rows=1, size=1)
    with pytest.raises(LockRefused, match="refused"):
        lake.actions.publish(ds, [dead], group_id="doomed")
    assert lake.used_segments(ds) == []
