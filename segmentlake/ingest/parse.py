"""Input rows → parsed rows, as Spark expressions (Druid's input row parsing and transformSpec).

:func:`parse_input` adds to the input DataFrame each row's epoch-millisecond time truncated to
the query granularity, its time chunk, the typed metric inputs and ``__reason``: why the row is
rejected (``None`` when it is kept); also ``__raw_ms``, the untruncated time they are computed
from. Nothing is dropped here, so the ingestion counts every rejected row by reason in the very
job that writes the kept ones. The expressions are SQL text: a small append's plan is built on
the driver for every call, and SQL text costs one JVM call per column where Column functions
cost one per function, column and literal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from segmentlake.core.granularity import WEEK_ORIGIN_MILLIS, Granularity
from segmentlake.core.ingest_spec import (
    ExpressionTransform,
    IngestionSpec,
    MetricSpec,
    TimestampSpec,
)
from segmentlake.core.interval import MAX_MILLIS, MIN_MILLIS, Interval
from segmentlake.core.joda_pattern import SparkPattern
from segmentlake.core.names import quote_identifier, sql_string
from segmentlake.core.spec_reader import FIRST_LAST_TYPES
from segmentlake.errors import SpecError
from segmentlake.spark.user_sql import user_expression, with_user_sql

__all__ = [
    "CHUNK",
    "FILTERED",
    "OUTSIDE_INTERVAL",
    "REASON",
    "TIME",
    "ParsedInput",
    "cast_dimensions",
    "discovered_dimensions",
    "fate_counts",
    "floor_millis_sql",
    "is_parse_exception",
    "metric_input",
    "parse_input",
]

TIME = "__time_ms"  # epoch ms truncated to the query granularity
CHUNK = "__chunk_ms"  # start of the row's segment-granularity bucket
REASON = "__reason"  # why the row is rejected; null for rows kept
FILTERED = "filtered"  # thrown away by transformSpec.filter
OUTSIDE_INTERVAL = "outside interval"
_DAY = 86_400_000
_MONTH_UNITS = {1: "month", 3: "quarter", 12: "year"}
_RAW_MS = "__raw_ms"  # the parse's own column: epoch ms, null outside 0001-9999
_FILTER = "filter"  # the rejection condition that stands for transformSpec.filter
# Druid's "auto": ISO strings or epoch millis; a string of digits is millis.
_DIGITS = r"^\s*-?[0-9]+\s*$"
_TIME_TYPES = (T.TimestampType, T.TimestampNTZType, T.DateType)
_CAST_TYPES = {"string": "string", "long": "bigint", "float": "float", "double": "double"}
_THETA_INPUTS = (
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.StringType,
    T.BinaryType,
)


def is_parse_exception(reason: str | None) -> bool:
    """Whether a rejection counts against ``max_parse_exceptions`` (unparseable rows do;
    filtered rows and rows outside the interval are thrown away on purpose)."""
    return reason is not None and reason not in (FILTERED, OUTSIDE_INTERVAL)


def fate_counts(reasons: Sequence[str], *, weight: str | None = None) -> list[Column]:
    """Aggregates of the input rows (``rows_in``) and of those rejected for each of
    ``reasons`` (``reason<i>``) over parsed rows, each counting 1 — or the column named
    ``weight``, over rows that each stand for that many input rows (rolled-up rows with their
    input row count)."""
    # SQL text: one JVM call per aggregate, where Column functions take one per function and
    # literal (~0.3 ms each: 55 ms of the plan's driver time with four reasons).
    n = "1" if weight is None else quote_identifier(weight)
    reason = quote_identifier(REASON)
    by_reason = [
        f"coalesce(sum(CASE WHEN {reason} = {sql_string(r)} THEN {n} END), 0) AS reason{i}"
        for i, r in enumerate(reasons)
    ]
    return [F.expr(f"coalesce(sum({n}), 0) AS rows_in"), *map(F.expr, by_reason)]


def metric_input(metric: MetricSpec) -> str:
    """The column holding a metric's typed input."""
    return f"__in_{metric.name}"


