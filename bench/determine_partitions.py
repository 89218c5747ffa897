"""What determining hashed partitions costs: ways of counting each chunk's distinct rolled-up
keys on the perfect-rollup bench's input, against a plain count of the rows.

Run from the repository root (a temporary directory under /tmp is created and removed):

    .venv/bin/python bench/determine_partitions.py            # 3,000,000 rows over 30 days

* ``hllpp``: Spark's ``approx_count_distinct`` (HyperLogLog++, 2% RSD) per chunk, as
  ``ingest/partitioning.py`` did until the count moved into the write job (2026-11-27);
* ``registers``: a plain HyperLogLog written as declarative aggregates Spark compiles
  (per chunk and register, the max leading-zero count of a 64-bit key hash; the estimate on
  the driver);
* ``exact``: ``distinct()`` then a count per chunk;
* ``count``: the rows per chunk (no distinct: what a determine pass cannot go below).

Medians of ``--repeat`` rounds; the worst relative error of each estimate against ``exact``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time

from perfect_rollup import make_input
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from segmentlake.spark.session import spark_session

_P = 12  # 4,096 registers, as HLL++ at 2% RSD


def hllpp(keys: DataFrame) -> dict[int, float]:
    return {r[0]: r[1] for r in keys.groupBy("c").agg(F.approx_count_distinct("h", 0.02)).collect()}


def registers(keys: DataFrame) -> dict[int, float]:
    width = 64 - _P
    rho = (
        keys.selectExpr("c", f"h & {(1 << _P) - 1} AS r", f"shiftrightunsigned(h, {_P}) AS w")
        .selectExpr("c", "r", "w", "CAST(floor(log2(w)) AS INT) AS k")
        .selectExpr(
            "c",
            "r",
            # log2 of a double can land a hair under a power of two: check the bit.
            f"CASE WHEN w = 0 THEN {width + 1} WHEN shiftleft(1L, k) > w THEN {width} - (k - 1) "
            f"ELSE {width} - k END AS rho",
        )
    )
    per_register = rho.groupBy("c", "r").agg(F.max("rho").alias("m"))
    sums = per_register.groupBy("c").agg(
        F.sum(F.pow(F.lit(2.0), -F.col("m"))).alias("z"), F.count("*").alias("n")
    )
    m = 1 << _P
    alpha = 0.7213 / (1 + 1.079 / m)
    out = {}
    for r in sums.collect():
        zeros = m - r["n"]
        estimate = alpha * m * m / (r["z"] + zeros)
        if estimate <= 2.5 * m and zeros > 0:  # small range: linear counting
            estimate = m * math.log(m / zeros)
        out[r["c"]] = estimate
    return out


def exact(keys: DataFrame) -> dict[int, float]:
    return {r[0]: r[1] for r in keys.distinct().groupBy("c").count().collect()}


def count(keys: DataFrame) -> dict[int, float]:
    return {r[0]: r[1] for r in keys.groupBy("c").count().collect()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(app_name="bench-determine", extra_conf={"spark.ui.enabled": "false"})
    root = tempfile.mkdtemp(prefix="bench-determine-")
    try:
        make_input(spark, f"{root}/source", args.rows, args.days)
        source = spark.read.format("delta").load(f"{root}/source")
        chunk = F.unix_millis("ts") - F.pmod(F.unix_millis("ts"), F.lit(86_400_000))
        key = F.xxhash64(F.date_trunc("day", "ts"), "channel", "country", "device", "page")
        keys = source.select(chunk.alias("c"), key.alias("h"))
        ways = {"hllpp": hllpp, "registers": registers, "exact": exact, "count": count}
        for way in ways.values():
            way(keys)  # warm
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.repeat):
            for name, way in ways.items():
                started = time.perf_counter()
                way(keys)
                times[name].append(time.perf_counter() - started)
        truth = exact(keys)
        errors = {
            name: max(abs(ways[name](keys)[c] / n - 1) for c, n in truth.items())
            for name in ("hllpp", "registers")
        }
        print(
            json.dumps(
                {
                    "rows": args.rows,
                    "seconds": {k: round(statistics.median(v), 3) for k, v in times.items()},
                    "worst_relative_error": {k: round(v, 4) for k, v in errors.items()},
                    "mean_distinct_keys_per_chunk": round(statistics.mean(truth.values())),
                },
                indent=2,
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
