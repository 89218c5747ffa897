"""Secondary partitioning for perfect rollup: how many segments each chunk gets, and which
segment (bucket) each rolled-up row goes to.

**Determine partitions** (Druid's first phase) is ONE Spark job over the kept input rows,
whatever the number of chunks:

* hashed, ``num_shards`` given — no job: every chunk gets that many buckets;
* hashed, ``target_rows_per_segment`` — per chunk, the approximate number of distinct rolled-up
  keys (HyperLogLog++, Spark's ``approx_count_distinct`` over a 64-bit hash of query-granular
  time and dimensions; an exact row count when rollup is off) gives
  ``num_buckets = ceil(keys / target)``;
* range — per chunk and partition-dimension tuple, the same HLL count; a window over each
  chunk's tuples in order accumulates them and cuts the chunk into ``n`` ranges of about
  ``keys / n`` each, where ``n = max(round(keys / target), ceil(keys / max))``. Only the first
  tuple of each range reaches the driver: one small row per segment.

**Tagging**: each rolled-up row gets its bucket by a broadcast join with that per-chunk table:
``pmod(hash(CAST(d AS STRING), ...), num_buckets)`` for hashed (see
:mod:`segmentlake.core.partitions_spec`), the range holding its tuple for range.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
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
from segmentlake.errors import SpecError
from segmentlake.ingest.parse import CHUNK, TIME

__all__ = [
    "BUCKET",
    "ChunkPartitions",
    "Partitioning",
    "determine_partitions",
    "hash_bucket",
    "rolled_up_keys",
]

logger = logging.getLogger(__name__)

BUCKET = "__bucket"
# HLL++ relative standard deviation: 2% costs 1.6 KB per chunk (or per range value) in the
# aggregation buffer and keeps segment sizes within a few percent of the target.
_RSD = 0.02


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

    spec: HashedPartitionsSpec | DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec
    dimensions: tuple[str, ...]
    chunks: Mapping[int, ChunkPartitions]
    default: ChunkPartitions = ChunkPartitions(1, (None,))

    @property
    def is_range(self) -> bool:
        return not isinstance(self.spec, HashedPartitionsSpec)

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

    def tag(self, rows: DataFrame) -> DataFrame:
        """``rows`` (with ``__chunk_ms`` and the dimensions) with their bucket in ``__bucket``."""
        spark = rows.sparkSession
        if self.is_range:
            table = [
                (chunk, b, *p.range_of(b))
                for chunk, p in self.chunks.items()
                for b in range(p.num_buckets)
            ]
            struct = T.StructType(
                [T.StructField(f"p{i}", T.StringType()) for i in range(len(self.dimensions))]
            )
            schema = T.StructType(
                [
                    T.StructField("__c", T.LongType()),
                    T.StructField(BUCKET, T.IntegerType()),
                    T.StructField("__lo", struct),
                    T.StructField("__hi", struct),
                ]
            )
            bounds = spark.createDataFrame(table, schema)
            value = _tuple(self.dimensions)
            within = (F.col("__lo").isNull() | (value >= F.col("__lo"))) & (
                F.col("__hi").isNull() | (value < F.col("__hi"))
            )
            joined = rows.join(F.broadcast(bounds), (F.col(CHUNK) == F.col("__c")) & within, "left")
            # Chunks the determine job did not see (a source that changed between the two
            # reads) become one segment with an open range, which describes them truly.
            return joined.withColumn(BUCKET, F.coalesce(F.col(BUCKET), F.lit(0))).drop(
                "__c", "__lo", "__hi"
            )
        if not self.chunks:
            fixed = F.lit(self.default.num_buckets)
            return rows.withColumn(BUCKET, hash_bucket(self.dimensions, fixed))
        counts = spark.createDataFrame(
            [(c, p.num_buckets) for c, p in self.chunks.items()], "__c BIGINT, __n INT"
        )
        joined = rows.join(F.broadcast(counts), F.col(CHUNK) == F.col("__c"), "left")
        joined = joined.withColumn("__n", F.coalesce(F.col("__n"), F.lit(1)))
        return joined.withColumn(BUCKET, hash_bucket(self.dimensions, F.col("__n"))).drop(
            "__c", "__n"
        )


def hash_bucket(columns: Sequence[str], num_buckets: Column) -> Column:
    """``pmod(hash(CAST(c AS STRING), ...), num_buckets)``: the documented bucket function
    (:data:`segmentlake.core.shard_spec.HASH_PARTITION_FUNCTION`)."""
    return F.pmod(F.hash(*[F.col(c).cast("string") for c in columns]), num_buckets).cast("int")


def rolled_up_keys(dimensions: Sequence[str]) -> Column:
    """A 64-bit hash of a rolled-up row's key (query-granular time and every dimension)."""
    return F.xxhash64(F.col(TIME), *[F.col(d) for d in dimensions])


