"""Parsed rows → the rows segments store: ``__time``, dimensions, metrics, ``__segment``.

With rollup on, rows with equal (truncated time, dimensions) in a segment become one row whose
metrics aggregate theirs (Druid's rollup); with rollup off each row keeps its own metrics
(count 1, the input as its own sum, min and max). With rollup, the rolled-up rows are shuffled
once more so that each segment is built by one Spark task and written as one file: by segment
key, or, where partitions are determined and the interval has a chunk for every task the
session runs at once, by chunk (see :func:`perfect_rollup_rows`). Without rollup, rows are
written by the tasks that read them, with no shuffle.
"""

from __future__ import annotations

import itertools

import numpy as np
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec, MetricSpec
from segmentlake.core.interval import Interval
from segmentlake.core.joined_chunks import JoinedChunks
from segmentlake.core.names import SEGMENT_KEY_COLUMN, TIME_COLUMN
from segmentlake.core.names import quote_identifier as _q
from segmentlake.core.partition_hash import partition_keys
from segmentlake.core.spec_reader import FIRST_LAST_TYPES
from segmentlake.ingest.parse import (
    CHUNK,
    PAIR_TIME,
    PAIR_VALUE,
    REASON,
    TIME,
    ParsedInput,
    fate_counts,
    floor_millis_sql,
    metric_input,
)
from segmentlake.ingest.partitioning import (
    BUCKET,
    TaggedRows,
    determines_partitions,
    tag_buckets,
)
from segmentlake.spark.connect import default_parallelism

__all__ = [
    "first_last_sql",
    "joined_chunk_sql",
    "kept_rows",
    "perfect_rollup_rows",
    "segment_rows",
]

_INPUT_ROWS = "__input_rows"
_SLOT = "__slot"
# The shortest month, in ms: consecutive chunks of a calendar granularity, divided by this,
# give distinct, almost consecutive numbers (a 31-day month sometimes skips one).
_MONTH_MS = 28 * 86_400_000
_AGGREGATES = {
    "longSum": "sum",
    "doubleSum": "sum",
    "longMin": "min",
    "doubleMin": "min",
    "longMax": "max",
    "doubleMax": "max",
    "floatSum": "sum",
    "floatMin": "min",
    "floatMax": "max",
}


def kept_rows(parsed: DataFrame) -> DataFrame:
    """The parsed rows the task keeps (no rejection reason)."""
    return parsed.where(F.col(REASON).isNull())


def perfect_rollup_rows(
    parsed: ParsedInput,
    spec: IngestionSpec,
    *,
    key_token: str,
    observation: Observation,
    interval: Interval,
) -> TaggedRows:
    """The rows to write for perfect rollup: rolled up per (chunk, time, dimensions) — Spark
    combines each input task's rows before the shuffle (partial aggregation) and merges them
    after — then tagged with their bucket (determined from those same rolled-up rows, in the
    same job: :func:`~segmentlake.ingest.partitioning.tag_buckets`), so that each segment,
    ``<chunk ms>.<bucket>.<token>``, is one Spark task's and one file.

    How the rolled-up rows reach the task that writes their segment:

    * **by chunk**, where partitions are determined (``targetRowsPerSegment``, range) and
      ``interval`` has at least as many chunks as the session runs tasks at once: the rows are
      shuffled by chunk into that many partitions, chunks dealt out in turn (balanced where a
      hash of 30 chunks into 8 partitions is not), and both the count and the write read that
      one shuffle, so the rollup's merge runs once;
    * **by segment key** otherwise (``numShards``, or fewer chunks than tasks, where by chunk
      would leave tasks idle): counted from the rollup's own shuffle, tagged, then shuffled by
      segment key.

    ``observation`` gets the input rows counted by fate
    (:func:`~segmentlake.ingest.parse.fate_counts`) when the job runs. With rollup, rejected
    rows are rolled up too, into one group per reason with every key and input nulled, and the
    counts are observed on the rolled-up rows: Spark evaluates an observation row by row
    outside its generated code, so observing the input cost ~0.5 s per 3 M rows, the rolled-up
    rows a fifth of that. With rollup off there is no rollup shuffle to share: the input is
    observed and the buckets are counted from it."""
    dimensions = parsed.dimensions
    metrics = [m.name for m in spec.metrics]
    partitions = spec.partitions_spec
    if not spec.granularity_spec.rollup:
        observed = parsed.frame.observe(observation, *fate_counts(parsed.reasons))
        keys = list(map(_q, [CHUNK, TIME, *dimensions]))
        rolled = _unrolled(kept_rows(observed), spec, keys)
        counted = kept_rows(parsed.frame)
        tagged = tag_buckets(rolled, partitions, dimensions, carried=[], counted=counted)
        return _stored(tagged, dimensions, metrics, key_token, by_segment=True)
    everything = _rolled_up_with_rejected(parsed, spec)
    kept = everything.observe(observation, *fate_counts(parsed.reasons, weight=_INPUT_ROWS))
    # After the observation, which Spark does not push filters through: pushed below the
    # rollup, this one would change the plan that the bucket count shares (see tag_buckets).
    kept = kept.where(F.col(REASON).isNull())
    granularity = spec.granularity_spec.segment_granularity
    parallelism = default_parallelism(kept.sparkSession)
    if determines_partitions(partitions) and _has_chunks(interval, granularity, parallelism):
        by_chunk = _shuffled_by_chunk(kept, granularity, parallelism)
        # The count references exactly the columns the write keeps, so both plan the same shuffle
        # and Spark runs it once (see tag_buckets).
        carried = [TIME, *dimensions, *metrics]
        tagged = tag_buckets(by_chunk, partitions, dimensions, carried=carried, clustered_by=_SLOT)
        return _stored(tagged, dimensions, metrics, key_token, by_segment=False)
    carried = [*metrics, _INPUT_ROWS]
    tagged = tag_buckets(kept, partitions, dimensions, carried=carried, counted=everything)
    return _stored(tagged, dimensions, metrics, key_token, by_segment=True)


