"""Secondary partitioning for perfect rollup: how many segments each chunk gets, and which
segment (bucket) each rolled-up row goes to.

**Determine partitions** (Druid's first phase) runs inside the write's Spark job, over the very
rolled-up rows the write stores: the per-chunk table below is an aggregate of those rows,
broadcast to tag them, so the input is scanned once (Spark reuses a shuffle for both: the
rollup's, or the shuffle by chunk after it; see :func:`tag_buckets` and
:func:`segmentlake.ingest.rollup.perfect_rollup_rows`). The counts are exact, not sketched.

* hashed, ``num_shards`` given — nothing to count: every chunk gets that many buckets;
* hashed, ``target_rows_per_segment`` — per chunk, ``num_buckets = ceil(rows / target)``
  over its rolled-up rows;
* range — per chunk and partition-dimension tuple, the rolled-up rows; a window over each
  chunk's tuples in order accumulates them and cuts the chunk into ``n`` ranges of about
  ``rows / n`` each, where ``n = max(round(rows / target), ceil(rows / max))``.

**Tagging**: each rolled-up row gets its bucket by a broadcast join with that per-chunk table:
``pmod(hash(CAST(d AS STRING), ...), num_buckets)`` for hashed (see
:mod:`segmentlake.core.partitions_spec`), the range holding its tuple for range. The table's
rows (one per chunk, or one per range) come back to the driver as the job's observed metrics,
and give the shard specs.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from segmentlake.core.partitions_spec import (
    DimensionRangePartitionsSpec,
    HashedPartitionsSpec,
    PartitionsSpec,
    SingleDimensionPartitionsSpec,
)
from segmentlake.core.shard_spec import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    ShardSpec,
    SingleDimensionShardSpec,
)
from segmentlake.errors import SegmentLakeError, SpecError
from segmentlake.ingest.parse import CHUNK, TIME
from segmentlake.spark.observed import observed_metrics

__all__ = [
    "BUCKET",
    "ChunkPartitions",
    "Partitioning",
    "TaggedRows",
    "determines_partitions",
    "hash_bucket",
    "tag_buckets",
]

logger = logging.getLogger(__name__)

BUCKET = "__bucket"
_ROWS = "__rows"
_START = "__start"
_TABLE = "table"

_PerfectRollupSpec = (
    HashedPartitionsSpec | DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec
)


@dataclass(frozen=True, slots=True)
class ChunkPartitions:
    """The buckets of one chunk: their count and, for range partitioning, each bucket's
    first tuple (``starts[0]`` is None: the first range is open below)."""

    num_buckets: int
    starts: tuple[tuple[str | None, ...] | None, ...] = ()

    def range_of(self, bucket: int) -> tuple[tuple[str | None, ...] | None, ...]:
        """``(start, end)`` of ``bucket``'s range; None bounds are open."""
        end = self.starts[bucket + 1] if bucket + 1 < len(self.starts) else None
        return self.starts[bucket], end


@dataclass(frozen=True, slots=True)
class Partitioning:
    """A perfect-rollup partitioning of one task: the spec, the dimensions it hashes or cuts
    by, and per chunk its buckets (chunks absent get ``default``)."""

    spec: _PerfectRollupSpec
    dimensions: tuple[str, ...]
    chunks: Mapping[int, ChunkPartitions]
    default: ChunkPartitions = ChunkPartitions(1, (None,))

    def of_chunk(self, chunk_ms: int) -> ChunkPartitions:
        return self.chunks.get(chunk_ms, self.default)

    def shard_spec(
        self, chunk_ms: int, bucket: int, partition_num: int, core_partitions: int
    ) -> ShardSpec:
        """The shard spec of the segment holding ``bucket`` of chunk ``chunk_ms``, numbered
        ``partition_num`` of ``core_partitions`` (empty buckets get no segment)."""
        chunk = self.of_chunk(chunk_ms)
        if isinstance(self.spec, HashedPartitionsSpec):
            return HashBasedNumberedShardSpec(
                partition_num,
                core_partitions,
                bucket,
                chunk.num_buckets,
                self.spec.partition_dimensions,
            )
        start, end = chunk.range_of(bucket)
        if isinstance(self.spec, SingleDimensionPartitionsSpec):
            return SingleDimensionShardSpec(
                partition_num,
                core_partitions,
                self.spec.partition_dimension,
                None if start is None else start[0],
                None if end is None else end[0],
            )
        return DimensionRangeShardSpec(partition_num, core_partitions, self.dimensions, start, end)


@dataclass(frozen=True, slots=True)
class TaggedRows:
    """Rolled-up rows with their bucket in ``__bucket``, and the partitioning they were
    tagged by: call ``partitioning(wrote_rows=...)`` once a Spark job has written ``frame``
    (the per-chunk table is an observed metric of that job)."""

    frame: DataFrame
    partitioning: Callable[..., Partitioning]