@dataclass(frozen=True, slots=True)
class ParsedInput:
    """The input with the parse columns added, and the dimensions the spec resolved to."""

    frame: DataFrame
    dimensions: tuple[str, ...]
    timestamp_column: str
    reasons: tuple[str, ...]  # every value ``__reason`` can take


def parse_input(df: DataFrame, spec: IngestionSpec, *, interval: Interval | None) -> ParsedInput:
    """Cast the dimensions to their declared types, apply ``spec``'s transforms, parse times
    and metric inputs, mark rejected rows.

    Raises :class:`SpecError` before any Spark job when a named column is missing, a
    transform or filter is not valid Spark SQL, or the timestamp column's type does not fit
    the timestamp format.
    """
    declared = dict(spec.dimensions_spec.types)
    # Before the transforms, so they see typed values; after them, for the dimensions a
    # transform makes (or remakes): every declared type holds in the segments.
    frame = cast_dimensions(_transformed(cast_dimensions(df, declared), spec), declared)
    columns = {f.name: f.dataType for f in frame.schema.fields}
    timestamp = spec.timestamp_spec
    ts_col = timestamp.column
    missing = timestamp.missing_value
    # With Druid's missingValue, a row without the column has that time (as a null one does).
    absent = missing is not None and ts_col not in columns
    if not absent:
        _require(columns, [ts_col], "timestampSpec.column")
    _require(columns, [m.field_name for m in spec.metrics if m.field_name], "metricsSpec fieldName")
    dimensions = _dimensions(spec, columns)
    # Two projections, each a JVM analysis of the plan (~10-20 ms), and SQL text (see the
    # module's docstring): 0.056 s where Column functions and four projections took 0.097 s.
    raw = quote_identifier(ts_col)
    if absent:
        raw_ms = f"CAST({missing} AS BIGINT)"
    else:
        raw_ms = _epoch_millis_sql(raw, columns[ts_col], timestamp, ts_col)
        if missing is not None:
            raw_ms = f"CASE WHEN {raw} IS NULL THEN CAST({missing} AS BIGINT) ELSE {raw_ms} END"
    ms = quote_identifier(_RAW_MS)
    in_range = f"CASE WHEN {raw_ms} BETWEEN {MIN_MILLIS} AND {MAX_MILLIS - 1} THEN {raw_ms} END"
    granularity = spec.granularity_spec
    typed = {
        m.name: _typed_input_sql(m, columns[m.field_name]) for m in spec.metrics if m.field_name
    }
    # Only the rejections this input can meet: each is a branch every kept row evaluates and
    # a count the write job keeps (~0.035 s per 3 M rows each), and typed inputs (a TIMESTAMP
    # column, a BIGINT for a longSum) cannot fail to parse.
    rejections: list[tuple[str, str]] = []
    if missing is None:
        rejections.append(("null timestamp", f"{raw} IS NULL"))
    if not absent and not isinstance(columns[ts_col], _TIME_TYPES):
        unparseable = f"unparseable timestamp ({timestamp.format})"
        rejections.append((unparseable, f"({raw_ms}) IS NULL"))
    rejections.append(("timestamp outside 0001-9999", f"{ms} IS NULL"))
    rejections += [
        (
            f"unparseable {m.field_name!r} for {m.type} metric {m.name!r}",
            f"{quote_identifier(m.field_name)} IS NOT NULL AND ({typed[m.name].sql}) IS NULL",
        )
        for m in spec.metrics
        if m.field_name and typed[m.name].can_fail
    ]
    if spec.transform_spec.filter is not None:
        rejections.append((FILTERED, _FILTER))
    if interval is not None:
        outside = f"{ms} < {interval.start_millis} OR {ms} >= {interval.end_millis}"
        rejections.append((OUTSIDE_INTERVAL, outside))

    if spec.transform_spec.filter is not None:  # its errors, before it goes inside a CASE
        over = frame

        def bad_filter() -> str:
            return (
                f"transformSpec.filter {spec.transform_spec.filter!r} is not a valid Spark SQL "
                f"condition over the input columns {over.columns}"
            )

        with_user_sql(frame.where, spec.transform_spec.filter, bad_filter)
    frame = frame.withColumn(_RAW_MS, F.expr(in_range))
    query, segment = granularity.query_granularity, granularity.segment_granularity
    time_sql, chunk_sql = floor_millis_sql(query, ms), floor_millis_sql(segment, ms)
    if not query.nests_in(segment):  # as Druid, a row's time never precedes its chunk
        time_sql = f"greatest({time_sql}, {chunk_sql})"
    parsed = {
        TIME: F.expr(time_sql),
        CHUNK: F.expr(chunk_sql),
        **{
            metric_input(m): F.expr(_input_sql(m, typed[m.name], columns[m.field_name], ms))
            for m in spec.metrics
            if m.field_name
        },
        REASON: _first_reason(rejections, spec.transform_spec.filter),
    }
    frame = frame.withColumns(parsed)
    return ParsedInput(frame, dimensions, ts_col, tuple(text for text, _ in rejections))


