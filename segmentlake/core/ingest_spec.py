"""The ingestion spec: what rows mean and how they become segments (Druid's ``dataSchema``).

Every part is a small frozen dataclass that validates itself, and :meth:`IngestionSpec.from_dict`
reads Druid's JSON form, so a spec written for Druid mostly carries over::

    spec = IngestionSpec.from_dict({
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "page"]},
        "metricsSpec": [{"type": "count", "name": "edits"},
                        {"type": "longSum", "name": "added", "fieldName": "added"}],
        "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
    })

Where Druid evaluates its own expression language (transforms, filters), segmentlake takes
Spark SQL expressions. A spec error names the field (``metricsSpec[1].fieldName``) and what
would be right, before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from segmentlake.core.granularity import Granularity
from segmentlake.core.partitions_spec import (
    DynamicPartitionsSpec,
    PartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.errors import SpecError

__all__ = [
    "AGGREGATOR_TYPES",
    "TIMESTAMP_FORMATS",
    "DimensionsSpec",
    "DynamicPartitionsSpec",
    "ExpressionTransform",
    "GranularitySpec",
    "IngestionSpec",
    "MetricSpec",
    "TimestampSpec",
    "TransformSpec",
    "metric_from_json",
    "metric_json",
]

TIMESTAMP_FORMATS = ("auto", "iso", "millis", "posix", "micro", "nano")
# Druid aggregator type -> whether it reads an input column (count does not).
AGGREGATOR_TYPES: Mapping[str, bool] = {
    "count": False,
    "longSum": True,
    "doubleSum": True,
    "longMin": True,
    "longMax": True,
    "doubleMin": True,
    "doubleMax": True,
    # Druid's DataSketches HLL build aggregator; built with Spark's hll_sketch_agg, so
    # sketches of different segments merge later (hll_union_agg).
    "HLLSketchBuild": True,
    # Druid's DataSketches HLL merge aggregator: unions sketches (binary) already built, e.g.
    # by an earlier ingestion; compaction re-aggregates HLLSketchBuild metrics with it.
    "HLLSketchMerge": True,
}
_HLL_LG_K = (4, 21)  # the lgConfigK range Spark's HLL sketch functions accept
_DEFAULT_LG_K = 12
_RESERVED_PREFIX = "__"


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where} must be a non-empty column name, got {value!r}")
    if value.startswith(_RESERVED_PREFIX):
        raise SpecError(f"{where} {value!r}: names starting with '__' are reserved (__time, ...)")
    return value


@dataclass(frozen=True, slots=True)
class TimestampSpec:
    """Which input column holds each row's time, and how to read it: ``iso`` (ISO-8601
    strings), ``millis``/``posix``/``micro``/``nano`` (epoch numbers), or ``auto`` (ISO strings,
    timestamps, or epoch milliseconds)."""

    column: str = "timestamp"
    format: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column.strip():
            raise SpecError(f"timestampSpec.column must be a column name, got {self.column!r}")
        if self.format not in TIMESTAMP_FORMATS:
            raise SpecError(
                f"timestampSpec.format {self.format!r} is not supported; expected one of "
                + ", ".join(TIMESTAMP_FORMATS)
            )


@dataclass(frozen=True, slots=True)
class DimensionsSpec:
    """The dimension columns, in order; ``None`` means every input column that is neither the
    timestamp, a metric's input, nor in ``exclusions``."""

    dimensions: tuple[str, ...] | None = None
    exclusions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.dimensions is not None:
            names = tuple(
                _name(d, f"dimensionsSpec.dimensions[{i}]") for i, d in enumerate(self.dimensions)
            )
            _no_duplicates(names, "dimensionsSpec.dimensions")
            object.__setattr__(self, "dimensions", names)
        object.__setattr__(self, "exclusions", tuple(self.exclusions))


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One rollup aggregator: ``type`` (Druid's name, see :data:`AGGREGATOR_TYPES`), the output
    column ``name`` and the input column ``field_name`` (none for ``count``). ``lg_k`` is the
    HLL sketch's log2 of buckets (4-21)."""

    type: str
    name: str
    field_name: str | None = None
    lg_k: int = _DEFAULT_LG_K

    def __post_init__(self) -> None:
        if self.type not in AGGREGATOR_TYPES:
            raise SpecError(
                f"metric {self.name!r}: unknown aggregator type {self.type!r}; expected one of "
                + ", ".join(AGGREGATOR_TYPES)
            )
        _name(self.name, "metric name")
        if AGGREGATOR_TYPES[self.type] and not self.field_name:
            raise SpecError(f"metric {self.name!r} ({self.type}) needs a fieldName to aggregate")
        if not AGGREGATOR_TYPES[self.type] and self.field_name:
            raise SpecError(f"metric {self.name!r}: count takes no fieldName")
        if not _HLL_LG_K[0] <= self.lg_k <= _HLL_LG_K[1]:
            raise SpecError(
                f"metric {self.name!r}: lgK must be within {_HLL_LG_K}, got {self.lg_k}"
            )


@dataclass(frozen=True, slots=True)
class GranularitySpec:
    """Segment granularity (the time chunk of a segment), query granularity (the timestamp
    truncation applied before rollup) and whether rows with equal truncated time and
    dimensions are rolled up into one."""

    segment_granularity: Granularity = Granularity.DAY
    query_granularity: Granularity = Granularity.NONE
    rollup: bool = True

    def __post_init__(self) -> None:
        segment = Granularity.parse(self.segment_granularity)
        query = Granularity.parse(self.query_granularity)
        if segment is Granularity.NONE:
            raise SpecError("granularitySpec.segmentGranularity cannot be NONE; e.g. DAY or HOUR")
        order = list(Granularity)
        if order.index(query) > order.index(segment):
            raise SpecError(
                f"granularitySpec.queryGranularity {query.name} is coarser than "
                f"segmentGranularity {segment.name}; it must be the same or finer"
            )
        object.__setattr__(self, "segment_granularity", segment)
        object.__setattr__(self, "query_granularity", query)


@dataclass(frozen=True, slots=True)
class ExpressionTransform:
    """A derived column: ``name`` computed by the Spark SQL ``expression``."""

    name: str
    expression: str

    def __post_init__(self) -> None:
        _name(self.name, "transform name")
        if not isinstance(self.expression, str) or not self.expression.strip():
            raise SpecError(f"transform {self.name!r} needs a Spark SQL expression")


@dataclass(frozen=True, slots=True)
class TransformSpec:
    """Transforms applied to input rows, then a Spark SQL ``filter`` keeping matching rows
    (rows filtered out are counted in the task report)."""

    transforms: tuple[ExpressionTransform, ...] = ()
    filter: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "transforms", tuple(self.transforms))
        _no_duplicates([t.name for t in self.transforms], "transformSpec.transforms")
        if self.filter is not None and (not isinstance(self.filter, str) or not self.filter):
            raise SpecError(
                f"transformSpec.filter must be a Spark SQL expression, got {self.filter!r}"
            )


