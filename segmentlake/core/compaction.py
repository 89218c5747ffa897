"""What a compaction does, decided without Spark: the spec it re-ingests with, the compaction
state (Druid's ``lastCompactionState``) its segments record, and which segments it takes.

* **Major** compaction re-ingests whole chunks with perfect rollup (the partitioning engine)
  under a new version, possibly of another segment granularity. A chunk whose visible
  segments all record the wanted state already is left alone.
* **Minor** compaction works inside one chunk and version: it takes runs of visible segments
  whose root partition ranges are adjacent, whole atomic update groups only (Druid's segment
  lock restrictions), and merges each run into fewer segments (or splits a too-large one)
  that overshadow it with the next minor version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import (
    DimensionsSpec,
    GranularitySpec,
    IngestionSpec,
    MetricSpec,
    TimestampSpec,
)
from segmentlake.core.interval import Interval
from segmentlake.core.names import TIME_COLUMN
from segmentlake.core.partitions_spec import PartitionsSpec
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.errors import SpecError

__all__ = [
    "COMPACTION_MODES",
    "MAJOR",
    "MINOR",
    "CompactionMode",
    "MinorRun",
    "compaction_spec",
    "compaction_state",
    "merged_schema",
    "minor_runs",
]

CompactionMode = Literal["minor", "major"]
# The run-time check's list: callers from untyped code, the CLI and SQL pass any string.
COMPACTION_MODES: tuple[CompactionMode, ...] = get_args(CompactionMode)
MAJOR: Final = "major"
MINOR: Final = "minor"
_GRANULARITY_ORDER = list(Granularity)


def merged_schema(
    segments: Sequence[DataSegment],
    *,
    query_granularity: Granularity | None = None,
    rollup: bool | None = None,
) -> tuple[tuple[str, ...], SegmentSchema]:
    """The dimensions (in order of first appearance) and the schema of the segments taken
    together: every aggregator once (the same name must mean the same aggregator), rollup only
    if every segment was rolled up, the finest query granularity unless one is given."""
    dimensions: dict[str, None] = {}
    aggregators: dict[str, MetricSpec] = {}
    schemas = []
    for seg in segments:
        if seg.schema is None:
            raise SpecError(
                f"segment {seg.id} records no schema (its aggregators), so it cannot be "
                "re-aggregated; re-ingest its interval with lake.overwrite to compact it"
            )
        schemas.append(seg.schema)
        dimensions.update(dict.fromkeys(seg.dimensions))
        for metric in seg.schema.aggregators:
            known = aggregators.setdefault(metric.name, metric)
            if _sketch_shape(known) != _sketch_shape(metric):
                raise SpecError(
                    f"metric {metric.name!r} is {known.type} in some segments and "
                    f"{metric.type} in others (e.g. {seg.id}); compact them separately or "
                    "re-ingest with one aggregator"
                )
    finest = min(
        (s.query_granularity for s in schemas),
        key=_GRANULARITY_ORDER.index,
        default=Granularity.NONE,
    )
    schema = SegmentSchema(
        tuple(aggregators.values()),
        query_granularity or finest,
        all(s.rollup for s in schemas) if rollup is None else rollup,
    )
    return tuple(d for d in dimensions if d not in aggregators), schema


def compaction_spec(
    dimensions: Sequence[str],
    schema: SegmentSchema,
    *,
    segment_granularity: Granularity,
    partitions_spec: PartitionsSpec,
) -> IngestionSpec:
    """The spec that re-ingests stored rows: time from ``__time``, each metric re-aggregated
    from its own column with its combining aggregator."""
    return IngestionSpec(
        timestamp_spec=TimestampSpec(TIME_COLUMN, "auto"),
        dimensions_spec=DimensionsSpec(tuple(dimensions)),
        metrics=schema.combining(),
        granularity_spec=GranularitySpec(
            segment_granularity, schema.query_granularity, schema.rollup
        ),
        partitions_spec=partitions_spec,
    )


def compaction_state(
    mode: CompactionMode,
    dimensions: Sequence[str],
    schema: SegmentSchema,
    *,
    segment_granularity: Granularity | None,
    partitions_spec: Mapping[str, Any],
) -> dict[str, Any]:
    """Druid's ``lastCompactionState``: the spec a compacted segment was made with, compared
    as a whole by later passes to tell what is already compacted as wanted."""
    return {
        "type": mode,
        "partitionsSpec": dict(partitions_spec),
        "dimensionsSpec": {"dimensions": list(dimensions)},
        "metricsSpec": schema.to_json()["aggregators"],
        "granularitySpec": {
            "segmentGranularity": None if segment_granularity is None else segment_granularity.name,
            "queryGranularity": schema.query_granularity.name,
            "rollup": schema.rollup,
        },
    }


def compacted_as_wanted(
    segments: Sequence[DataSegment], chunk: Interval, state: Mapping[str, Any]
) -> bool:
    """Whether a chunk's visible segments are exactly a compaction's output with ``state``."""
    return bool(segments) and all(
        s.interval == chunk
        and s.last_compaction_state is not None
        and _plain(s.last_compaction_state) == _plain(state)
        for s in segments
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class MinorRun:
    """Segments of one chunk a minor compaction replaces, and what its outputs will be: the
    union of their root ranges, the next minor version, how many segments."""

    inputs: tuple[DataSegment, ...]
    outputs: int

    @property
    def interval(self) -> Interval:
        return self.inputs[0].interval

    @property
    def version(self) -> str:
        return self.inputs[0].version

    @property
    def root_range(self) -> tuple[int, int]:
        return (
            min(s.shard_spec.start_root_partition_id for s in self.inputs),
            max(s.shard_spec.end_root_partition_id for s in self.inputs),
        )

    @property
    def minor_version(self) -> int:
        return max(s.shard_spec.minor_version for s in self.inputs) + 1

    @property
    def num_rows(self) -> int:
        return sum(s.num_rows for s in self.inputs)


def minor_runs(
    visible: Sequence[DataSegment],
    *,
    max_rows_per_segment: int,
    only_if_useful: bool = True,
) -> list[MinorRun]:
    """The runs a minor compaction takes from one chunk's visible data segments: maximal runs
    of complete atomic update groups with adjacent root ranges, each to become
    ``ceil(rows / max_rows_per_segment)`` segments. A run is taken only if that makes fewer
    segments or splits one above the limit, so a compacted run is left alone next time
    (unless not ``only_if_useful``: segments chosen by hand are compacted regardless).
    Incomplete groups (a fallback after a removal) end a run and are never taken."""
    if max_rows_per_segment < 1:
        raise SpecError(f"max_rows_per_segment must be >= 1, got {max_rows_per_segment}")
    groups: dict[tuple[int, int, int], list[DataSegment]] = {}
    for seg in visible:
        if seg.is_tombstone:
            continue
        spec = seg.shard_spec
        key = (spec.start_root_partition_id, spec.end_root_partition_id, spec.minor_version)
        groups.setdefault(key, []).append(seg)
    complete = sorted(
        (key, members)
        for key, members in groups.items()
        if len(members) >= members[0].shard_spec.atomic_update_group_size
    )
    runs: list[list[tuple[tuple[int, int, int], list[DataSegment]]]] = []
    for key, members in complete:
        if runs and runs[-1][-1][0][1] == key[0]:
            runs[-1].append((key, members))
        else:
            runs.append([(key, members)])
    chosen = []
    for run in runs:
        inputs = tuple(seg for _, members in run for seg in members)
        outputs = max(1, math.ceil(sum(s.num_rows for s in inputs) / max_rows_per_segment))
        too_large = any(s.num_rows > max_rows_per_segment for s in inputs)
        # Nothing to gain (fewer segments or none too large): already compacted as wanted.
        if only_if_useful and outputs >= len(inputs) and not too_large:
            continue
        chosen.append(MinorRun(inputs, outputs))
    return chosen


def _sketch_shape(metric: MetricSpec) -> tuple[str, int, int, int]:
    """What two segments' metric of one name must share to be merged into one column."""
    return metric.type, metric.lg_k, metric.size, metric.k