def _stored(
    tagged: TaggedRows,
    dimensions: tuple[str, ...],
    metrics: list[str],
    key_token: str,
    *,
    by_segment: bool,
) -> TaggedRows:
    """The columns a segment stores and its write key; ``by_segment`` shuffles the rows by
    that key (each segment's rows in one task), otherwise they stay where they are."""
    rows = tagged.frame.selectExpr(
        f"timestamp_millis({_q(TIME)}) AS {_q(TIME_COLUMN)}",
        *map(_q, [*dimensions, *metrics]),
        f"{_segment_key_sql(key_token)} AS {_q(SEGMENT_KEY_COLUMN)}",
    )
    if by_segment:
        rows = rows.repartition(SEGMENT_KEY_COLUMN)
    return TaggedRows(rows, tagged.partitioning)


def _segment_key_sql(
    key_token: str, *, bucketed: bool = True, joined: JoinedChunks | None = None
) -> str:
    """SQL of a row's write key: ``<chunk ms>[.<bucket>].<key_token>``, the chunk being one
    of ``joined`` where it holds the row (:func:`joined_chunk_sql`)."""
    if not key_token.isalnum():  # it goes into the SQL text as it is
        raise ValueError(f"a task's key token is letters and digits, not {key_token!r}")
    bucket = f"'.', CAST({_q(BUCKET)} AS STRING), " if bucketed else ""
    chunk = _q(CHUNK) if joined is None else joined_chunk_sql(joined)
    return f"concat(CAST({chunk} AS STRING), {bucket}'.{key_token}')"


def joined_chunk_sql(joined: JoinedChunks) -> str:
    """SQL of the start of a row's chunk: the one of ``joined`` (coarser chunks made of whole
    buckets, see :mod:`~segmentlake.metadata.chunk_layout`) that holds the row's bucket, else
    the bucket itself. Per granularity among them, a range test per run of adjacent chunks
    (the longest :data:`_MOST_RUNS`; compacted chunks come in runs) and one set membership
    test for the rest: one IN list of 10^4 chunks cost an append 0.6 s in building and
    planning its SQL."""
    chunk = _q(CHUNK)
    cases = []
    for granularity, (starts, ends) in joined.by_granularity().items():
        start = floor_millis_sql(granularity, chunk)
        cases.append(f"WHEN {_held_sql(chunk, start, starts, ends)} THEN {start}")
    return f"(CASE {' '.join(cases)} ELSE {chunk} END)" if cases else chunk


_MOST_RUNS = 16


