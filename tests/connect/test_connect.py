"""segmentlake over Spark Connect: a local Connect server with Delta's jars (started here, on
localhost) and a client process that runs the quickstart's story through it.

The client lives in its own process (``connect_worker.py`` says why). What needs a JVM in the
client's process raises :class:`ClassicSessionRequired`, asserted here too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segmentlake.spark.connect import ConnectServer, start_connect_server

ROOT = Path(__file__).parents[2]
CLIENT_TIMEOUT_S = 600  # a busy 2-core CI box took 215 s where an idle one takes 70 s

ROWS_PER_DAY = 100
# 100 edits a day for 4 days; 10 late edits on Jan 2 and Jan 4; Jan 3 overwritten with 50.
APPENDED = {"2024-01-01": 100, "2024-01-02": 100, "2024-01-03": 100, "2024-01-04": 100}
LATE = {**APPENDED, "2024-01-02": 110, "2024-01-04": 110}
OVERWRITTEN = {**LATE, "2024-01-03": 50}


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """One small local Connect server for this module (its log is in the test's tmp dir)."""
    server = start_connect_server(
        log_dir=tmp_path_factory.mktemp("connect-log"),
        extra_conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "1g",
        },
    )
    try:
        yield server
    finally:
        server.stop()


def run_client(server: ConnectServer, tmp_path: Path, story: str) -> dict[str, Any]:
    warehouse, inputs, result = tmp_path / "warehouse", tmp_path / "inputs", tmp_path / "r.json"
    inputs.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    command = [sys.executable, "-m", "tests.connect.connect_worker", server.url, str(warehouse)]
    completed = subprocess.run(
        [*command, str(inputs), str(result), story],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, (
        f"client exited {completed.returncode}:\n{completed.stdout[-3000:]}\n"
        f"{completed.stderr[-5000:]}\nserver log:\n{server.log_tail(40)}"
    )
    data: dict[str, Any] = json.loads(result.read_text())
    return data


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quickstart_runs_over_spark_connect(connect_server: ConnectServer, tmp_path: Path) -> None:
    assert connect_server.url.startswith("sc://localhost:")
    began = time.monotonic()
    result = run_client(connect_server, tmp_path, "quickstart")
    print(f"server start {connect_server.started_s:.1f} s, client {time.monotonic() - began:.1f} s")
    print("client steps (s since start):", result["seconds"])

    assert result["session"].startswith("pyspark.sql.connect")
    assert (result["append"]["status"], result["append"]["per_day"]) == ("SUCCESS", APPENDED)
    assert result["append"]["metrics"] is None  # job metrics live in the server's JVM
    assert (result["late"]["status"], result["late"]["per_day"]) == ("SUCCESS", LATE)
    assert (result["overwrite"]["status"], result["overwrite"]["per_day"]) == (
        "SUCCESS",
        OVERWRITTEN,
    )
    assert result["quickstart_exit"] == 0
    out = result["quickstart_out"]
    assert "4 visible piece(s) of wikipedia" in out
    assert "SQL: edits per day" in out
    assert "2024-01-03  50" in out
    assert result["view"]["edits"] == sum(OVERWRITTEN.values())
    filtered = result["filtered"]
    assert filtered["read"] == filtered["sql"] > 0
    assert filtered["columns"] == ["__time", "channel", "edits"]
    for case, expected in {
        "read_syntax": "filter 'channel = ' is not a boolean Spark SQL condition",
        "read_cut_off": "followed by a column alias",
        "read_column": "UNRESOLVED_COLUMN",
        "ingest_filter": "transformSpec.filter 'no_such_column = 1' is not a valid",
        "ingest_transform": "transform 'x': 'y +' is not a valid Spark SQL expression",
    }.items():
        error = result["bad_sql"][case]
        assert isinstance(error, dict), f"{case}: no error over Connect"
        assert error["type"] == "segmentlake.errors.SpecError", (case, error)
        assert expected in error["message"], (case, error)
    assert result["inspect"]["used_segments"] == 7  # 4 + 2 late + 1 new version
    assert result["inspect"]["history"] >= 3
    # Jan 2 and Jan 4 hold two segments (first append + late data), Jan 3 one new version.
    assert [n for _, n in result["timeline"]] == [1, 2, 1, 2]

    assert (result["compact"]["status"], result["compact"]["per_day"]) == (
        "SUCCESS",
        OVERWRITTEN,
    )
    kill = result["kill"]
    assert kill["unused"] >= 1
    assert kill["killed"] == kill["unused"]
    assert kill["rows_deleted"] > 0
    assert kill["per_day"] == OVERWRITTEN
    assert kill["view_edits"] == sum(OVERWRITTEN.values())

    skipped = result["skip_header"]
    assert isinstance(skipped, dict), "skipHeaderRows over Connect should have raised"
    assert "skipHeaderRows" in skipped["operation"]
    assert "classic SparkSession" in skipped["message"]
    assert "RDD API" in skipped["message"]
    assert result["druid_csv"] == {"status": "SUCCESS", "rows": 1}  # the same task, no skip
    ranged = result["perfect_rollup"]
    assert (ranged["status"], ranged["rows_in"]) == ("SUCCESS", 2 * ROWS_PER_DAY)
    assert ranged["rows_out"] == ranged["read_rows"]
    assert all(n >= 2 for n in ranged["segments_per_day"]), ranged  # ranges were cut
    assert ranged["contiguous"], ranged


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stream_appends_over_spark_connect(connect_server: ConnectServer, tmp_path: Path) -> None:
    result = run_client(connect_server, tmp_path, "stream")
    assert result["users"] == result["written"] == 20  # every row once
    assert result["tasks"] == 2  # one append per file (micro-batch)
