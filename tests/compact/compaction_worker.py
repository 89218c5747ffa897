"""One Spark driver of the multi-process compaction tests.

``python compaction_worker.py WAREHOUSE DATASOURCE MODE DIR``:

Each mode opens the warehouse first, says ``DIR/ready-<MODE>`` and waits for ``DIR/go``
(``tests/multiprocess_support.py``), so that the test releases warm drivers at one moment; each
operation's wall-clock start and end (and, for appends, its batch and outcome) go to
``DIR/times-<MODE>.json``.

* ``stream``: appends batches of 40 rows (users ``s<batch>-<i>``, unique) into the hours of
  2024-01-01 and 2024-01-02 until the file ``DIR/stop`` appears; a failed append is recorded
  (``ok`` false, ``error``), never hidden;
* ``major``: runs a major compaction HOUR -> DAY of both days and writes its report to
  ``DIR/compaction.json``; ``major-killable`` the same with a 10 s lease (killed, it blocks
  nobody long). Three JVMs on two cores make every commit slow, so the drivers that run side
  by side keep a 60 s lease, the default.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from segmentlake.lake import Lake
from segmentlake.spark import spark_session
from tests.multiprocess_support import OpTimes, driver_conf, signal_ready, wait_for_go

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
}


def batch_rows(batch: int) -> list[tuple[str, str, int]]:
    return [
        (f"2024-01-0{1 + i % 2}T{(batch + i) % 24:02d}:15:00Z", f"s{batch}-{i}", batch + i)
        for i in range(40)
    ]


def main(warehouse: str, datasource: str, mode: str, directory: Path) -> None:
    spark = spark_session(
        app_name=f"compaction-worker-{mode}",
        master="local[1]",
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    lake = Lake(spark, warehouse, lease_seconds=10 if mode == "major-killable" else 60)
    if mode not in ("stream", "major", "major-killable"):
        raise SystemExit(f"unknown mode {mode}")
    times = OpTimes(directory, mode)
    signal_ready(directory, mode)
    wait_for_go(directory)
    if mode == "stream":
        batch = 0
        while not (directory / "stop").exists():
            df = spark.createDataFrame(batch_rows(batch), "ts STRING, user STRING, added LONG")
            with times.op("append", batch=batch) as record:
                try:
                    lake.append(df, datasource, SPEC, lock_timeout_s=120)
                except Exception as err:  # counted by the test, never hidden
                    record.update(ok=False, error=f"{type(err).__name__}: {err}")
            batch += 1
    else:
        with times.op("compact"):
            report = lake.compact(
                datasource,
                "2024-01-01/P2D",
                mode="major",
                segment_granularity="DAY",
                lock_timeout_s=120,
            )
        (directory / "compaction.json").write_text(json.dumps(report.to_json()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))