def _held_sql(bucket: str, chunk_start: str, starts: np.ndarray, ends: np.ndarray) -> str:
    """SQL true when the bucket starting at ``bucket`` lies in one of the chunks
    ``[starts[i], ends[i])`` (of one granularity, sorted; ``chunk_start`` the SQL of the
    start of that granularity's chunk holding the bucket): adjacent chunks of one
    granularity tile their span, so a bucket starting in a run's span lies in one of the
    run's chunks."""
    run_of = np.concatenate([[0], np.cumsum(starts[1:] != ends[:-1])])  # each chunk's run
    firsts = np.flatnonzero(np.diff(run_of, prepend=-1))
    lasts = np.append(firsts[1:] - 1, len(starts) - 1)
    spans = ends[lasts] - starts[firsts]
    several = np.flatnonzero(lasts > firsts)  # runs of two chunks or more
    longest = several[np.argsort(-spans[several], kind="stable")[:_MOST_RUNS]]
    ranged = np.sort(longest)
    tests = [
        f"({bucket} >= {s} AND {bucket} < {e})"
        for s, e in zip(starts[firsts[ranged]].tolist(), ends[lasts[ranged]].tolist(), strict=True)
    ]
    rest = starts[~np.isin(run_of, ranged)]
    if len(rest):
        tests.append(f"{chunk_start} IN ({', '.join(map(str, rest.tolist()))})")
    return " OR ".join(tests)


def _has_chunks(interval: Interval, granularity: Granularity, at_least: int) -> bool:
    """Whether ``interval`` has at least ``at_least`` chunks (counting no further)."""
    chunks = itertools.islice(granularity.iterate(interval), at_least)
    return sum(1 for _ in chunks) >= at_least


def _shuffled_by_chunk(rows: DataFrame, granularity: Granularity, partitions: int) -> DataFrame:
    """``rows`` shuffled into ``partitions`` partitions, each chunk's rows into one, the
    chunks dealt out in time order: chunk ``i`` (counted from the epoch) to partition
    ``i mod partitions``. Spark's hash partitioning would send the chunk numbers themselves to
    partitions unevenly, so each number is replaced by a key that hashes to it
    (:func:`~segmentlake.core.partition_hash.partition_keys`); an explicit partition count
    also keeps adaptive execution from coalescing them."""
    step = granularity.fixed_millis or granularity.months * _MONTH_MS
    ordinal = f"floor({_q(CHUNK)} / {step})" if step else "0"
    keys = ", ".join(map(str, partition_keys(partitions)))
    slot = f"element_at(array({keys}), CAST(pmod({ordinal}, {partitions}) + 1 AS INT))"
    # A column, not an expression: Spark then knows the rows are clustered by it.
    return rows.selectExpr("*", f"{slot} AS {_SLOT}").repartition(partitions, _SLOT)


def _rolled_up_with_rejected(parsed: ParsedInput, spec: IngestionSpec) -> DataFrame:
    """Every parsed row rolled up per (chunk, time, dimensions, rejection reason), with the
    input rows each group stands for in ``__input_rows``. A rejected row has its keys and
    metric inputs nulled: the rejected rows of a reason become one group (a few rows through
    the shuffle, whatever their number), whose aggregates cannot overflow or fail, and whose
    null chunk is no chunk the buckets are counted for."""
    inputs = [metric_input(m) for m in spec.metrics if m.field_name]
    keys = [CHUNK, TIME, *parsed.dimensions]
    # SQL text: one JVM call per column, not one per function (see partitioning.py).
    kept = f"{_q(REASON)} IS NULL"
    nulled = parsed.frame.selectExpr(
        *[f"CASE WHEN {kept} THEN {_q(c)} END AS {_q(c)}" for c in [*keys, *inputs]], _q(REASON)
    )
    aggregates = [F.expr(f"{_aggregate_sql(m)} AS {_q(m.name)}") for m in spec.metrics]
    counted = F.expr(f"count(1) AS {_INPUT_ROWS}")
    return nulled.groupBy(*keys, REASON).agg(*aggregates, counted)


def _unrolled(kept: DataFrame, spec: IngestionSpec, keys: list[str]) -> DataFrame:
    """Each kept row with its own metrics (rollup off), next to ``keys`` (SQL expressions)."""
    if any(m.builds_sketch for m in spec.metrics):
        # A sketch is an aggregate even of one row: group each row with itself.
        grouped = kept.groupBy(F.monotonically_increasing_id(), *map(F.expr, keys))
        return grouped.agg(*[F.expr(f"{_aggregate_sql(m)} AS {_q(m.name)}") for m in spec.metrics])
    # Nothing to combine: rows go from the input's tasks straight to the table, as a plain
    # partitioned write does (a segment may then be several files, one per input task).
    return kept.selectExpr(*keys, *[f"{_single_sql(m)} AS {_q(m.name)}" for m in spec.metrics])