def _input_sql(metric: MetricSpec, typed: _TypedInput, dtype: T.DataType, ms: str) -> str:
    """SQL of a metric's input column: the typed value, paired with the row's time (epoch
    ms, before query granularity) for a first / last aggregator reading raw values."""
    if metric.type not in FIRST_LAST_TYPES or isinstance(dtype, T.StructType):
        return typed.sql
    return f"named_struct('{PAIR_TIME}', {ms}, '{PAIR_VALUE}', {typed.sql})"


def _first_reason(rejections: Sequence[tuple[str, str]], keep: str | None) -> Column:
    """``CASE WHEN <condition> THEN <reason> ... END`` over ``rejections`` (reason, condition
    SQL), the first that applies; the condition :data:`_FILTER` stands for rows the filter
    ``keep`` does not keep, which is parsed as an expression of its own, never spliced into
    SQL text (a user's SQL could close the CASE and change what it means)."""
    if keep is None:  # one expression: one JVM call
        whens = " ".join(f"WHEN {condition} THEN {sql_string(t)}" for t, condition in rejections)
        return F.expr(f"CASE {whens} END")
    reason: Column | None = None
    for text, condition in rejections:
        if condition == _FILTER:
            assert keep is not None
            applies = ~F.coalesce(user_expression(keep), F.lit(False))
        else:
            applies = F.expr(condition)
        reason = F.when(applies, text) if reason is None else reason.when(applies, text)
    assert reason is not None
    return reason


def floor_millis_sql(granularity: Granularity, ms: str) -> str:
    """SQL of the start (epoch ms) of ``granularity``'s bucket holding ``ms`` (an expression
    of epoch ms), computed in UTC whatever the session time zone (as
    :meth:`Granularity.bucket_start_millis`)."""
    if granularity is Granularity.NONE:
        return ms
    if granularity is Granularity.ALL:
        return f"CASE WHEN {ms} IS NOT NULL THEN CAST({MIN_MILLIS} AS BIGINT) END"
    if granularity is Granularity.WEEK:
        return f"({ms} - pmod({ms} - {WEEK_ORIGIN_MILLIS}, {granularity.fixed_millis}))"
    if granularity.fixed_millis:
        return f"({ms} - pmod({ms}, {granularity.fixed_millis}))"
    # Calendar units through a DATE, which carries no time zone.
    day = f"CAST(({ms} - pmod({ms}, {_DAY})) / {_DAY} AS INT)"
    unit = sql_string(_MONTH_UNITS[granularity.months])
    return f"(CAST(unix_date(trunc(date_from_unix_date({day}), {unit})) AS BIGINT) * {_DAY})"


def _transformed(df: DataFrame, spec: IngestionSpec) -> DataFrame:
    for t in spec.transform_spec.transforms:

        def bad_transform(t: ExpressionTransform = t, before: DataFrame = df) -> str:
            return (
                f"transform {t.name!r}: {t.expression!r} is not a valid Spark SQL expression "
                f"over the input columns {before.columns}"
            )

        def add(value: Column, name: str = t.name, before: DataFrame = df) -> DataFrame:
            return before.withColumn(name, value)

        df = with_user_sql(add, t.expression, bad_transform)
    return df


