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

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from segmentlake.core.names import quote_identifier as _q
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
    clustered_by: str | None = None,
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

    ``clustered_by`` names a column ``counted`` is hash-partitioned by, with each chunk's rows
    in one partition: the count groups by it too, so Spark counts and cuts each chunk where
    its rows are, with no exchange of its own (three stages become one).
    """
    within = () if clustered_by is None else (clustered_by,)
    counted = rolled if counted is None else counted
    if isinstance(spec, HashedPartitionsSpec):
        dims = spec.partition_dimensions or (TIME, *dimensions)
        _check_named(spec.partition_dimensions, dimensions)
        if spec.num_shards is not None:
            fixed = Partitioning(spec, dims, {}, ChunkPartitions(spec.num_shards))
            tagged = rolled.withColumn(BUCKET, hash_bucket(dims, str(spec.num_shards)))
            return TaggedRows(tagged, lambda *, wrote_rows: fixed)
        return _hashed(rolled, spec, dims, carried, counted, within)
    if isinstance(spec, DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec):
        dims = spec.partition_dimensions
        _check_named(dims, dimensions)
        _check_strings(rolled, dims)
        return _range(rolled, spec, dims, carried, counted, within)
    raise SpecError(f"partitionsSpec {spec.type_name!r} does not partition for perfect rollup")


def determines_partitions(spec: PartitionsSpec) -> bool:
    """Whether ``spec`` counts the rolled-up rows to decide each chunk's buckets (hashed
    with ``targetRowsPerSegment``, range), rather than being told (``numShards``)."""
    if isinstance(spec, HashedPartitionsSpec):
        return spec.num_shards is None
    return isinstance(spec, DimensionRangePartitionsSpec | SingleDimensionPartitionsSpec)


def hash_bucket(columns: Sequence[str], num_buckets: str) -> Column:
    """``pmod(hash(CAST(c AS STRING), ...), num_buckets)``, ``num_buckets`` a SQL expression:
    the documented bucket function (:data:`segmentlake.core.shard_spec.HASH_PARTITION_FUNCTION`)."""
    return F.expr(_hash_bucket_sql(columns, num_buckets))


def _hash_bucket_sql(columns: Sequence[str], num_buckets: str) -> str:
    hashed = ", ".join(f"CAST({_q(c)} AS STRING)" for c in columns)
    return f"CAST(pmod(hash({hashed}), {num_buckets}) AS INT)"


# The plans below are written as SQL text: one JVM call parses a whole expression, where
# building it from Column objects takes one per function and column (~0.3 ms each, which made
# building a range plan take ~0.45 s before its job started).


def _hashed(
    rolled: DataFrame,
    spec: HashedPartitionsSpec,
    dims: tuple[str, ...],
    carried: Sequence[str],
    counted: DataFrame,
    within: tuple[str, ...],
) -> TaggedRows:
    target = spec.target_rows_per_segment
    assert target is not None
    per_chunk = _rows_per(counted, [*within, CHUNK], carried)
    table = per_chunk.selectExpr(
        f"{_q(CHUNK)} AS __c",
        f"CAST(greatest(1, ceil({_ROWS} / {target})) AS INT) AS __n",
    )
    observed, read = _observed_table(table, ["__c", "__n"])
    joined = rolled.join(F.broadcast(observed), F.expr(f"{_q(CHUNK)} = __c"), "left")
    # Every chunk of ``rolled`` is in the table (it is counted from the same rows); the
    # default only keeps a row that somehow is not in a bucket the table describes.
    bucket = _hash_bucket_sql(dims, "coalesce(__n, 1)")
    tagged = joined.selectExpr(*map(_q, rolled.columns), f"{bucket} AS {BUCKET}")

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
    within: tuple[str, ...],
) -> TaggedRows:
    target = spec.target_rows_per_segment
    biggest = spec.max_rows_per_segment
    assert target is not None
    assert biggest is not None
    per_value = _rows_per(counted, [*within, CHUNK, *dims], carried)
    chunk = _q(CHUNK)
    # Per chunk, within the partitions that already hold each chunk whole (no exchange).
    per_chunk = ", ".join(map(_q, [*within, CHUNK]))
    order = ", ".join(f"{_q(d)} ASC NULLS FIRST" for d in dims)
    ordered = f"PARTITION BY {per_chunk} ORDER BY {order}"
    before = (
        f"coalesce(sum({_ROWS}) OVER ({ordered} "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)"
    )
    total = f"sum({_ROWS}) OVER (PARTITION BY {per_chunk})"
    pieces = f"CAST(greatest(1, round({total} / {target}), ceil({total} / {biggest})) AS BIGINT)"
    # Cut where the running count crosses a multiple of total / pieces: ranges of about equal
    # size, each at least one tuple (a tuple heavier than that spans its own range).
    cut = f"least(floor({before} * {pieces} / {total}), {pieces} - 1)"
    cuts = (
        per_value.selectExpr(
            *map(_q, within), chunk, f"{_tuple_sql(dims)} AS __value", f"{cut} AS __cut"
        )
        .groupBy(*within, CHUNK, "__cut")
        .agg(F.expr(f"min(__value) AS {_START}"))
    )
    # Renumbered 0..k-1 (a tuple heavier than one range leaves cut numbers unused); each
    # range ends where the next begins, the first and last are open.
    in_chunk = f"PARTITION BY {per_chunk} ORDER BY __cut"
    bounds = cuts.selectExpr(
        f"{chunk} AS __c",
        f"CAST(row_number() OVER ({in_chunk}) - 1 AS INT) AS {BUCKET}",
        _START,
        f"lead({_START}) OVER ({in_chunk}) AS __hi",
    )
    observed, read = _observed_table(bounds, ["__c", BUCKET, _START])
    value = _tuple_sql(dims)
    low = f"CASE WHEN {BUCKET} > 0 THEN {_START} END"
    in_range = f"({low} IS NULL OR {value} >= {low}) AND (__hi IS NULL OR {value} < __hi)"
    joined = rolled.join(F.broadcast(observed), F.expr(f"{chunk} = __c AND {in_range}"), "left")
    tagged = joined.selectExpr(*map(_q, rolled.columns), f"coalesce({BUCKET}, 0) AS {BUCKET}")

    def partitioning(*, wrote_rows: bool) -> Partitioning:
        rows = read(wrote_rows=wrote_rows)
        found = sorted(
            (int(r["__c"]), int(r[BUCKET]), tuple(r[_START])) for r in rows if _in_chunk(r)
        )
        chunks = {}
        for chunk_ms, ranges in itertools.groupby(found, key=lambda r: r[0]):
            starts = [start for _, _, start in ranges]
            chunks[chunk_ms] = ChunkPartitions(len(starts), (None, *starts[1:]))
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
    entry = ", ".join(map(_q, columns))
    observed = table.observe(observation, F.expr(f"collect_list(struct({entry})) AS {_TABLE}"))

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
    """``counted``'s rows per ``keys`` in ``__rows``. The count also references every carried
    column, so the optimizer keeps them (see :func:`tag_buckets` for why): ``count(c, ...)``
    counts the rows where none is null, never more than ``count(1)``, so the greater of the
    two is the row count, and the optimizer cannot tell. It only tests null bits: a hash of
    the columns per row made the count of 1.26 M rows 0.06 s slower."""
    counts = f"greatest(count(1), count({', '.join(map(_q, carried))}))" if carried else "count(1)"
    return counted.groupBy(*keys).agg(F.expr(f"{counts} AS {_ROWS}"))


def _tuple_sql(dimensions: Sequence[str]) -> str:
    fields = ", ".join(f"{_q(d)} AS p{i}" for i, d in enumerate(dimensions))
    return f"struct({fields})"


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
