"""The steps every multi-process test shares, written once: warm workers, one release, and proof
from the workers' own clocks that what the test calls concurrent really ran at the same time.

A Spark driver needs 10-20 s to start on a busy 2-core machine, and its first Delta read or
commit costs seconds more, so "start two workers and sleep a little" does not make them race.
Instead:

* worker: set up everything (Spark session, ``Lake``, DataFrames, a warm-up commit if useful),
  then :func:`signal_ready` (``DIR/ready-<worker>``) and :func:`wait_for_go`, which polls for
  ``DIR/go`` every 10 ms; it records each operation's wall-clock start and end with
  :class:`OpTimes`, saved as ``DIR/times-<worker>.json``;
* test: :func:`wait_ready` (every worker ready, none dead, bounded), :func:`go`, and after the
  run :func:`read_times` and :func:`assert_overlapped`, which fails unless every worker had an
  operation in flight while another worker's operation was.

Workers import this module too (their ``PYTHONPATH`` is the repository root), so it imports
nothing heavy; ``pytest`` only inside the test-side helpers.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLL_S = 0.01
READY_TIMEOUT_S = 600.0
# The Spark conf of a worker driver living a few minutes (one local core): it spends most of
# its life starting and warming up, and C1 alone starts it faster and, measured on this
# machine, commits no slower than with C2 compiling alongside.
SHORT_LIVED_DRIVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
GO_TIMEOUT_S = 900.0
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def driver_conf(conf: Mapping[str, str] = SHORT_LIVED_DRIVER_CONF) -> dict[str, str]:
    """``conf`` for a driver the suite starts, with the class data sharing archive ``make test``
    built added to its Java options (:mod:`tests.jvm_archive`: ~16 s to a warm driver instead
    of ~25 s); ``conf`` as it is when there is none. A ``conf`` given replaces the short-lived
    one rather than adding to it: a worker wants ``driver_conf()`` (two that passed their own
    rebuilt Delta state in the default number of tasks, and ran 20-40% longer)."""
    from tests.jvm_archive import archive_option

    option = archive_option()
    if not option:
        return dict(conf)
    return {**conf, _JAVA_OPTIONS: f"{conf.get(_JAVA_OPTIONS, '')} {option}".strip()}


# -- worker side --------------------------------------------------------------------------------


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` so that a reader never sees a partial file."""
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)


def signal_ready(directory: Path, worker: str, **info: Any) -> None:
    """Say that ``worker`` is warm and waits for the go; ``info`` goes to the test."""
    write_json(directory / f"ready-{worker}", info)


def wait_for_go(
    directory: Path,
    timeout_s: float = GO_TIMEOUT_S,
    *,
    keep_waiting: Callable[[], bool] | None = None,
) -> float:
    """Poll for ``DIR/go`` every 10 ms; return the wall-clock time it was seen. Gives up after
    ``timeout_s``, or as soon as ``keep_waiting()`` says no (e.g. the test process is gone)."""
    deadline = time.monotonic() + timeout_s
    go_file = directory / "go"
    while not go_file.exists():
        if time.monotonic() > deadline or (keep_waiting is not None and not keep_waiting()):
            raise TimeoutError(f"{go_file} never appeared")
        time.sleep(POLL_S)
    return time.time()


class OpTimes:
    """Wall-clock start and end of each operation of one worker."""

    def __init__(self, directory: Path, worker: str) -> None:
        self.path = directory / f"times-{worker}.json"
        self.ops: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # a worker may time operations from several threads

    @contextmanager
    def op(self, name: str, **info: Any) -> Iterator[dict[str, Any]]:
        """Time the block as operation ``name`` (recorded even if it raises, with ``ok``
        false), then save every operation so far: a test may read them while we run."""
        record: dict[str, Any] = {"op": name, **info, "start": time.time()}
        try:
            yield record
            record.setdefault("ok", True)
        except BaseException:
            record["ok"] = False
            raise
        finally:
            record["end"] = time.time()
            self.add(record)

    def add(self, record: dict[str, Any]) -> None:
        """Record an operation timed elsewhere: ``op``, ``start``, ``end`` and any info."""
        with self._lock:
            self.ops.append(record)
            write_json(self.path, self.ops)


# -- test side ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Op:
    """One timed operation of one worker."""

    worker: str
    name: str
    start: float
    end: float

    def overlap(self, other: Op) -> float:
        """Seconds both were in flight (<= 0: they were not)."""
        return min(self.end, other.end) - max(self.start, other.start)