def cast_dimensions(frame: DataFrame, types: Mapping[str, str]) -> DataFrame:
    """``frame`` with each column named in ``types`` cast to that Druid dimension type:
    ``string``, ``long``, ``float``, ``double`` with ``try_cast`` (a value that is not a number
    becomes null); ``auto`` keeps the column's type. Names ``frame`` lacks are skipped (a
    transform may make them). A string dimension of arrays, maps or structs is refused: there
    are no multi-value or nested dimensions."""
    if not types:  # no schema to resolve (it costs an analysis of the plan)
        return frame
    columns = {f.name: f.dataType for f in frame.schema.fields}
    casts = {}
    for name, kind in types.items():
        dtype = columns.get(name)
        if dtype is None or kind == "auto":
            continue
        if isinstance(dtype, T.ArrayType | T.MapType | T.StructType):
            raise SpecError(
                f"dimension {name!r} holds {dtype.simpleString()} values; multi-value and "
                "nested dimensions are not supported: pick a value with a transform (e.g. "
                f"element_at(`{name}`, 1)) or give the dimension type auto"
            )
        target = _CAST_TYPES[kind]
        if dtype.simpleString() != target:
            casts[name] = F.col(name).try_cast(target)
    return frame.withColumns(casts) if casts else frame


def _require(columns: dict[str, T.DataType], names: Sequence[str], where: str) -> None:
    missing = [n for n in names if n not in columns]
    if missing:
        raise SpecError(f"{where} names {missing}, not among the input columns {sorted(columns)}")


def _dimensions(spec: IngestionSpec, columns: dict[str, T.DataType]) -> tuple[str, ...]:
    explicit = spec.dimensions_spec.dimensions
    if explicit is not None:
        _require(columns, list(explicit), "dimensionsSpec.dimensions")
        return explicit
    return discovered_dimensions(spec, columns)


def discovered_dimensions(spec: IngestionSpec, columns: Iterable[str]) -> tuple[str, ...]:
    """The dimensions of a spec that lists none: every column but the timestamp, the metrics'
    inputs and outputs and the exclusions."""
    skip = {spec.timestamp_spec.column, *spec.dimensions_spec.exclusions}
    skip |= {m.field_name for m in spec.metrics if m.field_name}
    skip |= {m.name for m in spec.metrics}
    # Hidden columns (``__time``, ``__segment`` of a re-ingested read) are never dimensions.
    return tuple(c for c in columns if c not in skip and not c.startswith("__"))


def _epoch_millis_sql(raw: str, dtype: T.DataType, timestamp: TimestampSpec, name: str) -> str:
    """SQL of the timestamp column ``raw`` (quoted) as epoch ms (null where it does not
    parse)."""
    fmt = timestamp.format
    if isinstance(dtype, T.TimestampType):
        return f"unix_millis({raw})"
    if isinstance(dtype, T.TimestampNTZType):
        # A wall-clock time without zone is read as UTC, like strings without an offset: from
        # its fields, as no conversion through the session's zone is exact in a DST gap.
        return (
            f"(CAST(unix_date(CAST({raw} AS DATE)) AS BIGINT) * {_DAY} + hour({raw}) * 3600000 "
            f"+ minute({raw}) * 60000 + CAST(floor(date_part('SECOND', {raw}) * 1000) AS BIGINT))"
        )
    if isinstance(dtype, T.DateType):
        return f"(CAST(unix_date({raw}) AS BIGINT) * {_DAY})"
    numeric = isinstance(dtype, T.NumericType)
    if not numeric and not isinstance(dtype, T.StringType):
        raise SpecError(
            f"timestampSpec.column {name!r} has type {dtype.simpleString()}; expected a string, "
            "a number, a date or a timestamp"
        )
    pattern = timestamp.spark_pattern
    if pattern is not None:  # Druid parses a number's digits with the pattern too
        return _pattern_millis_sql(f"CAST({raw} AS STRING)" if numeric else raw, pattern)
    if fmt == "iso":
        if numeric:
            raise SpecError(
                f"timestampSpec.format 'iso' needs a string column, but {name!r} is "
                f"{dtype.simpleString()}; use 'millis', 'posix', 'micro' or 'nano'"
            )
        return _iso_millis_sql(raw)
    if fmt == "auto":
        if numeric:
            return _scaled_sql(raw, 1.0)
        millis, iso = _scaled_sql(raw, 1.0), _iso_millis_sql(raw)
        return f"CASE WHEN {raw} RLIKE {sql_string(_DIGITS)} THEN {millis} ELSE {iso} END"
    factor = {"millis": 1.0, "posix": 1000.0, "ruby": 1000.0, "micro": 1e-3, "nano": 1e-6}[fmt]
    return _scaled_sql(raw, factor)


