"""Strict reading of user input: every value has the type its field needs, every key is known.

Every reader of user input in the pure core either returns a valid object or raises ONE
:class:`SpecError` naming each bad field (a JSON path such as ``metricsSpec[1].lgK``) and what
would be right. Nothing is coerced: ``"false"`` is not a flag, ``"5"`` is not a number, and an
unknown key (a typo such as ``"formt"``) is refused with the accepted keys listed. Three layers:

* value checks for the frozen dataclasses (:func:`check_int`, :func:`check_flag`, ...), enums
  whose unknown values are SpecErrors (:class:`StrictEnumType`), and :func:`safe_repr` /
  :func:`show`, which print any value briefly without failing on it (a deeply nested list, an
  integer of 10,000 digits);
* :class:`JsonReader`, which collects every problem (path: message) before failing;
* :class:`DataSchemaReader`, which reads Druid's ``dataSchema`` and ``tuningConfig`` JSON
  into checked plain values (:class:`SchemaParts`, :class:`TuningParts`). The objects are built
  from them by :func:`segmentlake.core.ingest_spec.build_spec`, for both
  :meth:`IngestionSpec.from_dict` and the Druid task reader
  (:mod:`segmentlake.druid.ingest_task_reader`): one reader, not two.

This module is the bottom of the core's readers: it imports nothing of segmentlake but the
errors, so every other module can use it.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from segmentlake.errors import SpecError

__all__ = [
    "AGGREGATOR_TYPES",
    "DIMENSION_TYPES",
    "FIRST_LAST_TYPES",
    "INT32_MAX",
    "INT64_MAX",
    "TASK_TYPES",
    "TUNING_NO_EFFECT",
    "DataSchemaReader",
    "JsonReader",
    "SchemaParts",
    "Section",
    "StrictEnumType",
    "TuningParts",
    "at",
    "check_flag",
    "check_int",
    "check_number",
    "check_path",
    "check_text",
    "int_problem",
    "is_int",
    "safe_repr",
    "show",
    "spec_error",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)

# Druid's longs and ints (Java): a value beyond them is no Druid value, and the metadata
# stores them as BIGINT / INT columns (and orjson refuses integers beyond 64 bits).
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

TASK_TYPES = ("index_parallel", "index")
# "auto" keeps the input's type (Druid's type-aware schema discovery); the others are cast.
DIMENSION_TYPES = ("string", "long", "float", "double", "auto")
_HLL_TYPES = ("HLLSketchBuild", "HLLSketchMerge")

# -- printing any value -----------------------------------------------------------------------


class _Brief(reprlib.Repr):
    """reprlib's bounded repr (depth, items, length), which also survives integers too long
    for ``str`` (Python refuses more than 4300 digits) and objects whose repr fails."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 4
        self.maxstring = 40
        self.maxother = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 64:
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    def repr_instance(self, x: object, level: int) -> str:
        try:
            return super().repr_instance(x, level)
        except Exception:  # a broken __repr__ must not hide the real problem
            return f"<{type(x).__name__}>"


_BRIEF = _Brief()


def safe_repr(value: object) -> str:
    """A short Python repr of ``value`` (``'text'``, ``[1, 2, ...]``), whatever it is."""
    try:
        return _BRIEF.repr(value)
    except Exception:  # e.g. a dict subclass whose items() fails
        return f"<{type(value).__name__}>"


def show(value: object) -> str:
    """A short JSON-style rendering of ``value`` (``"text"``, ``true``, ``null``) for
    messages about JSON input; containers are shown as by :func:`safe_repr`."""
    if isinstance(value, str):
        text = json.dumps(value[:80])
    elif value is None or isinstance(value, bool):
        text = json.dumps(value)
    else:
        text = safe_repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def at(path: str, key: object) -> str:
    """The JSON path of ``key`` inside ``path`` (``granularitySpec.rollup``)."""
    name = key if isinstance(key, str) else safe_repr(key)
    return f"{path}.{name}" if path else name


# -- value checks for the dataclasses ---------------------------------------------------------


def is_int(value: object) -> bool:
    """An integer that is not a bool (``True`` is an int to Python, not to JSON)."""
    return isinstance(value, int) and not isinstance(value, bool)


def int_problem(value: object, minimum: int | None = None, maximum: int = INT64_MAX) -> str | None:
    """What is wrong with ``value`` as an integer in ``[minimum, maximum]`` ("must be ...,
    got ..."), or None when nothing is."""
    low = -INT64_MAX - 1 if minimum is None else minimum
    if is_int(value) and low <= value <= maximum:  # type: ignore[operator]
        return None
    if minimum is None:
        wanted = "an integer"
    elif maximum >= INT64_MAX:
        wanted = f"an integer >= {minimum}"
    else:
        wanted = f"an integer in {minimum}..{maximum}"
    return f"must be {wanted}, got {show(value)}"


def check_int(
    value: object,
    where: str,
    *,
    minimum: int | None = None,
    maximum: int = INT64_MAX,
) -> int:
    """``value`` if it is an integer in ``[minimum, maximum]``; else :class:`SpecError`."""
    problem = int_problem(value, minimum, maximum)
    if problem is not None:
        raise SpecError(f"{where} {problem}")
    return value  # type: ignore[return-value]


