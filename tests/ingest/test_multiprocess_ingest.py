"""Ingestion from separate Spark drivers: concurrent appends into one chunk both survive exactly
once (and the test checks from the drivers' own clocks that the appends did run at the same
time), and a driver killed in the middle of an overwrite leaves no visible row and blocks nobody
for long."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from segmentlake.lake import Lake
from tests.ingest.ingest_worker import SPEC
from tests.multiprocess_support import assert_overlapped, go, read_times, wait_ready

pytestmark = [
    pytest.mark.spark,
    pytest.mark.multiprocess,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

WORKER = Path(__file__).with_name("ingest_worker.py")


def start(warehouse: str, ds: str, mode: str, worker: int, directory: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.Popen(
        [sys.executable, str(WORKER), warehouse, ds, mode, str(worker), str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its JVM and Python workers die with it (killpg)
    )


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_concurrent_appends_into_one_chunk_both_survive(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    lake = Lake(spark, warehouse)
    rows = [("2024-01-01T00:00:00Z", "seed")]
    lake.append(spark.createDataFrame(rows, "ts STRING, user STRING"), "wiki", SPEC)
    procs = [start(warehouse, "wiki", "append", w, tmp_path) for w in range(2)]
    try:
        wait_ready(tmp_path, {str(w): p for w, p in enumerate(procs)})
        go(tmp_path)
        outputs = [p.communicate(timeout=800)[0] for p in procs]
    finally:
        for proc in procs:
            kill(proc)
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, output[-4000:]
    # The two appends were in flight at the same time: max(starts) < min(ends).
    assert_overlapped({str(w): read_times(tmp_path, str(w)) for w in range(2)})
    # Every row exactly once: a lost append misses 50 users, a doubled one counts them twice.
    rows = lake.read("wiki").collect()
    expected = ["seed"] + [f"w{w}-{i}" for w in range(2) for i in range(50)]
    assert Counter(r.user for r in rows) == Counter(expected)
    assert sum(r.edits for r in rows) == len(expected)
    segments = lake.used_segments("wiki")
    assert sorted(s.shard_spec.partition_num for s in segments) == [0, 1, 2]
    assert sorted(s.num_rows for s in segments) == [1, 50, 50]
    assert len({s.version for s in segments}) == 1
    assert [t.status for t in lake.tasks("wiki")] == ["SUCCESS"] * 3


def test_killed_overwrite_leaves_no_visible_rows_and_its_locks_expire(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    lake = Lake(spark, warehouse)
    old = spark.createDataFrame([("2024-01-01T00:00:00Z", "old")], "ts STRING, user STRING")
    lake.append(old, "wiki", SPEC)
    proc = start(warehouse, "wiki", "slow-overwrite", 0, tmp_path)
    try:
        deadline = time.monotonic() + 600
        while not (tmp_path / "writing").exists():
            assert proc.poll() is None, proc.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the overwrite never started writing"
            time.sleep(0.1)
        time.sleep(1.0)  # well inside the write job, some rows already on their way
        assert lake.locks("wiki"), "the overwrite should hold its time-chunk lock"
    finally:
        kill(proc)
    output = proc.stdout.read() if proc.stdout else ""
    assert "overwrite finished" not in output, "killed too late: the overwrite had finished"
    assert [r.user for r in lake.read("wiki").collect()] == ["old"]
    # Its lease (10 s) runs out; a new overwrite of the same day gets the lock and lands.
    new = spark.createDataFrame([("2024-01-01T01:00:00Z", "new")], "ts STRING, user STRING")
    report = lake.overwrite(new, "wiki", SPEC, interval="2024-01-01/P1D", lock_timeout_s=60)
    assert report.status == "SUCCESS"
    assert [r.user for r in lake.read("wiki").collect()] == ["new"]
