"""Reads with a filter leave out the segments whose secondary partition cannot hold a matching
row, and still return exactly the rows the filter selects.

The datasource is built by hand: rows written straight into its Delta table under their
segments' keys (hash buckets computed by Spark itself), and the segments published through the
metadata with hashed, range, single_dim and numbered shard specs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.core.filter_domain import Domain
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.names import datasource_table_path
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    NumberedShardSpec,
    ShardSpec,
    SingleDimensionShardSpec,
)
from segmentlake.lake import Lake
from segmentlake.read.catalyst_domain import domain_of
from segmentlake.storage.visible_rows import partitions

pytestmark = [pytest.mark.spark]

DS = "pruned"
DAYS = Interval.parse("2024-01-01/P5D")
SCHEMA = "__time TIMESTAMP, channel STRING, country STRING, city STRING, n BIGINT, added BIGINT"
CHANNELS = ["en", "de", "fr", "ja", "es", "it", "ru", "zh", "pt", "ko", "é", "", None]
COUNTRIES = ["de", "fr", "jp", "us", None]
CITIES = ["berlin", "lyon", "nyc", "paris", "sf", "zzzz", None]
BUCKETS = 4
# Day 2: range partitioning on (country, city): [-, (de, zzz)) [(de, zzz), (us, a)) [(us, a), -)
RANGE_CUTS: list[tuple[str | None, ...]] = [("de", "zzz"), ("us", "a")]
SINGLE_CUT = "fr"  # day 3: single_dim on channel: [-, fr) [fr, -)


def day(i: int) -> Interval:
    start = DAYS.start + timedelta(days=i)
    return Interval(start, start + timedelta(days=1))


def random_rows(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    return [
        (
            DAYS.start + timedelta(days=rng.randrange(5), minutes=rng.randrange(1440)),
            rng.choice(CHANNELS),
            rng.choice(COUNTRIES),
            rng.choice(CITIES),
            rng.randrange(-3, 9),
            rng.randrange(100),
        )
        for _ in range(count)
    ]


def _tuple_key(t: tuple[str | None, ...]) -> list[tuple[bool, str]]:
    return [(v is not None, v or "") for v in t]


def range_index(country: str | None, city: str | None) -> int:
    key = _tuple_key((country, city))
    return sum(1 for cut in RANGE_CUTS if _tuple_key(cut) <= key)


def single_index(channel: str | None) -> int:
    return 0 if channel is None or channel < SINGLE_CUT else 1


def keyed(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    """The rows with their ``__segment``: day 0 hashed by channel, day 1 by range, day 2 by
    single_dim, day 3 one numbered segment, day 4 hashed by the LONG n (cast to a string)."""
    tagged = []
    for row in rows:
        d = (row[0] - DAYS.start).days
        if d == 1:
            tagged.append((*row, f"d1.{range_index(row[2], row[3])}"))
        elif d == 2:
            tagged.append((*row, f"d2.{single_index(row[1])}"))
        else:
            tagged.append((*row, f"d{d}"))
    df = spark.createDataFrame(tagged, SCHEMA + ", __segment STRING")
    # Buckets from Spark's own hash, not from the Python function under test.
    bucket = {
        "d0": F.pmod(F.hash(F.col("channel").cast("string")), F.lit(BUCKETS)),
        "d4": F.pmod(F.hash(F.col("n").cast("string")), F.lit(BUCKETS)),
    }
    key = F.col("__segment")
    for prefix, b in bucket.items():
        key = F.when(F.col("__segment") == prefix, F.concat_ws(".", F.lit(prefix), b)).otherwise(
            key
        )
    return df.withColumn("__segment", key)


def shard_specs() -> list[tuple[int, str, ShardSpec]]:
    """(day, key, shard spec) of every segment."""
    specs: list[tuple[int, str, ShardSpec]] = []
    for d, dims in ((0, ("channel",)), (4, ("n",))):
        specs += [
            (d, f"d{d}.{b}", HashBasedNumberedShardSpec(b, BUCKETS, b, BUCKETS, dims))
            for b in range(BUCKETS)
        ]
    ends = [None, *RANGE_CUTS, None]
    specs += [
        (1, f"d1.{i}", DimensionRangeShardSpec(i, 3, ("country", "city"), ends[i], ends[i + 1]))
        for i in range(3)
    ]
    single = [None, SINGLE_CUT, None]
    specs += [
        (2, f"d2.{i}", SingleDimensionShardSpec(i, 2, "channel", single[i], single[i + 1]))
        for i in range(2)
    ]
    specs.append((3, "d3", NumberedShardSpec(0, 1)))
    return specs


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    path: Path = tmp_path_factory.mktemp("warehouse")
    lake = Lake(spark, str(path), lease_seconds=600)
    table = datasource_table_path(lake.warehouse, DS)
    keyed(spark, random_rows(7, 400)).write.format("delta").partitionBy("__segment").save(table)
    lock = lake.actions.try_lock(DS, DAYS, group_id="hand-written").lock
    assert lock is not None
    segments = [
        DataSegment(
            DS,
            day(d),
            lock.version,
            spec,
            load_spec={"type": "delta", "path": table, "segment": key},
        )
        for d, key, spec in shard_specs()
    ]
    lake.actions.publish(DS, segments, group_id="hand-written")
    return lake


@pytest.fixture(scope="module")
def stored(lake: Lake) -> DataFrame:
    """Every row of the datasource table, as a local relation: filters on it run in the
    driver, without a Spark job."""
    rows = all_rows(lake).collect()
    return lake.spark.createDataFrame(rows, all_rows(lake).schema)


def all_rows(lake: Lake) -> DataFrame:
    return lake.spark.read.format("delta").load(datasource_table_path(lake.warehouse, DS))


def kept_keys(lake: Lake, filter: str | Column) -> list[str]:
    return pruning(lake, filter)[0]


def pruning(lake: Lake, filter: str | Column) -> tuple[list[str], int]:
    """The visible keys a read with ``filter`` scans, and how many segments its domain left
    out."""
    types = {f.name: f.dataType for f in all_rows(lake).schema.fields}
    domain: Domain = domain_of(filter, types, spark=lake.spark)
    whole, partial, pruned = partitions(lake.timeline(DS), ETERNITY, domain)
    assert partial == {}
    return sorted(whole), pruned


def sorted_rows(df: DataFrame) -> list[tuple]:
    columns = ["__time", "channel", "country", "city", "n", "added"]
    return sorted(
        (tuple(r) for r in df.select(*columns).collect()),
        key=lambda r: tuple((v is not None, v) for v in r),
    )


EVERY_KEY = sorted(key for _, key, _ in shard_specs())


def test_the_fixture_publishes_every_segment_with_its_rows(lake: Lake, stored: DataFrame) -> None:
    assert kept_keys(lake, "true") == EVERY_KEY
    assert len(EVERY_KEY) == 14
    assert lake.read(DS).count() == 400
    keys = {r["__segment"] for r in stored.collect()}
    assert keys <= set(EVERY_KEY)
    assert len(keys) >= 12  # nearly every segment holds rows


FILTERS: list[tuple[Callable[[], str | Column], int]] = [
    # (filter, how many of the 14 segments the read keeps)
    (lambda: "channel = 'en'", 1 + 3 + 1 + 1 + 4),
    (lambda: "CHANNEL IN ('en', 'de', 'zz')", 3 + 3 + 2 + 1 + 4),  # at most 3 buckets
    (lambda: F.col("channel") == "ja", 1 + 3 + 1 + 1 + 4),
    (lambda: "channel < 'fr'", 4 + 3 + 1 + 1 + 4),
    (lambda: "country = 'fr' AND city = 'paris'", 4 + 1 + 2 + 1 + 4),
    (lambda: "country = 'de'", 4 + 2 + 2 + 1 + 4),
    (lambda: "n = 3", 4 + 3 + 2 + 1 + 1),
    (lambda: F.col("n").isin(3, 300), 4 + 3 + 2 + 1 + 2),  # at most 2 buckets
    (lambda: "channel = 'en' AND n = 3", 1 + 3 + 1 + 1 + 1),
    (lambda: "channel = 'a' AND channel = 'b'", 3 + 1 + 4),  # nothing matches
    (lambda: "channel = 'en' OR country = 'fr'", 14),
    (lambda: "NOT (channel = 'en')", 14),
    (lambda: "n > 3", 14),
]


@pytest.mark.parametrize(("make_filter", "at_most_kept"), FILTERS)
def test_filters_leave_out_segments(
    lake: Lake, make_filter: Callable[[], str | Column], at_most_kept: int
) -> None:
    kept = kept_keys(lake, make_filter())
    assert len(kept) <= at_most_kept
    if at_most_kept < len(EVERY_KEY):
        assert len(kept) < len(EVERY_KEY)


@pytest.mark.parametrize(("make_filter", "at_most_kept"), FILTERS)
def test_filtered_reads_return_exactly_the_filtered_rows(
    lake: Lake, stored: DataFrame, make_filter: Callable[[], str | Column], at_most_kept: int
) -> None:
    filter = make_filter()
    condition = F.expr(filter) if isinstance(filter, str) else filter
    assert sorted_rows(lake.read(DS, filter=filter)) == sorted_rows(stored.where(condition))


def test_the_exact_bucket_is_kept(lake: Lake, stored: DataFrame) -> None:
    en = stored.where("channel = 'en' AND __segment LIKE 'd0.%'")
    (bucket,) = {r["__segment"] for r in en.select("__segment").distinct().collect()}
    kept, pruned = pruning(lake, "channel = 'en'")
    assert pruned == 4  # 3 buckets and 1 single_dim range
    assert [k for k in kept if k.startswith("d0.")] == [bucket]
    assert [k for k in kept if k.startswith("d2.")] == ["d2.0"]  # 'en' < 'fr'


def test_interval_and_filter_together(lake: Lake, stored: DataFrame) -> None:
    filter = "channel IN ('fr', 'ko')"
    read = lake.read(DS, "2024-01-01/P3D", filter=filter)
    expected = (
        all_rows(lake)
        .where(filter)
        .where(
            (F.col("__time") >= datetime(2024, 1, 1, tzinfo=UTC))
            & (F.col("__time") < datetime(2024, 1, 4, tzinfo=UTC))
        )
    )
    assert sorted_rows(read) == sorted_rows(expected)