@dataclass(frozen=True, slots=True)
class IngestionSpec:
    """Everything an ingestion task needs to know besides the rows and the datasource."""

    timestamp_spec: TimestampSpec = field(default_factory=TimestampSpec)
    dimensions_spec: DimensionsSpec = field(default_factory=DimensionsSpec)
    metrics: tuple[MetricSpec, ...] = ()
    granularity_spec: GranularitySpec = field(default_factory=GranularitySpec)
    transform_spec: TransformSpec = field(default_factory=TransformSpec)
    partitions_spec: PartitionsSpec = field(default_factory=DynamicPartitionsSpec)
    max_parse_exceptions: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", tuple(self.metrics))
        metric_names = [m.name for m in self.metrics]
        _no_duplicates(metric_names, "metricsSpec names")
        dims = self.dimensions_spec.dimensions or ()
        clash = sorted(set(dims) & set(metric_names))
        if clash:
            raise SpecError(f"{clash} named both as dimension and as metric; rename one")
        _check_partition_dimensions(self)
        if self.max_parse_exceptions < 0:
            raise SpecError(
                f"maxParseExceptions must be >= 0, got {self.max_parse_exceptions} "
                "(0: fail on the first unparseable row)"
            )

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> IngestionSpec:
        """Read Druid's ``dataSchema`` JSON (optionally inside an ingestion spec's ``spec`` or
        with a ``tuningConfig`` for ``partitionsSpec`` and ``maxParseExceptions``)."""
        if not isinstance(spec, Mapping):
            raise SpecError(f"an ingestion spec must be a dict, got {type(spec).__name__}")
        root = spec.get("spec", spec)
        schema = root.get("dataSchema", root)
        tuning = root.get("tuningConfig") or spec.get("tuningConfig") or {}
        return cls(
            timestamp_spec=_timestamp(schema.get("timestampSpec") or {}),
            dimensions_spec=_dimensions(schema.get("dimensionsSpec") or {}),
            metrics=tuple(
                metric_from_json(m, i) for i, m in enumerate(schema.get("metricsSpec") or [])
            ),
            granularity_spec=_granularity(schema.get("granularitySpec") or {}),
            transform_spec=_transform(schema.get("transformSpec") or {}),
            partitions_spec=_partitions(tuning, schema),
            max_parse_exceptions=int(tuning.get("maxParseExceptions", 0)),
        )

    def to_dict(self) -> dict[str, Any]:
        """Druid's JSON for this spec: ``{"dataSchema": ..., "tuningConfig": ...}`` (without
        ``dataSource``), which :meth:`from_dict` reads back to an equal spec. A spec with an
        empty (not ``None``) dimension tuple has no Druid form: Druid reads ``[]`` as "discover
        every column"."""
        dims = self.dimensions_spec
        if dims.dimensions == ():
            raise SpecError(
                "a spec with no dimensions at all has no Druid JSON form (Druid reads an empty "
                "dimension list as 'discover every column'); name at least one dimension"
            )
        granularity = self.granularity_spec
        return {
            "dataSchema": {
                "timestampSpec": {
                    "column": self.timestamp_spec.column,
                    "format": self.timestamp_spec.format,
                },
                "dimensionsSpec": {
                    "dimensions": list(dims.dimensions or ()),
                    "dimensionExclusions": list(dims.exclusions),
                },
                "metricsSpec": [metric_json(m) for m in self.metrics],
                "granularitySpec": {
                    "type": "uniform",
                    "segmentGranularity": granularity.segment_granularity.name,
                    "queryGranularity": granularity.query_granularity.name,
                    "rollup": granularity.rollup,
                },
                "transformSpec": {
                    "transforms": [
                        {"type": "expression", "name": t.name, "expression": t.expression}
                        for t in self.transform_spec.transforms
                    ],
                    "filter": self.transform_spec.filter,
                },
            },
            "tuningConfig": {
                "partitionsSpec": self.partitions_spec.to_json(),
                "forceGuaranteedRollup": self.partitions_spec.perfect_rollup,
                "maxParseExceptions": self.max_parse_exceptions,
            },
        }


