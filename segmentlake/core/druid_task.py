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
from dataclasses import dataclass
from typing import Any

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec, build_intervals, build_spec
from segmentlake.core.interval import Interval
from segmentlake.core.spec_reader import (
    AVAILABLE,
    INT32_MAX,
    TASK_TYPES,
    TUNING_NO_EFFECT,
    DataSchemaReader,
    SchemaParts,
    at,
    check_flag,
    check_int,
    check_text,
    safe_repr,
    show,
    spec_error,
)
from segmentlake.errors import SpecError

__all__ = [
    "CONTEXT_NO_EFFECT",
    "INPUT_FORMATS",
    "TASK_TYPES",
    "TUNING_NO_EFFECT",
    "DruidIngestTask",
    "InputFormat",
    "LocalInputSource",
    "aligned_interval",
]

logger = logging.getLogger(__name__)

INPUT_FORMATS = ("json", "csv", "tsv", "parquet")
_PERFECT_ROLLUP = ("hashed", "range", "single_dim")
_TASK_ID = re.compile(r"[A-Za-z0-9_-]+")
# Druid's default listDelimiter: values are only split on it for multi-value dimensions.
_DRUID_LIST_DELIMITER = "\u0001"

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
    "awaitSegmentAvailabilityTimeoutMillis": AVAILABLE,
}
_JSON_NO_EFFECT = {
    "useJsonNodeReader": "Spark reads each line on its own, so a bad line never hides good ones",
}


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
        if not isinstance(self.files, list | tuple):
            raise SpecError(
                f"inputSource.files must be a list of paths, got {safe_repr(self.files)}"
            )
        object.__setattr__(self, "files", tuple(self.files))
        named = [("baseDir", self.base_dir), ("filter", self.filter)]
        for key, value in [*named, *(("files", f) for f in self.files)]:
            if value is not None and (not isinstance(value, str) or not value):
                raise SpecError(
                    f"inputSource.{key} must be a non-empty path, got {safe_repr(value)}"
                )
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
        if not isinstance(self.type, str) or self.type not in INPUT_FORMATS:
            raise SpecError(
                f"inputFormat type {safe_repr(self.type)} is not supported; accepted: "
                + ", ".join(INPUT_FORMATS)
            )
        if not isinstance(self.columns, list | tuple):
            raise SpecError(f"inputFormat.columns must be a list, got {safe_repr(self.columns)}")
        object.__setattr__(self, "columns", tuple(self.columns))
        check_flag(self.find_columns_from_header, "inputFormat.findColumnsFromHeader")
        check_flag(self.keep_null_columns, "inputFormat.keepNullColumns")
        check_flag(self.binary_as_string, "inputFormat.binaryAsString")
        check_int(self.skip_header_rows, "inputFormat.skipHeaderRows", minimum=0)
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
            raise SpecError(
                f"inputFormat.columns must be non-empty names, got {safe_repr(self.columns)}"
            )
        if len(set(self.columns)) != len(self.columns):
            raise SpecError(f"inputFormat.columns names a column twice: {list(self.columns)}")
        if self.type == "csv":
            if self.delimiter not in (None, ","):
                raise SpecError('csv is comma-separated; for another delimiter use "type": "tsv"')
            object.__setattr__(self, "delimiter", ",")
        elif self.delimiter is None:
            object.__setattr__(self, "delimiter", "\t")
        elif not isinstance(self.delimiter, str) or not self.delimiter:
            raise SpecError(
                f"inputFormat.delimiter must be non-empty, got {safe_repr(self.delimiter)}"
            )

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
    rows. The dimensions' types are the spec's (:class:`DimensionsSpec`); a task adds Druid's
    default type for the dimensions it declares none for (:attr:`default_dimension_type`).
    ``task_id``, ``priority`` and ``lock_timeout_ms`` come from the task's ``id`` and
    ``context``."""

    datasource: str
    spec: IngestionSpec
    input_source: LocalInputSource
    input_format: InputFormat
    intervals: tuple[Interval, ...] = ()
    append_to_existing: bool = False
    drop_existing: bool = False
    task_type: str = "index_parallel"
    task_id: str | None = None
    priority: int | None = None
    lock_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        check_text(self.datasource, "dataSource", what="a non-empty name")
        if not isinstance(self.spec, IngestionSpec):
            raise SpecError(f"spec must be an IngestionSpec, got {type(self.spec).__name__}")
        if not isinstance(self.input_source, LocalInputSource):
            raise SpecError("input_source must be a LocalInputSource")
        if not isinstance(self.input_format, InputFormat):
            raise SpecError("input_format must be an InputFormat")
        if not isinstance(self.task_type, str) or self.task_type not in TASK_TYPES:
            raise SpecError(f"task type {safe_repr(self.task_type)} is not one of {TASK_TYPES}")
        self._check_options()
        object.__setattr__(self, "intervals", self._intervals())
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
                f"task id {safe_repr(self.task_id)} must be letters, digits, '_' and '-' only "
                "(it names the task's storage partitions)"
            )
        check_flag(self.append_to_existing, "ioConfig.appendToExisting")
        check_flag(self.drop_existing, "ioConfig.dropExisting")
        if self.priority is not None:
            # Druid's priority is a Java int; the lock table keeps it in an INT column.
            check_int(self.priority, "context.priority", minimum=-INT32_MAX - 1, maximum=INT32_MAX)
        if self.lock_timeout_ms is not None:
            check_int(self.lock_timeout_ms, "context.lockTimeoutMillis", minimum=0)

    def _intervals(self) -> tuple[Interval, ...]:
        if not isinstance(self.intervals, list | tuple):
            raise SpecError(
                f"intervals must be a list of intervals, got {safe_repr(self.intervals)}"
            )
        return tuple(i if isinstance(i, Interval) else Interval.parse(i) for i in self.intervals)

    @property
    def default_dimension_type(self) -> str:
        """The type of a dimension whose type the spec does not declare (listed by name, or
        discovered): Druid reads files, whose values have no type it keeps, so ``string``, or
        ``auto`` (the input's type) with ``useSchemaDiscovery``."""
        return "auto" if self.spec.dimensions_spec.schema_discovery else "string"

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
        if not isinstance(text, str | bytes):
            raise SpecError(f"a task spec's JSON must be text, got {type(text).__name__}")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(
                f"the task spec is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
            ) from e
        except (ValueError, RecursionError) as e:  # a number of 4300+ digits; deep nesting
            raise SpecError(f"the task spec is not valid JSON: {safe_repr(e)}") from e
        return cls.from_dict(obj)

    def to_dict(self) -> dict[str, Any]:
        """Druid's task JSON for this task, in the current ``{"type", "spec"}`` form."""
        base = self.spec.to_dict()
        schema = {"dataSource": self.datasource, **base["dataSchema"]}
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
    for t in spec.transform_spec.transforms:
        if '"' in t.expression:
            raise SpecError(_DOUBLE_QUOTES.format(name=t.name))


# -- reading Druid's JSON ----------------------------------------------------------------------


class _Reader(DataSchemaReader):
    """Reads one task JSON: the dataSchema and tuningConfig as every ingestion spec is read
    (:class:`DataSchemaReader`), plus what only a task has (its type, id, context and
    ioConfig), collecting every problem (JSON path: message) before failing."""

    def __init__(self) -> None:
        super().__init__(logger)

    def task(self, value: Any) -> DruidIngestTask:
        top = self.object(value, "(task)", required=True)
        if not {"spec", "dataSchema", "ioConfig"} & set(top):
            self.problem(
                "spec",
                "is required: the task's dataSchema, ioConfig and tuningConfig (or those three "
                "at the top level, Druid's older form)",
            )
            raise _error(self.problems)
        if "spec" in top:
            self.keys(top, "", ("type", "id", "spec", "context"), _TASK_NO_EFFECT)
            root, prefix = self.object(top["spec"], "spec", required=True), "spec"
            self.keys(root, prefix, ("dataSchema", "ioConfig", "tuningConfig"))
        else:  # the older form: dataSchema, ioConfig and tuningConfig at the top level
            understood = ("type", "id", "context", "dataSchema", "ioConfig", "tuningConfig")
            self.keys(top, "", understood, _TASK_NO_EFFECT)
            root, prefix = top, ""
        io_path, tuning_path = at(prefix, "ioConfig"), at(prefix, "tuningConfig")
        io = self.object(root.get("ioConfig"), io_path, required=True)
        kind = self.task_type(top, io)
        options: dict[str, Any] = {"task_type": kind, "task_id": self.text(top, "id", "")}
        options.update(self.context(top.get("context"), "context"))
        schema = self.data_schema(root.get("dataSchema"), at(prefix, "dataSchema"), task=True)
        options.update(self.io_config(io, io_path, kind, schema.parser_format))
        tuning = self.tuning(root.get("tuningConfig"), tuning_path, kind)
        self.druid_expressions(schema)
        spec = build_spec(self, schema, tuning, root=prefix or "(task)")
        intervals = self.intervals(schema)
        places = {
            "intervals": at(prefix, "dataSchema.granularitySpec"),
            "dropExisting": io_path,
            "partitionsSpec": tuning_path,
        }
        partitions = {} if tuning.partitions is None else tuning.partitions.fields
        for key, message in _mode_problems(
            append=options["append_to_existing"],
            drop=options["drop_existing"],
            has_intervals=_has_intervals(schema),
            perfect_rollup=partitions.get("type") in _PERFECT_ROLLUP,
        ):
            self.problem(at(places[key], key), message)
        if self.problems or spec is None:
            raise _error(self.problems)
        task = self.attempt(
            prefix or "(task)",
            lambda: DruidIngestTask(
                datasource=schema.datasource or "",
                spec=spec,
                intervals=intervals,
                **options,
            ),
        )
        if task is None:
            raise _error(self.problems)
        return task

    def task_type(self, top: Mapping[str, Any], io: Mapping[str, Any]) -> str:
        kind = top.get("type", io.get("type", TASK_TYPES[0]))
        if isinstance(kind, str) and kind in TASK_TYPES:
            return kind
        self.problem(
            "type",
            f"{show(kind)} is not a native batch ingestion task; accepted: "
            + ", ".join(TASK_TYPES),
        )
        return TASK_TYPES[0]

    def context(self, value: Any, path: str) -> dict[str, int | None]:
        obj = self.object(value, path)
        self.keys(obj, path, ("priority", "lockTimeoutMillis"), CONTEXT_NO_EFFECT)
        # Druid's priority is a Java int; the lock table keeps it in an INT column.
        priority = self.integer(obj, "priority", path, -INT32_MAX - 1, INT32_MAX)
        timeout = self.integer(obj, "lockTimeoutMillis", path, 0)
        return {"priority": priority, "lock_timeout_ms": timeout}

    def druid_expressions(self, schema: SchemaParts) -> None:
        """A task's transforms were written for Druid: refuse its double-quoted names."""
        for section in schema.transforms:
            expression = section.fields.get("expression")
            if isinstance(expression, str) and '"' in expression:
                name = section.fields.get("name")
                self.problem(at(section.path, "expression"), _DOUBLE_QUOTES.format(name=name))

    def intervals(self, schema: SchemaParts) -> tuple[Interval, ...]:
        """The granularitySpec's intervals, which must make one run of whole chunks."""
        before = len(self.problems)
        intervals = build_intervals(self, schema)
        if not intervals or len(self.problems) > before or not schema.granularity.ok:
            return intervals
        assert schema.intervals is not None
        try:
            segment = Granularity.parse(schema.granularity.fields.get("segment_granularity", "day"))
        except SpecError:  # reported where the granularitySpec is built
            return intervals
        self.attempt(schema.intervals.path, lambda: aligned_interval(intervals, segment))
        return intervals

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
                at(path, "type"), f"{show(obj['type'])} does not match the task type {kind!r}"
            )
        # Druid 0.12's firehose, when it comes alone, is read as the input source it was.
        old = obj.get("inputSource") is None and obj.get("firehose") is not None
        source_key = "firehose" if old else "inputSource"
        if not old and obj.get("firehose") is not None:
            self.problem(at(path, "firehose"), "given together with inputSource; keep one")
        source = self.input_source(obj.get(source_key), at(path, source_key))
        found: tuple[Any, str] | None = None
        if obj.get("inputFormat") is not None:
            found = (obj["inputFormat"], at(path, "inputFormat"))
            if parser_format is not None:
                self.problem(parser_format[1], "given together with ioConfig.inputFormat; keep one")
        elif parser_format is not None:
            found = parser_format
        else:
            self.problem(
                at(path, "inputFormat"),
                'is required (or Druid 0.12\'s dataSchema.parser), e.g. {"type": "json"}; '
                "accepted types: " + ", ".join(INPUT_FORMATS),
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
                at(path, "type"),
                f"input source {show(kind)} is not supported; accepted: local (for other "
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
                at(path, "type"),
                f"input format {show(kind)} is not supported; accepted: "
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
        self.flatten(obj.get("flattenSpec"), at(path, "flattenSpec"))
        if obj.get("featureSpec"):
            self.problem(
                at(path, "featureSpec"),
                "Jackson parser features are not supported (Spark's JSON reader parses "
                "standard JSON); remove it",
            )
        self.flag(obj, "assumeNewlineDelimited", path)  # Spark reads one object per line
        return {"keep_null_columns": bool(self.flag(obj, "keepNullColumns", path))}

    def parquet_format(self, obj: Mapping[str, Any], path: str) -> dict[str, Any]:
        self.keys(obj, path, ("type", "flattenSpec", "binaryAsString"))
        self.flatten(obj.get("flattenSpec"), at(path, "flattenSpec"))
        return {"binary_as_string": bool(self.flag(obj, "binaryAsString", path))}

    def text_format(self, obj: Mapping[str, Any], path: str, *, delimiter: bool) -> dict[str, Any]:
        understood = ["type", "columns", "findColumnsFromHeader", "hasHeaderRow", "skipHeaderRows"]
        self.keys(obj, path, [*understood, "listDelimiter", *(["delimiter"] if delimiter else [])])
        if obj.get("listDelimiter", _DRUID_LIST_DELIMITER) != _DRUID_LIST_DELIMITER:
            self.problem(
                at(path, "listDelimiter"),
                "multi-value dimensions are not supported, so values are never split; remove "
                "listDelimiter",
            )
        header = self.flag(obj, "findColumnsFromHeader", path)
        old = self.flag(obj, "hasHeaderRow", path)  # Druid's deprecated name
        if header is not None and old is not None:
            self.problem(at(path, "hasHeaderRow"), "old name of findColumnsFromHeader; keep one")
        if obj.get("columns") and (header or old):
            self.problem(
                at(path, "columns"),
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


def _has_intervals(schema: SchemaParts) -> bool:
    """Whether the task gives intervals (an unreadable granularitySpec's problems say
    enough: no more about it)."""
    if not schema.granularity.ok:
        return True
    return schema.intervals is not None and bool(schema.intervals.fields["intervals"])


def _error(problems: Sequence[str]) -> SpecError:
    return spec_error("this Druid task cannot run on segmentlake", problems)
