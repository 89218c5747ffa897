"""Reading a filter's domain from Spark: SQL strings and Column expressions, case-insensitive
names, literals on either side, IN, AND/OR; whatever is not an exact equality or string range
on a plain column (NOT, functions, type mismatches, qualified names) constrains nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from segmentlake.core.filter_domain import Bound, Domain, Range, Values, comparison
from segmentlake.read.catalyst_domain import domain_of

pytestmark = [pytest.mark.spark]

TYPES: dict[str, DataType] = {
    "channel": StringType(),
    "User": StringType(),
    "n": LongType(),
    "i": IntegerType(),
    "s": ShortType(),
    "x": DoubleType(),
    "d": DateType(),
    "lc": StringType("UTF8_LCASE"),
    "Dup": StringType(),
    "dup": StringType(),
}


def values(*vs: str) -> Values:
    return Values.of(vs)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("channel = 'en'", {"channel": values("en")}),
        ("CHANNEL == 'en'", {"channel": values("en")}),
        ("'en' = channel", {"channel": values("en")}),
        ("user = 'bob'", {"User": values("bob")}),
        ("`channel` = 'é'", {"channel": values("é")}),
        ("channel <=> 'en'", {"channel": values("en")}),
        ("channel IN ('a', 'b', NULL)", {"channel": values("a", "b")}),
        ("channel < 'm'", {"channel": comparison("<", "m")}),
        ("'m' < channel", {"channel": comparison(">", "m")}),
        ("'m' >= channel", {"channel": comparison("<=", "m")}),
        (
            "channel >= 'a' AND channel < 'c'",
            {"channel": Range(Bound("a", True), Bound("c", False))},
        ),
        ("channel >= 'k' AND channel <= 'k'", {"channel": values("k")}),
        ("channel = 'a' OR channel = 'b'", {"channel": values("a", "b")}),
        ("channel = 'a' AND (user = 'b' OR n = 1)", {"channel": values("a")}),
        ("channel = 'a' AND NOT (user = 'b')", {"channel": values("a")}),
        ("channel = 'a' AND n = 7", {"channel": values("a"), "n": values("7")}),
        ("n = 5", {"n": values("5")}),
        ("5 = n", {"n": values("5")}),
        ("n IN (1, 2L, 3S, 4Y, -5)", {"n": values("1", "2", "3", "4", "-5")}),
        ("i = 3000000000", {"i": values("3000000000")}),
        ("s = 7Y", {"s": values("7")}),
    ],
)
def test_recognised_predicates(spark: SparkSession, sql: str, expected: Domain) -> None:
    assert domain_of(sql, TYPES, spark=spark) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "NOT (channel = 'en')",
        "channel != 'en'",
        "channel = 'a' OR user = 'b'",
        "channel IS NULL",
        "channel = NULL",
        "channel <=> NULL",
        "channel IN ('a', upper('b'))",
        "lower(channel) = 'a'",
        "channel LIKE 'a%'",
        "channel = user",
        "channel = 5",  # the string column is cast to a number: '05' matches too
        "n = '5'",
        "n = 1.0",
        "n < 5",  # numbers compare by value, their partition strings do not
        "x = 1",
        "d = DATE'2024-01-01'",
        "lc = 'a'",  # a case-insensitive collation matches 'A' too
        "channel = 'a' COLLATE UTF8_LCASE",
        "dup = 'a'",  # matches two columns that differ only in case
        "t.channel = 'a'",
        "channel.inner = 'a'",
        "missing = 'a'",
        "channel = ",  # does not parse
    ],
)
def test_unconstrained(spark: SparkSession, sql: str) -> None:
    assert domain_of(sql, TYPES, spark=spark) == {}


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (lambda: F.col("channel") == "en", {"channel": values("en")}),
        (lambda: F.col("CHANNEL").isin("a", "b"), {"channel": values("a", "b")}),
        (lambda: F.col("channel").eqNullSafe("a"), {"channel": values("a")}),
        (
            lambda: (F.col("channel") == "a") | (F.col("channel") == "b"),
            {"channel": values("a", "b")},
        ),
        (lambda: F.lit("m") < F.col("channel"), {"channel": comparison(">", "m")}),
        (
            lambda: (F.col("channel") >= "a") & (F.col("user") <= "z"),
            {"channel": comparison(">=", "a"), "User": comparison("<=", "z")},
        ),
        (lambda: F.col("n") == 5, {"n": values("5")}),
        (lambda: F.col("n").isin([1, 2]), {"n": values("1", "2")}),
        (lambda: F.expr("channel = 'en'"), {"channel": values("en")}),
        (lambda: ~(F.col("channel") == "a"), {}),
        (lambda: F.col("channel") != "a", {}),
        (lambda: F.col("n") == F.lit(None), {}),
        (lambda: F.col("channel").isin(), {}),
        (lambda: F.col("n") > 5, {}),
    ],
)
def test_column_expressions(
    spark: SparkSession, column: Callable[[], Column], expected: Domain
) -> None:
    assert domain_of(column(), TYPES, spark=spark) == expected


def test_the_active_session_is_used_by_default(spark: SparkSession) -> None:
    assert domain_of("channel = 'en'", TYPES) == {"channel": values("en")}


def test_columns_without_a_jvm_expression_constrain_nothing(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    class ConnectColumn:  # what Spark Connect hands out: no _jc
        pass

    with caplog.at_level(logging.DEBUG, logger="segmentlake.read.catalyst_domain"):
        assert domain_of(ConnectColumn(), TYPES, spark=spark) == {}  # type: ignore[arg-type]
    assert "no pruning" in caplog.text
