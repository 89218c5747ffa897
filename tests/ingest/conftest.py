"""Fixtures for the ingestion and read tests: one warehouse and ``Lake`` per module, one
datasource per test, and a small spec over a small edits table."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from segmentlake.lake import Lake

EDITS_SCHEMA = "ts STRING, channel STRING, user STRING, added BIGINT"


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    path: Path = tmp_path_factory.mktemp("warehouse")
    return Lake(spark, str(path), lease_seconds=600)


@pytest.fixture
def ds(request: pytest.FixtureRequest) -> str:
    """A datasource name of this test only."""
    return re.sub(r"\W+", "_", request.node.name).strip("_")[:60]


def edits(
    spark: SparkSession, rows: list[tuple[Any, ...]], schema: str = EDITS_SCHEMA
) -> DataFrame:
    return spark.createDataFrame(rows, schema)


def spec(**granularity: Any) -> dict[str, Any]:
    """Druid's dataSchema for the edits table: channel and user, an edit count and a sum."""
    return {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "user"]},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
        ],
        "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", **granularity},
    }


def ts(text: str) -> datetime:
    """An aware UTC datetime (``createDataFrame`` turns it into the right instant whatever
    the machine's time zone)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


EXPECTED_SCHEMA = "__time TIMESTAMP, channel STRING, user STRING, edits BIGINT, added BIGINT"
