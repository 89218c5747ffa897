"""The pure-Python partition hash agrees with Spark: ``hash_bucket`` equals Spark SQL's
``pmod(hash(CAST(d1 AS STRING), ...), n)`` on random strings (ASCII, any Unicode, empty,
null; one to three columns) and on integers cast to strings; ``spark_hash_int`` equals
``hash(CAST(v AS INT))``, and ``partition_keys`` lands each key in its own partition."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.core.partition_hash import hash_bucket, partition_keys, spark_hash, spark_hash_int

pytestmark = [pytest.mark.spark]

Row = tuple[str | None, ...]

# Every tail length, tail bytes at and above 0x80 (Java's signed bytes), 2-, 3- and 4-byte
# characters, and nulls around values (a null passes the running hash through).
EDGE_ROWS: list[Row] = [
    *[("abcdefghi"[:k], None, None) for k in range(10)],
    ("é", "€", "😀"),
    ("aé", "ab€", "abc😀"),
    ("\x00", "\x7f", "\u0080"),
    ("\uffff", "\U0010ffff", "ÿÿÿ"),
    (None, None, None),
    (None, "x", None),
    ("x", None, "y"),
    ("", "", ""),
]


def spark_hashes(spark: SparkSession, rows: list[Row], n: int, exprs: list[str]) -> list[Row]:
    """(hash, pmod(hash, n)) per row, computed by Spark over ``exprs``, in row order."""
    width = len(rows[0])
    schema = ", ".join(["i INT", *[f"c{k} STRING" for k in range(width)]])
    df = spark.createDataFrame([(i, *row) for i, row in enumerate(rows)], schema)
    args = ", ".join(exprs)
    out = df.selectExpr("i", f"hash({args}) AS h", f"pmod(hash({args}), {n}) AS b")
    return [(r.h, r.b) for r in out.orderBy("i").collect()]


def assert_agrees(spark: SparkSession, rows: list[Row], n: int) -> None:
    exprs = [f"CAST(c{k} AS STRING)" for k in range(len(rows[0]))]
    expected = spark_hashes(spark, rows, n, exprs)
    assert [(spark_hash(row), hash_bucket(row, n)) for row in rows] == expected


def test_edge_strings(spark: SparkSession) -> None:
    assert_agrees(spark, EDGE_ROWS, 7)
    assert_agrees(spark, [row[:1] for row in EDGE_ROWS], 1000)


texts = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=12),
    st.text(max_size=12),  # any code point but surrogates, which have no UTF-8 form
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), width=st.integers(1, 3), n=st.integers(1, 64))
def test_random_strings(spark: SparkSession, data: st.DataObject, width: int, n: int) -> None:
    value = st.one_of(st.none(), texts)
    rows = data.draw(st.lists(st.tuples(*[value] * width), min_size=1, max_size=200))
    assert_agrees(spark, rows, n)


def test_integers_hash_as_their_decimal_strings(spark: SparkSession) -> None:
    # Hashed partitioning casts every dimension to STRING: a long's bucket is its text's.
    values = [0, 1, -1, 42, 2**31 - 1, 2**31, -(2**31), 2**63 - 1, -(2**63), 1234567890123]
    df = spark.createDataFrame(
        [(i, v, v % 2**31) for i, v in enumerate(values)], "i INT, v LONG, w INT"
    )
    out = df.selectExpr(
        "i",
        "pmod(hash(CAST(v AS STRING)), 13) AS b",
        "pmod(hash(CAST(w AS STRING), CAST(v AS STRING)), 13) AS bw",
    ).orderBy("i")
    expected = [(r.b, r.bw) for r in out.collect()]
    actual = [
        (hash_bucket([str(v)], 13), hash_bucket([str(v % 2**31), str(v)], 13)) for v in values
    ]
    assert actual == expected


def test_int_hashes_agree(spark: SparkSession) -> None:
    values = [0, 1, -1, 42, 2**31 - 1, -(2**31), 123456789, -987654321]
    df = spark.createDataFrame([(v,) for v in values], "v INT")
    expected = [r.h for r in df.selectExpr("hash(v) AS h").collect()]
    assert [spark_hash_int(v) for v in values] == expected
    with pytest.raises(ValueError, match="32-bit"):
        spark_hash_int(2**31)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 37])
def test_partition_keys_land_each_slot_in_its_own_partition(spark: SparkSession, n: int) -> None:
    keys = partition_keys(n)
    df = spark.createDataFrame([(slot, key) for slot, key in enumerate(keys)], "slot INT, k INT")
    placed = df.repartition(n, "k").select("slot", F.spark_partition_id().alias("p")).collect()
    assert sorted((r.slot, r.p) for r in placed) == [(j, j) for j in range(n)]
