"""Parsed rows → the rows segments store: ``__time``, dimensions, metrics, ``__segment``.

With rollup on, rows with equal (truncated time, dimensions) in a segment become one row whose
metrics aggregate theirs (Druid's rollup); with rollup off each row keeps its own metrics
(count 1, the input as its own sum, min and max). With rollup, rows are shuffled by segment
once, so each segment is built by one Spark task and written as one file; without, rows are
written by the tasks that read them, with no shuffle.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from segmentlake.core.ingest_spec import IngestionSpec, MetricSpec
from segmentlake.ingest.parse import CHUNK, REASON, TIME, metric_input

__all__ = ["SEGMENT_KEY", "bucket_column", "segment_rows", "write_key"]

SEGMENT_KEY = "__segment"  # the Delta partition value that holds a segment's rows
_BUCKET = "__bucket"
_AGGREGATES = {
    "longSum": F.sum,
    "doubleSum": F.sum,
    "longMin": F.min,
    "doubleMin": F.min,
    "longMax": F.max,
    "doubleMax": F.max,
}


def write_key(prefix: str, chunk_ms: int, bucket: int) -> str:
    """The ``__segment`` value of one segment of a task: unique to the task, so rows of a
    task that fails before publishing are never read (only published keys are)."""
    return f"{prefix}_{chunk_ms}_{bucket}"


def _write_key_column(prefix: str) -> Column:
    return F.concat(
        F.lit(f"{prefix}_"), F.col(CHUNK).cast("string"), F.lit("_"), F.col(_BUCKET).cast("string")
    )


def bucket_column(buckets: Mapping[int, int], dimensions: tuple[str, ...]) -> Column:
    """Which of its chunk's ``buckets[chunk]`` segments a row goes to: a hash of its time and
    dimensions, so rows that roll up together land in the same segment."""
    split = {chunk: n for chunk, n in buckets.items() if n > 1}
    if not split:
        return F.lit(0)
    counts = F.create_map(*[F.lit(x) for chunk, n in split.items() for x in (chunk, n)])
    n = F.coalesce(counts[F.col(CHUNK)], F.lit(1))
    return F.pmod(F.xxhash64(F.col(TIME), *map(F.col, dimensions)), n).cast("int")


def segment_rows(
    parsed: DataFrame,
    spec: IngestionSpec,
    dimensions: tuple[str, ...],
    *,
    buckets: Mapping[int, int],
    key_prefix: str,
) -> DataFrame:
    """The rows to write: kept rows only, tagged with their segment's write key, rolled up
    if the spec says so. ``buckets`` maps each chunk (epoch ms) the counting pass saw to its
    number of segments; a row in any other chunk fails the job (the input changed between
    the passes), so no row is ever written where no segment will point."""
    known = list(buckets)
    kept = parsed.where(F.col(REASON).isNull())
    kept = kept.withColumn(
        CHUNK,
        F.when(F.col(CHUNK).isin(known), F.col(CHUNK)).otherwise(
            F.raise_error(
                F.concat(
                    F.lit("input changed between the counting and the writing pass: a row in "),
                    F.lit("chunk starting at epoch ms "),
                    F.col(CHUNK).cast("string"),
                    F.lit(" was not counted; ingest a deterministic input (a table or files)"),
                )
            ).cast("long")
        ),
    )
    kept = kept.withColumn(_BUCKET, bucket_column(buckets, dimensions))
    kept = kept.withColumn(SEGMENT_KEY, _write_key_column(key_prefix))
    time = F.timestamp_millis(F.col(TIME)).alias("__time")
    dims = [F.col(d) for d in dimensions]
    shuffled = kept.repartition(SEGMENT_KEY)
    if spec.granularity_spec.rollup:
        return (
            shuffled.groupBy(F.col(SEGMENT_KEY), F.col(TIME), *dims)
            .agg(*[_aggregate(m).alias(m.name) for m in spec.metrics])
            .select(time, *dims, *[F.col(m.name) for m in spec.metrics], F.col(SEGMENT_KEY))
        )
    if any(m.type == "HLLSketchBuild" for m in spec.metrics):
        # A sketch is an aggregate even of one row: group each row with itself.
        row_id = F.monotonically_increasing_id().alias("__row")
        return (
            shuffled.select("*", row_id)
            .groupBy(F.col("__row"), F.col(SEGMENT_KEY), F.col(TIME), *dims)
            .agg(*[_aggregate(m).alias(m.name) for m in spec.metrics])
            .select(time, *dims, *[F.col(m.name) for m in spec.metrics], F.col(SEGMENT_KEY))
        )
    # Nothing to combine: rows go from the input's tasks straight to the table, as a plain
    # partitioned write does (a segment may then be several files, one per input task).
    return kept.select(time, *dims, *[_single(m).alias(m.name) for m in spec.metrics], SEGMENT_KEY)


def _aggregate(metric: MetricSpec) -> Column:
    if metric.type == "count":
        return F.count(F.lit(1))
    if metric.type == "HLLSketchBuild":
        return F.hll_sketch_agg(F.col(metric_input(metric)), metric.lg_k)
    return _AGGREGATES[metric.type](F.col(metric_input(metric)))


def _single(metric: MetricSpec) -> Column:
    if metric.type == "count":
        return F.lit(1).cast("long")
    return F.col(metric_input(metric))
