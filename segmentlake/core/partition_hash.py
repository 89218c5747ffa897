"""Spark SQL's ``hash`` over strings, in pure Python: the bucket function of hashed partitioning.

A hashed segment holds the rows whose bucket is
``pmod(hash(CAST(d1 AS STRING), ..., CAST(dn AS STRING)), num_buckets)`` (see
:mod:`segmentlake.core.partitions_spec`). Spark's ``hash`` is ``Murmur3Hash`` with seed 42: each
non-null value is hashed with the previous result as its seed (a null passes the seed through),
and a string's UTF-8 bytes go through ``Murmur3_x86_32.hashUnsafeBytes``. That is Spark's legacy
variant, kept for compatibility: the 1-3 tail bytes are each sign-extended and mixed as a whole
block, not packed into one block as standard Murmur3 (Spark's ``hashUnsafeBytes2``) does. Blocks
are little-endian ints (``Platform.getInt`` on the machines Spark runs on).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

__all__ = [
    "SPARK_HASH_SEED",
    "hash_bucket",
    "partition_keys",
    "spark_hash",
    "spark_hash_bytes",
    "spark_hash_int",
]

SPARK_HASH_SEED = 42
_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK, 15) * _C2) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def spark_hash_bytes(data: bytes, seed: int) -> int:
    """``Murmur3_x86_32.hashUnsafeBytes(data, seed)`` as a signed 32-bit int."""
    h1 = seed & _MASK
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i : i + 4], "little")))
    for byte in data[aligned:]:
        # Java's byte is signed: 0x80..0xFF become negative ints, i.e. 0xFFFFFF80.. as 32 bits.
        h1 = _mix_h1(h1, _mix_k1(byte | 0xFFFFFF00 if byte & 0x80 else byte))
    return _signed(_fmix(h1, len(data)))


def spark_hash_int(value: int, seed: int = SPARK_HASH_SEED) -> int:
    """What Spark SQL's ``hash(v)`` returns for an INT ``v`` (``Murmur3_x86_32.hashInt``)."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"{value} is not a 32-bit int")
    return _signed(_fmix(_mix_h1(seed & _MASK, _mix_k1(value & _MASK)), 4))


@functools.lru_cache(maxsize=16)  # a session asks for its parallelism's keys every ingest
def partition_keys(num_partitions: int) -> tuple[int, ...]:
    """INT keys ``k[0..n-1]`` that Spark's hash partitioning into ``n`` partitions sends to
    partitions ``0..n-1`` (``pmod(hash(k[j]), n) == j``): repartitioning by ``k[slot]`` puts each
    slot in its own partition, where hashing the slots themselves would pile some together.

    >>> keys = partition_keys(4)
    >>> [spark_hash_int(k) % 4 for k in keys]
    [0, 1, 2, 3]
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    found: dict[int, int] = {}
    candidate = 0
    while len(found) < num_partitions:
        found.setdefault(spark_hash_int(candidate) % num_partitions, candidate)
        candidate += 1
    return tuple(found[j] for j in range(num_partitions))


def spark_hash(values: Sequence[str | None], seed: int = SPARK_HASH_SEED) -> int:
    """What Spark SQL's ``hash(v1, ..., vn)`` returns for these strings (nulls skipped).

    Raises ``UnicodeEncodeError`` for strings with lone surrogates, which have no UTF-8 form.
    """
    result = _signed(seed & _MASK)
    for value in values:
        if value is not None:
            result = spark_hash_bytes(value.encode("utf-8"), result)
    return result


def hash_bucket(values: Sequence[str | None], num_buckets: int) -> int:
    """The bucket ``pmod(hash(v1, ..., vn), num_buckets)`` of a row with these string values."""
    # Python's % already takes the sign of the divisor, which is Spark's pmod.
    return spark_hash(values) % num_buckets
