"""The partition hash: Spark SQL's ``hash`` on strings (values checked against Spark in
tests/read/test_partition_hash_spark.py), nulls skipped, buckets by ``pmod``."""

from __future__ import annotations

import pytest

from segmentlake.core.partition_hash import (
    SPARK_HASH_SEED,
    hash_bucket,
    partition_keys,
    spark_hash,
    spark_hash_int,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([""], 142593372),
        (["a"], 1485273170),  # one tail byte
        (["abcd"], -396302900),  # one whole block
        (["abcdefg"], 2132013596),  # a block and three tail bytes
        (["é", "€", "😀"], 1471497075),  # 2-, 3- and 4-byte characters, each seeding the next
        (["x", "y"], -147397959),
    ],
)
def test_known_spark_values(values: list[str], expected: int) -> None:
    assert spark_hash(values) == expected


def test_nulls_pass_the_seed_through() -> None:
    assert spark_hash([None]) == SPARK_HASH_SEED == 42
    assert spark_hash([]) == 42
    assert spark_hash(["x", None, "y"]) == spark_hash([None, "x", "y", None])


def test_buckets_are_pmod_of_the_signed_hash() -> None:
    assert spark_hash(["3"]) < 0
    assert hash_bucket(["3"], 7) == spark_hash(["3"]) % 7 == 6
    assert all(0 <= hash_bucket([str(i)], 5) < 5 for i in range(200))
    assert {hash_bucket([str(i)], 5) for i in range(200)} == set(range(5))
    assert hash_bucket(["anything"], 1) == 0


def test_lone_surrogates_have_no_hash() -> None:
    with pytest.raises(UnicodeEncodeError):
        spark_hash(["\ud800"])


def test_partition_keys_cover_every_partition_once() -> None:
    for n in (1, 2, 7, 64, 1000):
        keys = partition_keys(n)
        assert len(keys) == n
        assert [spark_hash_int(k) % n for k in keys] == list(range(n))
    with pytest.raises(ValueError, match="at least 1"):
        partition_keys(0)
