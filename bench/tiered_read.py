"""Benchmark: a tiered read (every visible segment loaded on a volume) against a deep-storage
read of the same rows, on local Spark.

Run from the repository root:

    .venv/bin/python bench/tiered_read.py            # 30 days x 100,000 rows

Builds a datasource of ``--days`` DAY segments, adds one volume, lets the coordinator load
every segment there (timed: the loads are one Spark job per batch), then times
``lake.read(ds)`` and ``lake.read(ds, tier="hot")`` each with a count, a group-by and a
filtered sum (best of ``--repeat``), checks they return the same rows, and prints the ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from pyspark.sql import functions as F

from segmentlake.lake import Lake
from segmentlake.spark.session import spark_session

SPEC = {
    "timestampSpec": {"column": "ts", "format": "millis"},
    "dimensionsSpec": {"dimensions": ["channel", "page"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}


def queries(frame):  # type: ignore[no-untyped-def]
    return (
        lambda: frame.count(),
        lambda: frame.groupBy("channel").agg(F.sum("added")).collect(),
        lambda: frame.where("page = 'p7'").agg(F.sum("added")).collect(),
    )


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rows-per-day", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(app_name="bench tiered read")
    root = tempfile.mkdtemp(prefix="segmentlake-tiered-")
    lake = Lake(spark, f"{root}/warehouse")
    start = 1_704_067_200_000
    n = args.days * args.rows_per_day
    rows = spark.range(n).select(
        (F.lit(start) + F.col("id") * (86_400_000 // args.rows_per_day)).alias("ts"),
        F.concat(F.lit("c"), (F.col("id") % 20).cast("string")).alias("channel"),
        F.concat(F.lit("p"), (F.col("id") % 1000).cast("string")).alias("page"),
        (F.col("id") % 97).alias("added"),
    )
    lake.append(rows, "bench", SPEC)
    lake.add_volume("hot1", tier="hot", path=f"{root}/hot1", capacity_bytes=2**40, priority=1)
    lake.set_rules("bench", [{"type": "loadForever", "tieredReplicants": {"hot": 1}}])
    started = time.perf_counter()
    report = lake.coordinator().run_once()
    load_s = time.perf_counter() - started
    deep, tiered = lake.read("bench"), lake.read("bench", tier="hot")
    same = sorted(deep.groupBy("channel").agg(F.sum("added")).collect()) == sorted(
        tiered.groupBy("channel").agg(F.sum("added")).collect()
    )
    result = {
        "rows": n,
        "segments": report.stats.segments,
        "loaded": report.loaded,
        "load_seconds": round(load_s, 2),
        "same_rows": same and deep.count() == tiered.count(),
    }
    for name, d, t in zip(
        ("count", "group_by", "filtered_sum"), queries(deep), queries(tiered), strict=True
    ):
        d_s, t_s = best(d, args.repeat), best(t, args.repeat)
        result[name] = {
            "deep_s": round(d_s, 3),
            "tiered_s": round(t_s, 3),
            "ratio": round(t_s / d_s, 2),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
