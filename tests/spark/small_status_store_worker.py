"""Measure the same block over and over in a Spark whose status store keeps only a few stages,
so the block's skipped stages are evicted right after its jobs end; prints one JSON line per
block (``null`` where the metrics could not be read). Run by test_job_metrics.py."""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from segmentlake.spark.job_metrics import measure_jobs


def run_block_with_skipped_stages(spark: SparkSession) -> None:
    counts = spark.range(100_000).selectExpr("id % 7 AS k").groupBy("k").count()
    counts.collect()
    # Both reuse the first job's shuffle files: each plans the map stage anew and skips it.
    counts.collect()
    counts.join(counts, "k").collect()


def main(retained: int, blocks: int) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.retainedStages", str(retained))
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for i in range(blocks):
        with measure_jobs(spark, f"block-{i}") as measured:
            run_block_with_skipped_stages(spark)
        print(json.dumps(None if measured.metrics is None else measured.metrics.to_json()))
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