def check_number(
    value: object,
    where: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    below: float | None = None,
) -> float:
    """``value`` if it is a finite number (not a bool) within the bounds; ``below`` is an
    exclusive upper bound. Integers are numbers too (JSON does not tell ``1`` from ``1.0``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{where} must be a number, got {show(value)}")
    # A huge integer is a finite number Python cannot make a float of.
    if (isinstance(value, int) and value.bit_length() > 63) or not math.isfinite(value):
        raise SpecError(f"{where} must be a finite number within ±2^63, got {show(value)}")
    if (
        (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
        or (below is not None and value >= below)
    ):
        low = "" if minimum is None else f">= {minimum}"
        high = f"<= {maximum}" if maximum is not None else ""
        high = f"< {below}" if below is not None else high
        bounds = " and ".join(b for b in (low, high) if b)
        raise SpecError(f"{where} must be a number {bounds}, got {show(value)}")
    return value


def check_flag(value: object, where: str) -> bool:
    """``value`` if it is a bool (``"false"`` is not: ``bool("false")`` is True)."""
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, got {show(value)}")
    return value


def check_list(value: object, where: str, *, what: str) -> list[Any]:
    """``value``'s items as a list, if it is a list, tuple, set or other iterable that is not
    a string, bytes or a mapping (a single name passed where a list belongs would otherwise be
    read one character at a time)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise SpecError(f"{where} must be a list of {what}, got {show(value)}")
    return list(value)


def check_text(value: object, where: str, *, what: str = "a non-empty string") -> str:
    """``value`` if it is a non-blank string."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where} must be {what}, got {show(value)}")
    return value


def check_path(value: object, where: str) -> str:
    """``value`` if it is a non-blank path without NUL characters (no file system or object
    store takes one; the store would fail only at the first write)."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise SpecError(
            f"{where} must be a non-empty path without NUL characters, got {safe_repr(value)}"
        )
    return value


class StrictEnumType(enum.EnumType):
    """The metaclass of enums whose lookup of an unknown value raises their ``_missing_``'s
    :class:`SpecError`, also for values Enum cannot print in its own error message (it
    formats the value even after ``_missing_`` raised, and an integer of 4300+ digits does
    not format)."""

    def __call__(cls: type[E], *args: Any, **kwargs: Any) -> E:  # type: ignore[misc]
        try:
            return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]
        except SpecError:
            raise
        except ValueError:
            if len(args) == 1 and not kwargs:
                cls._missing_(args[0])
            raise


def spec_error(header: str, problems: Sequence[str]) -> SpecError:
    """One error listing every problem under ``header``."""
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    return SpecError("\n".join([f"{header} ({count}):", *(f"  - {p}" for p in problems)]))


# -- the problem-collecting reader ------------------------------------------------------------


