"""Druid's native batch ingestion task (``index_parallel`` / ``index``) as one frozen object.

:meth:`DruidIngestTask.from_dict` reads the task JSON a Druid user POSTs to the Overlord — the
``{"type", "spec": {"dataSchema", "ioConfig", "tuningConfig"}}`` form, the older form with
those three at the top level, and Druid 0.12's ``parser.parseSpec`` / ``firehose`` form.
Every key at every level is one of:

* understood — it means the same on Spark as on Druid;
* without effect — it only steers Druid's own processes (memory, subtasks, persists, segment
  file format); it is accepted and logged at INFO as "has no effect on Spark: <reason>";
* refused — everything else, including unknown keys. All refused keys and bad values are
  reported together, in ONE :class:`SpecError` that lists each with its JSON path and what
  would be accepted; nothing is silently ignored.

:meth:`DruidIngestTask.to_dict` writes Druid's JSON back (``from_dict(to_dict(t)) == t``). The
engine that runs a task is :func:`segmentlake.ingest.druid_task.run_druid_task`; the fields and
their meaning on Spark are tabulated in docs/druid-specs.md.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from segmentlake.core.druid_filter import druid_filter_sql
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import AGGREGATOR_TYPES, IngestionSpec, MetricSpec
from segmentlake.core.interval import Interval
from segmentlake.errors import SpecError

__all__ = [
    "CONTEXT_NO_EFFECT",
    "DIMENSION_TYPES",
    "INPUT_FORMATS",
    "TASK_TYPES",
    "TUNING_NO_EFFECT",
    "DruidIngestTask",
    "InputFormat",
    "LocalInputSource",
    "aligned_interval",
]

logger = logging.getLogger(__name__)

TASK_TYPES = ("index_parallel", "index")
INPUT_FORMATS = ("json", "csv", "tsv", "parquet")
# "auto" keeps the input's type (Druid's type-aware schema discovery); the others are cast.
DIMENSION_TYPES = ("string", "long", "float", "double", "auto")
_PERFECT_ROLLUP = ("hashed", "range", "single_dim")
_TASK_ID = re.compile(r"[A-Za-z0-9_-]+")
# Druid's default listDelimiter: values are only split on it for multi-value dimensions.
_DRUID_LIST_DELIMITER = "\u0001"
_DEFAULT_LG_K = next(f.default for f in fields(MetricSpec) if f.name == "lg_k")

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
_AVAILABLE = (
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
    "awaitSegmentAvailabilityTimeoutMillis": _AVAILABLE,
}
CONTEXT_NO_EFFECT: Mapping[str, str] = {
    "forceTimeChunkLock": (
        "segmentlake overwrites under time-chunk locks and appends under segment locks, "
        "whatever this says"
    ),
    "useLineageBasedSegmentAllocation": (
        "appends allocate segment ids centrally, in one metadata commit"
    ),
}
_TASK_NO_EFFECT: Mapping[str, str] = {
    "resource": "Druid's worker slots and availability groups; the Spark application runs it",
    "awaitSegmentAvailabilityTimeoutMillis": _AVAILABLE,
}
_DIMENSION_NO_EFFECT = {
    "createBitmapIndex": "Druid's bitmap index; Parquet segments have none (Delta skips files)",
}
_DIMENSIONS_NO_EFFECT = {
    "forceSegmentSortByTime": "the row order inside Druid's segment files; reads never rely on it",
}
_HLL_NO_EFFECT = {
    "tgtHllType": (
        "how a sketch stores its buckets (4, 6 or 8 bits); Spark builds HLL_8 sketches, whose "
        "estimates and unions are the same"
    ),
    "round": "rounding of Druid's query results; hll_sketch_estimate returns whole numbers",
    "shouldFinalize": "Druid's query-time finalization; readers call hll_sketch_estimate",
}
_JSON_NO_EFFECT = {
    "useJsonNodeReader": "Spark reads each line on its own, so a bad line never hides good ones",
}
# Druid's pre-partitionsSpec tuningConfig keys, read into a partitionsSpec as Druid does.
_DEPRECATED_PARTITIONING = (
    "maxRowsPerSegment",
    "targetPartitionSize",
    "maxTotalRows",
    "numShards",
    "partitionDimensions",
)


# -- the objects -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _wildcard(pattern: str) -> re.Pattern[str]:
    # Druid's filter is a commons-io wildcard: '*' and '?' only, case-sensitive.
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


@dataclass(frozen=True, slots=True)
class LocalInputSource:
    """Druid's ``local`` input source: the files under ``base_dir`` (recursively) whose names
    match the wildcard ``filter`` (``*`` and ``?``; default ``*``), and the listed ``files``.
    Relative paths are relative to the working directory, as in Druid."""

    base_dir: str | None = None
    filter: str | None = None
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.files, str):
            raise SpecError(f"inputSource.files must be a list of paths, got {self.files!r}")
        object.__setattr__(self, "files", tuple(self.files))
        named = [("baseDir", self.base_dir), ("filter", self.filter)]
        for key, value in [*named, *(("files", f) for f in self.files)]:
            if value is not None and (not isinstance(value, str) or not value):
                raise SpecError(f"inputSource.{key} must be a non-empty path, got {value!r}")
        if self.base_dir is None and not self.files:
            raise SpecError(
                'the local inputSource needs "baseDir" (with a "filter" such as "*.json") '
                'or "files"'
            )
        if self.base_dir is None and self.filter is not None:
            raise SpecError('inputSource.filter selects files under "baseDir"; give baseDir too')
        if self.base_dir is not None and self.filter is None:
            object.__setattr__(self, "filter", "*")

    def matches(self, file_name: str) -> bool:
        """Whether a file name (not a path) matches ``filter``."""
        return _wildcard(self.filter or "*").fullmatch(file_name) is not None

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "local"}
        if self.base_dir is not None:
            obj["baseDir"] = self.base_dir
            obj["filter"] = self.filter
        if self.files:
            obj["files"] = list(self.files)
        return obj


@dataclass(frozen=True, slots=True)
class InputFormat:
    """How input files are parsed: ``json`` (one object per line), ``csv``/``tsv`` with
    ``columns`` or ``find_columns_from_header`` (after ``skip_header_rows`` lines) and a
    ``delimiter`` (tsv; csv's is ``,``), or ``parquet``. ``keep_null_columns`` (json) makes a
    column null in every row a discovered dimension; ``binary_as_string`` (parquet) reads
    binary columns as UTF-8 strings."""

    type: str
    columns: tuple[str, ...] = ()
    find_columns_from_header: bool = False
    skip_header_rows: int = 0
    delimiter: str | None = None
    keep_null_columns: bool = False
    binary_as_string: bool = False

    def __post_init__(self) -> None:
        if self.type not in INPUT_FORMATS:
            raise SpecError(
                f"inputFormat type {self.type!r} is not supported; accepted: "
                + ", ".join(INPUT_FORMATS)
            )
        if isinstance(self.columns, str):
            raise SpecError(f"inputFormat.columns must be a list, got {self.columns!r}")
        object.__setattr__(self, "columns", tuple(self.columns))
        if self.type in ("csv", "tsv"):
            self._check_text()
        elif self.columns or self.find_columns_from_header or self.skip_header_rows:
            raise SpecError(
                "inputFormat columns, findColumnsFromHeader and skipHeaderRows apply to csv and "
                f"tsv, not {self.type}"
            )
        elif self.delimiter is not None:
            raise SpecError(f"inputFormat.delimiter applies to tsv, not {self.type}")
        if self.keep_null_columns and self.type != "json":
            raise SpecError(f"inputFormat.keepNullColumns applies to json, not {self.type}")
        if self.binary_as_string and self.type != "parquet":
            raise SpecError(f"inputFormat.binaryAsString applies to parquet, not {self.type}")

    def _check_text(self) -> None:
        if bool(self.columns) == bool(self.find_columns_from_header):
            raise SpecError(
                f'inputFormat ({self.type}): give the column names in "columns" or set '
                '"findColumnsFromHeader": true — exactly one of them'
            )
        if any(not isinstance(c, str) or not c for c in self.columns):
            raise SpecError(f"inputFormat.columns must be non-empty names, got {self.columns}")
        if len(set(self.columns)) != len(self.columns):
            raise SpecError(f"inputFormat.columns names a column twice: {list(self.columns)}")
        skip = self.skip_header_rows
        if not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
            raise SpecError(f"inputFormat.skipHeaderRows must be an integer >= 0, got {skip!r}")
        if self.type == "csv":
            if self.delimiter not in (None, ","):
                raise SpecError('csv is comma-separated; for another delimiter use "type": "tsv"')
            object.__setattr__(self, "delimiter", ",")
        elif self.delimiter is None:
            object.__setattr__(self, "delimiter", "\t")
        elif not isinstance(self.delimiter, str) or not self.delimiter:
            raise SpecError(f"inputFormat.delimiter must be non-empty, got {self.delimiter!r}")

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": self.type}
        if self.type in ("csv", "tsv"):
            if self.columns:
                obj["columns"] = list(self.columns)
            else:
                obj["findColumnsFromHeader"] = True
            if self.skip_header_rows:
                obj["skipHeaderRows"] = self.skip_header_rows
            if self.type == "tsv":
                obj["delimiter"] = self.delimiter
        if self.keep_null_columns:
            obj["keepNullColumns"] = True
        if self.binary_as_string:
            obj["binaryAsString"] = True
        return obj


def _expanded(interval: Interval, granularity: Granularity) -> Interval:
    if interval.is_empty():
        raise SpecError(f"interval {interval} is empty")
    start = granularity.bucket_start_millis(interval.start_millis)
    last = granularity.bucket_start_millis(interval.end_millis - 1)
    return Interval.of_millis(start, granularity.next_bucket_start_millis(last))


def aligned_interval(intervals: Iterable[Interval], granularity: Granularity) -> Interval:
    """The whole ``granularity`` chunks Druid locks for ``intervals`` (each widened to chunk
    bounds; abutting and overlapping ones merged), as one interval. Raises :class:`SpecError`
    when gaps remain: one segmentlake task replaces one interval."""
    spans = sorted(_expanded(i, granularity) for i in intervals)
    if not spans:
        raise SpecError("no intervals given")
    merged = [spans[0]]
    for span in spans[1:]:
        last = merged[-1]
        if span.start_millis <= last.end_millis:
            end = max(last.end_millis, span.end_millis)
            merged[-1] = Interval.of_millis(last.start_millis, end)
        else:
            merged.append(span)
    if len(merged) > 1:
        raise SpecError(
            f"the intervals cover {len(merged)} separate runs of {granularity.name} chunks "
            f"({', '.join(map(str, merged))}); a segmentlake task replaces one interval: give "
            "one interval spanning them (its chunks without rows are replaced too) or run one "
            "task per run"
        )
    return merged[0]


def _mode_problems(
    *, append: bool, drop: bool, has_intervals: bool, perfect_rollup: bool
) -> list[tuple[str, str]]:
    """(field, message) for every contradiction between the task's mode and its spec."""
    problems = []
    if not append and not has_intervals:
        problems.append(
            (
                "intervals",
                "required: segmentlake replaces whole intervals, so an overwrite must say which "
                '(e.g. "intervals": ["2024-01-01/2024-01-08"]); or set ioConfig.'
                "appendToExisting: true to add the rows to what is there",
            )
        )
    if append and drop:
        problems.append(
            (
                "dropExisting",
                "applies to overwrites only (Druid ignores it with appendToExisting: true); "
                "remove it or set appendToExisting: false",
            )
        )
    if append and perfect_rollup:
        problems.append(
            (
                "partitionsSpec",
                "perfect rollup (hashed, range or single_dim partitioning, "
                "forceGuaranteedRollup) needs all of a time chunk's rows in one task, so it "
                "cannot append (Druid refuses it too): use dynamic partitioning to append, or "
                "appendToExisting: false to overwrite",
            )
        )
    return problems


@dataclass(frozen=True, slots=True, kw_only=True)
class DruidIngestTask:
    """One Druid native batch task: the ``datasource``, the :class:`IngestionSpec` (dataSchema
    and tuningConfig), where the rows are (``input_source``, ``input_format``), the
    ``granularitySpec.intervals`` as given, and the mode: append (``append_to_existing``) or
    overwrite of :attr:`interval`, where ``drop_existing`` also empties the chunks that get no
    rows. ``dimension_types`` pairs each listed dimension with its Druid type; a dimension is
    cast to it, except ``auto`` ones (and discovered ones with ``schema_discovery``), which keep
    the input's type. ``task_id``, ``priority`` and ``lock_timeout_ms`` come from the task's
    ``id`` and ``context``."""

    datasource: str
    spec: IngestionSpec
    input_source: LocalInputSource
    input_format: InputFormat
    intervals: tuple[Interval, ...] = ()
    append_to_existing: bool = False
    drop_existing: bool = False
    dimension_types: tuple[tuple[str, str], ...] = ()
    schema_discovery: bool = False
    task_type: str = "index_parallel"
    task_id: str | None = None
    priority: int | None = None
    lock_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.datasource, str) or not self.datasource:
            raise SpecError(f"dataSource must be a non-empty name, got {self.datasource!r}")
        if not isinstance(self.spec, IngestionSpec):
            raise SpecError(f"spec must be an IngestionSpec, got {type(self.spec).__name__}")
        if not isinstance(self.input_source, LocalInputSource):
            raise SpecError("input_source must be a LocalInputSource")
        if not isinstance(self.input_format, InputFormat):
            raise SpecError("input_format must be an InputFormat")
        if self.task_type not in TASK_TYPES:
            raise SpecError(f"task type {self.task_type!r} is not one of {TASK_TYPES}")
        self._check_options()
        object.__setattr__(
            self,
            "intervals",
            tuple(i if isinstance(i, Interval) else Interval.parse(i) for i in self.intervals),
        )
        object.__setattr__(self, "dimension_types", self._typed_dimensions())
        problems = _mode_problems(
            append=self.append_to_existing,
            drop=self.drop_existing,
            has_intervals=bool(self.intervals),
            perfect_rollup=self.spec.partitions_spec.perfect_rollup,
        )
        if problems:
            raise SpecError("; ".join(f"{key}: {message}" for key, message in problems))
        if self.intervals:
            aligned_interval(self.intervals, self.spec.granularity_spec.segment_granularity)
        _check_druid_form(self.spec)

    def _check_options(self) -> None:
        if self.task_id is not None and (
            not isinstance(self.task_id, str) or not _TASK_ID.fullmatch(self.task_id)
        ):
            raise SpecError(
                f"task id {self.task_id!r} must be letters, digits, '_' and '-' only (it names "
                "the task's storage partitions)"
            )
        if self.priority is not None and (
            not isinstance(self.priority, int) or isinstance(self.priority, bool)
        ):
            raise SpecError(f"context.priority must be an integer, got {self.priority!r}")
        timeout = self.lock_timeout_ms
        if timeout is not None and (
            not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0
        ):
            raise SpecError(f"context.lockTimeoutMillis must be >= 0, got {timeout!r}")

    def _typed_dimensions(self) -> tuple[tuple[str, str], ...]:
        """Each listed dimension with its type (the default type where none is given)."""
        names = self.spec.dimensions_spec.dimensions
        given = tuple((str(name), str(kind)) for name, kind in self.dimension_types)
        if names is None:
            if given:
                raise SpecError("dimension_types needs a listed dimensionsSpec.dimensions")
            return ()
        if given and tuple(name for name, _ in given) != names:
            raise SpecError(
                f"dimension_types {list(given)} must name the dimensions {list(names)} in order"
            )
        default = "auto" if self.schema_discovery else "string"
        types = dict(given) if given else dict.fromkeys(names, default)
        for name, kind in types.items():
            if kind not in DIMENSION_TYPES:
                raise SpecError(
                    f"dimension {name!r} has type {kind!r}; accepted: " + ", ".join(DIMENSION_TYPES)
                )
        return tuple((n, types[n]) for n in names)

    @property
    def interval(self) -> Interval | None:
        """The interval this task replaces (or appends into): the whole segment-granularity
        chunks of ``intervals``; None when no intervals are given."""
        if not self.intervals:
            return None
        return aligned_interval(self.intervals, self.spec.granularity_spec.segment_granularity)

    # -- JSON --------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, task: Any) -> DruidIngestTask:
        """Read a Druid ``index_parallel`` / ``index`` task JSON (see the module). Raises ONE
        :class:`SpecError` listing every refused key and bad value with its JSON path."""
        return _Reader().task(task)

    @classmethod
    def from_json(cls, text: str) -> DruidIngestTask:
        """:meth:`from_dict` of a JSON text."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(
                f"the task spec is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
            ) from e
        return cls.from_dict(obj)

    def to_dict(self) -> dict[str, Any]:
        """Druid's task JSON for this task, in the current ``{"type", "spec"}`` form."""
        base = self.spec.to_dict()
        schema = {"dataSource": self.datasource, **base["dataSchema"]}
        dimensions = schema["dimensionsSpec"]
        default = "auto" if self.schema_discovery else "string"
        if self.dimension_types:
            dimensions["dimensions"] = [
                name if kind == default else {"type": kind, "name": name}
                for name, kind in self.dimension_types
            ]
        if self.schema_discovery:
            dimensions["useSchemaDiscovery"] = True
        if self.intervals:
            schema["granularitySpec"]["intervals"] = [str(i) for i in self.intervals]
        io_config = {
            "type": self.task_type,
            "inputSource": self.input_source.to_dict(),
            "inputFormat": self.input_format.to_dict(),
            "appendToExisting": self.append_to_existing,
            "dropExisting": self.drop_existing,
        }
        task: dict[str, Any] = {"type": self.task_type}
        if self.task_id is not None:
            task["id"] = self.task_id
        task["spec"] = {
            "dataSchema": schema,
            "ioConfig": io_config,
            "tuningConfig": {"type": self.task_type, **base["tuningConfig"]},
        }
        context = {"priority": self.priority, "lockTimeoutMillis": self.lock_timeout_ms}
        if any(v is not None for v in context.values()):
            task["context"] = {k: v for k, v in context.items() if v is not None}
        return task

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)


