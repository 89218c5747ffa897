"""Benchmark of perfect-rollup ingestion against the plain Spark way of rolling up, and of a
top-N query on the rolled-up datasource against the raw rows.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/perfect_rollup.py                   # 3,000,000 rows over 30 days
    .venv/bin/python bench/perfect_rollup.py --rows 1000000 --repeat 3
    .venv/bin/python bench/perfect_rollup.py --repeat 3 --variants hashed_target_rows --stages

The input (web edits: channel, country, device and a Zipf-popular page; added/deleted counts;
a user id for a distinct-count sketch left out on both sides) is written once as a Delta table,
so every side reads the same rows from storage. After one uncounted warm-up round, each round
runs both sides back to back, alternating which goes first; medians are reported.

* **ingest**: ``lake.overwrite`` of the 30 days with a hashed partitions spec — ``numShards``
  given (no determine-partitions pass), and ``targetRowsPerSegment`` (the pass runs) — and with
  a range spec on ``page``, each vs ``df.groupBy(day, channel, country, device, page)
  .agg(count, sum, min, max)`` written to a plain Delta table partitioned by day: the same
  rolled-up rows. Target ratio <= 1.3.
* ``--stages``: after the rounds of each variant, one more round of each side with the task
  time, records and shuffle bytes of every Spark stage it ran (from Spark's status store):
  where the ratio comes from.
* **top-N**: the 10 pages with the most ``added`` over the whole period, through ``lake.read``
  of the rolled-up datasource vs ``spark.read`` of the raw rows (a plain Delta table
  partitioned by day, compacted with ``OPTIMIZE``): what rollup buys a Druid-style query.
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

from ingest_read import alternating
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake import Lake
from segmentlake.spark.session import spark_session

CONF = {"spark.ui.enabled": "false"}
DIMENSIONS = ["channel", "country", "device", "page"]
START = "2024-01-01"


def spec(partitions: dict) -> dict:
    return {
        "timestampSpec": {"column": "ts", "format": "auto"},
        "dimensionsSpec": {"dimensions": DIMENSIONS},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "longMin", "name": "least_added", "fieldName": "added"},
            {"type": "longMax", "name": "most_added", "fieldName": "added"},
            {"type": "longSum", "name": "deleted", "fieldName": "deleted"},
        ],
        "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "day"},
        "partitionsSpec": partitions,
    }


def make_input(spark: SparkSession, path: str, rows: int, days: int) -> DataFrame:
    """Deterministic pseudo-random edits, written once as Delta."""
    r = [F.xxhash64("id", F.lit(i)) for i in range(6)]
    start_ms = spark.sql(f"SELECT unix_millis(TIMESTAMP'{START} 00:00:00Z')").first()[0]
    # Page popularity is Zipf-like: page n with weight ~ 1/n, via floor(exp(u * ln 300)).
    u = F.pmod(r[3], F.lit(1_000_000)) / F.lit(1_000_000.0)
    edits = spark.range(rows, numPartitions=8).select(
        F.timestamp_millis(F.lit(start_ms) + F.pmod(r[0], F.lit(days * 86_400_000))).alias("ts"),
        F.concat(F.lit("#ch"), F.pmod(r[1], F.lit(10))).alias("channel"),
        F.concat(F.lit("c"), F.pmod(r[2], F.lit(10))).alias("country"),
        F.element_at(
            F.array(*[F.lit(d) for d in ("mobile", "desktop", "tablet", "bot")]),
            (F.pmod(r[4], F.lit(4)) + 1).cast("int"),
        ).alias("device"),
        F.concat(F.lit("page"), F.floor(F.exp(u * F.log(F.lit(300.0))))).alias("page"),
        F.pmod(r[5], F.lit(500)).alias("added"),
        F.pmod(F.xxhash64("id", F.lit(9)), F.lit(50)).alias("deleted"),
    )
    edits.write.format("delta").save(path)
    return spark.read.format("delta").load(path)


def plain_rollup(source: DataFrame, path: str) -> None:
    """The plain way: one group-by to the day, written partitioned by day."""
    day = F.date_trunc("day", F.col("ts")).alias("__time")
    rolled = source.groupBy(day, *DIMENSIONS).agg(
        F.count(F.lit(1)).alias("edits"),
        F.sum("added").alias("added"),
        F.min("added").alias("least_added"),
        F.max("added").alias("most_added"),
        F.sum("deleted").alias("deleted"),
    )
    rolled.withColumn("day", F.to_date("__time")).write.format("delta").partitionBy("day").save(
        path
    )


def stage_profile(spark: SparkSession, run: Callable[[], object]) -> list[dict]:
    """Run ``run`` and return each Spark stage it completed: tasks, task time, records in
    and out, shuffle bytes written."""
    context = spark.sparkContext._jsc.sc()
    first = context.dagScheduler().nextStageId()
    run()
    time.sleep(1.0)  # the status store is fed by an asynchronous listener
    store, stages = context.statusStore(), []
    for stage_id in range(first, context.dagScheduler().nextStageId()):
        try:
            s = store.lastStageAttempt(stage_id)
        except Exception:  # a stage planned but never submitted
            continue
        if str(s.status()) != "COMPLETE":
            continue
        stages.append(
            {
                "stage": stage_id,
                "tasks": s.numTasks(),
                "task_ms": s.executorRunTime(),
                "input_records": s.inputRecords(),
                "shuffle_read_records": s.shuffleReadRecords(),
                "shuffle_write_records": s.shuffleWriteRecords(),
                "shuffle_write_mb": round(s.shuffleWriteBytes() / 1e6, 1),
                "output_records": s.outputRecords(),
            }
        )
    return stages


def top_pages(df: DataFrame, metric: str) -> list:
    return (
        df.groupBy("page")
        .agg(F.sum(metric).alias("a"))
        .orderBy(F.desc("a"), "page")
        .limit(10)
        .collect()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=["hashed_num_shards", "hashed_target_rows", "range_target_rows"],
        help="run only these ingest variants (default: all three)",
    )
    parser.add_argument(
        "--stages", action="store_true", help="print each side's Spark stages once more"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = spark_session(app_name="bench-perfect-rollup", quiet_progress=True, extra_conf=CONF)
    root = Path(tempfile.mkdtemp(prefix="bench-rollup-"))
    try:
        source = make_input(spark, str(root / "source"), args.rows, args.days)
        lake = Lake(spark, str(root / "warehouse"))
        interval = f"{START}/P{args.days}D"
        variants = {
            "hashed_num_shards": {"type": "hashed", "numShards": 2},
            "hashed_target_rows": {"type": "hashed", "targetRowsPerSegment": 20_000},
            "range_target_rows": {
                "type": "range",
                "partitionDimensions": ["page"],
                "targetRowsPerSegment": 20_000,
            },
        }
        med = statistics.median
        result: dict = {"rows": args.rows, "days": args.days}
        if args.variants:
            variants = {k: v for k, v in variants.items() if k in args.variants}
        for name, partitions in variants.items():
            reports: list = []

            def ingest(
                i: int, name: str = name, partitions: dict = partitions, reports: list = reports
            ) -> None:
                report = lake.overwrite(source, f"{name}{i}", spec(partitions), interval=interval)
                reports.append(report)

            def plain(i: int, name: str = name) -> None:
                plain_rollup(source, str(root / f"plain_{name}{i}"))

            alternating(1, lambda _: plain(99), lambda _: ingest(99))  # warm-up, not counted
            reports.clear()
            plain_s, lake_s = alternating(args.repeat, plain, ingest)
            result[name] = {
                "plain_s": round(med(plain_s), 2),
                "lake_s": round(med(lake_s), 2),
                "ratio": round(med(lake_s) / med(plain_s), 2),
                "segments": reports[-1].segments,
                "rows_out": reports[-1].rows.rows_out,
                "largest_segment_rows": reports[-1].largest_segment_rows,
                "lake_phases": {k: round(v, 2) for k, v in reports[-1].phases.items()},
            }
            print(json.dumps({name: result[name]}), flush=True)
            if args.stages:
                for side, run in (("plain", plain), ("segmentlake", ingest)):
                    stages = stage_profile(spark, lambda run=run: run(98))
                    print(json.dumps({name: {f"{side}_stages": stages}}), flush=True)
        if "hashed_num_shards" not in result:
            print(json.dumps(result, indent=2))
            return
        # Top-N: rolled-up datasource vs the raw rows, compacted.
        raw = str(root / "raw")
        source.withColumn("day", F.to_date("ts")).write.format("delta").partitionBy("day").save(raw)
        spark.sql(f"OPTIMIZE delta.`{raw}`")
        rolled_name = "hashed_num_shards0"
        expected = top_pages(spark.read.format("delta").load(raw), "added")
        assert top_pages(lake.read(rolled_name), "added") == expected, "top-N answers differ"
        raw_s, rolled_s = alternating(
            max(args.repeat, 7),
            lambda _: top_pages(spark.read.format("delta").load(raw), "added"),
            lambda _: top_pages(lake.read(rolled_name), "added"),
        )
        result["top_n"] = {
            "raw_rows_s": round(med(raw_s), 3),
            "rolled_up_s": round(med(rolled_s), 3),
            "speedup": round(med(raw_s) / med(rolled_s), 2),
            "raw_rows": args.rows,
            "rolled_up_rows": result["hashed_num_shards"]["rows_out"],
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
