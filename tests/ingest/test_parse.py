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
        # Without a zone a value is UTC, as Druid reads it, not a New York time.
        (
            [
                "2024-01-01T00:00:00",
                "2024-01-01",
                " 2024-01-01 00:00:00.000 ",
                "2024-01-01T05:30:00+05:30",
            ],
            "STRING",
            "iso",
            [JAN1] * 4,
        ),
        (
            ["2024-01-01T00:00:00.5", "2024-01-01T00:00:00 UTC"],
            "STRING",
            "auto",
            [JAN1 + 500, JAN1],
        ),
        (["2024-01", "2024"], "STRING", "iso", [JAN1, JAN1]),
        # 02:30 on 2024-03-10 does not exist in New York (DST): a wall time read as UTC does.
        ([datetime(2024, 3, 10, 2, 30, 0, 250000)], "TIMESTAMP_NTZ", "auto", [1_710_037_800_250]),
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


def ms(*fields: int) -> int:
    return int(datetime(*fields, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


@pytest.mark.usefixtures("new_york")
@pytest.mark.parametrize(
    ("fmt", "values", "wanted"),
    [
        (
            "dd/MMM/yyyy:HH:mm:ss Z",  # an access log's
            ["05/Mar/2024:10:00:00 -0800", "5/mar/2024:1:2:3 +0000", "05/Mar/2024:10:00:00"],
            [ms(2024, 3, 5, 18), ms(2024, 3, 5, 1, 2, 3), "unparseable timestamp"],
        ),
        (
            "EEE, dd MMM yyyy HH:mm:ss Z",  # RFC 1123: the day's name is read and ignored
            ["Tue, 05 Mar 2024 10:00:00 +0100", "Tue, 05 Mar 2024 10:00:00 Z"],
            [ms(2024, 3, 5, 9), ms(2024, 3, 5, 10)],
        ),
        (
            "yyyy-MM-dd'T'HH:mm:ss.SSSZZ",  # any number of fraction digits, as Joda reads
            ["2024-03-05T10:00:00.250+01:00", "2024-03-05T10:00:00.123456Z"],
            [ms(2024, 3, 5, 9) + 250, ms(2024, 3, 5, 10) + 123],
        ),
        ("yyyy-MM-dd ZZZ", ["2024-03-05 America/Los_Angeles"], [ms(2024, 3, 5, 8)]),
        (
            # Hostile years fail the row, not the job: Spark's try_to_timestamp raises on them.
            "yyyy-MM-dd HH:mm Z",
            ["0000-01-05 10:00 Z", "-2024-01-05 10:00 Z", "99999-01-05 10:00 Z", "", "2024"],
            ["unparseable timestamp"] * 5,
        ),
    ],
)
def test_joda_patterns_read_what_druid_reads(
    spark: SparkSession, fmt: str, values: list, wanted: list
) -> None:
    got = parsed_ms(spark, values, "STRING", fmt)
    assert got == [w if isinstance(w, int) else f"{w} ({fmt})" for w in wanted]


@pytest.mark.usefixtures("new_york")
@pytest.mark.parametrize(
    ("fmt", "values", "dtype", "wanted"),
    [
        ("yyyy-MM-dd HH:mm:ss", ["2024-03-05 10:00:00", "2024-3-5 7:03:09"], "STRING", None),
        ("yyyy-MM-dd'T'HH:mm:ss'Z'", ["2024-03-05T10:00:00Z"], "STRING", [ms(2024, 3, 5, 10)]),
        # 02:30 does not exist in New York that day (DST); in UTC it does.
        ("yyyy-MM-dd HH:mm", ["2024-03-10 02:30"], "STRING", [ms(2024, 3, 10, 2, 30)]),
        ("yyyyMMddHH", [2024030510], "BIGINT", [ms(2024, 3, 5, 10)]),  # a number's digits
        ("MM/dd/yy", ["03/05/24", "03/05/70"], "STRING", [ms(2024, 3, 5), ms(1970, 3, 5)]),
        ("ruby", [1_709_632_800.25], "DOUBLE", [ms(2024, 3, 5, 10) + 250]),
        ("ISO", ["2024-03-05T10:00:00Z"], "STRING", [ms(2024, 3, 5, 10)]),  # any case
    ],
)
def test_more_druid_formats_read_zone_less_values_as_utc(
    spark: SparkSession, fmt: str, values: list, dtype: str, wanted: list | None
) -> None:
    """Values of a pattern without a zone are UTC times (Joda's default zone in Druid), in a
    session whose time zone is not UTC."""
    wanted = wanted or [ms(2024, 3, 5, 10), ms(2024, 3, 5, 7, 3, 9)]
    assert parsed_ms(spark, values, dtype, fmt) == wanted


def test_missing_value_times_rows_without_a_timestamp(spark: SparkSession) -> None:
    """Druid's missingValue: a null timestamp gets it; an unparseable one is still rejected;
    without the column at all, every row gets it."""
    spec = IngestionSpec.from_dict(
        {"timestampSpec": {"column": "ts", "format": "iso", "missingValue": "2010-01-01T00:00Z"}}
    )
    df = spark.createDataFrame([("2024-01-01T00:00:00Z",), (None,), ("soon",)], "ts STRING")
    rows = parse_input(df, spec, interval=None).frame.select(TIME, REASON).collect()
    assert [(r[TIME], r[REASON]) for r in rows] == [
        (JAN1, None),
        (ms(2010, 1, 1), None),
        (None, "unparseable timestamp (iso)"),
    ]
    without = spark.createDataFrame([("a",), ("b",)], "page STRING")
    parsed = parse_input(without, spec, interval=None)
    assert [r[TIME] for r in parsed.frame.select(TIME).collect()] == [ms(2010, 1, 1)] * 2
    assert parsed.reasons == ("timestamp outside 0001-9999",)


@pytest.mark.parametrize(
    ("segment", "query", "values", "wanted"),
    [
        # 2024-03-01 is a Friday: its week began in February, before the row's MONTH chunk.
        (
            "month",
            "week",
            ["2024-03-01T10:00:00Z", "2024-03-05T10:00:00Z"],
            [(2024, 3, 1), (2024, 3, 4)],
        ),
        ("fifteen_minute", "ten_minute", ["2024-03-01T00:16:00Z"], [(2024, 3, 1, 0, 15)]),
        ("eight_hour", "six_hour", ["2024-03-01T09:00:00Z"], [(2024, 3, 1, 8)]),
    ],
)
def test_a_query_granularity_that_does_not_nest_never_moves_a_row_out_of_its_chunk(
    spark: SparkSession, segment: str, query: str, values: list, wanted: list
) -> None:
    """Druid clamps a row's truncated time to its segment's start (IncrementalIndex)."""
    spec = IngestionSpec.from_dict(
        {
            "timestampSpec": {"column": "ts", "format": "iso"},
            "granularitySpec": {"segmentGranularity": segment, "queryGranularity": query},
        }
    )
    df = spark.createDataFrame([(v,) for v in values], "ts STRING")
    rows = parse_input(df, spec, interval=None).frame.select(TIME, CHUNK).collect()
    assert [r[TIME] for r in rows] == [ms(*w) for w in wanted]
    assert all(r[CHUNK] <= r[TIME] for r in rows)


def test_druid_regex_and_search_filters_keep_what_druid_keeps(spark: SparkSession) -> None:
    """Druid's regex filter finds its pattern anywhere (java.util.regex find(), as RLIKE);
    its search filter matches a lower-cased substring; a null value matches neither."""
    spec = IngestionSpec.from_dict(
        {
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["page"]},
            "transformSpec": {
                "filter": {
                    "type": "or",
                    "fields": [
                        {"type": "regex", "dimension": "page", "pattern": "Wiki\\d"},
                        {
                            "type": "search",
                            "dimension": "page",
                            "query": {"type": "insensitive_contains", "value": "MAIN"},
                        },
                    ],
                }
            },
        }
    )
    pages = ["about Wiki1", "The Main page", "Wikipedia", None]
    df = spark.createDataFrame(
        [("2024-01-01T00:00:00Z", p) for p in pages], "ts STRING, page STRING"
    )
    rows = parse_input(df, spec, interval=None).frame.select("page", REASON).collect()
    assert [(r.page, r[REASON]) for r in rows] == [
        ("about Wiki1", None),
        ("The Main page", None),
        ("Wikipedia", "filtered"),
        (None, "filtered"),
    ]
