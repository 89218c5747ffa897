"""Row parsing as Spark expressions: timestamp formats, time buckets that agree with the pure
core's granularities whatever the session time zone, and rejection reasons."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import MAX_MILLIS, MIN_MILLIS
from segmentlake.ingest.parse import CHUNK, REASON, TIME, floor_millis_sql, parse_input

pytestmark = [pytest.mark.spark]

JAN1 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


@pytest.fixture
def new_york(spark: SparkSession) -> Iterator[None]:
    """A session time zone that is not UTC: parsing must not depend on it."""
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def parsed_ms(spark: SparkSession, values: list, dtype: str, fmt: str) -> list:
    df = spark.createDataFrame([(v,) for v in values], f"ts {dtype}")
    spec = IngestionSpec.from_dict({"timestampSpec": {"column": "ts", "format": fmt}})
    rows = parse_input(df, spec, interval=None).frame.select(TIME, REASON).collect()
    return [r[TIME] if r[REASON] is None else r[REASON] for r in rows]


@pytest.mark.usefixtures("new_york")
@pytest.mark.parametrize(
    ("values", "dtype", "fmt", "wanted"),
    [
        (["2024-01-01T00:00:00Z", "2024-01-01T01:00:00+01:00"], "STRING", "iso", [JAN1, JAN1]),
        ([str(JAN1), "2024-01-01T00:00:00.250Z"], "STRING", "auto", [JAN1, JAN1 + 250]),
        ([JAN1], "BIGINT", "millis", [JAN1]),
        ([JAN1], "BIGINT", "auto", [JAN1]),
        ([JAN1 // 1000], "BIGINT", "posix", [JAN1]),
        ([1_704_067_200.5], "DOUBLE", "posix", [JAN1 + 500]),
        ([JAN1 * 1000 + 999], "BIGINT", "micro", [JAN1]),
        ([JAN1 * 1_000_000], "BIGINT", "nano", [JAN1]),
        ([datetime(2024, 1, 1, tzinfo=UTC)], "TIMESTAMP", "auto", [JAN1]),
        ([datetime(2024, 1, 1)], "TIMESTAMP_NTZ", "auto", [JAN1]),  # wall time read as UTC
        ([date(2024, 1, 1)], "DATE", "auto", [JAN1]),
        (["soon", None], "STRING", "iso", ["unparseable timestamp (iso)", "null timestamp"]),
        ([Decimal(10**19)], "DECIMAL(20,0)", "millis", ["unparseable timestamp (millis)"]),
        ([MAX_MILLIS + 5], "BIGINT", "millis", ["unparseable timestamp (millis)"]),
    ],
)
def test_timestamp_formats(
    spark: SparkSession, values: list, dtype: str, fmt: str, wanted: list
) -> None:
    assert parsed_ms(spark, values, dtype, fmt) == wanted


@pytest.mark.usefixtures("new_york")
def test_buckets_agree_with_the_core_granularities(spark: SparkSession) -> None:
    rng = random.Random(7)
    samples = [rng.randrange(MIN_MILLIS, MAX_MILLIS) for _ in range(300)]
    samples += [0, -1, JAN1 - 1, JAN1, MIN_MILLIS, MAX_MILLIS - 1]
    df = spark.createDataFrame([(m,) for m in samples], "ms BIGINT")
    granularities = [g for g in Granularity if g is not Granularity.ALL]
    rows = df.select(
        "ms", *[F.expr(floor_millis_sql(g, "ms")).alias(g.name) for g in granularities]
    ).collect()
    for row in rows:
        for g in granularities:
            assert row[g.name] == g.bucket_start_millis(row.ms), (g, row.ms)


def test_chunk_and_query_time_follow_the_granularity_spec(spark: SparkSession) -> None:
    df = spark.createDataFrame([("2024-02-15T13:45:10Z",)], "ts STRING")
    spec = IngestionSpec.from_dict(
        {
            "timestampSpec": {"column": "ts"},
            "granularitySpec": {"segmentGranularity": "month", "queryGranularity": "hour"},
        }
    )
    row = parse_input(df, spec, interval=None).frame.first()
    assert row[CHUNK] == int(datetime(2024, 2, 1, tzinfo=UTC).timestamp() * 1000)
    assert row[TIME] == int(datetime(2024, 2, 15, 13, tzinfo=UTC).timestamp() * 1000)


def test_only_the_rejections_an_input_can_meet(spark: SparkSession) -> None:
    """Typed inputs cannot fail to parse (a TIMESTAMP, integers for a long metric, numbers
    for a double one), so they get no rejection reason to evaluate and count; a DECIMAL
    that overflows a long, or a string, still does."""
    df = spark.createDataFrame(
        [(datetime(2024, 1, 1, tzinfo=UTC), 5, 2, Decimal(10**19), "7")],
        "ts TIMESTAMP, n BIGINT, i INT, big DECIMAL(20,0), s STRING",
    )
    metrics = [
        {"type": "longSum", "name": "a", "fieldName": "n"},
        {"type": "doubleSum", "name": "b", "fieldName": "i"},
        {"type": "doubleMax", "name": "c", "fieldName": "big"},
        {"type": "longSum", "name": "d", "fieldName": "big"},
        {"type": "longMin", "name": "e", "fieldName": "s"},
    ]
    spec = IngestionSpec.from_dict(
        {"timestampSpec": {"column": "ts", "format": "auto"}, "metricsSpec": metrics}
    )
    parsed = parse_input(df, spec, interval=None)
    overflow = "unparseable 'big' for longSum metric 'd'"
    assert parsed.reasons == (
        "null timestamp",
        "timestamp outside 0001-9999",
        overflow,
        "unparseable 's' for longMin metric 'e'",
    )
    assert [r[REASON] for r in parsed.frame.select(REASON).collect()] == [overflow]
