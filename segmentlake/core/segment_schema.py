"""What a segment's rows mean (Druid's segment ``Metadata``): the aggregators that built its
metric columns, the query granularity its times are truncated to, and whether it is rolled up.

Compaction needs it to merge segments: each metric is re-aggregated with its *combining* form
(a ``count`` column is summed, a min stays a min, an HLL sketch is unioned), and a datasource
ingested without rollup is compacted without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec, MetricSpec, metric_from_json, metric_json
from segmentlake.core.spec_reader import FIRST_LAST_TYPES, check_flag, safe_repr
from segmentlake.errors import SpecError

__all__ = ["SegmentSchema", "combining_metric"]

# A stored metric column is re-aggregated by the combining aggregator of its type.
_COMBINING = {
    "count": "longSum",
    "longSum": "longSum",
    "doubleSum": "doubleSum",
    "longMin": "longMin",
    "longMax": "longMax",
    "doubleMin": "doubleMin",
    "doubleMax": "doubleMax",
    "floatSum": "floatSum",
    "floatMin": "floatMin",
    "floatMax": "floatMax",
    "HLLSketchBuild": "HLLSketchMerge",
    "HLLSketchMerge": "HLLSketchMerge",
    "thetaSketch": "thetaSketch",  # over the stored sketches: isInputThetaSketch
    "quantilesDoublesSketch": "quantilesDoublesSketch",  # merging the stored sketches
    # first / last over the stored (time, value) pairs: the earliest (latest) pair
    **{t: t for t in FIRST_LAST_TYPES},
}


def combining_metric(metric: MetricSpec) -> MetricSpec:
    """The aggregator that merges ``metric``'s stored column into itself (Druid's
    ``getCombiningFactory``): ``count`` → ``longSum`` of the count, ``HLLSketchBuild`` →
    ``HLLSketchMerge`` of the sketches, ``thetaSketch`` → the union of its stored sketches
    (``isInputThetaSketch``), the others keep their type.

    >>> combining_metric(MetricSpec("count", "edits")).type
    'longSum'
    """
    sketches = metric.type in ("thetaSketch", "quantilesDoublesSketch")
    return MetricSpec(
        _COMBINING[metric.type],
        metric.name,
        metric.name,
        metric.lg_k,
        metric.size,
        input_sketch=sketches,
        k=metric.k,
        max_string_bytes=metric.max_string_bytes,
    )


@dataclass(frozen=True, slots=True)
class SegmentSchema:
    """Aggregators, query granularity and rollup of a segment's rows."""

    aggregators: tuple[MetricSpec, ...] = ()
    query_granularity: Granularity = Granularity.NONE
    rollup: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "aggregators", tuple(self.aggregators))
        object.__setattr__(self, "query_granularity", Granularity.parse(self.query_granularity))
        check_flag(self.rollup, "schema.rollup")
        for metric in self.aggregators:
            if not isinstance(metric, MetricSpec):
                raise SpecError(f"a segment schema's aggregators are MetricSpecs, got {metric!r}")

    @classmethod
    def of(cls, spec: IngestionSpec) -> SegmentSchema:
        """The schema of the segments an ingestion with ``spec`` writes."""
        granularity = spec.granularity_spec
        return cls(spec.metrics, granularity.query_granularity, granularity.rollup)

    def combining(self) -> tuple[MetricSpec, ...]:
        return tuple(combining_metric(m) for m in self.aggregators)

    def to_json(self) -> dict[str, Any]:
        return {
            "aggregators": [metric_json(m) for m in self.aggregators],
            "queryGranularity": self.query_granularity.name,
            "rollup": self.rollup,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SegmentSchema:
        if not isinstance(data, Mapping):
            raise SpecError(f"a segment schema must be a JSON object, got {safe_repr(data)}")
        aggregators: Sequence[Any] = data.get("aggregators") or ()
        if not isinstance(aggregators, list | tuple):
            raise SpecError(
                f"schema.aggregators must be a list of aggregators, got {safe_repr(aggregators)}"
            )
        metrics = []
        for i, metric in enumerate(aggregators):
            try:
                metrics.append(metric_from_json(metric, i))
            except SpecError as e:  # it names the place as in an ingestion spec's metricsSpec
                raise SpecError(f"schema.aggregators[{i}]: {e}") from e
        try:
            granularity = Granularity.parse(data.get("queryGranularity", "NONE"))
        except SpecError as e:
            raise SpecError(f"schema.queryGranularity: {e}") from e
        return cls(
            tuple(metrics), granularity, check_flag(data.get("rollup", True), "schema.rollup")
        )
