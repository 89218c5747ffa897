"""Compaction against a second Spark driver appending without a pause: major HOUR -> DAY
commits, zero appends fail, every appended row is read exactly once, and the drivers' own clocks
show appends running while the compaction ran; a compaction driver killed mid-run leaves the old
data visible, nothing half-published, and blocks nobody long."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.core.locks import LockType
from segmentlake.lake import Lake
from tests.compact.compaction_worker import SPEC, batch_rows
from tests.multiprocess_support import (
    assert_overlapped,
    go,
    ops_from,
    read_all_times,
    wait_ready,
)

pytestmark = [pytest.mark.spark, pytest.mark.multiprocess, pytest.mark.slow]

WORKER = Path(__file__).with_name("compaction_worker.py")


def start(warehouse: str, ds: str, mode: str, directory: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.Popen(
        [sys.executable, str(WORKER), warehouse, ds, mode, str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def appends(directory: Path) -> list[dict]:
    """The stream's appends so far: batch, ok, error, start, end."""
    path = directory / "times-stream.json"
    return json.loads(path.read_text()) if path.exists() else []


Row = tuple[str, str, int]


def seed(spark: SparkSession, lake: Lake, ds: str) -> list[Row]:
    written = []
    for batch in (-3, -2, -1):  # negative batches: the seed, before the stream
        rows = [(t, f"seed{u}", a) for t, u, a in batch_rows(batch)]
        written += rows
        lake.append(spark.createDataFrame(rows, "ts STRING, user STRING, added LONG"), ds, SPEC)
    return written


def per_user_totals(lake: Lake) -> dict[str, tuple[int, int]]:
    rows = lake.read("wiki").groupBy("user").agg(F.sum("edits"), F.sum("added")).collect()
    return {r[0]: (r[1], r[2]) for r in rows}


def expected_rows(directory: Path, seeded: list[Row]) -> list[Row]:
    done = [a["batch"] for a in appends(directory) if a["ok"]]
    return seeded + [row for b in done for row in batch_rows(b)]


def test_major_compaction_while_another_driver_appends(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    lake = Lake(spark, warehouse)
    seeded = seed(spark, lake, "wiki")
    procs = {mode: start(warehouse, "wiki", mode, tmp_path) for mode in ("stream", "major")}
    stream, compactor = procs["stream"], procs["major"]
    try:
        wait_ready(tmp_path, procs)
        go(tmp_path)
        deadline = time.monotonic() + 900
        while not (tmp_path / "compaction.json").exists():
            assert compactor.poll() is None, compactor.communicate()[0][-4000:]
            assert stream.poll() is None, stream.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the compaction never finished"
            time.sleep(0.5)
        finished_at = len(appends(tmp_path))
        while len(appends(tmp_path)) < finished_at + 2:  # appends go on after it, too
            assert stream.poll() is None, stream.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the stream stopped appending"
            time.sleep(0.5)
        (tmp_path / "stop").touch()
        stream.communicate(timeout=300)
        compactor.communicate(timeout=60)
    finally:
        kill(stream)
        kill(compactor)
    report = json.loads((tmp_path / "compaction.json").read_text())
    assert report["status"] == "SUCCESS", report
    done = appends(tmp_path)
    assert [a for a in done if not a["ok"]] == []  # zero failed appends
    assert len(done) >= 4
    # The compaction ran while appends ran (the drivers' clocks), and some append started and
    # ended inside it: it published while the compaction held its REPLACE locks.
    times = read_all_times(tmp_path, ["major"])
    times["stream"] = ops_from("stream", done)
    assert_overlapped(times)
    [compaction] = times["major"]
    inside = [a for a in times["stream"] if compaction.start < a.start and a.end < compaction.end]
    print(f"{len(inside)} of {len(done)} appends ran entirely inside the compaction")
    assert inside, "no append ran entirely while the compaction did"
    # Every row that was appended, exactly once: counted, not collected into a set.
    written = expected_rows(tmp_path, seeded)
    rows = lake.read("wiki").collect()
    assert Counter(r.user for r in rows) == Counter(user for _, user, _ in written)
    assert sum(r.edits for r in rows) == len(written)  # rollup on: counts, not rows
    assert sum(r.added for r in rows) == sum(added for _, _, added in written)
    compacted = [s for s in lake.timeline("wiki").visible_segments() if s.last_compaction_state]
    assert {s.interval.duration_millis for s in compacted} == {86_400_000}
    upgraded = [s for s in lake.used_segments("wiki") if "upgradedFrom" in s.load_spec]
    assert upgraded, "no append landed during the compaction: the test proved nothing"


def test_killed_compaction_leaves_old_data_and_blocks_nobody_long(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    lake = Lake(spark, warehouse)
    seed(spark, lake, "wiki")
    before = sorted(map(tuple, lake.read("wiki").collect()))
    totals_before = per_user_totals(lake)
    segments_before = set(lake.used_segments("wiki"))
    (tmp_path / "go").touch()
    compactor = start(warehouse, "wiki", "major-killable", tmp_path)
    try:
        deadline = time.monotonic() + 600
        while not [lk for lk in lake.locks("wiki") if lk.lock_type is LockType.REPLACE]:
            assert compactor.poll() is None, compactor.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the compaction never locked"
            time.sleep(0.2)
        time.sleep(2.0)  # into its read and write jobs
    finally:
        kill(compactor)
    assert not (tmp_path / "compaction.json").exists()
    assert set(lake.used_segments("wiki")) == segments_before  # nothing half-published
    assert sorted(map(tuple, lake.read("wiki").collect())) == before
    # Its lease (10 s) runs out; a compaction of the same days then gets the lock and lands.
    report = lake.compact(
        "wiki", "2024-01-01/P2D", mode="major", segment_granularity="DAY", lock_timeout_s=60
    )
    assert report.status == "SUCCESS"
    assert per_user_totals(lake) == totals_before
