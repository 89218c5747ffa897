"""Benchmark of ingestion and reads against the plain Delta way of doing the same work.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/ingest_read.py                     # 3,000,000 rows over 30 days
    .venv/bin/python bench/ingest_read.py --rows 1000000 --repeat 3

The input is written once as a Delta table, so both sides read the same rows from storage.
After one uncounted warm-up round, each round runs both sides back to back, alternating which
goes first; medians of ``--repeat`` (default 5) rounds are reported.

* **append**: ``lake.append`` (rollup off, so both sides write the same rows) vs
  ``df.write.format("delta").partitionBy("day").mode("append")`` of the same rows with a
  ``day`` column. Target ratio <= 1.3. ``lake.append`` with rollup on (the same spec with
  HOUR query granularity) is reported too, for information.
* **read**: a scan-and-aggregate query (edits and added per channel over the whole table)
  through ``lake.read`` of a datasource built by one overwrite (one segment per day: fully
  compacted) vs ``spark.read.format("delta")`` of a plain table holding the very rows
  ``lake.read`` returns, partitioned by day and compacted by Delta's ``OPTIMIZE``. The lake
  side includes loading the timeline (reported apart as well). The lake side includes
  loading the timeline from the metadata. Target ratio <= 1.10.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake import Lake
from segmentlake.cli.quickstart import SPEC, edits_of_days
from segmentlake.spark.job_metrics import measure_jobs
from segmentlake.spark.session import spark_session

START_MS = 1_704_067_200_000  # 2024-01-01
CONF = {"spark.ui.enabled": "false"}


def spec(*, rollup: bool) -> dict:
    """The quickstart's spec without its sketch (a plain table has no equivalent), rolled up
    to the hour or not rolled up at all."""
    granularity = {"segmentGranularity": "day", "queryGranularity": "hour" if rollup else "none"}
    return {
        **SPEC,
        "metricsSpec": [m for m in SPEC["metricsSpec"] if m["type"] != "HLLSketchBuild"],
        "granularitySpec": {**granularity, "rollup": rollup},
    }


def make_input(spark: SparkSession, path: str, rows: int, days: int) -> DataFrame:
    from datetime import UTC, datetime, timedelta

    start = datetime(2024, 1, 1, tzinfo=UTC)
    every_day = [start + timedelta(days=d) for d in range(days)]
    edits_of_days(spark, every_day, rows // days, seed=1).write.format("delta").save(path)
    return spark.read.format("delta").load(path)


def timed(fn: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def alternating(
    rounds: int, first: Callable[[int], object], second: Callable[[int], object]
) -> tuple[list[float], list[float]]:
    """Time both sides ``rounds`` times, alternating which runs first (the machine's state,
    caches and JIT, favours neither)."""
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            a.append(timed(first, i))
            b.append(timed(second, i))
        else:
            b.append(timed(second, i))
            a.append(timed(first, i))
    return a, b


def _median_metrics(runs: list[dict]) -> dict:
    """Field by field medians of Spark job metrics (executor run ms, records, bytes)."""
    keys = sorted({k for r in runs for k in r})
    return {k: statistics.median([r.get(k, 0) for r in runs]) for k in keys}


def aggregate(df: DataFrame) -> list:
    return df.groupBy("channel").agg(F.sum("edits"), F.sum("added")).collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the warehouse")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = spark_session(app_name="bench-ingest-read", quiet_progress=True, extra_conf=CONF)
    root = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        source = make_input(spark, str(root / "source"), args.rows, args.days)
        rows = source.count()
        lake = Lake(spark, str(root / "warehouse"))
        phases: list[dict[str, float]] = []
        lake_jobs: list[dict] = []
        plain_jobs: list[dict] = []

        def plain_write(i: int) -> None:
            with_day = source.withColumn("day", F.to_date("timestamp"))
            with measure_jobs(spark, f"plain{i}") as jobs:
                with_day.write.format("delta").partitionBy("day").save(str(root / f"plain{i}"))
            plain_jobs.append(jobs.metrics.to_json() if jobs.metrics else {})

        def lake_append(i: int) -> None:
            report = lake.append(source, f"bench{i}", spec(rollup=False))
            phases.append(dict(report.phases))
            lake_jobs.append(dict(report.phase_metrics))

        # One uncounted round first: the first write of each kind pays for JIT and caches.
        alternating(1, lambda _: plain_write(99), lambda _: lake_append(99))
        phases.clear()
        lake_jobs.clear()
        plain_jobs.clear()
        plain_append, lake_appends = alternating(args.repeat, plain_write, lake_append)
        lake_rollup = [
            timed(lambda i=i: lake.append(source, f"rollup{i}", spec(rollup=True)))
            for i in range(args.repeat)
        ]
        # A fully compacted datasource: one overwrite, one segment per day.
        interval = f"2024-01-01/P{args.days}D"
        # (Rollup on with no query granularity: the same rows, shuffled into one file per day.)
        lake.overwrite(
            source,
            "compacted",
            {
                **spec(rollup=True),
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none"},
            },
            interval=interval,
        )
        # The plain side: the very rows lake.read returns, in a plain Delta table partitioned
        # by day and compacted by Delta's OPTIMIZE (one file per day, like one segment per day).
        plain_table = str(root / "plain_read")
        lake.read("compacted").withColumn("day", F.to_date("__time")).write.format(
            "delta"
        ).partitionBy("day").save(plain_table)
        spark.sql(f"OPTIMIZE delta.`{plain_table}`")
        aggregate(lake.read("compacted"))  # warm both sides alike
        aggregate(spark.read.format("delta").load(plain_table))
        rounds = max(args.repeat, 7)
        plain_read, lake_read = alternating(
            rounds,
            lambda _: aggregate(spark.read.format("delta").load(plain_table)),
            lambda _: aggregate(lake.read("compacted")),
        )
        lake_plan = [timed(lambda: lake.read("compacted")) for _ in range(rounds)]
        assert sorted(map(tuple, aggregate(lake.read("compacted")))) == sorted(
            map(tuple, aggregate(spark.read.format("delta").load(plain_table)))
        ), "lake.read and the plain table disagree"
        med = statistics.median
        result = {
            "rows": rows,
            "days": args.days,
            "append_plain_s": round(med(plain_append), 2),
            "append_lake_s": round(med(lake_appends), 2),
            "append_ratio": round(med(lake_appends) / med(plain_append), 2),
            "append_lake_rollup_s": round(med(lake_rollup), 2),
            "append_lake_phases": {k: round(v, 2) for k, v in phases[-1].items()},
            # Where the time goes: Spark's task time summed over each side's jobs (median
            # round), next to the wall time of each phase of the append.
            "profile": {
                "plain_write_jobs": _median_metrics(plain_jobs),
                "lake_phase_jobs": {
                    phase: _median_metrics([m[phase] for m in lake_jobs if phase in m])
                    for phase in lake_jobs[-1]
                },
                "lake_phase_wall_s": {
                    k: round(med([p.get(k, 0.0) for p in phases]), 3) for k in phases[-1]
                },
            },
            "read_plain_s": round(med(plain_read), 3),
            "read_lake_s": round(med(lake_read), 3),
            "read_ratio": round(med(lake_read) / med(plain_read), 2),
            "read_lake_building_the_dataframe_s": round(med(lake_plan), 3),
            "runs": {
                "append_plain": plain_append,
                "append_lake": lake_appends,
                "append_lake_rollup": lake_rollup,
                "read_plain": plain_read,
                "read_lake": lake_read,
                "read_lake_plan": lake_plan,
            },
        }
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