def tag_buckets(
    rolled: DataFrame,
    spec: PartitionsSpec,
    dimensions: tuple[str, ...],
    *,
    carried: Sequence[str],
    counted: DataFrame | None = None,
) -> TaggedRows:
    """Tag ``rolled`` (with ``__chunk_ms`` and the dimensions) with each row's bucket,
    determining the buckets from ``counted`` (default: ``rolled`` itself), whose rows per
    chunk each rolled-up row stands for (rows of a null chunk, rejected ones, are counted but
    describe no chunk); checks the partition dimensions first and raises :class:`SpecError`
    naming what is wrong.

    ``carried`` names the columns the write keeps from ``counted`` besides the grouping
    keys: the count references them too, so its plan of ``counted`` is the write's, and Spark
    runs the scan and the shuffles below it once for both (it reuses an exchange only between
    identical plans; with a metric pruned from one, the input would be read twice).
    """
    if isinstance(spec, HashedPartitionsSpec):
        dims = spec.partition_dimensions or (TIME, *dimensions)
        _check_named(spec.partition_dimensions, dimensions)
        if spec.num_shards is not None:
            fixed = Partitioning(spec, dims, {}, ChunkPartitions(spec.num_shards))
            tagged = rolled.withColumn(BUCKET, hash_bucket(dims, F.lit(spec.num_shards)))
            return TaggedRows(tagged, lambda *, wrote_rows: fixed)
        return _hashed(rolled, spec, dims, carried, rolled if counted is None else counted)
    if isinstance(spec, DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec):
        dims = spec.partition_dimensions
        _check_named(dims, dimensions)
        _check_strings(rolled, dims)
        return _range(rolled, spec, dims, carried, rolled if counted is None else counted)
    raise SpecError(f"partitionsSpec {spec.type_name!r} does not partition for perfect rollup")


def determines_partitions(spec: PartitionsSpec) -> bool:
    """Whether ``spec`` counts the rolled-up rows to decide each chunk's buckets (hashed
    with ``targetRowsPerSegment``, range), rather than being told (``numShards``)."""
    if isinstance(spec, HashedPartitionsSpec):
        return spec.num_shards is None
    return isinstance(spec, DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec)


def hash_bucket(columns: Sequence[str], num_buckets: Column) -> Column:
    """``pmod(hash(CAST(c AS STRING), ...), num_buckets)``: the documented bucket function
    (:data:`segmentlake.core.shard_spec.HASH_PARTITION_FUNCTION`)."""
    return F.pmod(F.hash(*[F.col(c).cast("string") for c in columns]), num_buckets).cast("int")


def _hashed(
    rolled: DataFrame,
    spec: HashedPartitionsSpec,
    dims: tuple[str, ...],
    carried: Sequence[str],
    counted: DataFrame,
) -> TaggedRows:
    assert spec.target_rows_per_segment is not None
    per_chunk = _rows_per(counted, [CHUNK], carried)
    buckets = F.greatest(F.lit(1), F.ceil(F.col(_ROWS) / spec.target_rows_per_segment))
    table = per_chunk.select(F.col(CHUNK).alias("__c"), buckets.cast("int").alias("__n"))
    observed, read = _observed_table(table, ["__c", "__n"])
    joined = rolled.join(F.broadcast(observed), F.col(CHUNK) == F.col("__c"), "left")
    # Every chunk of ``rolled`` is in the table (it is counted from the same rows); the
    # default only keeps a row that somehow is not in a bucket the table describes.
    n = F.coalesce(F.col("__n"), F.lit(1))
    tagged = joined.withColumn(BUCKET, hash_bucket(dims, n)).drop("__c", "__n")

    def partitioning(*, wrote_rows: bool) -> Partitioning:
        rows = read(wrote_rows=wrote_rows)
        chunks = {int(r["__c"]): ChunkPartitions(int(r["__n"])) for r in rows if _in_chunk(r)}
        logger.info("hashed: %d chunk(s), %d bucket(s)", len(chunks), _total(chunks))
        return Partitioning(spec, dims, chunks)

    return TaggedRows(tagged, partitioning)


