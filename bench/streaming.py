"""Streaming appends: sustained rows/s and micro-batch latency, segmentlake vs plain Delta.

A file stream of ``--files`` JSON files (``--rows`` rows each, over two days) is drained with
``maxFilesPerTrigger=1`` and ``availableNow``, so each file is one micro-batch:

* segmentlake: ``segmentlake.streaming.append_stream`` (each batch one exactly-once append,
  DAY segments, no rollup);
* plain: the same stream with ``foreachBatch`` appending each batch to a Delta table
  partitioned by day (what a Delta user writes; at-least-once: a replayed batch is written
  twice).

Run from the repository root:

    .venv/bin/python bench/streaming.py                   # 20 files x 50,000 rows
    .venv/bin/python bench/streaming.py --files 5 --rows 10000

Reported per side: rows, seconds from start to drained, rows/s, and the micro-batch
durations (p50, max) from the query's progress reports; ratio = segmentlake / plain.
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
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from segmentlake.lake import Lake
from segmentlake.spark.session import spark_session
from segmentlake.streaming import append_stream

CONF = {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
SCHEMA = "ts STRING, user STRING, page STRING, n LONG"
SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user", "page"]},
    "metricsSpec": [{"type": "longSum", "name": "n", "fieldName": "n"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}


def make_files(spark: SparkSession, source: Path, files: int, rows: int) -> None:
    for f in range(files):
        df = spark.range(rows).select(
            F.format_string(
                "2024-01-0%dT%02d:00:00Z", (F.col("id") % 2) + 1, F.col("id") % 24
            ).alias("ts"),
            F.format_string("u%d-%d", F.lit(f), F.col("id")).alias("user"),
            (F.col("id") % 50).cast("string").alias("page"),
            F.lit(1).cast("long").alias("n"),
        )
        out = source / f"tmp-{f}"
        df.coalesce(1).write.json(str(out))
        (part,) = out.glob("part-*.json")
        part.rename(source / f"part-{f:04d}.json")
        shutil.rmtree(out)


def stream(spark: SparkSession, source: Path) -> DataFrame:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))


def measure(query: Any, started: float, rows: int) -> dict[str, Any]:
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    batches = [
        p["durationMs"]["triggerExecution"] / 1000
        for p in query.recentProgress
        if p["numInputRows"] > 0
    ]
    return {
        "rows": rows,
        "seconds": round(elapsed, 1),
        "rows_per_s": round(rows / elapsed),
        "batches": len(batches),
        "batch_p50_s": round(statistics.median(batches), 2) if batches else None,
        "batch_max_s": round(max(batches), 2) if batches else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows", type=int, default=50_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = spark_session(app_name="bench-streaming", quiet_progress=True, extra_conf=CONF)
    root = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    try:
        source = root / "in"
        source.mkdir()
        make_files(spark, source, args.files, args.rows)
        rows = args.files * args.rows
        lake = Lake(spark, str(root / "warehouse"))

        def run_plain(name: str) -> dict[str, Any]:
            path = str(root / name)

            def plain_batch(batch: DataFrame, _: int) -> None:
                day = F.to_date(F.to_timestamp("ts"))
                batch.withColumn("day", day).write.format("delta").mode("append").partitionBy(
                    "day"
                ).save(path)

            started = time.perf_counter()
            query = (
                stream(spark, source)
                .writeStream.foreachBatch(plain_batch)
                .option("checkpointLocation", str(root / f"chk-{name}"))
                .trigger(availableNow=True)
                .start()
            )
            return measure(query, started, rows)

        run_plain("warmup")  # the first stream of the JVM pays for class loading and JIT
        plain = run_plain("plain")

        started = time.perf_counter()
        query = append_stream(
            lake, stream(spark, source), "events", SPEC,
            checkpoint_location=str(root / "chk-lake"), trigger={"availableNow": True},
        )  # fmt: skip
        mine = measure(query, started, rows)
        assert lake.read("events").count() == rows
        result = {
            "command": " ".join(sys.argv),
            "segmentlake": mine,
            "plain_delta_foreachBatch": plain,
            "ratio_rows_per_s": round(mine["rows_per_s"] / plain["rows_per_s"], 2),
            "ratio_batch_p50": round(mine["batch_p50_s"] / plain["batch_p50_s"], 2),
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
