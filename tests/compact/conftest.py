"""Fixtures for the compaction tests: a warehouse and ``Lake`` per module, a datasource per
test, and events with a count, a sum, a min, a max and an HLL sketch."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.lake import Lake

EVENTS_SCHEMA = "ts STRING, channel STRING, user STRING, added BIGINT"


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    path: Path = tmp_path_factory.mktemp("warehouse")
    return Lake(spark, str(path), lease_seconds=600)


@pytest.fixture
def ds(request: pytest.FixtureRequest) -> str:
    return re.sub(r"\W+", "_", request.node.name).strip("_")[:60]


def spec(segment: str = "day", query: str = "hour", rollup: bool = True) -> dict[str, Any]:
    return {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "user"]},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "longMin", "name": "smallest", "fieldName": "added"},
            {"type": "longMax", "name": "largest", "fieldName": "added"},
            {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"},
        ],
        "granularitySpec": {
            "segmentGranularity": segment,
            "queryGranularity": query,
            "rollup": rollup,
        },
    }


def events(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, EVENTS_SCHEMA)


def totals(frame: DataFrame) -> dict[str, Any]:
    """Datasource-wide aggregates that rollup and compaction must preserve."""
    row = frame.agg(
        F.sum("edits").alias("edits"),
        F.sum("added").alias("added"),
        F.min("smallest").alias("smallest"),
        F.max("largest").alias("largest"),
        F.hll_sketch_estimate(F.hll_union_agg("users", True)).alias("users"),
    ).collect()[0]
    return row.asDict()


def per_key(frame: DataFrame) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """(hour, channel, user) -> (edits, added, smallest, largest), rolled up."""
    rows = (
        frame.groupBy("__time", "channel", "user")
        .agg(F.sum("edits"), F.sum("added"), F.min("smallest"), F.max("largest"))
        .collect()
    )
    return {(r[0], r[1], r[2]): tuple(r[3:]) for r in rows}