class JsonReader:
    """Reads JSON (dicts, lists, strings, numbers, bools, None), collecting every problem as
    ``path: message`` instead of failing on the first. Keys "without effect" are logged at INFO
    to ``log`` (the reading module's logger, so its users' logging settings apply)."""

    def __init__(self, log: logging.Logger | None = None) -> None:
        self.problems: list[str] = []
        self.log = log or logger

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)

    def attempt(self, path: str, build: Callable[[], T]) -> T | None:
        """``build()``, or None with its :class:`SpecError` recorded at ``path``."""
        try:
            return build()
        except SpecError as e:
            self.problem(path, str(e))
            return None

    def no_effect(self, path: str, reason: str) -> None:
        self.log.info("%s has no effect on Spark: %s", path, reason)

    def object(self, value: Any, path: str, *, required: bool = False) -> Mapping[str, Any]:
        """``value`` if it is a JSON object; else reports it (a missing one only when
        ``required``) and returns an empty object."""
        if isinstance(value, Mapping):
            return value
        if value is not None or required:
            what = "is required" if value is None else f"must be a JSON object, got {show(value)}"
            self.problem(path, what)
        return {}

    def keys(
        self,
        obj: Mapping[Any, Any],
        path: str,
        understood: Iterable[str],
        no_effect: Mapping[str, str] | None = None,
    ) -> None:
        """Refuse unknown keys, listing the accepted ones; log the ones without effect."""
        known = set(understood)
        quiet = no_effect or {}
        for key in obj:
            if not isinstance(key, str):
                self.problem(at(path, key), "keys must be strings (JSON object keys)")
            elif key in quiet:
                self.no_effect(at(path, key), quiet[key])
            elif key not in known:
                accepted = ", ".join(sorted(known | set(quiet)))
                self.problem(at(path, key), f"not supported; accepted here: {accepted}")

    def flag(self, obj: Mapping[str, Any], key: str, path: str) -> bool | None:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        self.problem(at(path, key), f"must be true or false, got {show(value)}")
        return None

    def integer(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        minimum: int,
        maximum: int = INT64_MAX,
    ) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        problem = int_problem(value, minimum, maximum)
        if problem is None:
            return value  # type: ignore[no-any-return]
        self.problem(at(path, key), problem)
        return None

    def text(
        self, obj: Mapping[str, Any], key: str, path: str, *, required: bool = False
    ) -> str | None:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
        if value is not None or required:
            got = "it is missing" if value is None else f"got {show(value)}"
            self.problem(at(path, key), f"must be a non-empty string; {got}")
        return None

    def texts(self, obj: Mapping[str, Any], key: str, path: str) -> list[str]:
        value = obj.get(key)
        if value is None:
            return []
        if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            return value
        self.problem(at(path, key), f"must be a list of non-empty strings, got {show(value)}")
        return []

    def items(self, obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
        """The list at ``key`` (empty when missing or null)."""
        value = obj.get(key)
        if value is None:
            return []
        if isinstance(value, list):
            return value
        self.problem(at(path, key), f"must be a list, got {show(value)}")
        return []

    def one_of(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        accepted: Sequence[str],
        default: str,
        *,
        what: str = "",
    ) -> str:
        """The value at ``key`` if it is one of ``accepted`` (``default`` when missing);
        ``what`` names the value in the message ("dimension type")."""
        value = obj.get(key, default)
        if isinstance(value, str) and value in accepted:
            return value
        named = f"{what} {show(value)}".lstrip()
        self.problem(at(path, key), f"{named} is not supported; accepted: {', '.join(accepted)}")
        return default


# -- Druid's dataSchema and tuningConfig ------------------------------------------------------

# Druid aggregator type -> whether it reads an input column (count does not).
AGGREGATOR_TYPES: Mapping[str, bool] = {
    "count": False,
    "longSum": True,
    "doubleSum": True,
    "longMin": True,
    "longMax": True,
    "doubleMin": True,
    "doubleMax": True,
    # Stored as FLOAT (a floatSum adds up as DOUBLE and is rounded once, at the end).
    "floatSum": True,
    "floatMin": True,
    "floatMax": True,
    # Druid's DataSketches HLL build aggregator; built with Spark's hll_sketch_agg, so
    # sketches of different segments merge later (hll_union_agg).
    "HLLSketchBuild": True,
    # Druid's DataSketches HLL merge aggregator: unions sketches (binary) already built, e.g.
    # by an earlier ingestion; compaction re-aggregates HLLSketchBuild metrics with it.
    "HLLSketchMerge": True,
    # Druid's DataSketches theta aggregator, built with Spark's theta_sketch_agg (the same
    # library): raw values, or with isInputThetaSketch theta sketches already built, unioned.
    "thetaSketch": True,
    # Druid's DataSketches quantiles aggregator over numbers, built with Spark's KLL sketch
    # (kll_sketch_agg_double): approximate quantiles and ranks, merged by compaction.
    "quantilesDoublesSketch": True,
    # Druid's first/last aggregators: the value of the earliest (latest) row of each rolled-up
    # row, kept with its time as STRUCT<time BIGINT, value> so compaction can combine them.
    **{
        f"{t}{end}": True
        for t in ("long", "double", "float", "string")
        for end in ("First", "Last")
    },
}
FIRST_LAST_TYPES = frozenset(
    f"{t}{end}" for t in ("long", "double", "float", "string") for end in ("First", "Last")
)

_IN_MEMORY = (
    "Druid's threshold for persisting in-heap rows; Spark streams rows through its tasks and "
    "spills by itself"
)
_PERSISTS = "Druid's intermediate persists; segmentlake writes each segment once, with none"
_SUBTASKS = "Druid's subtask scheduling; Spark runs the task on its executors' cores"
_PUSH = "Druid's wait for pushing segments to deep storage; the Spark job writes them"
_PARSE_LOG = (
    "Druid's log of unparseable rows; segmentlake counts them by reason in the task report "
    "and shows the first ones when the task fails"
)
AVAILABLE = (
    "segments are readable as soon as the publish commit lands; there are no Historicals to "
    "wait for"
)

# tuningConfig keys that only steer Druid's own processes.
TUNING_NO_EFFECT: Mapping[str, str] = {
    "maxRowsInMemory": _IN_MEMORY,
    "rowFlushBoundary": _IN_MEMORY,
    "maxBytesInMemory": _IN_MEMORY,
    "skipBytesInMemoryOverheadCheck": _IN_MEMORY,
    "appendableIndexSpec": "Druid's in-heap index implementation; Spark holds no such index",
    "maxColumnsToMerge": _PERSISTS,
    "maxPendingPersists": _PERSISTS,
    "numPersistThreads": _PERSISTS,
    "indexSpecForIntermediatePersists": _PERSISTS,
    "indexSpec": (
        "Druid's segment file format (bitmaps, compression, encodings); segmentlake segments "
        "are Parquet files, compressed as spark.sql.parquet.compression.codec says"
    ),
    "buildV9Directly": "Druid 0.12's segment format switch; segments are Parquet files",
    "forceExtendableShardSpecs": (
        "Druid 0.12's switch to appendable (numbered) shard specs, which dynamic "
        "partitioning always uses"
    ),
    "splitHintSpec": (
        "how Druid splits the input among subtasks; Spark splits files into partitions itself "
        "(spark.sql.files.maxPartitionBytes)"
    ),
    "maxNumConcurrentSubTasks": _SUBTASKS,
    "maxNumSubTasks": _SUBTASKS,
    "taskStatusCheckPeriodMs": _SUBTASKS,
    "chatHandlerTimeout": _SUBTASKS,
    "chatHandlerNumRetries": _SUBTASKS,
    "maxRetry": "Druid's subtask retries; Spark retries failed tasks (spark.task.maxFailures)",
    "maxNumSegmentsToMerge": "Druid's merge fan-in; perfect rollup is one Spark shuffle",
    "totalNumMergeTasks": (
        "Druid's number of merge tasks; the shuffle's partitions are Spark's "
        "(spark.sql.shuffle.partitions)"
    ),
    "pushTimeout": _PUSH,
    "publishTimeout": _PUSH,
    "segmentWriteOutMediumFactory": "where Druid buffers segment files; Spark writes Parquet",
    "logParseExceptions": _PARSE_LOG,
    "maxSavedParseExceptions": _PARSE_LOG,
    "awaitSegmentAvailabilityTimeoutMillis": AVAILABLE,
}
_DIMENSION_NO_EFFECT = {
    "createBitmapIndex": "Druid's bitmap index; Parquet segments have none (Delta skips files)",
}
_DIMENSIONS_NO_EFFECT = {
    "forceSegmentSortByTime": "the row order inside Druid's segment files; reads never rely on it",
}
_THETA_NO_EFFECT = {
    "shouldFinalize": "Druid's query-time finalization; readers call theta_sketch_estimate",
    "errorBoundsStdDev": "Druid's query-time error bounds of an estimate",
}
_HYPER_NO_EFFECT = {
    "round": "rounding of Druid's query results; hll_sketch_estimate returns whole numbers",
}
_DEFAULT_HLL_LG_K = 12  # MetricSpec's default
_QUANTILES_NO_EFFECT = {
    "maxStreamLength": "a bound Druid's quantiles sketch needs; Spark's KLL sketch needs none",
    "shouldFinalize": "Druid's query-time finalization; readers call "
    "kll_sketch_get_quantile_double",
}
_HLL_NO_EFFECT = {
    "tgtHllType": (
        "how a sketch stores its buckets (4, 6 or 8 bits); Spark builds HLL_8 sketches, whose "
        "estimates and unions are the same"
    ),
    "round": "rounding of Druid's query results; hll_sketch_estimate returns whole numbers",
    "shouldFinalize": "Druid's query-time finalization; readers call hll_sketch_estimate",
}
# Where an IngestionSpec (lake.append / lake.overwrite) finds what a Druid task says elsewhere.
_API_NO_EFFECT = {
    "dataSource": "the datasource is the one lake.append / lake.overwrite is given",
    "intervals": "lake.append / lake.overwrite take the interval as their interval= argument",
    "ioConfig": "the rows are the DataFrame given to lake.append / lake.overwrite",
    "parseSpec": "the rows are a DataFrame, already parsed; only its timestampSpec and "
    "dimensionsSpec count",
    "type": "an IngestionSpec is the task's dataSchema and tuningConfig; lake.append / "
    "lake.overwrite run it",
    "id": "lake.append / lake.overwrite take the task id as their task_id= argument",
    "context": "lake.append / lake.overwrite take priority= and lock_timeout_s= arguments",
    "resource": "Druid's worker slots; the Spark application runs the task",
}
# Druid's pre-partitionsSpec tuningConfig keys, read into a partitionsSpec as Druid does.
DEPRECATED_PARTITIONING = (
    "maxRowsPerSegment",
    "targetPartitionSize",
    "maxTotalRows",
    "numShards",
    "partitionDimensions",
)
_SECTIONS = ("timestampSpec", "dimensionsSpec", "metricsSpec", "granularitySpec", "transformSpec")


@dataclass(frozen=True, slots=True)
class Section:
    """One object to build: its JSON path, its checked constructor arguments, and whether it
    was read without problems (a section with problems is not built: its problems say all)."""

    path: str
    fields: dict[str, Any]
    ok: bool = True


@dataclass(frozen=True, slots=True)
class SchemaParts:
    """What :meth:`DataSchemaReader.data_schema` read. ``granularity`` holds the raw
    granularity values (the builder parses them), ``filter`` a Spark SQL string or Druid's
    filter JSON, ``intervals`` the raw interval strings; ``partitions`` is a partitionsSpec
    given in the dataSchema itself (the API's form) and ``parser_format`` Druid 0.12's
    ``parser.parseSpec`` input format with its path."""

    path: str
    datasource: str | None
    timestamp: Section
    dimensions: Section
    metrics: tuple[Section, ...]
    granularity: Section
    intervals: Section | None
    transforms: tuple[Section, ...]
    filter: Section
    partitions: Section | None = None
    parser_format: tuple[Mapping[str, Any], str] | None = None


@dataclass(frozen=True, slots=True)
class TuningParts:
    """What :meth:`DataSchemaReader.tuning` read: the partitionsSpec JSON (given, or built from
    Druid's deprecated keys; None when the tuningConfig says nothing about partitioning)."""

    path: str
    partitions: Section | None = None
    force_guaranteed_rollup: bool | None = None
    max_parse_exceptions: int = 0


class DataSchemaReader(JsonReader):
    """Reads Druid's ``dataSchema`` and ``tuningConfig`` JSON into checked parts, collecting
    every problem. Shared by :meth:`IngestionSpec.from_dict` (``task=False``) and the Druid
    task reader (``task=True``), which differ only where a task says more: a task needs its
    ``dataSource`` and ``intervals``; the API logs them as without effect."""

    # -- the forms IngestionSpec.from_dict reads ---------------------------------------------

    def ingestion(self, spec: Mapping[str, Any]) -> tuple[SchemaParts, TuningParts, str]:
        """The dataSchema and tuningConfig of an ingestion spec in any of its forms: a bare
        dataSchema (with ``tuningConfig`` next to its keys, as in the README), ``{"dataSchema",
        "tuningConfig"}`` (Druid's older task form), or a task's ``{"spec": {...}}``. Also
        returns the root path (``spec`` for the task form)."""
        wrapper = {k: _API_NO_EFFECT[k] for k in ("type", "id", "context", "resource")}
        if "spec" in spec:
            self.keys(spec, "", ("spec",), wrapper)
            root, prefix = self.object(spec["spec"], "spec", required=True), "spec"
            self.keys(
                root, prefix, ("dataSchema", "tuningConfig"), _only(_API_NO_EFFECT, "ioConfig")
            )
        elif "dataSchema" in spec:
            no_effect = {**wrapper, **_only(_API_NO_EFFECT, "ioConfig")}
            self.keys(spec, "", ("dataSchema", "tuningConfig"), no_effect)
            root, prefix = spec, ""
        else:  # the bare dataSchema, with tuningConfig next to its keys
            schema = self.data_schema(spec, "", task=False, extra=("tuningConfig",))
            tuning_path = at("", "tuningConfig")
            return schema, self.tuning(spec.get("tuningConfig"), tuning_path, None), ""
        schema_path = at(prefix, "dataSchema")
        schema = self.data_schema(root.get("dataSchema"), schema_path, task=False)
        tuning = self.tuning(root.get("tuningConfig"), at(prefix, "tuningConfig"), None)
        return schema, tuning, prefix

    # -- dataSchema ----------------------------------------------------------------------------

    def data_schema(
        self, value: Any, path: str, *, task: bool, extra: Iterable[str] = ()
    ) -> SchemaParts:
        """``extra``: keys next to the dataSchema's own that the caller reads."""
        if not isinstance(value, Mapping):  # nothing in it to read, or to complain about
            self.object(value, path, required=True)
            return _unread(path)
        obj = value
        understood = ["parser", *_SECTIONS, *extra]
        understood += ["dataSource"] if task else ["partitionsSpec"]
        self.keys(obj, path, understood, {} if task else _only(_API_NO_EFFECT, "dataSource"))
        datasource = self.text(obj, "dataSource", path, required=task)
        found = {key: (obj.get(key), at(path, key)) for key in ("timestampSpec", "dimensionsSpec")}
        parser_format = None
        if obj.get("parser") is not None:
            parsed, parser_format = self.parser(obj["parser"], at(path, "parser"))
            for key, (inner, inner_path) in parsed.items():
                if found[key][0] is not None and inner is not None:
                    self.problem(inner_path, f"given twice: here and in {found[key][1]}")
                elif inner is not None:
                    found[key] = (inner, inner_path)
            if not task and parser_format is not None:
                self.no_effect(parser_format[1], _API_NO_EFFECT["parseSpec"])
                parser_format = None
        dimensions = self.dimensions(*found["dimensionsSpec"])
        granularity, intervals = self.granularity(
            obj.get("granularitySpec"), at(path, "granularitySpec"), task=task
        )
        transforms, filt = self.transform(obj.get("transformSpec"), at(path, "transformSpec"))
        partitions = None
        if obj.get("partitionsSpec") is not None:
            partitions = self.partitions_section(obj["partitionsSpec"], at(path, "partitionsSpec"))
        return SchemaParts(
            path=path,
            datasource=datasource,
            timestamp=self.timestamp(*found["timestampSpec"]),
            dimensions=dimensions,
            metrics=self.metrics(obj.get("metricsSpec"), at(path, "metricsSpec")),
            granularity=granularity,
            intervals=intervals,
            transforms=transforms,
            filter=filt,
            partitions=partitions,
            parser_format=parser_format,
        )

    def parser(
        self, value: Any, path: str
    ) -> tuple[dict[str, tuple[Any, str]], tuple[Mapping[str, Any], str] | None]:
        """Druid 0.12's ``parser``: its timestampSpec, dimensionsSpec and input format."""
        obj = self.object(value, path)
        self.keys(obj, path, ("type", "parseSpec"))
        if obj.get("type", "string") != "string":
            self.problem(
                at(path, "type"),
                f"parser {show(obj.get('type'))} is not supported; accepted: string "
                "(or, better, an ioConfig.inputFormat)",
            )
        spec_path = at(path, "parseSpec")
        spec = self.object(obj.get("parseSpec"), spec_path, required=True)
        inner = {
            key: (spec.get(key), at(spec_path, key)) for key in ("timestampSpec", "dimensionsSpec")
        }
        fmt = {k: v for k, v in spec.items() if k not in ("format", *inner)}
        fmt["type"] = spec.get("format")
        return inner, (fmt, spec_path)

    def timestamp(self, value: Any, path: str) -> Section:
        obj = self.object(value, path)
        since = len(self.problems)
        self.keys(obj, path, ("column", "format", "missingValue"))
        fields: dict[str, Any] = {
            k: self.text(obj, k, path) for k in ("column", "format") if obj.get(k) is not None
        }
        missing = obj.get("missingValue")
        if isinstance(missing, str) or (isinstance(missing, int) and not isinstance(missing, bool)):
            fields["missing_value"] = missing  # TimestampSpec reads the time itself
        elif missing is not None:
            self.problem(
                at(path, "missingValue"),
                f"must be an ISO-8601 time or epoch milliseconds, got {show(missing)}",
            )
        return Section(path, fields, len(self.problems) == since)

    def dimensions(self, value: Any, path: str) -> Section:
        """The dimensions, each with its declared type when it is given as ``{"name",
        "type"}`` (a bare name, or an object without ``type``, declares none)."""
        obj = self.object(value, path)
        since = len(self.problems)
        understood = (
            "dimensions",
            "dimensionExclusions",
            "spatialDimensions",
            "includeAllDimensions",
            "useSchemaDiscovery",
        )
        self.keys(obj, path, understood, _DIMENSIONS_NO_EFFECT)
        spatial = self.items(obj, "spatialDimensions", path)
        if spatial:
            self.problem(
                at(path, "spatialDimensions"),
                "spatial dimensions are not supported; remove them or leave the list empty",
            )
        if self.flag(obj, "includeAllDimensions", path):
            self.problem(
                at(path, "includeAllDimensions"),
                "not supported: segmentlake takes the listed dimensions, or discovers every "
                "column when the list is empty — not both; remove it or set it to false",
            )
        discovery = bool(self.flag(obj, "useSchemaDiscovery", path))
        entries = self.items(obj, "dimensions", path)
        typed = tuple(self.dimension(e, f"{path}.dimensions[{i}]") for i, e in enumerate(entries))
        fields = {
            # Druid: an empty list means "discover every column".
            "dimensions": tuple(name for name, _ in typed) or None,
            "exclusions": tuple(self.texts(obj, "dimensionExclusions", path)),
            "types": tuple((name, kind) for name, kind in typed if kind is not None),
            "schema_discovery": discovery,
        }
        return Section(path, fields, len(self.problems) == since)

    def dimension(self, entry: Any, path: str) -> tuple[str, str | None]:
        """A dimension's name and declared type (None: none declared)."""
        if isinstance(entry, str):
            return entry, None
        obj = self.object(entry, path, required=True)
        self.keys(obj, path, ("name", "type", "multiValueHandling"), _DIMENSION_NO_EFFECT)
        if "multiValueHandling" in obj:
            self.problem(
                at(path, "multiValueHandling"),
                "multi-value dimensions are not supported (array values are refused when "
                "read); remove it",
            )
        name = self.text(obj, "name", path, required=True) or ""
        if "type" not in obj:  # Druid's default: a string dimension, as a bare name
            return name, None
        return name, self.one_of(
            obj, "type", path, DIMENSION_TYPES, "string", what="dimension type"
        )

    def metrics(self, value: Any, path: str) -> tuple[Section, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(path, f"must be a list of aggregators, got {show(value)}")
            return ()
        return tuple(self.metric(m, f"{path}[{i}]") for i, m in enumerate(value))

    def metric(self, value: Any, path: str) -> Section:
        obj = self.object(value, path, required=True)
        since = len(self.problems)
        kind = obj.get("type")
        if kind == "hyperUnique":
            return self.hyper_unique(obj, path)
        if not isinstance(kind, str) or kind not in AGGREGATOR_TYPES:
            what = "is required" if kind is None else f"unknown aggregator type {safe_repr(kind)}"
            accepted = ", ".join([*AGGREGATOR_TYPES, "hyperUnique"])
            self.problem(at(path, "type"), f"{what}; accepted: {accepted}")
            return Section(path, {}, ok=False)
        hll, theta = kind in _HLL_TYPES, kind == "thetaSketch"
        quantiles = kind == "quantilesDoublesSketch"
        first_last = kind in FIRST_LAST_TYPES
        extra = (
            ("lgK", "stringEncoding")
            if hll
            else ("size", "isInputThetaSketch")
            if theta
            else ("k",)
            if quantiles
            else ("timeColumn", "maxStringBytes")
            if first_last
            else ()
        )
        quiet = (
            _HLL_NO_EFFECT
            if hll
            else _THETA_NO_EFFECT
            if theta
            else _QUANTILES_NO_EFFECT
            if quantiles
            else {}
        )
        self.keys(obj, path, ("type", "name", "fieldName", *extra), quiet)
        if obj.get("stringEncoding", "utf8") != "utf8":
            self.problem(
                at(path, "stringEncoding"),
                f"{show(obj['stringEncoding'])} is not supported: Spark's HLL sketches hash "
                "strings as UTF-8; accepted: utf8",
            )
        fields: dict[str, Any] = {"type": kind, "name": self.text(obj, "name", path, required=True)}
        if obj.get("fieldName") is not None:
            fields["field_name"] = self.text(obj, "fieldName", path)
        if hll and obj.get("lgK") is not None:
            fields["lg_k"] = self.integer(obj, "lgK", path, 4, 21)
        if theta and obj.get("size") is not None:
            fields["size"] = self.integer(obj, "size", path, 16, 1 << 26)
        if theta and obj.get("isInputThetaSketch") is not None:
            fields["input_sketch"] = self.flag(obj, "isInputThetaSketch", path)
        if quantiles and obj.get("k") is not None:
            fields["k"] = self.integer(obj, "k", path, 2, 32768)
        if first_last:
            self.first_last(obj, path, fields)
        return Section(path, fields, len(self.problems) == since)

    def first_last(self, obj: Mapping[str, Any], path: str, fields: dict[str, Any]) -> None:
        if obj.get("timeColumn", "__time") != "__time":
            self.problem(
                at(path, "timeColumn"),
                f"{show(obj['timeColumn'])} is not supported: first and last follow the row's "
                'timestamp ("__time", the default)',
            )
        if obj.get("maxStringBytes") is not None:
            if not str(obj.get("type")).startswith("string"):
                self.problem(at(path, "maxStringBytes"), "applies to stringFirst/stringLast only")
            else:
                fields["max_string_bytes"] = self.integer(obj, "maxStringBytes", path, 1)

    def hyper_unique(self, obj: Mapping[str, Any], path: str) -> Section:
        """Druid's older cardinality aggregator, read as ``HLLSketchBuild``: an HLL sketch of
        the values, unioned by compaction, estimated by readers. Druid's own HyperLogLog
        collectors (``isInputHyperUnique``) have no Spark reader and are refused."""
        since = len(self.problems)
        self.keys(obj, path, ("type", "name", "fieldName", "isInputHyperUnique"), _HYPER_NO_EFFECT)
        if self.flag(obj, "isInputHyperUnique", path):
            self.problem(
                at(path, "isInputHyperUnique"),
                "Druid's serialized HyperLogLog collectors cannot be read by Spark; ingest the "
                "raw values (false), or HLL sketches with HLLSketchMerge",
            )
        fields = {
            "type": "HLLSketchBuild",
            "name": self.text(obj, "name", path, required=True),
            "field_name": self.text(obj, "fieldName", path, required=True),
        }
        self.log.info(
            "%s: hyperUnique is built as HLLSketchBuild (Apache DataSketches' HLL, lgK %d): the "
            "same distinct-count estimate; readers call hll_sketch_estimate(hll_union_agg(col))",
            path, _DEFAULT_HLL_LG_K,
        )  # fmt: skip
        return Section(path, fields, len(self.problems) == since)

    def granularity(self, value: Any, path: str, *, task: bool) -> tuple[Section, Section | None]:
        obj = self.object(value, path)
        since = len(self.problems)
        understood = ("type", "segmentGranularity", "queryGranularity", "rollup")
        if task:
            self.keys(obj, path, (*understood, "intervals"))
        else:
            self.keys(obj, path, understood, _only(_API_NO_EFFECT, "intervals"))
        if obj.get("type", "uniform") != "uniform":
            self.problem(
                at(path, "type"),
                f"{show(obj.get('type'))} is not supported: segmentlake cuts every chunk by "
                'one segmentGranularity; accepted: "uniform"',
            )
        fields: dict[str, Any] = {}
        for key, name in (
            ("segmentGranularity", "segment_granularity"),
            ("queryGranularity", "query_granularity"),
        ):
            if obj.get(key) is not None:
                fields[name] = obj[key]  # a name or {"type": name}: Granularity.parse says
        rollup = self.flag(obj, "rollup", path)
        if rollup is not None:
            fields["rollup"] = rollup
        intervals = None
        if obj.get("intervals") is not None:
            where = at(path, "intervals")
            texts = obj["intervals"]
            if isinstance(texts, list) and all(isinstance(t, str) for t in texts):
                intervals = Section(where, {"intervals": tuple(texts)})
            else:
                self.problem(where, f"must be a list of ISO intervals, got {show(texts)}")
        return Section(path, fields, len(self.problems) == since), intervals

    def transform(self, value: Any, path: str) -> tuple[tuple[Section, ...], Section]:
        obj = self.object(value, path)
        self.keys(obj, path, ("transforms", "filter"))
        transforms = tuple(
            self.expression(t, f"{path}.transforms[{i}]")
            for i, t in enumerate(self.items(obj, "transforms", path))
        )
        where = at(path, "filter")
        filt = obj.get("filter")
        # The filter is checked (and its Druid JSON translated) even when a transform is bad,
        # so one error lists the problems of both.
        ok = filt is None or isinstance(filt, str | Mapping)
        if not ok:
            self.problem(
                where,
                "must be a Spark SQL condition (a string) or Druid's filter JSON (an object), "
                f"got {show(filt)}",
            )
        return transforms, Section(where, {"filter": filt}, ok)

    def expression(self, value: Any, path: str) -> Section:
        obj = self.object(value, path, required=True)
        since = len(self.problems)
        self.keys(obj, path, ("type", "name", "expression"))
        if obj.get("type", "expression") != "expression":
            self.problem(
                at(path, "type"),
                f"transform {show(obj.get('type'))} is not supported; accepted: expression",
            )
        fields = {
            "name": self.text(obj, "name", path, required=True),
            "expression": self.text(obj, "expression", path, required=True),
        }
        return Section(path, fields, len(self.problems) == since)

    # -- tuningConfig --------------------------------------------------------------------------

    def tuning(self, value: Any, path: str, kind: str | None) -> TuningParts:
        """``kind``: the task's type, which a tuningConfig ``type`` must match (None: any
        native batch type)."""
        obj = self.object(value, path)
        understood = (
            "type",
            "partitionsSpec",
            "forceGuaranteedRollup",
            "maxParseExceptions",
            "reportParseExceptions",
            *DEPRECATED_PARTITIONING,
        )
        self.keys(obj, path, understood, TUNING_NO_EFFECT)
        if kind is not None and obj.get("type", kind) != kind:
            self.problem(
                at(path, "type"), f"{show(obj['type'])} does not match the task type {kind!r}"
            )
        elif kind is None and "type" in obj:
            self.one_of(obj, "type", path, TASK_TYPES, TASK_TYPES[0], what="task type")
        force = self.flag(obj, "forceGuaranteedRollup", path)
        limit = self.integer(obj, "maxParseExceptions", path, 0)
        if self.flag(obj, "reportParseExceptions", path):
            if limit:
                self.no_effect(
                    at(path, "maxParseExceptions"),
                    "reportParseExceptions: true sets it to 0, as in Druid",
                )
            limit = 0
        return TuningParts(
            path=path,
            partitions=self.partitions(obj, path, bool(force)),
            force_guaranteed_rollup=force,
            max_parse_exceptions=limit or 0,
        )

    def partitions_section(self, value: Any, path: str) -> Section | None:
        if isinstance(value, Mapping):
            return Section(path, dict(value))
        self.problem(path, f"must be a JSON object, got {show(value)}")
        return None

    def partitions(self, obj: Mapping[str, Any], path: str, force: bool) -> Section | None:
        """The partitionsSpec, or the one Druid builds from the deprecated keys (None when
        neither is given and forceGuaranteedRollup is not set)."""
        old = {k: obj[k] for k in DEPRECATED_PARTITIONING if obj.get(k) is not None}
        for key in old:  # checked even where Druid ignores them: "5" is no row count anywhere
            if key == "partitionDimensions":
                self.texts(obj, key, path)
            else:
                self.integer(obj, key, path, 1)
        given = obj.get("partitionsSpec")
        if given is not None:
            for key in old:  # Druid's getPartitionsSpec drops them too
                self.no_effect(at(path, key), "Druid ignores it too when partitionsSpec is given")
            return self.partitions_section(given, at(path, "partitionsSpec"))
        if not old and not force:
            return None
        if "maxRowsPerSegment" in old and "targetPartitionSize" in old:
            self.problem(
                at(path, "targetPartitionSize"),
                "old name of maxRowsPerSegment; Druid refuses both together, keep one",
            )
        spec: dict[str, Any] = {
            "type": "hashed" if force else "dynamic",
            # Druid's targetPartitionSize is maxRowsPerSegment; for hashed, it is the target.
            "maxRowsPerSegment": old.get("maxRowsPerSegment", old.get("targetPartitionSize")),
        }
        used = ("numShards", "partitionDimensions") if force else ("maxTotalRows",)
        spec.update({k: old.get(k) for k in used})
        ignored = ("maxTotalRows",) if force else ("numShards", "partitionDimensions")
        for key in ignored:
            if key in old:
                self.no_effect(
                    at(path, key), f"Druid ignores it too with {spec['type']} partitioning"
                )
        return Section(path, {k: v for k, v in spec.items() if v is not None})


def _unread(path: str) -> SchemaParts:
    """The parts of a dataSchema that is not there (its problem is recorded)."""
    missing = {key: Section(at(path, key), {}, ok=False) for key in _SECTIONS}
    return SchemaParts(
        path=path,
        datasource=None,
        timestamp=missing["timestampSpec"],
        dimensions=missing["dimensionsSpec"],
        metrics=(),
        granularity=missing["granularitySpec"],
        intervals=None,
        transforms=(),
        filter=Section(at(path, "transformSpec.filter"), {"filter": None}, ok=False),
    )


def _only(table: Mapping[str, str], *keys: str) -> dict[str, str]:
    return {k: table[k] for k in keys}
