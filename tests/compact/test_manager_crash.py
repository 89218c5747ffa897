"""Compaction managers in two Spark drivers, each killed -9 at a random moment and restarted,
while a user compaction drains two chunks and appends arrive: the user compaction completes
exactly once, no segment is compacted twice in one generation, reads equal the appended rows
(every row once), and the drivers' own clocks show both managers working at the same time."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_planning import RatioPlanner
from segmentlake.lake import Lake
from segmentlake.metadata.records import SEGMENT, segments_from_rows
from tests.compact.conftest import events, per_key
from tests.compact.test_manager_scenario import rows, spec
from tests.multiprocess_support import (
    assert_overlapped,
    go,
    read_all_times,
    read_times,
    wait_ready,
)

pytestmark = [pytest.mark.spark, pytest.mark.multiprocess, pytest.mark.slow]

WORKER = Path(__file__).with_name("manager_worker.py")
DAYS = ("2024-03-01", "2024-03-02")


def start(warehouse: str, ds: str, log: Path, name: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    with log.with_name(f"{name}.out").open("w") as out:
        return subprocess.Popen(
            [sys.executable, str(WORKER), warehouse, ds, str(log), name],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def output_tail(directory: Path, name: str) -> str:
    path = directory / f"{name}.out"
    return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def day_rows(day: str, first: int, n: int) -> list[tuple]:
    return [(day + t[0][10:], *t[1:]) for t in rows(first, n)]


def _drained(lake: Lake, ds: str) -> bool:
    """Each day down to its selection's one segment and at most two more."""
    timeline = lake.timeline(ds)
    return all(len(timeline.visible_segments(_day(day))) <= 3 for day in DAYS)


