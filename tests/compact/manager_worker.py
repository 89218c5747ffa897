"""One Spark driver running the compaction manager with one local compactor, for the crash
tests: ``python manager_worker.py WAREHOUSE DATASOURCE LOG``. It runs until killed, with a
20 s lease (a killed driver's reservations expire soon) and a pass every second; each pass
and each job outcome is appended to LOG as a JSON line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from segmentlake.compact.manager import CompactionManager, JobOutcome
from segmentlake.ingest.task import IngestTarget
from segmentlake.lake import Lake
from segmentlake.spark import spark_session


def main(warehouse: str, datasource: str, log: Path) -> None:
    spark = spark_session(
        app_name="manager-worker",
        master="local[1]",
        quiet_progress=True,
        extra_conf={"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"},
    )
    lake = Lake(spark, warehouse, lease_seconds=20)

    def record(outcome: JobOutcome) -> None:
        line = {"t": time.time(), "job": outcome.job.job_id, "status": outcome.status}
        with log.open("a") as out:
            out.write(json.dumps({**line, "error": outcome.error}) + "\n")

    target = IngestTarget(spark, lake.warehouse, lake.lockbox)
    manager = CompactionManager(target, datasources=[datasource], on_outcome=record)
    manager.run(compactors=1, interval_s=1.0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