def segment_rows(
    parsed: DataFrame,
    spec: IngestionSpec,
    dimensions: tuple[str, ...],
    *,
    key_token: str,
    joined: JoinedChunks | None = None,
) -> DataFrame:
    """The rows to write: kept rows only, tagged with their chunk's write key, rolled up if
    the spec says so (one segment per chunk; the task splits oversized ones); a row whose
    bucket lies in one of the existing coarser chunks ``joined`` goes to that chunk's
    segment. Built from SQL text in as few projections as the plan needs: a small append's
    plan costs the driver ~10 ms per projection (a JVM analysis) and ~0.3 ms per Column
    function."""
    key_sql = _segment_key_sql(key_token, bucketed=False, joined=joined)
    key = f"{key_sql} AS {_q(SEGMENT_KEY_COLUMN)}"
    time = f"timestamp_millis({_q(TIME)}) AS {_q(TIME_COLUMN)}"
    dims = list(map(_q, dimensions))
    metrics = [_q(m.name) for m in spec.metrics]
    stored = [time, *dims, *metrics, _q(SEGMENT_KEY_COLUMN)]
    kept = kept_rows(parsed)
    if not spec.granularity_spec.rollup:
        if any(m.builds_sketch for m in spec.metrics):
            return _unrolled(kept, spec, [key, _q(TIME), *dims]).selectExpr(*stored)
        singles = [f"{_single_sql(m)} AS {_q(m.name)}" for m in spec.metrics]
        return kept.selectExpr(time, *dims, *singles, key)  # one projection, no shuffle
    inputs = [_q(metric_input(m)) for m in spec.metrics if m.field_name]
    keyed = kept.selectExpr(key, _q(TIME), *dims, *inputs)
    # Without metrics, rollup keeps one row per (time, dimensions): the row count only lets
    # Spark aggregate at all, and is dropped.
    aggregates = [F.expr(f"{_aggregate_sql(m)} AS {_q(m.name)}") for m in spec.metrics]
    grouped = keyed.repartition(SEGMENT_KEY_COLUMN).groupBy(
        *map(F.col, [_q(SEGMENT_KEY_COLUMN), _q(TIME), *dims])
    )
    return grouped.agg(*(aggregates or [F.expr("count(1)")])).selectExpr(*stored)


def first_last_sql(metric: MetricSpec, pairs: str) -> str:
    """SQL of a first / last aggregate over a column of (time, value) pairs: the pair of the
    earliest (latest) time among those with a value (Druid skips null values too)."""
    function = "min_by" if metric.type.endswith("First") else "max_by"
    when = f"CASE WHEN {pairs}.{PAIR_VALUE} IS NOT NULL THEN {pairs}.{PAIR_TIME} END"
    return f"{function}({pairs}, {when})"


def _single_sql(metric: MetricSpec) -> str:
    """A row's own value of ``metric`` (rollup off)."""
    return "CAST(1 AS BIGINT)" if metric.type == "count" else _q(metric_input(metric))


def _aggregate_sql(metric: MetricSpec) -> str:
    if metric.type == "count":
        return "count(1)"
    column = _q(metric_input(metric))
    if metric.type == "HLLSketchBuild":
        return f"hll_sketch_agg({column}, {int(metric.lg_k)})"
    if metric.type == "HLLSketchMerge":
        # Sketches of different lgK merge into the smaller one (Druid's union does the same).
        return f"hll_union_agg({column}, true)"
    if metric.type == "thetaSketch":
        function = "theta_union_agg" if metric.input_sketch else "theta_sketch_agg"
        return f"{function}({column}, {int(metric.lg_nominal_entries)})"
    if metric.type == "quantilesDoublesSketch":
        function = "kll_merge_agg_double" if metric.input_sketch else "kll_sketch_agg_double"
        return f"{function}({column}, {int(metric.k)})"
    if metric.type in FIRST_LAST_TYPES:
        return first_last_sql(metric, column)
    if metric.type == "floatSum":  # Spark sums FLOATs as a DOUBLE: stored as the FLOAT it is
        return f"CAST(sum({column}) AS FLOAT)"
    return f"{_AGGREGATES[metric.type]}({column})"