_DOUBLE_QUOTES = (
    "transform {name!r}: Druid quotes column names with double quotes, Spark SQL reads "
    "\"...\" as a string; write `column` (backticks) for a column or 'text' for a string"
)


def _check_druid_form(spec: IngestionSpec) -> None:
    """Refuse what Druid's JSON cannot say, so every task can be written back and re-read."""
    if spec.dimensions_spec.dimensions == ():
        raise SpecError("a Druid task lists at least one dimension, or none to discover them")
    for metric in spec.metrics:
        if not metric.type.startswith("HLLSketch") and metric.lg_k != _DEFAULT_LG_K:
            raise SpecError(f"metric {metric.name!r}: lgK applies to HLL sketch metrics only")
    for t in spec.transform_spec.transforms:
        if '"' in t.expression:
            raise SpecError(_DOUBLE_QUOTES.format(name=t.name))


# -- reading Druid's JSON ----------------------------------------------------------------------


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, slots=True)
class _Schema:
    """What the dataSchema reader found (``section`` is the dataSchema for IngestionSpec)."""

    datasource: str
    section: dict[str, Any]
    dimension_types: tuple[tuple[str, str], ...]
    schema_discovery: bool
    intervals: tuple[Interval, ...]
    parser_format: tuple[Mapping[str, Any], str] | None  # Druid 0.12 parseSpec and its path