def metric_json(metric: MetricSpec) -> dict[str, Any]:
    """Druid's JSON for one aggregator."""
    obj: dict[str, Any] = {"type": metric.type, "name": metric.name}
    if metric.field_name is not None:
        obj["fieldName"] = metric.field_name
    if metric.type.startswith("HLLSketch") or metric.lg_k != _DEFAULT_LG_K:
        obj["lgK"] = metric.lg_k
    return obj


# -- Druid JSON readers --------------------------------------------------------------------


def _timestamp(obj: Mapping[str, Any]) -> TimestampSpec:
    return TimestampSpec(column=obj.get("column", "timestamp"), format=obj.get("format", "auto"))


def _dimensions(obj: Mapping[str, Any]) -> DimensionsSpec:
    raw = obj.get("dimensions")
    names = None
    if raw:  # Druid: an empty list means "discover every column"
        names = tuple(str(d.get("name", "")) if isinstance(d, Mapping) else d for d in raw)
    return DimensionsSpec(names, tuple(obj.get("dimensionExclusions") or ()))


def metric_from_json(obj: Any, index: int) -> MetricSpec:
    """One aggregator from Druid's JSON (``index``: its place in ``metricsSpec``)."""
    if not isinstance(obj, Mapping):
        raise SpecError(f"metricsSpec[{index}] must be an object, got {obj!r}")
    for key in ("type", "name"):
        if key not in obj:
            raise SpecError(f"metricsSpec[{index}] lacks {key!r}: {dict(obj)}")
    return MetricSpec(
        obj["type"], obj["name"], obj.get("fieldName"), int(obj.get("lgK", _DEFAULT_LG_K))
    )


def _granularity(obj: Mapping[str, Any]) -> GranularitySpec:
    return GranularitySpec(
        segment_granularity=Granularity.parse(obj.get("segmentGranularity", "day")),
        query_granularity=Granularity.parse(obj.get("queryGranularity", "none")),
        rollup=bool(obj.get("rollup", True)),
    )


def _transform(obj: Mapping[str, Any]) -> TransformSpec:
    transforms = []
    for i, t in enumerate(obj.get("transforms") or []):
        if not isinstance(t, Mapping) or t.get("type", "expression") != "expression":
            raise SpecError(f"transformSpec.transforms[{i}] must be an expression transform: {t!r}")
        transforms.append(ExpressionTransform(t.get("name", ""), t.get("expression", "")))
    filt = obj.get("filter")
    if filt is not None and not isinstance(filt, str):
        raise SpecError(
            "transformSpec.filter must be a Spark SQL expression string (segmentlake does not "
            f"read Druid's filter JSON), got {filt!r}"
        )
    return TransformSpec(tuple(transforms), filt)


def _partitions(tuning: Mapping[str, Any], schema: Mapping[str, Any]) -> PartitionsSpec:
    spec = partitions_spec_from_dict(
        tuning.get("partitionsSpec") or schema.get("partitionsSpec") or {}
    )
    force = tuning.get("forceGuaranteedRollup")
    if force is not None and bool(force) != spec.perfect_rollup:
        raise SpecError(
            f"tuningConfig.forceGuaranteedRollup={force} contradicts partitionsSpec type "
            f"{spec.type_name!r}: perfect rollup comes with 'hashed', 'range' or 'single_dim' "
            "partitioning, best-effort rollup with 'dynamic'"
        )
    return spec


def _check_partition_dimensions(spec: IngestionSpec) -> None:
    partitions = spec.partitions_spec
    if not partitions.perfect_rollup:
        return
    named = getattr(partitions, "partition_dimensions", ())
    dims = spec.dimensions_spec.dimensions
    missing = [d for d in named if dims is not None and d not in dims]
    if missing:
        raise SpecError(
            f"partitionsSpec partition dimensions {missing} are not among the dimensions "
            f"{list(dims or ())}; partition on dimensions the segments keep"
        )


def _no_duplicates(names: Sequence[str], where: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise SpecError(f"{where}: {n!r} appears twice")
        seen.add(n)
