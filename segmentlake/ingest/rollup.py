"""Parsed rows → the rows segments store: ``__time``, dimensions, metrics, ``__segment``.

With rollup on, rows with equal (truncated time, dimensions) in a segment become one row whose
metrics aggregate theirs (Druid's rollup); with rollup off each row keeps its own metrics
(count 1, the input as its own sum, min and max). With rollup, rows are shuffled by segment
once, so each segment is built by one Spark task and written as one file; without, rows are
written by the tasks that read them, with no shuffle.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from segmentlake.core.ingest_spec import IngestionSpec, MetricSpec
from segmentlake.core.names import SEGMENT_KEY_COLUMN, TIME_COLUMN
from segmentlake.ingest.parse import CHUNK, REASON, TIME, metric_input
from segmentlake.ingest.partitioning import BUCKET, TaggedRows, tag_buckets

__all__ = [
    "kept_rows",
    "perfect_rollup_rows",
    "segment_rows",
]

_AGGREGATES = {
    "longSum": F.sum,
    "doubleSum": F.sum,
    "longMin": F.min,
    "doubleMin": F.min,
    "longMax": F.max,
    "doubleMax": F.max,
}


def kept_rows(parsed: DataFrame) -> DataFrame:
    """The parsed rows the task keeps (no rejection reason)."""
    return parsed.where(F.col(REASON).isNull())


def perfect_rollup_rows(
    parsed: DataFrame,
    spec: IngestionSpec,
    dimensions: tuple[str, ...],
    *,
    key_token: str,
    unobserved: DataFrame | None = None,
) -> TaggedRows:
    """The rows to write for perfect rollup: rolled up per (chunk, time, dimensions) — Spark
    combines each input task's rows before the shuffle (partial aggregation) and merges them
    after — then tagged with their bucket (determined from those same rolled-up rows, in the
    same job: :func:`~segmentlake.ingest.partitioning.tag_buckets`) and shuffled once more,
    rolled up, by ``<chunk ms>.<bucket>.<token>``: one Spark task, one file, per segment.

    With rollup off there is no rollup shuffle to share, and the buckets are counted from
    ``unobserved`` (the parsed rows without ``parsed``'s observed metrics, which would
    otherwise count every input row twice; default ``parsed``)."""
    kept = kept_rows(parsed)
    metrics = [m.name for m in spec.metrics]
    if spec.granularity_spec.rollup:
        keys = [F.col(CHUNK), F.col(TIME), *[F.col(d) for d in dimensions]]
        aggregates = [_aggregate(m).alias(m.name) for m in spec.metrics]
        rolled = kept.groupBy(*keys).agg(*(aggregates or [F.count(F.lit(1)).alias("__n")]))
        counted = None
    else:
        rolled = _unrolled(kept, spec, [F.col(CHUNK), F.col(TIME), *map(F.col, dimensions)])
        counted = kept_rows(parsed if unobserved is None else unobserved)
    carried = metrics if counted is None else []
    tagged = tag_buckets(rolled, spec.partitions_spec, dimensions, carried=carried, counted=counted)
    key = F.concat_ws(".", F.col(CHUNK).cast("string"), F.col(BUCKET).cast("string"))
    key = F.concat(key, F.lit(f".{key_token}"))
    time = F.timestamp_millis(F.col(TIME)).alias(TIME_COLUMN)
    rows = (
        tagged.frame.withColumn(SEGMENT_KEY_COLUMN, key)
        .repartition(SEGMENT_KEY_COLUMN)
        .select(time, *[F.col(d) for d in dimensions], *metrics, F.col(SEGMENT_KEY_COLUMN))
    )
    return TaggedRows(rows, tagged.partitioning)


def _unrolled(kept: DataFrame, spec: IngestionSpec, keys: list[Column]) -> DataFrame:
    """Each kept row with its own metrics (rollup off), next to ``keys``."""
    if any(m.type == "HLLSketchBuild" for m in spec.metrics):
        # A sketch is an aggregate even of one row: group each row with itself.
        grouped = kept.groupBy(F.monotonically_increasing_id(), *keys)
        return grouped.agg(*[_aggregate(m).alias(m.name) for m in spec.metrics])
    # Nothing to combine: rows go from the input's tasks straight to the table, as a plain
    # partitioned write does (a segment may then be several files, one per input task).
    return kept.select(*keys, *[_single(m).alias(m.name) for m in spec.metrics])


def segment_rows(
    parsed: DataFrame, spec: IngestionSpec, dimensions: tuple[str, ...], *, key_token: str
) -> DataFrame:
    """The rows to write: kept rows only, tagged with their chunk's write key, rolled up if
    the spec says so (one segment per chunk; the task splits oversized ones)."""
    kept = kept_rows(parsed).withColumn(
        SEGMENT_KEY_COLUMN, F.concat(F.col(CHUNK).cast("string"), F.lit(f".{key_token}"))
    )
    time = F.timestamp_millis(F.col(TIME)).alias(TIME_COLUMN)
    dims = [F.col(d) for d in dimensions]
    metrics = [F.col(m.name) for m in spec.metrics]
    keys = [F.col(SEGMENT_KEY_COLUMN), F.col(TIME), *dims]
    if spec.granularity_spec.rollup:
        # Without metrics, rollup keeps one row per (time, dimensions): the row count
        # only lets Spark aggregate at all, and is dropped.
        aggregates = [_aggregate(m).alias(m.name) for m in spec.metrics] or [F.count(F.lit(1))]
        rows = kept.repartition(SEGMENT_KEY_COLUMN).groupBy(*keys).agg(*aggregates)
    else:
        rows = _unrolled(kept, spec, keys)
    return rows.select(time, *dims, *metrics, F.col(SEGMENT_KEY_COLUMN))


def _aggregate(metric: MetricSpec) -> Column:
    if metric.type == "count":
        return F.count(F.lit(1))
    if metric.type == "HLLSketchBuild":
        return F.hll_sketch_agg(F.col(metric_input(metric)), metric.lg_k)
    if metric.type == "HLLSketchMerge":
        # Sketches of different lgK merge into the smaller one (Druid's union does the same).
        return F.hll_union_agg(F.col(metric_input(metric)), True)
    return _AGGREGATES[metric.type](F.col(metric_input(metric)))


def _single(metric: MetricSpec) -> Column:
    if metric.type == "count":
        return F.lit(1).cast("long")
    return F.col(metric_input(metric))