def _range(
    rolled: DataFrame,
    spec: DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec,
    dims: tuple[str, ...],
    carried: Sequence[str],
    counted: DataFrame,
) -> TaggedRows:
    assert spec.target_rows_per_segment is not None
    assert spec.max_rows_per_segment is not None
    per_value = _rows_per(counted, [CHUNK, *dims], carried)
    ordered = Window.partitionBy(CHUNK).orderBy(*[F.col(d).asc_nulls_first() for d in dims])
    before = F.coalesce(
        F.sum(_ROWS).over(ordered.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)
    )
    total = F.sum(_ROWS).over(Window.partitionBy(CHUNK))
    pieces = F.greatest(
        F.lit(1),
        F.round(total / spec.target_rows_per_segment),
        F.ceil(total / spec.max_rows_per_segment),
    ).cast("long")
    # Cut where the running count crosses a multiple of total / pieces: ranges of about equal
    # size, each at least one tuple (a tuple heavier than that spans its own range).
    cut = F.floor(F.col("__before") * F.col("__pieces") / F.col("__total"))
    cuts = (
        per_value.withColumns({"__before": before, "__total": total, "__pieces": pieces})
        .withColumn("__cut", F.least(cut, F.col("__pieces") - 1))
        .groupBy(CHUNK, "__cut")
        .agg(F.min(_tuple(dims)).alias(_START))
    )
    # Renumbered 0..k-1 (a tuple heavier than one range leaves cut numbers unused); each
    # range ends where the next begins, the first and last are open.
    in_chunk = Window.partitionBy(CHUNK).orderBy("__cut")
    bounds = cuts.select(
        F.col(CHUNK).alias("__c"),
        (F.row_number().over(in_chunk) - 1).cast("int").alias(BUCKET),
        F.col(_START),
        F.lead(_START).over(in_chunk).alias("__hi"),
    )
    observed, read = _observed_table(bounds, ["__c", BUCKET, _START])
    value = _tuple(dims)
    low = F.when(F.col(BUCKET) > 0, F.col(_START))
    within = (low.isNull() | (value >= low)) & (F.col("__hi").isNull() | (value < F.col("__hi")))
    joined = rolled.join(F.broadcast(observed), (F.col(CHUNK) == F.col("__c")) & within, "left")
    tagged = joined.withColumn(BUCKET, F.coalesce(F.col(BUCKET), F.lit(0))).drop(
        "__c", _START, "__hi"
    )

    def partitioning(*, wrote_rows: bool) -> Partitioning:
        rows = read(wrote_rows=wrote_rows)
        found = sorted(
            (int(r["__c"]), int(r[BUCKET]), tuple(r[_START])) for r in rows if _in_chunk(r)
        )
        chunks = {}
        for chunk, ranges in itertools.groupby(found, key=lambda r: r[0]):
            starts = [start for _, _, start in ranges]
            chunks[chunk] = ChunkPartitions(len(starts), (None, *starts[1:]))
        logger.info("range: %d chunk(s), %d range(s)", len(chunks), _total(chunks))
        return Partitioning(spec, dims, chunks)

    return TaggedRows(tagged, partitioning)


def _observed_table(
    table: DataFrame, columns: Sequence[str]
) -> tuple[DataFrame, Callable[..., list[Any]]]:
    """``table`` observed whole (its ``columns``, row by row), and the reader of what the job
    that ran it observed: ``read(wrote_rows=...)``. Spark reports nothing when no row reached
    the write (:mod:`segmentlake.spark.observed`); the table is then empty, as it would have
    been, unless rows were written: then shard specs would be guesses, and it raises."""
    observation = Observation(f"segmentlake-partitions-{uuid.uuid4().hex}")
    observed = table.observe(observation, F.collect_list(F.struct(*columns)).alias(_TABLE))

    def read(*, wrote_rows: bool) -> list[Any]:
        metrics = observed_metrics(observation)
        if metrics is not None:
            return list(metrics[_TABLE])
        if wrote_rows:
            raise SegmentLakeError(
                "Spark reported no partition table for a perfect-rollup write that wrote "
                "rows; nothing was published (the segments' shard specs would be unknown)"
            )
        return []

    return observed, read


def _in_chunk(row: Any) -> bool:
    """Whether a row of a partition table describes a chunk: rejected rows counted with the
    kept ones have none (see :func:`tag_buckets`)."""
    return row["__c"] is not None


def _rows_per(counted: DataFrame, keys: Sequence[str], carried: Sequence[str]) -> DataFrame:
    """``counted``'s rows per ``keys`` in ``__rows``. The count also hashes every carried
    column, and ``__rows`` depends on that hash (never null for a group that has rows), so
    the optimizer keeps them: see :func:`tag_buckets` for why."""
    if not carried:
        return counted.groupBy(*keys).agg(F.count(F.lit(1)).alias(_ROWS))
    grouped = counted.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("__n"), F.max(F.xxhash64(*map(F.col, carried))).alias("__h")
    )
    rows = F.when(F.col("__h").isNotNull(), F.col("__n")).otherwise(F.lit(0))
    return grouped.select(*keys, rows.alias(_ROWS))


def _tuple(dimensions: Sequence[str]) -> Column:
    return F.struct(*[F.col(d).alias(f"p{i}") for i, d in enumerate(dimensions)])


def _check_named(named: Sequence[str], dimensions: Sequence[str]) -> None:
    missing = [d for d in named if d not in dimensions]
    if missing:
        raise SpecError(
            f"partitionsSpec partition dimensions {missing} are not among the ingested "
            f"dimensions {list(dimensions)}"
        )


def _check_strings(rows: DataFrame, dims: Sequence[str]) -> None:
    types = {f.name: f.dataType for f in rows.schema.fields}
    wrong = {d: types[d].simpleString() for d in dims if not isinstance(types[d], T.StringType)}
    if wrong:
        raise SpecError(
            f"range partitioning needs string dimensions, but {wrong} are not; cast them with "
            "a transform, e.g. {'type': 'expression', 'name': 'x', 'expression': "
            "'CAST(x AS STRING)'}, or use hashed partitioning"
        )


def _total(chunks: Mapping[int, ChunkPartitions]) -> int:
    return sum(c.num_buckets for c in chunks.values())
