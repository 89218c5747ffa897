"""Druid's float, theta and quantiles sketch aggregators through ingestion, minor and major
compaction on real Spark and Delta: FLOAT columns stay FLOAT, sketches union instead of
re-counting."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.lake import Lake

pytestmark = [pytest.mark.spark]

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["channel"]},
    "metricsSpec": [
        {"type": "floatSum", "name": "load", "fieldName": "x"},
        {"type": "floatMin", "name": "least", "fieldName": "x"},
        {"type": "floatMax", "name": "most", "fieldName": "x"},
        {"type": "thetaSketch", "name": "users", "fieldName": "user", "size": 4096},
    ],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
}


def rows(spark: SparkSession, salt: int) -> DataFrame:
    data = [
        (f"2024-01-01T{h:02d}:{m:02d}:00Z", f"#{m % 2}", f"u{(h * 7 + m + salt) % 40}", 0.5 * m)
        for h in range(4)
        for m in range(6)
    ]
    return spark.createDataFrame(data, "ts STRING, channel STRING, user STRING, x STRING")


def summary(frame: DataFrame) -> dict[str, Any]:
    return (
        frame.agg(
            F.sum("load").alias("load"),
            F.min("least").alias("least"),
            F.max("most").alias("most"),
            F.theta_sketch_estimate(F.theta_union_agg("users", 12)).alias("users"),
        )
        .first()
        .asDict()
    )


def test_float_and_theta_metrics_survive_minor_and_major_compaction(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    for salt in (0, 13):  # two appends: two segments an hour, users overlapping
        lake.append(rows(spark, salt), ds, SPEC)
    users = {r.user for salt in (0, 13) for r in rows(spark, salt).collect()}
    types = {f.name: f.dataType.simpleString() for f in lake.read(ds).schema.fields}
    assert (types["load"], types["least"], types["most"], types["users"]) == (
        "float",
        "float",
        "float",
        "binary",
    )
    wanted = {"load": 2 * 4 * 7.5, "least": 0.0, "most": 2.5, "users": len(users)}
    assert summary(lake.read(ds)) == wanted

    minor = lake.compact(ds, mode="minor")
    assert minor.status == "SUCCESS", minor.summary()
    assert summary(lake.read(ds)) == wanted
    major = lake.compact(ds, mode="major", segment_granularity="DAY")
    assert major.status == "SUCCESS", major.summary()
    after = lake.read(ds)
    assert summary(after) == wanted
    assert after.schema["load"].dataType.simpleString() == "float"
    # Rolled up to one row per (hour, channel): each row's sketch is a union, not a recount.
    assert after.count() == 4 * 2


QUANTILES_SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["channel"]},
    "metricsSpec": [
        {"type": "count", "name": "n"},
        {"type": "quantilesDoublesSketch", "name": "latency", "fieldName": "ms", "k": 256},
    ],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
}


def latencies(spark: SparkSession, salt: int) -> DataFrame:
    data = [
        (f"2024-01-01T{h:02d}:{m % 60:02d}:00Z", f"#{m % 2}", str(float((m * 37 + salt) % 1000)))
        for h in range(3)
        for m in range(200)
    ]
    return spark.createDataFrame(data, "ts STRING, channel STRING, ms STRING")


def quantiles(frame: DataFrame) -> tuple[int, float, float]:
    merged = F.kll_merge_agg_double("latency")
    row = frame.agg(
        F.kll_sketch_get_n_double(merged).alias("n"),
        F.kll_sketch_get_quantile_double(merged, F.lit(0.0)).alias("low"),
        F.kll_sketch_get_quantile_double(merged, F.lit(1.0)).alias("high"),
    ).first()
    return row.n, row.low, row.high


def test_quantiles_sketches_are_built_at_ingestion_and_merged_by_compaction(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """Druid's quantilesDoublesSketch as Spark's KLL sketch: every input value counted once
    through two appends, a minor and a major compaction; the median stays near the true one."""
    for salt in (0, 500):
        lake.append(latencies(spark, salt), ds, QUANTILES_SPEC)
    values = sorted(float(r.ms) for salt in (0, 500) for r in latencies(spark, salt).collect())
    assert lake.read(ds).schema["latency"].dataType.simpleString() == "binary"
    wanted = (len(values), values[0], values[-1])
    assert quantiles(lake.read(ds)) == wanted
    assert lake.compact(ds, mode="minor").status == "SUCCESS"
    assert quantiles(lake.read(ds)) == wanted
    major = lake.compact(ds, mode="major", segment_granularity="DAY")
    assert major.status == "SUCCESS", major.summary()
    after = lake.read(ds)
    assert quantiles(after) == wanted
    assert after.count() == 3 * 2  # a row per hour and channel: sketches merged, not rebuilt
    median = after.agg(
        F.kll_sketch_get_quantile_double(F.kll_merge_agg_double("latency"), F.lit(0.5))
    ).first()[0]
    true_median = values[len(values) // 2]
    assert abs(median - true_median) <= 0.05 * (values[-1] - values[0])  # KLL's rank error


FIRST_LAST_SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["sensor"]},
    "metricsSpec": [
        {"type": "doubleFirst", "name": "opening", "fieldName": "reading"},
        {"type": "doubleLast", "name": "closing", "fieldName": "reading"},
        {"type": "longLast", "name": "seq", "fieldName": "n"},
        {"type": "stringLast", "name": "status", "fieldName": "state", "maxStringBytes": 4},
        {"type": "floatFirst", "name": "first_f", "fieldName": "reading"},
    ],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
}


def readings(spark: SparkSession, minutes: range, salt: int) -> DataFrame:
    data = [
        (
            f"2024-01-01T{h:02d}:{m:02d}:00Z",
            f"s{m % 2}",
            None if m == minutes.start else str(h * 100 + m + salt / 10),
            h * 60 + m,
            f"state-{m}",
        )
        for h in range(2)
        for m in minutes
    ]
    schema = "ts STRING, sensor STRING, reading STRING, n BIGINT, state STRING"
    return spark.createDataFrame(data, schema)


def first_last(frame: DataFrame) -> dict:
    rows = frame.groupBy("sensor").agg(
        F.min_by("opening.value", "opening.time").alias("opening"),
        F.max_by("closing.value", "closing.time").alias("closing"),
        F.max_by("seq.value", "seq.time").alias("seq"),
        F.max_by("status.value", "status.time").alias("status"),
    )
    return {r.sensor: (r.opening, r.closing, r.seq, r.status) for r in rows.collect()}


def test_first_and_last_keep_their_times_through_appends_and_compaction(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """Druid's first/last aggregators, stored as (time, value) pairs: the earliest and latest
    values with a value (nulls skipped, as Druid does), whichever append brought them, the same
    after a minor and a major compaction; a string cut to maxStringBytes."""
    lake.append(readings(spark, range(30, 60), 0), ds, FIRST_LAST_SPEC)  # later minutes first
    lake.append(readings(spark, range(0, 30), 5), ds, FIRST_LAST_SPEC)
    types = {f.name: f.dataType.simpleString() for f in lake.read(ds).schema.fields}
    assert types["opening"] == "struct<time:bigint,value:double>"
    assert types["first_f"] == "struct<time:bigint,value:float>"
    assert types["status"] == "struct<time:bigint,value:string>"
    # Minute 0 of each hour has no reading: the first is minute 2 (s0) or 1 (s1) of hour 0.
    wanted = {
        "s0": (2.5, 158.0, 118, "stat"),
        "s1": (1.5, 159.0, 119, "stat"),
    }
    assert first_last(lake.read(ds)) == wanted
    assert lake.compact(ds, mode="minor").status == "SUCCESS"
    assert first_last(lake.read(ds)) == wanted
    major = lake.compact(ds, mode="major", segment_granularity="DAY")
    assert major.status == "SUCCESS", major.summary()
    assert first_last(lake.read(ds)) == wanted
    assert lake.read(ds).count() == 2 * 2  # a row per hour and sensor


def test_first_and_last_without_rollup_keep_each_rows_pair(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    spec = {
        **FIRST_LAST_SPEC,
        "metricsSpec": [{"type": "longLast", "name": "seq", "fieldName": "n"}],
        "granularitySpec": {
            "segmentGranularity": "day",
            "queryGranularity": "none",
            "rollup": False,
        },
    }
    rows = [("2024-01-01T00:00:01.5Z", "a", 7), ("2024-01-01T00:00:03Z", "a", None)]
    lake.append(spark.createDataFrame(rows, "ts STRING, sensor STRING, n BIGINT"), ds, spec)
    pairs = sorted((r.seq.time, r.seq.value) for r in lake.read(ds).collect())
    assert pairs == [(1_704_067_201_500, 7), (1_704_067_203_000, None)]