def _iso_millis_sql(text: str) -> str:
    """SQL of the ISO-8601 string ``text`` as epoch ms. A value without a zone is a UTC time,
    as Druid reads it, whatever the Spark session's time zone (Spark would read it in that
    zone): it is parsed with ``Z`` appended (a date, month or year alone completed to its
    first instant), which fails for a value that has a zone, parsed as it is. One parse for
    the usual ``...Z`` value."""
    value = f"trim({text})"
    # The value with Z appended, or the rest of a day, month or year alone: all UTC.
    as_utc = [
        f"try_to_timestamp(concat({value}, {sql_string(rest)}))"
        for rest in ("Z", "T00:00:00Z", "-01T00:00:00Z", "-01-01T00:00:00Z")
    ]
    zoned = f"try_to_timestamp({value})"
    parsed = (
        f"CASE WHEN endswith({value}, 'Z') THEN {zoned} "
        f"ELSE coalesce({', '.join(as_utc)}, {zoned}) END"
    )
    return f"unix_millis({parsed})"


def _pattern_millis_sql(text: str, pattern: SparkPattern) -> str:
    """SQL of the string ``text`` parsed with a Joda pattern's Spark form, as epoch ms; null
    unless the whole value has the pattern's shape (Spark's ``try_to_timestamp`` raises, and
    fails the job, on a year such as ``0000``). A leading day-of-week name is dropped first;
    a two-digit year is taken from the century Joda reads (see
    :mod:`~segmentlake.core.joda_pattern`), a hundred years before Spark's 2000-2099 for the
    years after next 19."""
    value = f"regexp_replace({text}, '^[A-Za-z]+', '')" if pattern.weekday else text
    if pattern.zoned:
        ts = f"try_to_timestamp({value}, {sql_string(pattern.pattern)})"
    else:  # a UTC time, as Joda's default zone in Druid, not one in the session's zone
        utc = sql_string(f"{pattern.pattern}XXX")
        ts = f"try_to_timestamp(concat({value}, 'Z'), {utc})"
    if pattern.two_digit_year:
        last = datetime.now(UTC).year + 19  # Joda's pivot: the year 30 years ago, +- 50
        ts = f"(CASE WHEN year({ts}) > {last} THEN {ts} - INTERVAL 100 YEARS ELSE {ts} END)"
    return f"CASE WHEN {text} RLIKE {sql_string(f'^{pattern.shape}$')} THEN unix_millis({ts}) END"


def _scaled_sql(raw: str, factor: float) -> str:
    """SQL of an epoch number times ``factor`` as whole ms; null when not a number or beyond
    any representable time (so huge values never overflow a long)."""
    value = f"(try_cast({raw} AS DOUBLE) * {_double(factor)})"
    low, high = _double(float(MIN_MILLIS)), _double(float(MAX_MILLIS))
    return f"CASE WHEN {value} BETWEEN {low} AND {high} THEN floor({value}) END"


def _double(value: float) -> str:
    """A DOUBLE literal (a bare ``1.0`` is a DECIMAL in Spark SQL)."""
    return f"CAST({sql_string(repr(value))} AS DOUBLE)"


# What a first / last aggregator keeps per rolled-up row: its value and that value's time.
PAIR_TIME, PAIR_VALUE = "time", "value"
_FIRST_LAST_VALUE = {"long": "BIGINT", "double": "DOUBLE", "float": "FLOAT", "string": "STRING"}


def first_last_value_type(metric: MetricSpec) -> str:
    """The SQL type of a first / last aggregator's value (``longFirst`` -> ``BIGINT``)."""
    return _FIRST_LAST_VALUE[metric.type.removesuffix("First").removesuffix("Last")]


