"""One Spark driver of the multi-process ingestion tests.

``python ingest_worker.py WAREHOUSE DATASOURCE MODE WORKER DIR``:

* ``append``: opens the warehouse and builds 50 rows of user ``w<WORKER>-<i>`` in 2024-01-01,
  says ``DIR/ready-<WORKER>``, waits for ``DIR/go`` (``tests/multiprocess_support.py``; the test
  gives it once every driver is ready, so that they append at the same moment), appends, records
  the append's wall-clock start and end in ``DIR/times-<WORKER>.json`` and prints the report;
* ``slow-overwrite``: overwrites 2024-01-01 with rows whose dimension is computed by a slow
  Python UDF, with a 10 s lock lease (a heartbeat every 3.3 s leaves room for a loaded
  machine); the UDF creates ``DIR/writing`` when the write job starts, so the test can kill
  this process in the middle of it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pyspark.sql import functions as F

from segmentlake.lake import Lake
from segmentlake.spark import spark_session
from tests.multiprocess_support import OpTimes, driver_conf, signal_ready, wait_for_go

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "count", "name": "edits"}],
    "granularitySpec": {"segmentGranularity": "day"},
}


def main(warehouse: str, datasource: str, mode: str, worker: int, directory: Path) -> None:
    spark = spark_session(
        app_name=f"ingest-worker-{worker}",
        master="local[1]",
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    if mode == "append":
        lake = Lake(spark, warehouse)
        rows = [(f"2024-01-01T{i % 24:02d}:00:00Z", f"w{worker}-{i}") for i in range(50)]
        df = spark.createDataFrame(rows, "ts STRING, user STRING")
        times = OpTimes(directory, str(worker))
        signal_ready(directory, str(worker))
        wait_for_go(directory)
        with times.op("append"):
            report = lake.append(df, datasource, SPEC)
        print(report.summary(), flush=True)
    elif mode == "slow-overwrite":
        lake = Lake(spark, warehouse, lease_seconds=10)
        marker = str(directory / "writing")

        @F.udf("string")
        def slow(user: str) -> str:
            Path(marker).touch()
            time.sleep(0.2)
            return user

        rows = [("2024-01-01T05:00:00Z", f"new-{i}") for i in range(400)]
        df = spark.createDataFrame(rows, "ts STRING, user STRING").withColumn("user", slow("user"))
        lake.overwrite(df, datasource, SPEC, interval="2024-01-01/P1D")
        print("overwrite finished: the test should have killed it", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