class _Reader:
    """Reads one task JSON, collecting every problem (JSON path: message) before failing."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    # -- generic checks ------------------------------------------------------------------------

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def object(self, value: Any, path: str, *, required: bool = False) -> Mapping[str, Any]:
        """``value`` if it is a JSON object; else reports it (a missing one only when
        ``required``) and returns an empty object."""
        if isinstance(value, Mapping):
            return value
        if value is not None or required:
            what = "is required" if value is None else f"must be a JSON object, got {_show(value)}"
            self.problem(path, what)
        return {}

    def keys(
        self,
        obj: Mapping[str, Any],
        path: str,
        understood: Iterable[str],
        no_effect: Mapping[str, str] | None = None,
    ) -> None:
        """Refuse unknown keys; log the ones without effect."""
        known = set(understood)
        quiet = no_effect or {}
        for key in obj:
            if key in known:
                continue
            if key in quiet:
                logger.info("%s has no effect on Spark: %s", _at(path, key), quiet[key])
                continue
            accepted = ", ".join(sorted(known | set(quiet)))
            self.problem(_at(path, key), f"not supported; accepted here: {accepted}")

    def flag(self, obj: Mapping[str, Any], key: str, path: str) -> bool | None:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        self.problem(_at(path, key), f"must be true or false, got {_show(value)}")
        return None

    def integer(self, obj: Mapping[str, Any], key: str, path: str, minimum: int) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return value
        self.problem(_at(path, key), f"must be an integer >= {minimum}, got {_show(value)}")
        return None

    def text(
        self, obj: Mapping[str, Any], key: str, path: str, *, required: bool = False
    ) -> str | None:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
        if value is not None or required:
            got = "it is missing" if value is None else f"got {_show(value)}"
            self.problem(_at(path, key), f"must be a non-empty string; {got}")
        return None

    def texts(self, obj: Mapping[str, Any], key: str, path: str) -> list[str]:
        value = obj.get(key)
        if value is None:
            return []
        if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            return value
        self.problem(_at(path, key), f"must be a list of non-empty strings, got {_show(value)}")
        return []

    def check(self, path: str, section: Mapping[str, Any], since: int) -> None:
        """Validate one normalized section on its own (unless it already has problems), so
        that each section's own error is listed."""
        if len(self.problems) > since:
            return
        try:
            IngestionSpec.from_dict(section)
        except SpecError as e:
            self.problem(path, str(e))

    # -- the task ------------------------------------------------------------------------------

    def task(self, value: Any) -> DruidIngestTask:
        top = self.object(value, "(task)", required=True)
        if "spec" in top:
            self.keys(top, "", ("type", "id", "spec", "context"), _TASK_NO_EFFECT)
            root, prefix = self.object(top["spec"], "spec", required=True), "spec"
            self.keys(root, prefix, ("dataSchema", "ioConfig", "tuningConfig"))
        else:  # the older form: dataSchema, ioConfig and tuningConfig at the top level
            understood = ("type", "id", "context", "dataSchema", "ioConfig", "tuningConfig")
            self.keys(top, "", understood, _TASK_NO_EFFECT)
            root, prefix = top, ""
        io_path, tuning_path = _at(prefix, "ioConfig"), _at(prefix, "tuningConfig")
        io = self.object(root.get("ioConfig"), io_path, required=True)
        kind = self.task_type(top, io)
        options: dict[str, Any] = {"task_type": kind, "task_id": self.text(top, "id", "")}
        options.update(self.context(top.get("context"), "context"))
        schema = self.data_schema(root.get("dataSchema"), _at(prefix, "dataSchema"))
        options.update(self.io_config(io, io_path, kind, schema.parser_format))
        tuning = self.tuning(root.get("tuningConfig"), tuning_path, kind)
        places = {
            "intervals": _at(prefix, "dataSchema.granularitySpec"),
            "dropExisting": io_path,
            "partitionsSpec": tuning_path,
        }
        for key, message in _mode_problems(
            append=options["append_to_existing"],
            drop=options["drop_existing"],
            has_intervals=bool(schema.intervals),
            perfect_rollup=tuning["partitionsSpec"].get("type") in _PERFECT_ROLLUP,
        ):
            self.problem(_at(places[key], key), message)
        if self.problems:
            raise _error(self.problems)
        try:  # what is left: checks across sections (e.g. a dimension named as a metric)
            spec = IngestionSpec.from_dict({"dataSchema": schema.section, "tuningConfig": tuning})
            return DruidIngestTask(
                datasource=schema.datasource,
                spec=spec,
                intervals=schema.intervals,
                dimension_types=schema.dimension_types,
                schema_discovery=schema.schema_discovery,
                **options,
            )
        except SpecError as e:
            raise _error([f"{prefix or '(task)'}: {e}"]) from e

    def task_type(self, top: Mapping[str, Any], io: Mapping[str, Any]) -> str:
        kind = top.get("type", io.get("type", TASK_TYPES[0]))
        if kind in TASK_TYPES:
            return str(kind)
        self.problem(
            "type",
            f"{_show(kind)} is not a native batch ingestion task; accepted: "
            + ", ".join(TASK_TYPES),
        )
        return TASK_TYPES[0]

    def context(self, value: Any, path: str) -> dict[str, int | None]:
        obj = self.object(value, path)
        self.keys(obj, path, ("priority", "lockTimeoutMillis"), CONTEXT_NO_EFFECT)
        priority = obj.get("priority")
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            self.problem(_at(path, "priority"), f"must be an integer, got {_show(priority)}")
            priority = None
        timeout = self.integer(obj, "lockTimeoutMillis", path, 0)
        return {"priority": priority, "lock_timeout_ms": timeout}

    # -- dataSchema ----------------------------------------------------------------------------

    def data_schema(self, value: Any, path: str) -> _Schema:
        obj = self.object(value, path, required=True)
        sections = ("timestampSpec", "dimensionsSpec", "metricsSpec", "granularitySpec")
        self.keys(obj, path, ("dataSource", "parser", "transformSpec", *sections))
        datasource = self.text(obj, "dataSource", path, required=True) or ""
        found = {key: (obj.get(key), _at(path, key)) for key in ("timestampSpec", "dimensionsSpec")}
        parser_format = None
        if obj.get("parser") is not None:
            parsed, parser_format = self.parser(obj["parser"], _at(path, "parser"))
            for key, (inner, inner_path) in parsed.items():
                if found[key][0] is not None and inner is not None:
                    self.problem(inner_path, f"given twice: here and in {found[key][1]}")
                elif inner is not None:
                    found[key] = (inner, inner_path)
        section: dict[str, Any] = {"timestampSpec": self.timestamp(*found["timestampSpec"])}
        dimensions, types, discovery = self.dimensions(*found["dimensionsSpec"])
        section["dimensionsSpec"] = dimensions
        section["metricsSpec"] = self.metrics(obj.get("metricsSpec"), _at(path, "metricsSpec"))
        granularity, intervals = self.granularity(
            obj.get("granularitySpec"), _at(path, "granularitySpec")
        )
        section["granularitySpec"] = granularity
        section["transformSpec"] = self.transform(
            obj.get("transformSpec"), _at(path, "transformSpec")
        )
        return _Schema(datasource, section, types, discovery, intervals, parser_format)

    def parser(
        self, value: Any, path: str
    ) -> tuple[dict[str, tuple[Any, str]], tuple[Mapping[str, Any], str] | None]:
        """Druid 0.12's ``parser``: its timestampSpec, dimensionsSpec and input format."""
        obj = self.object(value, path)
        self.keys(obj, path, ("type", "parseSpec"))
        if obj.get("type", "string") != "string":
            self.problem(
                _at(path, "type"),
                f"parser {_show(obj.get('type'))} is not supported; accepted: string "
                "(or, better, an ioConfig.inputFormat)",
            )
        spec_path = _at(path, "parseSpec")
        spec = self.object(obj.get("parseSpec"), spec_path, required=True)
        inner = {
            key: (spec.get(key), _at(spec_path, key)) for key in ("timestampSpec", "dimensionsSpec")
        }
        fmt = {k: v for k, v in spec.items() if k not in ("format", *inner)}
        fmt["type"] = spec.get("format")
        return inner, (fmt, spec_path)

    def timestamp(self, value: Any, path: str) -> dict[str, Any]:
        obj = self.object(value, path)
        since = len(self.problems)
        self.keys(obj, path, ("column", "format", "missingValue"))
        if obj.get("missingValue") is not None:
            self.problem(
                _at(path, "missingValue"),
                "not supported: a row without a timestamp is unparseable (counted against "
                "maxParseExceptions); fill the column with a transform instead",
            )
        section = {k: obj[k] for k in ("column", "format") if obj.get(k) is not None}
        self.check(path, {"timestampSpec": section}, since)
        return section

    def dimensions(
        self, value: Any, path: str
    ) -> tuple[dict[str, Any], tuple[tuple[str, str], ...], bool]:
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
        if obj.get("spatialDimensions"):
            self.problem(
                _at(path, "spatialDimensions"),
                "spatial dimensions are not supported; remove them or leave the list empty",
            )
        if self.flag(obj, "includeAllDimensions", path):
            self.problem(
                _at(path, "includeAllDimensions"),
                "not supported: segmentlake takes the listed dimensions, or discovers every "
                "column when the list is empty — not both; remove it or set it to false",
            )
        discovery = bool(self.flag(obj, "useSchemaDiscovery", path))
        entries = obj.get("dimensions") or []
        if not isinstance(entries, list):
            self.problem(_at(path, "dimensions"), f"must be a list, got {_show(entries)}")
            entries = []
        typed = [
            self.dimension(e, f"{path}.dimensions[{i}]", discovery) for i, e in enumerate(entries)
        ]
        section = {
            "dimensions": [name for name, _ in typed],
            "dimensionExclusions": self.texts(obj, "dimensionExclusions", path),
        }
        self.check(path, {"dimensionsSpec": section}, since)
        return section, tuple(typed), discovery

    def dimension(self, entry: Any, path: str, discovery: bool) -> tuple[str, str]:
        default = "auto" if discovery else "string"
        if isinstance(entry, str):
            return entry, default
        obj = self.object(entry, path, required=True)
        self.keys(obj, path, ("name", "type", "multiValueHandling"), _DIMENSION_NO_EFFECT)
        if "multiValueHandling" in obj:
            self.problem(
                _at(path, "multiValueHandling"),
                "multi-value dimensions are not supported (array values are refused when "
                "read); remove it",
            )
        name = self.text(obj, "name", path, required=True) or ""
        kind = obj.get("type", "string")
        if kind not in DIMENSION_TYPES:
            self.problem(
                _at(path, "type"),
                f"dimension type {_show(kind)} is not supported; accepted: "
                + ", ".join(DIMENSION_TYPES),
            )
            kind = default
        return name, str(kind)

    def metrics(self, value: Any, path: str) -> list[dict[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(path, f"must be a list of aggregators, got {_show(value)}")
            return []
        since = len(self.problems)
        section = [self.metric(m, f"{path}[{i}]") for i, m in enumerate(value)]
        self.check(path, {"metricsSpec": section}, since)
        return section

    def metric(self, value: Any, path: str) -> dict[str, Any]:
        obj = self.object(value, path, required=True)
        kind = obj.get("type")
        if kind not in AGGREGATOR_TYPES:
            self.problem(
                _at(path, "type"),
                f"aggregator {_show(kind)} is not supported; accepted: "
                + ", ".join(AGGREGATOR_TYPES),
            )
            return {}
        hll = kind in ("HLLSketchBuild", "HLLSketchMerge")
        extra = ("lgK", "stringEncoding") if hll else ()
        self.keys(obj, path, ("type", "name", "fieldName", *extra), _HLL_NO_EFFECT if hll else {})
        if obj.get("stringEncoding", "utf8") != "utf8":
            self.problem(
                _at(path, "stringEncoding"),
                f"{_show(obj['stringEncoding'])} is not supported: Spark's HLL sketches hash "
                "strings as UTF-8; accepted: utf8",
            )
        return {k: obj[k] for k in ("type", "name", "fieldName", "lgK") if obj.get(k) is not None}

    def granularity(self, value: Any, path: str) -> tuple[dict[str, Any], tuple[Interval, ...]]:
        obj = self.object(value, path)
        since = len(self.problems)
        understood = ("type", "segmentGranularity", "queryGranularity", "rollup", "intervals")
        self.keys(obj, path, understood)
        if obj.get("type", "uniform") != "uniform":
            self.problem(
                _at(path, "type"),
                f"{_show(obj.get('type'))} is not supported: segmentlake cuts every chunk by "
                'one segmentGranularity; accepted: "uniform"',
            )
        self.flag(obj, "rollup", path)
        keys = ("segmentGranularity", "queryGranularity", "rollup")
        section = {k: obj[k] for k in keys if obj.get(k) is not None}
        self.check(path, {"granularitySpec": section}, since)
        intervals = self.intervals(obj.get("intervals"), _at(path, "intervals"))
        if intervals and len(self.problems) == since:
            segment = Granularity.parse(section.get("segmentGranularity", "day"))
            try:
                aligned_interval(intervals, segment)
            except SpecError as e:
                self.problem(_at(path, "intervals"), str(e))
        return section, intervals

    def intervals(self, value: Any, path: str) -> tuple[Interval, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(path, f"must be a list of ISO intervals, got {_show(value)}")
            return ()
        found = []
        for i, text in enumerate(value):
            try:
                interval = Interval.parse(text)
                if interval.is_empty():
                    raise SpecError(f"interval {text!r} is empty")
                found.append(interval)
            except SpecError as e:
                self.problem(f"{path}[{i}]", str(e))
        return tuple(found)

    def transform(self, value: Any, path: str) -> dict[str, Any]:
        obj = self.object(value, path)
        since = len(self.problems)
        self.keys(obj, path, ("transforms", "filter"))
        transforms = obj.get("transforms") or []
        if not isinstance(transforms, list):
            self.problem(_at(path, "transforms"), f"must be a list, got {_show(transforms)}")
            transforms = []
        section: dict[str, Any] = {
            "transforms": [
                self.expression(t, f"{path}.transforms[{i}]") for i, t in enumerate(transforms)
            ],
            "filter": self.filter(obj.get("filter"), _at(path, "filter")),
        }
        self.check(path, {"transformSpec": section}, since)
        return section

    def expression(self, value: Any, path: str) -> dict[str, Any]:
        obj = self.object(value, path, required=True)
        self.keys(obj, path, ("type", "name", "expression"))
        if obj.get("type", "expression") != "expression":
            self.problem(
                _at(path, "type"),
                f"transform {_show(obj.get('type'))} is not supported; accepted: expression",
            )
        expression = self.text(obj, "expression", path, required=True) or ""
        if '"' in expression:
            self.problem(_at(path, "expression"), _DOUBLE_QUOTES.format(name=obj.get("name")))
        return {"type": "expression", "name": obj.get("name", ""), "expression": expression}

    def filter(self, value: Any, path: str) -> str | None:
        if value is None or isinstance(value, str):
            return value
        sql, problems = druid_filter_sql(value, path)
        for problem in problems:
            self.problems.append(problem)
        return sql

    # -- ioConfig ------------------------------------------------------------------------------

    def io_config(
        self,
        obj: Mapping[str, Any],
        path: str,
        kind: str,
        parser_format: tuple[Mapping[str, Any], str] | None,
    ) -> dict[str, Any]:
        understood = ("type", "inputSource", "inputFormat", "firehose")
        self.keys(obj, path, (*understood, "appendToExisting", "dropExisting"))
        mode = {
            "append_to_existing": bool(self.flag(obj, "appendToExisting", path)),
            "drop_existing": bool(self.flag(obj, "dropExisting", path)),
        }
        if not obj:  # a missing ioConfig is reported already
            return {"input_source": None, "input_format": None, **mode}
        if obj.get("type", kind) != kind:
            self.problem(
                _at(path, "type"), f"{_show(obj['type'])} does not match the task type {kind!r}"
            )
        # Druid 0.12's firehose, when it comes alone, is read as the input source it was.
        old = obj.get("inputSource") is None and obj.get("firehose") is not None
        source_key = "firehose" if old else "inputSource"
        if not old and obj.get("firehose") is not None:
            self.problem(_at(path, "firehose"), "given together with inputSource; keep one")
        source = self.input_source(obj.get(source_key), _at(path, source_key))
        found: tuple[Any, str] | None = None
        if obj.get("inputFormat") is not None:
            found = (obj["inputFormat"], _at(path, "inputFormat"))
            if parser_format is not None:
                self.problem(parser_format[1], "given together with ioConfig.inputFormat; keep one")
        elif parser_format is not None:
            found = parser_format
        else:
            self.problem(
                _at(path, "inputFormat"),
                'is required, e.g. {"type": "json"}; accepted types: ' + ", ".join(INPUT_FORMATS),
            )
        fmt = self.input_format(*found) if found is not None else None
        return {"input_source": source, "input_format": fmt, **mode}

    def input_source(self, value: Any, path: str) -> LocalInputSource | None:
        obj = self.object(value, path, required=True)
        if not obj:
            return None
        kind = obj.get("type")
        if kind != "local":
            self.problem(
                _at(path, "type"),
                f"input source {_show(kind)} is not supported; accepted: local (for other "
                "sources, read the rows with Spark and call lake.append / lake.overwrite)",
            )
            return None
        self.keys(obj, path, ("type", "baseDir", "filter", "files"))
        before = len(self.problems)
        base_dir = self.text(obj, "baseDir", path)
        wildcard = self.text(obj, "filter", path)
        files = self.texts(obj, "files", path)
        if len(self.problems) > before:
            return None
        try:
            return LocalInputSource(base_dir, wildcard, tuple(files))
        except SpecError as e:
            self.problem(path, str(e))
            return None

    def input_format(self, value: Any, path: str) -> InputFormat | None:
        obj = self.object(value, path, required=True)
        kind = obj.get("type")
        if kind not in INPUT_FORMATS:
            self.problem(
                _at(path, "type"),
                f"input format {_show(kind)} is not supported; accepted: "
                + ", ".join(INPUT_FORMATS),
            )
            return None
        before = len(self.problems)
        readers: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
            "json": self.json_format,
            "parquet": self.parquet_format,
            "csv": functools.partial(self.text_format, delimiter=False),
            "tsv": functools.partial(self.text_format, delimiter=True),
        }
        options = readers[kind](obj, path)
        if len(self.problems) > before:
            return None
        try:
            return InputFormat(kind, **options)
        except SpecError as e:
            self.problem(path, str(e))
            return None

    def json_format(self, obj: Mapping[str, Any], path: str) -> dict[str, Any]:
        understood = ("type", "flattenSpec", "featureSpec", "keepNullColumns")
        self.keys(obj, path, (*understood, "assumeNewlineDelimited"), _JSON_NO_EFFECT)
        self.flatten(obj.get("flattenSpec"), _at(path, "flattenSpec"))
        if obj.get("featureSpec"):
            self.problem(
                _at(path, "featureSpec"),
                "Jackson parser features are not supported (Spark's JSON reader parses "
                "standard JSON); remove it",
            )
        self.flag(obj, "assumeNewlineDelimited", path)  # Spark reads one object per line
        return {"keep_null_columns": bool(self.flag(obj, "keepNullColumns", path))}

    def parquet_format(self, obj: Mapping[str, Any], path: str) -> dict[str, Any]:
        self.keys(obj, path, ("type", "flattenSpec", "binaryAsString"))
        self.flatten(obj.get("flattenSpec"), _at(path, "flattenSpec"))
        return {"binary_as_string": bool(self.flag(obj, "binaryAsString", path))}

    def text_format(self, obj: Mapping[str, Any], path: str, *, delimiter: bool) -> dict[str, Any]:
        understood = ["type", "columns", "findColumnsFromHeader", "hasHeaderRow", "skipHeaderRows"]
        self.keys(obj, path, [*understood, "listDelimiter", *(["delimiter"] if delimiter else [])])
        if obj.get("listDelimiter", _DRUID_LIST_DELIMITER) != _DRUID_LIST_DELIMITER:
            self.problem(
                _at(path, "listDelimiter"),
                "multi-value dimensions are not supported, so values are never split; remove "
                "listDelimiter",
            )
        header = self.flag(obj, "findColumnsFromHeader", path)
        old = self.flag(obj, "hasHeaderRow", path)  # Druid's deprecated name
        if header is not None and old is not None:
            self.problem(_at(path, "hasHeaderRow"), "old name of findColumnsFromHeader; keep one")
        if obj.get("columns") and (header or old):
            self.problem(
                _at(path, "columns"),
                "given with findColumnsFromHeader: true, which would ignore them; keep one",
            )
        return {
            "columns": tuple(self.texts(obj, "columns", path)),
            "find_columns_from_header": bool(header or old),
            "skip_header_rows": self.integer(obj, "skipHeaderRows", path, 0) or 0,
            "delimiter": self.text(obj, "delimiter", path) if delimiter else None,
        }

    def flatten(self, value: Any, path: str) -> None:
        """Only the flattenSpec that flattens nothing (top-level fields as columns)."""
        obj = self.object(value, path)
        self.keys(obj, path, ("useFieldDiscovery", "fields"))
        if obj.get("fields") or obj.get("useFieldDiscovery", True) is not True:
            self.problem(
                path,
                "flattening nested fields is not supported; read top-level fields (remove the "
                "flattenSpec) and extract nested ones with transforms, e.g. "
                '{"type": "expression", "name": "city", "expression": "geo.city"}',
            )

    # -- tuningConfig --------------------------------------------------------------------------

    def tuning(self, value: Any, path: str, kind: str) -> dict[str, Any]:
        obj = self.object(value, path)
        since = len(self.problems)
        understood = (
            "type",
            "partitionsSpec",
            "forceGuaranteedRollup",
            "maxParseExceptions",
            "reportParseExceptions",
            *_DEPRECATED_PARTITIONING,
        )
        self.keys(obj, path, understood, TUNING_NO_EFFECT)
        if obj.get("type", kind) != kind:
            self.problem(
                _at(path, "type"), f"{_show(obj['type'])} does not match the task type {kind!r}"
            )
        force = self.flag(obj, "forceGuaranteedRollup", path)
        section: dict[str, Any] = {"partitionsSpec": self.partitions(obj, path, bool(force))}
        if force is not None:
            section["forceGuaranteedRollup"] = force
        limit = self.integer(obj, "maxParseExceptions", path, 0)
        if self.flag(obj, "reportParseExceptions", path):
            if limit:
                logger.info(
                    "%s has no effect on Spark: reportParseExceptions: true sets it to 0, as "
                    "in Druid",
                    _at(path, "maxParseExceptions"),
                )
            limit = 0
        section["maxParseExceptions"] = limit or 0
        self.check(path, {"tuningConfig": section}, since)
        return section

    def partitions(self, obj: Mapping[str, Any], path: str, force: bool) -> dict[str, Any]:
        """The partitionsSpec, or the one Druid builds from the deprecated keys."""
        old = {k: obj[k] for k in _DEPRECATED_PARTITIONING if obj.get(k) is not None}
        given = obj.get("partitionsSpec")
        if given is not None:
            for key in old:  # Druid's getPartitionsSpec drops them too
                logger.info(
                    "%s has no effect on Spark: Druid ignores it too when partitionsSpec is given",
                    _at(path, key),
                )
            if not isinstance(given, Mapping):
                self.problem(_at(path, "partitionsSpec"), f"must be an object, got {_show(given)}")
                return {}
            return dict(given)
        if "maxRowsPerSegment" in old and "targetPartitionSize" in old:
            self.problem(
                _at(path, "targetPartitionSize"),
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
                logger.info(
                    "%s has no effect on Spark: Druid ignores it too with %s partitioning",
                    _at(path, key),
                    spec["type"],
                )
        return {k: v for k, v in spec.items() if v is not None}


def _error(problems: Sequence[str]) -> SpecError:
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    lines = [f"this Druid task cannot run on segmentlake ({count}):"]
    lines += [f"  - {p}" for p in problems]
    return SpecError("\n".join(lines))
