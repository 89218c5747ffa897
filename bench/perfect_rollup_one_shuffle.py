"""Probe of a perfect-rollup plan that segmentlake does not ship: one shuffle of the raw rows
by chunk, then rollup, count and tagging inside the task that holds each chunk whole.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/perfect_rollup_one_shuffle.py --rounds 4

The shipped plan (``lake.overwrite`` with ``targetRowsPerSegment`` or a range spec, see
``bench/perfect_rollup.py``) shuffles twice: the rollup's own shuffle (with partial
aggregation before it) and a shuffle of the rolled-up rows by chunk, then counts each chunk
in a job of its own and tags and writes in another. This probe writes the same segments
(one file each, one task per chunk) from one shuffle: the raw rows by chunk slot, rolled up
in the task (Spark plans no exchange: the rows are already clustered by slot), each chunk's
rows counted with a window (``count(1) OVER (PARTITION BY slot, chunk)``; for range a running
count ordered by the partition dimension cuts the chunk) and written partitioned by segment
key to a plain Delta table. Only the Spark job is timed, without segmentlake's metadata
(which the shipped side includes), against the plain ``groupBy`` + partitioned Delta write of
``bench/perfect_rollup.py``. Rounds alternate their order; the first is a warm-up; medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from perfect_rollup import DIMENSIONS, START, make_input, plain_rollup, spec
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from segmentlake import Lake
from segmentlake.core.partition_hash import partition_keys
from segmentlake.spark.session import spark_session

TARGET = 20_000
METRICS = ["edits", "added", "least_added", "most_added", "deleted"]


def one_shuffle(source: DataFrame, path: str, kind: str, parallelism: int) -> None:
    """The probe's plan, written to a Delta table at ``path`` partitioned by segment key."""
    keys = ", ".join(map(str, partition_keys(parallelism)))
    raw = source.selectExpr(
        "unix_millis(date_trunc('day', ts)) AS chunk", *DIMENSIONS, "added", "deleted"
    )
    ordinal = "floor(chunk / 86400000)"
    slot = f"element_at(array({keys}), CAST(pmod({ordinal}, {parallelism}) + 1 AS INT))"
    by_slot = raw.selectExpr("*", f"{slot} AS __slot").repartition(parallelism, "__slot")
    rolled = by_slot.groupBy("__slot", "chunk", *DIMENSIONS).agg(
        F.expr("count(1) AS edits"),
        F.expr("sum(added) AS added"),
        F.expr("min(added) AS least_added"),
        F.expr("max(added) AS most_added"),
        F.expr("sum(deleted) AS deleted"),
    )
    chunk = "PARTITION BY __slot, chunk"
    if kind == "hashed":
        counted = rolled.selectExpr("*", f"count(1) OVER ({chunk}) AS __total")
        hashed = ", ".join(f"CAST({c} AS STRING)" for c in ["chunk", *DIMENSIONS])
        buckets = f"greatest(1, ceil(__total / {TARGET}))"
        tagged = counted.selectExpr("*", f"CAST(pmod(hash({hashed}), {buckets}) AS INT) AS __b")
    else:
        upto = f"count(1) OVER ({chunk} ORDER BY page RANGE UNBOUNDED PRECEDING)"
        counted = rolled.selectExpr(
            "*",
            f"{upto} - count(1) OVER (PARTITION BY __slot, chunk, page) AS __before",
            f"count(1) OVER ({chunk}) AS __total",
        )
        pieces = f"greatest(1, round(__total / {TARGET}), ceil(__total / 30000))"
        cut = f"least(floor(__before * {pieces} / __total), {pieces} - 1)"
        tagged = counted.selectExpr("*", f"CAST({cut} AS INT) AS __b")
    stored = tagged.selectExpr(
        "timestamp_millis(chunk) AS __time",
        *DIMENSIONS,
        *METRICS,
        "concat(CAST(chunk AS STRING), '.', CAST(__b AS STRING), '.probe') AS __segment",
    )
    stored.write.format("delta").partitionBy("__segment").save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=4, help="the first is a warm-up")
    args = parser.parse_args()
    conf = {"spark.ui.enabled": "false"}
    spark = spark_session(app_name="bench-one-shuffle", quiet_progress=True, extra_conf=conf)
    root = Path(tempfile.mkdtemp(prefix="bench-one-shuffle-"))
    try:
        source = make_input(spark, str(root / "source"), args.rows, 30)
        lake = Lake(spark, str(root / "warehouse"))
        parallelism = spark.sparkContext.defaultParallelism
        partitions = {
            "hashed": {"type": "hashed", "targetRowsPerSegment": TARGET},
            "range": {
                "type": "range",
                "partitionDimensions": ["page"],
                "targetRowsPerSegment": TARGET,
            },
        }

        def shipped(kind: str) -> Callable[[int], object]:
            return lambda i: lake.overwrite(
                source, f"{kind}{i}", spec(partitions[kind]), interval=f"{START}/P30D"
            )

        def probe(kind: str) -> Callable[[int], object]:
            return lambda i: one_shuffle(source, str(root / f"{kind}{i}"), kind, parallelism)

        sides: dict[str, Callable[[int], object]] = {
            "plain": lambda i: plain_rollup(source, str(root / f"plain{i}")),
            "shipped_hashed": shipped("hashed"),
            "one_shuffle_hashed": probe("hashed"),
            "shipped_range": shipped("range"),
            "one_shuffle_range": probe("range"),
        }
        seconds: dict[str, list[float]] = {name: [] for name in sides}
        for round_number in range(args.rounds):
            order = list(sides.items())
            if round_number % 2:
                order.reverse()
            for name, run in order:
                began = time.perf_counter()
                run(round_number)
                if round_number:
                    seconds[name].append(time.perf_counter() - began)
        median = {name: statistics.median(s) for name, s in seconds.items()}
        result = {
            name: {"s": round(s, 2), "ratio": round(s / median["plain"], 2)}
            for name, s in median.items()
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
