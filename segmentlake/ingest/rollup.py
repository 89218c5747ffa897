"""Parsed rows → the rows segments store: ``__time``, dimensions, metrics, ``__segment``.

With rollup on, rows with equal (truncated time, dimensions) in a segment become one row whose
metrics aggregate theirs (Druid's rollup); with rollup off each row keeps its own metrics
(count 1, the input as its own sum, min and max). With rollup, rows are shuffled by segment
once, so each segment is built by one Spark task and written as one file; without, rows are
written by the tasks that read them, with no shuffle.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from segmentlake.core.ingest_spec import IngestionSpec, MetricSpec
from segmentlake.core.names import SEGMENT_KEY_COLUMN, TIME_COLUMN
from segmentlake.ingest.parse import (
    CHUNK,
    REASON,
    TIME,
    ParsedInput,
    fate_counts,
    metric_input,
)
from segmentlake.ingest.partitioning import BUCKET, TaggedRows, tag_buckets

__all__ = [
    "kept_rows",
    "perfect_rollup_rows",
    "segment_rows",
]

_INPUT_ROWS = "__input_rows"
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
    parsed: ParsedInput, spec: IngestionSpec, *, key_token: str, observation: Observation
) -> TaggedRows:
    """The rows to write for perfect rollup: rolled up per (chunk, time, dimensions) — Spark
    combines each input task's rows before the shuffle (partial aggregation) and merges them
    after — then tagged with their bucket (determined from those same rolled-up rows, in the
    same job: :func:`~segmentlake.ingest.partitioning.tag_buckets`) and shuffled once more,
    rolled up, by ``<chunk ms>.<bucket>.<token>``: one Spark task, one file, per segment.

    ``observation`` gets the input rows counted by fate
    (:func:`~segmentlake.ingest.parse.fate_counts`) when the job runs. With rollup, rejected
    rows are rolled up too, into one group per reason with every key and input nulled, and the
    counts are observed on the rolled-up rows: Spark evaluates an observation row by row
    outside its generated code, so observing the input cost ~0.5 s per 3 M rows, the rolled-up
    rows a fifth of that. With rollup off there is no rollup shuffle to share: the input is
    observed and the buckets are counted from it."""
    dimensions = parsed.dimensions
    metrics = [m.name for m in spec.metrics]
    if not spec.granularity_spec.rollup:
        observed = parsed.frame.observe(observation, *fate_counts(parsed.reasons))
        keys = [F.col(CHUNK), F.col(TIME), *map(F.col, dimensions)]
        rolled = _unrolled(kept_rows(observed), spec, keys)
        tagged = tag_buckets(
            rolled, spec.partitions_spec, dimensions, carried=[], counted=kept_rows(parsed.frame)
        )
    else:
        everything = _rolled_up_with_rejected(parsed, spec)
        weight = F.col(_INPUT_ROWS)
        kept = everything.observe(observation, *fate_counts(parsed.reasons, weight=weight))
        # After the observation, which Spark does not push filters through: pushed below the
        # rollup, this one would change the plan that the bucket count shares (see tag_buckets).
        kept = kept.where(F.col(REASON).isNull())
        tagged = tag_buckets(
            kept,
            spec.partitions_spec,
            dimensions,
            carried=[*metrics, _INPUT_ROWS],
            counted=everything,
        )
    key = F.concat_ws(".", F.col(CHUNK).cast("string"), F.col(BUCKET).cast("string"))
    key = F.concat(key, F.lit(f".{key_token}"))
    time = F.timestamp_millis(F.col(TIME)).alias(TIME_COLUMN)
    rows = (
        tagged.frame.withColumn(SEGMENT_KEY_COLUMN, key)
        .repartition(SEGMENT_KEY_COLUMN)
        .select(time, *[F.col(d) for d in dimensions], *metrics, F.col(SEGMENT_KEY_COLUMN))
    )
    return TaggedRows(rows, tagged.partitioning)


def _rolled_up_with_rejected(parsed: ParsedInput, spec: IngestionSpec) -> DataFrame:
    """Every parsed row rolled up per (chunk, time, dimensions, rejection reason), with the
    input rows each group stands for in ``__input_rows``. A rejected row has its keys and
    metric inputs nulled: the rejected rows of a reason become one group (a few rows through
    the shuffle, whatever their number), whose aggregates cannot overflow or fail, and whose
    null chunk is no chunk the buckets are counted for."""
    kept = F.col(REASON).isNull()
    inputs = [metric_input(m) for m in spec.metrics if m.field_name]
    keys = [CHUNK, TIME, *parsed.dimensions]
    nulled = parsed.frame.select(
        *[F.when(kept, F.col(c)).alias(c) for c in [*keys, *inputs]], F.col(REASON)
    )
    aggregates = [_aggregate(m).alias(m.name) for m in spec.metrics]
    return nulled.groupBy(*keys, REASON).agg(*aggregates, F.count(F.lit(1)).alias(_INPUT_ROWS))


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
