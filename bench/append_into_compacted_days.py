"""Small HOUR appends into a datasource whose days are DAY chunks, against the plain Delta append.

A stream appends by HOUR; compaction (or an ingestion by DAY) has made the older days DAY
chunks. Each append keys its rows by the existing DAY chunk that holds their hour (one
segment a day, not one an hour: docs/decisions.md, "Allocation"), so before its write it
finds the datasource's coarser chunks and builds SQL that maps an hour to its day. That work
grows with the number of such chunks; this measures it at ``--days`` of them:

    .venv/bin/python bench/append_into_compacted_days.py                # 10,000 DAY chunks
    .venv/bin/python bench/append_into_compacted_days.py --days 100000  # slower to build

The datasource is built by one ``lake.append`` by DAY of two rows a day. Then ``--rounds``
appends of 100 rows into the last day, by HOUR, alternating with the plain way: the same
rows appended to a Delta table of the same rows partitioned by day (``partitionBy("day")``),
10^4 partitions. Medians after the first (warm-up) round; ratio = segmentlake / plain.

``--new-driver`` makes each round what a batch job's one append is: segmentlake appends
through a new ``Lake`` (its metadata read cold, as a new driver reads it), and both sides
start with Delta's log cache cleared:

    .venv/bin/python bench/append_into_compacted_days.py --new-driver
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest_read import alternating

from segmentlake.lake import Lake
from segmentlake.spark.session import spark_session

CONF = {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}
START_MS = 946_684_800_000  # 2000-01-01
DAY_MS = 86_400_000


def spec(granularity: str) -> dict:
    return {
        "timestampSpec": {"column": "timestamp", "format": "auto"},
        "dimensionsSpec": {"dimensions": ["channel"]},
        "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
        "granularitySpec": {
            "segmentGranularity": granularity,
            "queryGranularity": "none",
            "rollup": False,
        },
    }


def days_of_rows(spark: SparkSession, days: int) -> DataFrame:
    """Two rows a day for ``days`` days from 2000-01-01."""
    return spark.range(days * 2).select(
        F.timestamp_millis(F.lit(START_MS) + (F.col("id") / 2).cast("long") * DAY_MS).alias(
            "timestamp"
        ),
        (F.col("id") % 7).cast("string").alias("channel"),
        F.lit(1).cast("long").alias("added"),
    )


def small_rows(spark: SparkSession, day_ms: int) -> DataFrame:
    """100 rows over the day starting at ``day_ms``, in memory (no source to read)."""
    rows = [(day_ms + i * 600_000, str(i % 7), 1) for i in range(100)]
    df = spark.createDataFrame(rows, "ms LONG, channel STRING, added LONG")
    df = df.select(F.timestamp_millis("ms").alias("timestamp"), "channel", "added")
    return spark.createDataFrame(df.collect(), df.schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--new-driver", action="store_true", help="a cold Lake every round")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = spark_session(app_name="bench-compacted-days", quiet_progress=True, extra_conf=CONF)
    root = Path(tempfile.mkdtemp(prefix="bench-compacted-days-"))
    try:
        lake = Lake(spark, str(root / "warehouse"))
        started = time.perf_counter()
        built = lake.append(days_of_rows(spark, args.days), "ds", spec("day"), lock_timeout_s=600)
        assert built.status == "SUCCESS", built.error
        build_s = time.perf_counter() - started
        plain = str(root / "plain")
        by_day = F.date_trunc("day", F.col("timestamp"))
        days_of_rows(spark, args.days).withColumn("day", by_day).write.format("delta").partitionBy(
            "day"
        ).save(plain)

        small = small_rows(spark, START_MS + (args.days - 1) * DAY_MS)
        daily = small.withColumn("day", by_day)
        segments: list[int] = []

        def cold() -> None:
            if args.new_driver:
                # What a new driver does not have either: Delta's cached logs.
                spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]

        def ours(_: int) -> None:
            cold()
            appender = Lake(spark, lake.warehouse) if args.new_driver else lake
            report = appender.append(small, "ds", spec("hour"))
            assert report.status == "SUCCESS", report.error
            segments.append(report.segments)

        def theirs(_: int) -> None:
            cold()
            daily.write.format("delta").mode("append").partitionBy("day").save(plain)

        lake_s, plain_s = alternating(args.rounds, ours, theirs)
        med = statistics.median
        rows = args.days * 2 + 100 * args.rounds
        assert lake.read("ds").count() == rows
        print(
            json.dumps(
                {
                    "command": " ".join(sys.argv),
                    "day_chunks": args.days,
                    "new_driver": args.new_driver,
                    "build_s": round(build_s, 1),
                    "rounds_counted": args.rounds - 1,
                    "segmentlake_s": round(med(lake_s[1:]), 3),
                    "plain_s": round(med(plain_s[1:]), 3),
                    "ratio": round(med(lake_s[1:]) / med(plain_s[1:]), 2),
                    "segments_per_append": sorted(set(segments)),
                    "segmentlake_runs_s": [round(x, 3) for x in lake_s],
                    "plain_runs_s": [round(x, 3) for x in plain_s],
                    "read_back_rows": rows,
                },
                indent=2,
            )
        )
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