def test_killed_managers_and_compactors_restart_without_loss_or_double_work(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    lake = Lake(spark, warehouse)  # appends here; three JVMs on two cores make them slow
    ds = "crash"
    written = [r for day in DAYS for r in day_rows(day, 0, 1600)]  # 40 segments a day
    assert lake.append(events(spark, written), ds, spec(50)).status == "SUCCESS"
    lake.set_compaction_config(
        ds, CompactionConfig(planner=RatioPlanner(ratio=1.0, max_segments_per_job=10))
    )
    user = lake.start_user_compaction(ds, f"{DAYS[0]}/P2D", max_segments_per_job=8)
    logs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    names = [["a0"], ["b0"]]  # each manager's incarnations
    procs = [start(warehouse, ds, log, n[0]) for log, n in zip(logs, names, strict=True)]
    try:
        wait_ready(
            tmp_path,
            {n[0]: p for n, p in zip(names, procs, strict=True)},
            tail=lambda name: output_tail(tmp_path, name),
        )
        started = time.monotonic()
        go(tmp_path)
        kills: dict[int, float] = {}  # manager -> seconds after the go it was killed
        first_jobs: dict[str, float] = {}
        while len(kills) < len(procs):
            for n in sorted(set(range(len(procs))) - set(kills)):
                elapsed = time.monotonic() - started
                if elapsed < _kill_moment(tmp_path, names[n][0], first_jobs, elapsed, rng):
                    continue
                kills[n] = round(elapsed, 1)
                kill(procs[n])
                names[n].append(f"{names[n][0][0]}{len(names[n])}")
                procs[n] = start(warehouse, ds, logs[n], names[n][-1])  # finds "go": starts
                # Appends arrive meanwhile (while the new driver starts): compacted by system
                # jobs outside the selection.
                more = day_rows(DAYS[n], 10_000 + 1000 * n, 120)
                written += more
                assert lake.append(events(spark, more), ds, spec(50)).status == "SUCCESS"
            time.sleep(0.2)
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            status = lake.compaction_status(ds)
            finished = lake.user_compaction(ds, user.compaction_id).status == "SUCCESS"
            # The appended segments are a system job's, planned by a pass after the selection
            # let their day go: a moment with the managers quiet can fall between the two.
            if finished and not status.running and not status.selections and _drained(lake, ds):
                break
            time.sleep(0.5)
    finally:
        for proc in procs:
            kill(proc)
    # The two managers (over all their incarnations) ran passes and jobs at the same time.
    times = {
        manager[0][0]: [op for ops in read_all_times(tmp_path, manager).values() for op in ops]
        for manager in names
    }
    assert_overlapped(times)
    jobs = {m: [op for op in ops if op.name == "job"] for m, ops in times.items()}
    print(f"jobs per manager: { {m: len(j) for m, j in jobs.items()} }")
    outcomes = [json.loads(line) for log in logs if log.exists() for line in log.open()]
    context = f"seed {seed}, kills at {kills}, outcomes {_count(outcomes)}"
    done = lake.user_compaction(ds, user.compaction_id)
    assert done.status == "SUCCESS", context
    assert sorted(done.done) == sorted(done.chunks), context
    assert len(set(done.done)) == len(done.done) == 2, context
    assert lake.compaction_status(ds).selections == (), context
    assert not [o for o in outcomes if o["status"] == "failed"], context
    _assert_no_generation_compacted_twice(lake, ds, context)
    read = lake.read(ds)
    assert per_key(read) == per_key(_reference(spark, written)), context
    # Every written row counted once (rollup on: by the count metric, not by rows read).
    assert read.agg(F.sum("edits")).first()[0] == len(written), context
    for day in DAYS:  # each day drained to one segment for the selection, + appended ones
        assert len(lake.timeline(ds).visible_segments(_day(day))) <= 3, context


_KILL_LATEST_S = 45.0  # a manager that never finishes a job by then is killed anyway


def _kill_moment(
    directory: Path, name: str, first_jobs: dict[str, float], elapsed: float, rng: random.Random
) -> float:
    """Seconds after the go to kill manager ``name`` (its first incarnation): a random 0-3 s
    after the test first sees one of its compactions finished (noted in ``first_jobs``), so
    the kill lands while it works with more jobs queued, not at a moment when it may be idle
    or done (as a kill at a random 10-55 s could); the fallback until then."""
    if name not in first_jobs and any(op.name == "job" for op in read_times(directory, name)):
        first_jobs[name] = elapsed + rng.uniform(0.0, 3.0)
    return first_jobs.get(name, _KILL_LATEST_S)


def _assert_no_generation_compacted_twice(lake: Lake, ds: str, context: str) -> None:
    """Two compactions taking the same segment would publish two atomic update groups with one
    minor version over overlapping root ranges of one chunk."""
    records = lake.metadata.rows(ds, _kind(SEGMENT))
    groups: dict[tuple, set[tuple[int, int]]] = defaultdict(set)
    for seg in segments_from_rows(records):
        spec_ = seg.shard_spec
        if spec_.minor_version:
            root = (spec_.start_root_partition_id, spec_.end_root_partition_id)
            groups[(seg.interval, seg.version, spec_.minor_version)].add(root)
    for key, roots in groups.items():
        ordered = sorted(roots)
        for (s1, e1), (s2, e2) in itertools.pairwise(ordered):
            assert e1 <= s2, f"{key}: root ranges {(s1, e1)} and {(s2, e2)} overlap; {context}"


def _kind(kind: str):  # type: ignore[no-untyped-def]
    import pyarrow.compute as pc

    return pc.field("kind") == kind


def _day(day: str):  # type: ignore[no-untyped-def]
    from segmentlake.core.interval import Interval

    return Interval.parse(f"{day}/P1D")


def _count(outcomes: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for o in outcomes:
        counts[o["status"]] += 1
    return dict(counts)


def _reference(spark: SparkSession, written: list[tuple]):  # type: ignore[no-untyped-def]
    from tests.compact.test_manager_scenario import _as_rolled

    return events(spark, written).selectExpr(*_as_rolled())