def determine_partitions(
    kept: DataFrame,
    spec: PartitionsSpec,
    dimensions: tuple[str, ...],
    *,
    rollup: bool,
) -> Partitioning:
    """The partitioning of a task's kept rows (see the module); checks the partition
    dimensions first and raises :class:`SpecError` naming what is wrong."""
    if isinstance(spec, HashedPartitionsSpec):
        dims = spec.partition_dimensions or (TIME, *dimensions)
        _check_named(spec.partition_dimensions, dimensions)
        if spec.num_shards is not None:
            return Partitioning(spec, dims, {}, ChunkPartitions(spec.num_shards))
        assert spec.target_rows_per_segment is not None
        return Partitioning(spec, dims, _hashed_chunks(kept, dimensions, spec, rollup=rollup))
    if isinstance(spec, DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec):
        dims = spec.partition_dimensions
        _check_named(dims, dimensions)
        _check_strings(kept, dims)
        return Partitioning(spec, dims, _range_chunks(kept, dimensions, spec, rollup=rollup))
    raise SpecError(f"partitionsSpec {spec.type_name!r} does not partition for perfect rollup")


def _hashed_chunks(
    kept: DataFrame, dimensions: tuple[str, ...], spec: HashedPartitionsSpec, *, rollup: bool
) -> dict[int, ChunkPartitions]:
    assert spec.target_rows_per_segment is not None
    target = spec.target_rows_per_segment
    rows = _key_count(dimensions, rollup=rollup)
    chunks = {}
    for r in kept.groupBy(CHUNK).agg(rows.alias("n")).collect():
        keys = int(r["n"])
        chunks[int(r[CHUNK])] = ChunkPartitions(max(1, math.ceil(keys / target)))
    logger.info("hashed: %d chunk(s), %d bucket(s)", len(chunks), _total(chunks))
    return chunks


def _range_chunks(
    kept: DataFrame,
    dimensions: tuple[str, ...],
    spec: DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec,
    *,
    rollup: bool,
) -> dict[int, ChunkPartitions]:
    assert spec.target_rows_per_segment is not None
    assert spec.max_rows_per_segment is not None
    dims = spec.partition_dimensions
    per_value = kept.groupBy(CHUNK, *dims).agg(_key_count(dimensions, rollup=rollup).alias("n"))
    ordered = Window.partitionBy(CHUNK).orderBy(*[F.col(d).asc_nulls_first() for d in dims])
    before = F.coalesce(
        F.sum("n").over(ordered.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)
    )
    total = F.sum("n").over(Window.partitionBy(CHUNK))
    pieces = F.greatest(
        F.lit(1),
        F.round(total / spec.target_rows_per_segment),
        F.ceil(total / spec.max_rows_per_segment),
    ).cast("long")
    # Cut where the running count crosses a multiple of total / pieces: ranges of about equal
    # size, each at least one tuple (a tuple heavier than that spans its own range).
    bucket = F.floor(F.col("__before") * F.col("__pieces") / F.col("__total"))
    cuts = (
        per_value.withColumns({"__before": before, "__total": total, "__pieces": pieces})
        .withColumn(BUCKET, F.least(bucket, F.col("__pieces") - 1))
        .groupBy(CHUNK, BUCKET)
        .agg(F.min(_tuple(dims)).alias("start"), F.sum("n").alias("n"))
    )
    found: dict[int, list[tuple[int, tuple[str | None, ...], int]]] = {}
    for r in cuts.collect():
        found.setdefault(int(r[CHUNK]), []).append((int(r[BUCKET]), tuple(r["start"]), int(r["n"])))
    chunks = {}
    for chunk, ranges in found.items():
        ranges.sort()
        # Renumbered 0..k-1: a tuple heavier than one range leaves bucket numbers unused.
        starts = (None, *(start for _, start, _ in ranges[1:]))
        chunks[chunk] = ChunkPartitions(len(ranges), starts)
    logger.info("range: %d chunk(s), %d range(s)", len(chunks), _total(chunks))
    return chunks


def _key_count(dimensions: Sequence[str], *, rollup: bool) -> Column:
    if not rollup:
        return F.count(F.lit(1))
    return F.approx_count_distinct(rolled_up_keys(dimensions), _RSD)


def _tuple(dimensions: Sequence[str]) -> Column:
    return F.struct(*[F.col(d).alias(f"p{i}") for i, d in enumerate(dimensions)])


def _check_named(named: Sequence[str], dimensions: Sequence[str]) -> None:
    missing = [d for d in named if d not in dimensions]
    if missing:
        raise SpecError(
            f"partitionsSpec partition dimensions {missing} are not among the ingested "
            f"dimensions {list(dimensions)}"
        )


def _check_strings(kept: DataFrame, dims: Sequence[str]) -> None:
    types = {f.name: f.dataType for f in kept.schema.fields}
    wrong = {d: types[d].simpleString() for d in dims if not isinstance(types[d], T.StringType)}
    if wrong:
        raise SpecError(
            f"range partitioning needs string dimensions, but {wrong} are not; cast them with "
            "a transform, e.g. {'type': 'expression', 'name': 'x', 'expression': "
            "'CAST(x AS STRING)'}, or use hashed partitioning"
        )


def _total(chunks: Mapping[int, ChunkPartitions]) -> int:
    return sum(c.num_buckets for c in chunks.values())
