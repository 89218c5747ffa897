"""One Spark driver running the compaction manager with one local compactor, for the crash
tests: ``python manager_worker.py WAREHOUSE DATASOURCE LOG NAME``. Once its session, ``Lake``
and manager are set up it says ``<LOG dir>/ready-<NAME>`` and waits for ``<LOG dir>/go``
(``tests/multiprocess_support.py``; a restarted worker finds it there and starts at once). It
runs until killed, with a 20 s lease (a killed driver's reservations expire soon) and a pass
every second; each job outcome is appended to LOG as a JSON line, and each pass's and job's
wall-clock start and end go to ``<LOG dir>/times-<NAME>.json``."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from segmentlake.compact.manager import CompactionManager, JobOutcome, PassReport
from segmentlake.core.compaction_jobs import CompactionJob
from segmentlake.ingest.task import IngestTarget
from segmentlake.lake import Lake
from segmentlake.spark import spark_session
from tests.multiprocess_support import OpTimes, driver_conf, signal_ready, wait_for_go


class TimedManager(CompactionManager):
    """The manager, with each compactor run timed (reserve, compact, commit or refusal): a
    batch of jobs (one compaction) or a single job."""

    times: OpTimes

    def run_batch(self, jobs: Sequence[CompactionJob], **kwargs: Any) -> list[JobOutcome]:
        with self.times.op("job", job=",".join(j.job_id for j in jobs)) as record:
            outcomes = super().run_batch(jobs, **kwargs)
            record["status"] = ",".join(o.status for o in outcomes)
        return outcomes


def main(warehouse: str, datasource: str, log: Path, name: str) -> None:
    # Its output file is what the test shows of a worker that died: passes, phases, refusals.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    spark = spark_session(
        app_name="manager-worker",
        master="local[1]",
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    lake = Lake(spark, warehouse, lease_seconds=20)
    times = OpTimes(log.parent, name)

    def record(outcome: JobOutcome) -> None:
        line = {"t": time.time(), "job": outcome.job.job_id, "status": outcome.status}
        with log.open("a") as out:
            out.write(json.dumps({**line, "error": outcome.error}) + "\n")

    def timed_pass(_: CompactionManager, report: PassReport) -> None:
        end = time.time()
        times.add({"op": "pass", "start": end - report.seconds, "end": end})

    target = IngestTarget(spark, lake.warehouse, lake.lockbox)
    manager = TimedManager(target, datasources=[datasource], on_outcome=record)
    manager.times = times
    signal_ready(log.parent, name)
    wait_for_go(log.parent)
    manager.run(compactors=1, interval_s=1.0, on_pass=timed_pass)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4])
