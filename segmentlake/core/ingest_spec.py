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

Where Druid evaluates its own expression language (transforms), segmentlake takes Spark SQL
expressions; ``transformSpec.filter`` is a Spark SQL condition or Druid's filter JSON (translated
to Spark SQL); a typed dimension (``{"type": "long", "name": "port"}``) is cast to its type when
rows are ingested. The JSON is read strictly, by the same reader as Druid task JSON
(:mod:`segmentlake.core.spec_reader`): an unknown key, a value of the wrong type (``"false"``
for a flag, ``"5"`` for a number) or a bad value fails with ONE :class:`SpecError` listing every
problem with its JSON path (``metricsSpec[1].fieldName``) and what would be right, before any
work starts. The dataclasses check their own fields' types too.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from segmentlake.core.druid_filter import druid_filter_sql
from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import (
    MAX_MILLIS,
    MIN_MILLIS,
    Interval,
    format_timestamp,
    parse_timestamp,
    to_millis,
)
from segmentlake.core.joda_pattern import SparkPattern, spark_pattern
from segmentlake.core.partitions_spec import (
    DimensionRangePartitionsSpec,
    DynamicPartitionsSpec,
    HashedPartitionsSpec,
    PartitionsSpec,
    SingleDimensionPartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.core.spec_reader import (
    AGGREGATOR_TYPES,
    DIMENSION_TYPES,
    DataSchemaReader,
    JsonReader,
    SchemaParts,
    Section,
    TuningParts,
    at,
    check_flag,
    check_int,
    check_text,
    safe_repr,
    spec_error,
)
from segmentlake.errors import SpecError

__all__ = [
    "AGGREGATOR_TYPES",
    "DIMENSION_TYPES",
    "TIMESTAMP_FORMATS",
    "DimensionsSpec",
    "DynamicPartitionsSpec",
    "ExpressionTransform",
    "GranularitySpec",
    "IngestionSpec",
    "MetricSpec",
    "TimestampSpec",
    "TransformSpec",
    "build_intervals",
    "build_spec",
    "metric_from_json",
    "metric_json",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

TIMESTAMP_FORMATS = ("auto", "iso", "millis", "posix", "micro", "nano", "ruby")
_HLL_LG_K = (4, 21)  # the lgConfigK range Spark's HLL sketch functions accept
_DEFAULT_LG_K = 12
_DEFAULT_THETA_SIZE = 16384  # Druid's
_DEFAULT_QUANTILES_K = 128  # Druid's
_DEFAULT_MAX_STRING_BYTES = 1024  # Druid's, for stringFirst / stringLast
# Spark's KLL sketches take k from 8; Druid's quantiles sketches powers of two up to 32768.
_QUANTILES_K = (8, 32768)
_SKETCH_INPUTS = ("thetaSketch", "quantilesDoublesSketch")
_RESERVED_PREFIX = "__"
_PARTITIONS_SPECS = (
    DynamicPartitionsSpec,
    HashedPartitionsSpec,
    DimensionRangePartitionsSpec,
    SingleDimensionPartitionsSpec,
)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where} must be a non-empty column name, got {safe_repr(value)}")
    if value.startswith(_RESERVED_PREFIX):
        raise SpecError(
            f"{where} {safe_repr(value)}: names starting with '__' are reserved (__time, ...)"
        )
    return value


def _names(value: Any, where: str) -> tuple[str, ...]:
    """A list or tuple of column names (a string is not one: "abc" is not a, b, c)."""
    if not isinstance(value, list | tuple):
        raise SpecError(f"{where} must be a list of column names, got {safe_repr(value)}")
    return tuple(_name(n, f"{where}[{i}]") for i, n in enumerate(value))


def _instance(value: Any, kind: type | tuple[type, ...], where: str) -> None:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SpecError(f"{where} must be a {names}, got {safe_repr(value)}")


@dataclass(frozen=True, slots=True)
class TimestampSpec:
    """Which input column holds each row's time, and how to read it: ``iso`` (ISO-8601
    strings), ``millis``/``posix``/``micro``/``nano`` (epoch numbers), ``ruby`` (epoch seconds
    with a fraction), ``auto`` (ISO strings, timestamps, or epoch milliseconds), or a Joda
    pattern such as ``"yyyy-MM-dd HH:mm:ss"`` (Druid's; see :mod:`segmentlake.core.joda_pattern`).
    Named formats are matched without regard to case, as Druid does, and kept in lower case.
    ``missing_value`` (epoch ms, or an ISO-8601 time; Druid's ``missingValue``) is the time of a
    row whose column is null or absent, which is otherwise rejected.

    >>> TimestampSpec("when", "dd/MMM/yyyy:HH:mm:ss Z").spark_pattern.pattern
    "d'/'MMM'/'y':'H':'m':'s' 'XX"
    """

    column: str = "timestamp"
    format: str = "auto"
    missing_value: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column.strip():
            raise SpecError(
                f"timestampSpec.column must be a column name, got {safe_repr(self.column)}"
            )
        if not isinstance(self.format, str):
            raise SpecError(
                f"timestampSpec.format must be a string (one of {', '.join(TIMESTAMP_FORMATS)} "
                f"or a Joda pattern), got {safe_repr(self.format)}"
            )
        if self.format.lower() in TIMESTAMP_FORMATS:
            object.__setattr__(self, "format", self.format.lower())
        else:
            spark_pattern(self.format)  # a SpecError naming what Spark cannot parse
        missing: Any = self.missing_value
        if isinstance(missing, str):  # Druid's JSON gives an ISO-8601 time
            try:
                missing = to_millis(parse_timestamp(missing))
            except SpecError as e:
                raise SpecError(f"timestampSpec.missingValue: {e}") from e
            object.__setattr__(self, "missing_value", missing)
        if missing is not None and (
            isinstance(missing, bool)
            or not isinstance(missing, int)
            or not MIN_MILLIS <= missing <= MAX_MILLIS
        ):
            raise SpecError(
                "timestampSpec.missingValue must be a time in the years 0001-9999 (epoch ms or "
                f"ISO-8601), got {safe_repr(missing)}"
            )

    def to_json(self) -> dict[str, Any]:
        """Druid's JSON form."""
        obj: dict[str, Any] = {"column": self.column, "format": self.format}
        if self.missing_value is not None:
            obj["missingValue"] = format_timestamp(self.missing_value)
        return obj

    @property
    def spark_pattern(self) -> SparkPattern | None:
        """The Spark pattern of a Joda ``format``; None for a named format."""
        return None if self.format in TIMESTAMP_FORMATS else spark_pattern(self.format)


@dataclass(frozen=True, slots=True)
class DimensionsSpec:
    """The dimension columns, in order; ``None`` means every input column that is neither the
    timestamp, a metric's input, nor in ``exclusions``.

    ``types`` pairs a listed dimension with the Druid type its JSON declares (``{"name",
    "type"}``): ``string``, ``long``, ``float`` or ``double`` values are cast to it when rows
    are ingested, ``auto`` ones keep the input's type. A dimension without a declared type keeps
    the type its rows have; that is how a typed DataFrame keeps its columns' types, while a Druid
    task, whose input files carry no types Druid would keep, gives it Druid's default (``string``,
    or ``auto`` with ``schema_discovery``, Druid's ``useSchemaDiscovery``)."""

    dimensions: tuple[str, ...] | None = None
    exclusions: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = ()
    schema_discovery: bool = False

    def __post_init__(self) -> None:
        if self.dimensions is not None:
            names = _names(self.dimensions, "dimensionsSpec.dimensions")
            _no_duplicates(names, "dimensionsSpec.dimensions")
            object.__setattr__(self, "dimensions", names)
        if not isinstance(self.exclusions, list | tuple) or not all(
            isinstance(e, str) and e for e in self.exclusions
        ):
            raise SpecError(
                "dimensionsSpec.dimensionExclusions must be a list of column names, got "
                + safe_repr(self.exclusions)
            )
        object.__setattr__(self, "exclusions", tuple(self.exclusions))
        check_flag(self.schema_discovery, "dimensionsSpec.useSchemaDiscovery")
        object.__setattr__(self, "types", self._declared_types())

    def _declared_types(self) -> tuple[tuple[str, str], ...]:
        """``types`` checked, in the dimensions' order (so equal specs compare equal)."""
        where = "dimensionsSpec.dimensions"
        pairs = self.types if isinstance(self.types, list | tuple) else None
        if pairs is None or not all(
            isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in pairs
        ):
            raise SpecError(
                f"{where} types must be (name, type) pairs of strings, got {safe_repr(self.types)}"
            )
        declared = dict(pairs)
        if len(declared) != len(pairs):
            raise SpecError(f"{where} types name a dimension twice: {safe_repr(self.types)}")
        listed = self.dimensions or ()
        for name, kind in declared.items():
            if name not in listed:
                raise SpecError(
                    f"{where}: a type is declared for {name!r}, which is not among the listed "
                    f"dimensions {list(listed)}; list it, or remove its type"
                )
            if kind not in DIMENSION_TYPES:
                raise SpecError(
                    f"{where}: {name!r} has type {kind!r}; accepted: " + ", ".join(DIMENSION_TYPES)
                )
        return tuple((name, declared[name]) for name in listed if name in declared)

    def to_json(self) -> dict[str, Any]:
        """Druid's ``dimensionsSpec`` JSON: a declared type makes its dimension an object."""
        declared = dict(self.types)
        return {
            "dimensions": [
                {"type": declared[name], "name": name} if name in declared else name
                for name in self.dimensions or ()
            ],
            "dimensionExclusions": list(self.exclusions),
            "useSchemaDiscovery": self.schema_discovery,
        }


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One rollup aggregator: ``type`` (Druid's name, see :data:`AGGREGATOR_TYPES`), the output
    column ``name`` and the input column ``field_name`` (none for ``count``). ``lg_k`` is the
    HLL sketch's log2 of buckets (4-21); ``size`` a theta sketch's nominal entries (a power of
    two, 16 to 2^26; Druid's default 16384) and ``input_sketch`` whether its input is theta
    sketches to union (Druid's ``isInputThetaSketch``; for ``quantilesDoublesSketch``, set by
    compaction, whose input is the stored sketches); ``k`` a quantiles sketch's accuracy
    parameter (a power of two, 8 to 32768; Druid's default 128); ``max_string_bytes`` the
    longest value a ``stringFirst``/``stringLast`` keeps (Druid's default 1024); other
    aggregators keep the defaults."""

    type: str
    name: str
    field_name: str | None = None
    lg_k: int = _DEFAULT_LG_K
    size: int = _DEFAULT_THETA_SIZE
    input_sketch: bool = False
    k: int = _DEFAULT_QUANTILES_K
    max_string_bytes: int = _DEFAULT_MAX_STRING_BYTES

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or self.type not in AGGREGATOR_TYPES:
            raise SpecError(
                f"metric {safe_repr(self.name)}: unknown aggregator type {safe_repr(self.type)}; "
                "expected one of " + ", ".join(AGGREGATOR_TYPES)
            )
        _name(self.name, "metric name")
        where = f"metric {self.name!r}"
        if self.field_name is not None:
            # An input column: any name the rows have (only outputs avoid the '__' prefix).
            check_text(self.field_name, f"{where} fieldName", what="an input column name")
        if AGGREGATOR_TYPES[self.type] and self.field_name is None:
            raise SpecError(f"{where} ({self.type}) needs a fieldName to aggregate")
        if not AGGREGATOR_TYPES[self.type] and self.field_name is not None:
            raise SpecError(f"{where}: count takes no fieldName")
        check_int(self.lg_k, f"{where}: lgK", minimum=_HLL_LG_K[0], maximum=_HLL_LG_K[1])
        if not self.type.startswith("HLLSketch") and self.lg_k != _DEFAULT_LG_K:
            # Druid's JSON has no lgK for them: a spec saying one could not be written back.
            raise SpecError(f"{where}: lgK applies to HLL sketch metrics only")
        check_int(self.size, f"{where}: size", minimum=16, maximum=1 << 26)
        if self.size & (self.size - 1):
            lower = 1 << (self.size.bit_length() - 1)
            raise SpecError(
                f"{where}: size {self.size} is not a power of two; Druid's theta sketches take "
                f"e.g. {lower} or {lower * 2}"
            )
        check_flag(self.input_sketch, f"{where}: isInputThetaSketch")
        if self.type != "thetaSketch" and self.size != _DEFAULT_THETA_SIZE:
            raise SpecError(f"{where}: size applies to thetaSketch only")
        if self.type not in _SKETCH_INPUTS and self.input_sketch:
            raise SpecError(f"{where}: isInputThetaSketch applies to thetaSketch only")
        self._check_k(where)
        check_int(self.max_string_bytes, f"{where}: maxStringBytes", minimum=1)
        if self.type not in ("stringFirst", "stringLast") and (
            self.max_string_bytes != _DEFAULT_MAX_STRING_BYTES
        ):
            raise SpecError(f"{where}: maxStringBytes applies to stringFirst/stringLast only")

    def _check_k(self, where: str) -> None:
        if self.type != "quantilesDoublesSketch":
            if self.k != _DEFAULT_QUANTILES_K:
                raise SpecError(f"{where}: k applies to quantilesDoublesSketch only")
            return
        low, high = _QUANTILES_K
        check_int(self.k, f"{where}: k", minimum=low, maximum=high)
        if self.k & (self.k - 1):
            raise SpecError(
                f"{where}: k {self.k} is not a power of two; Druid's quantiles sketches take "
                f"e.g. {1 << (self.k.bit_length() - 1)} or {1 << self.k.bit_length()}"
            )

    @property
    def builds_sketch(self) -> bool:
        """Whether the metric sketches raw values: a sketch is an aggregate even of one row."""
        return self.type == "HLLSketchBuild" or (
            self.type in _SKETCH_INPUTS and not self.input_sketch
        )

    @property
    def lg_nominal_entries(self) -> int:
        """log2 of a theta sketch's ``size``: Spark's ``lgNomEntries``."""
        return self.size.bit_length() - 1


@dataclass(frozen=True, slots=True)
class GranularitySpec:
    """Segment granularity (the time chunk of a segment), query granularity (the timestamp
    truncation applied before rollup) and whether rows with equal truncated time and
    dimensions are rolled up into one."""

    segment_granularity: Granularity = Granularity.DAY
    query_granularity: Granularity = Granularity.NONE
    rollup: bool = True

    def __post_init__(self) -> None:
        segment = _granularity(self.segment_granularity, "segmentGranularity")
        query = _granularity(self.query_granularity, "queryGranularity")
        check_flag(self.rollup, "granularitySpec.rollup")
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


def _granularity(value: Any, key: str) -> Granularity:
    try:
        return Granularity.parse(value)
    except SpecError as e:
        raise SpecError(f"granularitySpec.{key}: {e}") from None


@dataclass(frozen=True, slots=True)
class ExpressionTransform:
    """A derived column: ``name`` computed by the Spark SQL ``expression``."""

    name: str
    expression: str

    def __post_init__(self) -> None:
        _name(self.name, "transform name")
        if not isinstance(self.expression, str) or not self.expression.strip():
            raise SpecError(
                f"transform {self.name!r} needs a Spark SQL expression, got "
                + safe_repr(self.expression)
            )


@dataclass(frozen=True, slots=True)
class TransformSpec:
    """Transforms applied to input rows, then a Spark SQL ``filter`` keeping matching rows
    (rows filtered out are counted in the task report)."""

    transforms: tuple[ExpressionTransform, ...] = ()
    filter: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.transforms, list | tuple):
            raise SpecError(
                f"transformSpec.transforms must be a list, got {safe_repr(self.transforms)}"
            )
        for i, t in enumerate(self.transforms):
            _instance(t, ExpressionTransform, f"transformSpec.transforms[{i}]")
        object.__setattr__(self, "transforms", tuple(self.transforms))
        _no_duplicates([t.name for t in self.transforms], "transformSpec.transforms")
        if self.filter is not None and (
            not isinstance(self.filter, str) or not self.filter.strip()
        ):
            raise SpecError(
                "transformSpec.filter must be a Spark SQL expression, got " + safe_repr(self.filter)
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
        self._check_types()
        object.__setattr__(self, "metrics", tuple(self.metrics))
        metric_names = [m.name for m in self.metrics]
        _no_duplicates(metric_names, "metricsSpec names")
        dims = self.dimensions_spec.dimensions or ()
        clash = sorted(set(dims) & set(metric_names))
        if clash:
            raise SpecError(
                f"dimensionsSpec.dimensions and metricsSpec: {clash} named both as dimension "
                "and as metric; rename one"
            )
        _check_partition_dimensions(self)
        check_int(
            self.max_parse_exceptions,
            "maxParseExceptions (0: fail on the first unparseable row)",
            minimum=0,
        )

    def _check_types(self) -> None:
        _instance(self.timestamp_spec, TimestampSpec, "timestamp_spec")
        _instance(self.dimensions_spec, DimensionsSpec, "dimensions_spec")
        _instance(self.granularity_spec, GranularitySpec, "granularity_spec")
        _instance(self.transform_spec, TransformSpec, "transform_spec")
        _instance(self.partitions_spec, _PARTITIONS_SPECS, "partitions_spec")
        if not isinstance(self.metrics, list | tuple):
            raise SpecError(f"metrics must be a list of MetricSpecs, got {safe_repr(self.metrics)}")
        for i, metric in enumerate(self.metrics):
            _instance(metric, MetricSpec, f"metrics[{i}]")

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> IngestionSpec:
        """Read Druid's ``dataSchema`` JSON: bare (optionally with ``tuningConfig`` and
        ``partitionsSpec`` next to its keys), as ``{"dataSchema", "tuningConfig"}``, or inside
        an ingestion spec's ``spec``. Raises ONE :class:`SpecError` listing every unknown key
        and bad value with its JSON path; keys Druid uses that mean nothing here (``ioConfig``,
        ``maxRowsInMemory``, ...) are logged at INFO."""
        if not isinstance(spec, Mapping):
            raise SpecError(f"an ingestion spec must be a dict, got {type(spec).__name__}")
        reader = DataSchemaReader(logger)
        schema, tuning, root = reader.ingestion(spec)
        built = build_spec(reader, schema, tuning, root=root)
        build_intervals(reader, schema)  # checked, though lake.append takes interval=
        if reader.problems or built is None:
            raise spec_error("this ingestion spec cannot be used", reader.problems)
        return built

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
                "timestampSpec": self.timestamp_spec.to_json(),
                "dimensionsSpec": dims.to_json(),
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
    if metric.type == "thetaSketch":
        obj["size"] = metric.size
        obj["isInputThetaSketch"] = metric.input_sketch
    if metric.type == "quantilesDoublesSketch":
        obj["k"] = metric.k  # its input, numbers or sketches, needs no flag in Druid's JSON
    if metric.type in ("stringFirst", "stringLast"):
        obj["maxStringBytes"] = metric.max_string_bytes
    return obj


# -- building the objects from the checked JSON -------------------------------------------


def build_spec(
    reader: JsonReader, schema: SchemaParts, tuning: TuningParts, *, root: str
) -> IngestionSpec | None:
    """The spec of what :class:`DataSchemaReader` read. Each section's own error is recorded
    at its path, errors across sections at ``root``; None when there is any problem."""
    fields: dict[str, Any] = {
        "timestamp_spec": _build(reader, schema.timestamp, lambda f: TimestampSpec(**f)),
        "dimensions_spec": _build(reader, schema.dimensions, lambda f: DimensionsSpec(**f)),
        "metrics": tuple(_build(reader, m, lambda f: MetricSpec(**f)) for m in schema.metrics),
        "granularity_spec": _build(reader, schema.granularity, lambda f: GranularitySpec(**f)),
        "transform_spec": _transform(reader, schema),
        "partitions_spec": _partitions(reader, schema, tuning),
        "max_parse_exceptions": tuning.max_parse_exceptions,
    }
    if reader.problems:
        return None
    return reader.attempt(root, lambda: IngestionSpec(**fields))


def build_intervals(reader: JsonReader, schema: SchemaParts) -> tuple[Interval, ...]:
    """The granularitySpec's ``intervals``, each checked (parsed, not empty)."""
    if schema.intervals is None:
        return ()
    found = []
    for i, text in enumerate(schema.intervals.fields["intervals"]):
        where = f"{schema.intervals.path}[{i}]"
        interval = reader.attempt(where, functools.partial(Interval.parse, text))
        if interval is not None and interval.is_empty():
            reader.problem(where, f"interval {text!r} is empty")
        elif interval is not None:
            found.append(interval)
    return tuple(found)


def _build(reader: JsonReader, section: Section, make: Callable[[dict[str, Any]], T]) -> T | None:
    if not section.ok:  # its problems are recorded already
        return None
    return reader.attempt(section.path, lambda: make(section.fields))


def _transform(reader: JsonReader, schema: SchemaParts) -> TransformSpec | None:
    transforms = [_build(reader, t, lambda f: ExpressionTransform(**f)) for t in schema.transforms]
    section = schema.filter
    filt = section.fields["filter"]
    if section.ok and isinstance(filt, Mapping):  # Druid's filter JSON, as Spark SQL
        filt, problems = druid_filter_sql(filt, section.path)
        reader.problems.extend(problems)
    if not section.ok or None in transforms:
        return None
    built = [t for t in transforms if t is not None]
    return reader.attempt(
        at(schema.path, "transformSpec"), lambda: TransformSpec(tuple(built), filt)
    )


def _partitions(
    reader: JsonReader, schema: SchemaParts, tuning: TuningParts
) -> PartitionsSpec | None:
    if tuning.partitions is not None and schema.partitions is not None:
        reader.problem(schema.partitions.path, f"given twice: here and in {tuning.partitions.path}")
        return None
    section = tuning.partitions or schema.partitions
    if section is None:
        section = Section(at(tuning.path, "partitionsSpec"), {})
    spec = _build(reader, section, partitions_spec_from_dict)
    force = tuning.force_guaranteed_rollup
    if spec is not None and force is not None and force != spec.perfect_rollup:
        reader.problem(
            at(tuning.path, "forceGuaranteedRollup"),
            f"{str(force).lower()} contradicts partitionsSpec type {spec.type_name!r}: perfect "
            "rollup comes with 'hashed', 'range' or 'single_dim' partitioning, best-effort "
            "rollup with 'dynamic'",
        )
    return spec


def metric_from_json(obj: Any, index: int) -> MetricSpec:
    """One aggregator from Druid's JSON (``index``: its place in ``metricsSpec``), read as
    strictly as a whole spec."""
    reader = DataSchemaReader(logger)
    section = reader.metric(obj, f"metricsSpec[{index}]")
    metric = _build(reader, section, lambda f: MetricSpec(**f))
    if reader.problems or metric is None:
        raise spec_error("this aggregator cannot be used", reader.problems)
    return metric


def _check_partition_dimensions(spec: IngestionSpec) -> None:
    partitions = spec.partitions_spec
    if not partitions.perfect_rollup:
        return
    named = partitions.partition_dimensions
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
