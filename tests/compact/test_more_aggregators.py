"""Druid's float and theta sketch aggregators through ingestion, minor and major compaction on
real Spark and Delta: FLOAT columns stay FLOAT, sketches union instead of re-counting."""

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
