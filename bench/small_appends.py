"""Benchmark of a stream of small appends: every append's time, the checkpointing ones included.

Delta Spark checkpoints a table in the job of every 10th commit; segmentlake creates its
datasource tables with that left to delta-rs (``segmentlake/storage/table_files.py``). This
times ``--appends`` appends of ``--rows`` rows over two days to one datasource (two DAY
segments each), and the same rows appended to a plain Delta table partitioned by day (Delta's
defaults: what a Delta user's stream writes with ``foreachBatch``), alternating which side
appends first each round. ``--spark-checkpoints`` creates the datasource table with Spark's
own interval instead (how every datasource table was made before), for the A/B in one run.

Run from the repository root:

    .venv/bin/python bench/small_appends.py                     # 40 appends of 1,000 rows
    .venv/bin/python bench/small_appends.py --appends 40 --spark-checkpoints

Reported per side: mean, p50, p90 and max of the appends, and the appends that committed a
multiple of 10 (the checkpointing ones); ratio = segmentlake / plain.
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

from streaming import CONF, SPEC  # the same datasource as the streaming bench's

from segmentlake.lake import Lake
from segmentlake.spark.session import spark_session
from segmentlake.storage import table_files


def batch(spark: SparkSession, i: int, rows: int) -> DataFrame:
    return spark.range(rows).select(
        F.format_string("2024-01-0%dT%02d:00:00Z", (F.col("id") % 2) + 1, F.col("id") % 24).alias(
            "ts"
        ),
        F.format_string("u%d-%d", F.lit(i), F.col("id")).alias("user"),
        (F.col("id") % 50).cast("string").alias("page"),
        F.lit(1).cast("long").alias("n"),
    )


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "mean": round(statistics.mean(times), 3),
        "p50": round(statistics.median(times), 3),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "max": round(ordered[-1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument(
        "--spark-checkpoints",
        action="store_true",
        help="create the datasource table with Spark's checkpoint interval (as before)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.spark_checkpoints:  # a table made as before: Delta's default interval
        table_files.SPARK_CHECKPOINT_INTERVAL = "10"
    spark = spark_session(app_name="bench-small-appends", quiet_progress=True, extra_conf=CONF)
    root = Path(tempfile.mkdtemp(prefix="bench-small-appends-"))
    try:
        lake = Lake(spark, str(root / "warehouse"))
        plain_path = str(root / "plain")
        lake.append(batch(spark, -1, args.rows), "warmup", SPEC)  # both sides' first-use costs
        batch(spark, -1, args.rows).write.format("delta").save(str(root / "warmup"))
        ours: list[float] = []
        plain: list[float] = []
        for i in range(args.appends):
            df = batch(spark, i, args.rows)

            def lake_side(df: DataFrame = df) -> None:
                assert lake.append(df, "stream", SPEC).status == "SUCCESS"

            def plain_side(df: DataFrame = df) -> None:
                day = df.withColumn("day", F.to_date(F.to_timestamp("ts")))
                day.write.format("delta").mode("append").partitionBy("day").save(plain_path)

            sides = [(lake_side, ours), (plain_side, plain)]
            for run, into in sides if i % 2 == 0 else sides[::-1]:
                started = time.perf_counter()
                run()
                into.append(time.perf_counter() - started)
        # Commit v of a table is append v+1 here (the first append created version 0).
        at_multiples = [i for i in range(args.appends) if i > 0 and i % 10 == 0]
        result = {
            "appends": args.appends,
            "rows": args.rows,
            "datasource_checkpoints": "spark" if args.spark_checkpoints else "delta-rs",
            "segmentlake": summary(ours),
            "plain": summary(plain),
            "ratio_mean": round(statistics.mean(ours) / statistics.mean(plain), 2),
            "ratio_p50": round(statistics.median(ours) / statistics.median(plain), 2),
            "checkpointing_appends": {
                "segmentlake": [round(ours[i], 2) for i in at_multiples],
                "plain": [round(plain[i], 2) for i in at_multiples],
            },
        }
        print(json.dumps(result, indent=2))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