def _tail(proc: subprocess.Popen) -> str:
    if proc.stdout is None:
        return ""
    try:
        out = proc.communicate(timeout=10)[0]
    except (subprocess.TimeoutExpired, ValueError):
        return ""
    return (out or "")[-4000:]


def wait_ready(
    directory: Path,
    procs: Mapping[str, subprocess.Popen],
    *,
    timeout_s: float = READY_TIMEOUT_S,
    tail: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """Wait until every worker of ``procs`` (name -> process) wrote ``DIR/ready-<name>``;
    fail at once if one exits first, or after ``timeout_s``. Returns each worker's ready info.
    ``tail(name)`` describes a worker for the failure message (default: its piped output)."""
    import pytest

    deadline = time.monotonic() + timeout_s
    waiting = dict(procs)
    while waiting:
        for name, proc in list(waiting.items()):
            if (directory / f"ready-{name}").exists():
                del waiting[name]
            elif proc.poll() is not None:
                text = tail(name) if tail else _tail(proc)
                pytest.fail(f"worker {name} exited ({proc.returncode}) before it was ready\n{text}")
        if waiting and time.monotonic() > deadline:
            pytest.fail(f"workers {sorted(waiting)} not ready after {timeout_s:.0f} s")
        if waiting:
            time.sleep(POLL_S)
    return {name: json.loads((directory / f"ready-{name}").read_text()) for name in procs}


def go(directory: Path) -> float:
    """Release every worker waiting in :func:`wait_for_go`; return the wall-clock time."""
    released = time.time()
    (directory / "go").touch()
    return released


def read_times(directory: Path, worker: str) -> list[Op]:
    """The operations ``worker`` recorded (see :class:`OpTimes`)."""
    path = directory / f"times-{worker}.json"
    return ops_from(worker, json.loads(path.read_text()) if path.exists() else [])


def read_all_times(directory: Path, workers: Sequence[str]) -> dict[str, list[Op]]:
    """:func:`read_times` of each of ``workers``, by name."""
    return {worker: read_times(directory, worker) for worker in workers}


def ops_from(worker: str, records: Sequence[Mapping[str, Any]]) -> list[Op]:
    return [Op(worker, str(r["op"]), float(r["start"]), float(r["end"])) for r in records]


@dataclass(frozen=True, slots=True)
class Overlap:
    """How the workers' operations overlapped."""

    per_worker: dict[str, float]  # the longest overlap of any op of the worker with another's
    common: float  # the time every worker was busy at once (<= 0: never all at once)

    def summary(self) -> str:
        each = ", ".join(f"{w} {s:.2f}s" for w, s in sorted(self.per_worker.items()))
        return f"longest overlap per worker: {each}; all busy at once: {self.common:.2f}s"


def overlap_of(times: Mapping[str, Sequence[Op]]) -> Overlap:
    per_worker = {}
    for worker, ops in times.items():
        others = [o for w, theirs in times.items() if w != worker for o in theirs]
        per_worker[worker] = max((op.overlap(o) for op in ops for o in others), default=0.0)
    spans = [(min(o.start for o in ops), max(o.end for o in ops)) for ops in times.values() if ops]
    common = min(e for _, e in spans) - max(s for s, _ in spans) if spans else 0.0
    return Overlap(per_worker, common)


def assert_overlapped(times: Mapping[str, Sequence[Op]], *, together: bool = False) -> Overlap:
    """Fail unless every worker had an operation in flight while another worker's was (for two
    workers with one op each: ``max(starts) < min(ends)``); with ``together``, also unless
    all workers were busy at one common instant. Prints and returns the figures."""
    assert len(times) >= 2, f"overlap needs two workers or more, got {sorted(times)}"
    empty = [w for w, ops in times.items() if not ops]
    assert not empty, f"workers {empty} recorded no operation"
    result = overlap_of(times)
    detail = {
        w: [(o.name, round(o.start, 3), round(o.end, 3)) for o in ops] for w, ops in times.items()
    }
    print(f"overlap: {result.summary()}")
    alone = [w for w, s in result.per_worker.items() if s <= 0]
    assert not alone, f"workers {alone} ran no operation while another ran one: {detail}"
    if together:
        assert result.common > 0, f"the workers were never all busy at once: {detail}"
    return result