def _first_last_input(metric: MetricSpec, dtype: T.DataType, raw: str) -> _TypedInput:
    """A first / last aggregator's input: the value cast to its type (a string one cut to
    ``maxStringBytes`` characters) or, for a column of the stored pairs (compaction), the
    pairs as they are; the row's time is paired with it in :func:`parse_input`."""
    if isinstance(dtype, T.StructType) and {f.name for f in dtype.fields} == {
        PAIR_TIME,
        PAIR_VALUE,
    }:
        return _TypedInput(raw, False)
    kind = first_last_value_type(metric)
    if kind == "STRING":
        return _TypedInput(f"left(CAST({raw} AS STRING), {int(metric.max_string_bytes)})", False)
    numeric = isinstance(dtype, T.NumericType)
    if kind == "BIGINT":
        numeric = isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType)
    return _TypedInput(f"try_cast({raw} AS {kind})", not numeric)


class _TypedInput(NamedTuple):
    """SQL of a metric's input as its aggregator takes it, and whether a non-null input can
    fail to become that (a string for a longSum can; a BIGINT cannot)."""

    sql: str
    can_fail: bool


def _typed_input_sql(metric: MetricSpec, dtype: T.DataType) -> _TypedInput:
    assert metric.field_name is not None
    raw = quote_identifier(metric.field_name)
    if metric.type in FIRST_LAST_TYPES:  # before the prefixes: doubleFirst is no doubleSum
        return _first_last_input(metric, dtype, raw)
    if metric.type.startswith("long"):
        integer = isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType)
        return _TypedInput(f"try_cast({raw} AS BIGINT)", not integer)
    if metric.type.startswith("double"):
        return _TypedInput(f"try_cast({raw} AS DOUBLE)", not isinstance(dtype, T.NumericType))
    if metric.type.startswith("float"):
        return _TypedInput(f"try_cast({raw} AS FLOAT)", not isinstance(dtype, T.NumericType))
    if metric.type == "HLLSketchMerge" or metric.input_sketch:
        if not isinstance(dtype, T.BinaryType):
            kind, maker, build = {
                "HLLSketchMerge": ("HLL", "hll_sketch_agg", "HLLSketchBuild"),
                "thetaSketch": ("theta", "theta_sketch_agg", "isInputThetaSketch false"),
                "quantilesDoublesSketch": ("KLL", "kll_sketch_agg_double", "numbers"),
            }[metric.type]
            raise SpecError(
                f"metric {metric.name!r} ({metric.type}) unions {kind} sketches: its fieldName "
                f"{metric.field_name!r} must be a BINARY column of sketches (as {maker} "
                f"makes), not {dtype.simpleString()}; use {build} for raw values"
            )
        return _TypedInput(raw, False)
    if metric.type == "quantilesDoublesSketch":
        if isinstance(dtype, T.BinaryType):
            raise SpecError(
                f"metric {metric.name!r} (quantilesDoublesSketch) sketches numbers, but its "
                f"fieldName {metric.field_name!r} is BINARY; sketches are merged when a "
                "datasource is compacted, not when they are ingested"
            )
        return _TypedInput(f"try_cast({raw} AS DOUBLE)", not isinstance(dtype, T.NumericType))
    if metric.type == "thetaSketch":  # Spark's theta sketch takes these types as they are
        if isinstance(dtype, _THETA_INPUTS):
            return _TypedInput(raw, False)
        if isinstance(dtype, T.ByteType | T.ShortType):
            return _TypedInput(f"CAST({raw} AS INT)", False)  # hashed as the INT it is
        if isinstance(dtype, T.DecimalType):
            return _TypedInput(f"CAST({raw} AS DOUBLE)", False)
        return _TypedInput(f"try_cast({raw} AS STRING)", False)
    # HLLSketchBuild: Spark's sketch takes int, bigint, string or binary values.
    if isinstance(dtype, T.IntegerType | T.LongType | T.StringType | T.BinaryType):
        return _TypedInput(raw, False)
    return _TypedInput(f"try_cast({raw} AS STRING)", False)
