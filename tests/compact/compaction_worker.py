"""One Spark driver of the multi-process compaction tests.

``python compaction_worker.py WAREHOUSE DATASOURCE MODE DIR``:

* ``stream``: appends batches of 40 rows (users ``s<batch>-<i>``, unique) into the hours of
  2024-01-01 and 2024-01-02 until the file ``DIR/stop`` appears; writes one JSON line per
  append (batch, ok, error) to ``DIR/appends.jsonl``;
* ``major``: waits for ``DIR/go``, runs a major compaction HOUR -> DAY of both days and writes
  its report to ``DIR/compaction.json``; ``major-killable`` the same with a 10 s lease (killed,
  it blocks nobody long). Three JVMs on two cores make every commit slow, so the drivers
  that run side by side keep a 60 s lease, the default.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from segmentlake.lake import Lake
from segmentlake.spark import spark_session

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
        extra_conf={"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"},
    )
    lake = Lake(spark, warehouse, lease_seconds=10 if mode == "major-killable" else 60)
    if mode == "stream":
        batch = 0
        with (directory / "appends.jsonl").open("a") as out:
            while not (directory / "stop").exists():
                df = spark.createDataFrame(batch_rows(batch), "ts STRING, user STRING, added LONG")
                try:
                    lake.append(df, datasource, SPEC, lock_timeout_s=120)
                    line = {"batch": batch, "ok": True}
                except Exception as err:  # counted by the test, never hidden
                    line = {"batch": batch, "ok": False, "error": f"{type(err).__name__}: {err}"}
                out.write(json.dumps(line) + "\n")
                out.flush()
                (directory / "go").touch()
                batch += 1
    elif mode in ("major", "major-killable"):
        while not (directory / "go").exists():
            time.sleep(0.05)
        report = lake.compact(
            datasource,
            "2024-01-01/P2D",
            mode="major",
            segment_granularity="DAY",
            lock_timeout_s=120,
        )
        (directory / "compaction.json").write_text(json.dumps(report.to_json()))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))
