"""The validating reader of a Druid task's JSON (:func:`read_task`).

It reads the dataSchema and tuningConfig as every ingestion spec is read (the core's
:class:`DataSchemaReader`), plus what only a task has: its type, id, context and ioConfig.
Every problem is collected with its JSON path and all are raised together in ONE
:class:`SpecError`; keys without effect on Spark are logged at INFO to this module's logger.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import build_intervals, build_spec
from segmentlake.core.interval import Interval
from segmentlake.core.spec_reader import (
    INT32_MAX,
    TASK_TYPES,
    DataSchemaReader,
    SchemaParts,
    TuningParts,
    at,
    show,
    spec_error,
)
from segmentlake.druid.flatten import FlattenField, FlattenSpec
from segmentlake.druid.ingest_task import (
    DOUBLE_QUOTES,
    DruidIngestTask,
    aligned_interval,
    mode_problems,
)
from segmentlake.druid.input import (
    INPUT_FORMATS,
    CombiningInputSource,
    DruidInputSource,
    InlineInputSource,
    InputFormat,
    InputSource,
    LocalInputSource,
    reads_files,
)
from segmentlake.druid.no_effect import CONTEXT_NO_EFFECT, JSON_NO_EFFECT, TASK_NO_EFFECT
from segmentlake.errors import SpecError

__all__ = ["TaskReader", "read_task"]

logger = logging.getLogger(__name__)

_PERFECT_ROLLUP = ("hashed", "range", "single_dim")
# Druid's default listDelimiter: values are only split on it for multi-value dimensions.
_DRUID_LIST_DELIMITER = "\u0001"


def read_task(value: Any) -> DruidIngestTask:
    """The task of a Druid task JSON (parsed); ONE :class:`SpecError` listing every refused
    key and bad value with its JSON path."""
    return TaskReader().task(value)


class TaskReader(DataSchemaReader):
    """Reads one task JSON: the dataSchema and tuningConfig as every ingestion spec is read
    (:class:`DataSchemaReader`), plus what only a task has (its type, id, context and
    ioConfig), collecting every problem (JSON path: message) before failing."""

    def __init__(self) -> None:
        super().__init__(logger)

    def task(self, value: Any) -> DruidIngestTask:
        top = self.object(value, "(task)", required=True)
        root, prefix = self.root(top)
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
        self.mode(options, schema, tuning, prefix)
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

    def root(self, top: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
        """The object holding the dataSchema, ioConfig and tuningConfig, and its path:
        ``spec``, or the task itself in Druid's older form."""
        if top.get("type") == "compact":
            self.problem(
                "type",
                "'compact' is a compaction task, not an ingestion task: read it with "
                "DruidCompactTask.from_dict or segmentlake.druid.tasks.read_druid_task; "
                "segmentlake ingest runs both",
            )
            raise _error(self.problems)
        if not {"spec", "dataSchema", "ioConfig"} & set(top):
            if top.get("type") not in TASK_TYPES:  # say which tasks there are, too
                self.problem(
                    "type",
                    f"{show(top.get('type'))} is not a task segmentlake runs; accepted: "
                    f"{', '.join(TASK_TYPES)} (ingestion, with a spec), compact, kill",
                )
            self.problem(
                "spec",
                "is required: the task's dataSchema, ioConfig and tuningConfig (or those three "
                "at the top level, Druid's older form)",
            )
            raise _error(self.problems)
        if "spec" in top:
            self.keys(top, "", ("type", "id", "spec", "context"), TASK_NO_EFFECT)
            root = self.object(top["spec"], "spec", required=True)
            self.keys(root, "spec", ("dataSchema", "ioConfig", "tuningConfig"))
            return root, "spec"
        understood = ("type", "id", "context", "dataSchema", "ioConfig", "tuningConfig")
        self.keys(top, "", understood, TASK_NO_EFFECT)
        return top, ""

    def mode(
        self, options: Mapping[str, Any], schema: SchemaParts, tuning: TuningParts, prefix: str
    ) -> None:
        """Report each contradiction between the task's mode and its spec where it is."""
        places = {
            "intervals": at(prefix, "dataSchema.granularitySpec"),
            "dropExisting": at(prefix, "ioConfig"),
            "partitionsSpec": at(prefix, "tuningConfig"),
        }
        partitions = {} if tuning.partitions is None else tuning.partitions.fields
        for key, message in mode_problems(
            append=options["append_to_existing"],
            drop=options["drop_existing"],
            has_intervals=_has_intervals(schema),
            perfect_rollup=partitions.get("type") in _PERFECT_ROLLUP,
        ):
            self.problem(at(places[key], key), message)

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
                self.problem(at(section.path, "expression"), DOUBLE_QUOTES.format(name=name))

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
        elif source is not None and not reads_files(source):
            pass  # a druid source's rows come typed from its segments: no format to parse them
        else:
            self.problem(
                at(path, "inputFormat"),
                'is required (or Druid 0.12\'s dataSchema.parser), e.g. {"type": "json"}; '
                "accepted types: " + ", ".join(INPUT_FORMATS),
            )
        fmt = self.input_format(*found) if found is not None else None
        return {"input_source": source, "input_format": fmt, **mode}

    def input_source(self, value: Any, path: str, *, nested: bool = False) -> InputSource | None:
        obj = self.object(value, path, required=True)
        if not obj:
            return None
        kind = obj.get("type")
        if kind == "druid":
            return self.druid_source(obj, path)
        if kind == "combining" and not nested:
            return self.combining_source(obj, path)
        if kind == "inline":
            self.keys(obj, path, ("type", "data"))
            data = self.text(obj, "data", path, required=True)
            return None if data is None else self.attempt(path, lambda: InlineInputSource(data))
        if kind != "local":
            accepted = "local, inline, druid" + ("" if nested else ", combining")
            self.problem(
                at(path, "type"),
                f"input source {show(kind)} is not supported{' here' if nested else ''}; "
                f"accepted: {accepted} (for other sources, read the rows with Spark and call "
                "lake.append / lake.overwrite)",
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

    def druid_source(self, obj: Mapping[str, Any], path: str) -> DruidInputSource | None:
        self.keys(obj, path, ("type", "dataSource", "interval", "filter"))
        datasource = self.text(obj, "dataSource", path, required=True)
        text = self.text(obj, "interval", path, required=True)
        filt = self.object(obj.get("filter"), at(path, "filter")) or None
        span = None
        if text is not None:
            span = self.attempt(at(path, "interval"), functools.partial(Interval.parse, text))
        if datasource is None or span is None:
            return None
        return self.attempt(path, lambda: DruidInputSource(datasource, span, filt))

    def combining_source(self, obj: Mapping[str, Any], path: str) -> CombiningInputSource | None:
        self.keys(obj, path, ("type", "delegates"))
        where = at(path, "delegates")
        given = self.items(obj, "delegates", path)
        if not given:
            self.problem(where, "is required: a non-empty list of input sources")
            return None
        read = [self.input_source(d, f"{where}[{i}]", nested=True) for i, d in enumerate(given)]
        delegates = [d for d in read if d is not None]
        if len(delegates) < len(read):
            return None
        return self.attempt(path, lambda: CombiningInputSource(tuple(delegates)))  # type: ignore[arg-type]

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
        self.keys(obj, path, (*understood, "assumeNewlineDelimited"), JSON_NO_EFFECT)
        flatten = self.flatten(obj.get("flattenSpec"), at(path, "flattenSpec"))
        if obj.get("featureSpec"):
            self.problem(
                at(path, "featureSpec"),
                "Jackson parser features are not supported (Spark's JSON reader parses "
                "standard JSON); remove it",
            )
        self.flag(obj, "assumeNewlineDelimited", path)  # Spark reads one object per line
        return {
            "keep_null_columns": bool(self.flag(obj, "keepNullColumns", path)),
            "flatten": flatten,
        }

    def parquet_format(self, obj: Mapping[str, Any], path: str) -> dict[str, Any]:
        self.keys(obj, path, ("type", "flattenSpec", "binaryAsString"))
        flatten = self.flatten(obj.get("flattenSpec"), at(path, "flattenSpec"))
        return {
            "binary_as_string": bool(self.flag(obj, "binaryAsString", path)),
            "flatten": flatten,
        }

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

    def flatten(self, value: Any, path: str) -> FlattenSpec | None:
        """Druid's flattenSpec: its fields (``root``, ``path``, ``jq``, ``tree``), each
        problem at its path."""
        if value is None:
            return None
        obj = self.object(value, path)
        self.keys(obj, path, ("useFieldDiscovery", "fields"))
        discovery = self.flag(obj, "useFieldDiscovery", path)
        fields = []
        for i, entry in enumerate(self.items(obj, "fields", path)):
            where = f"{path}.fields[{i}]"
            field_obj = self.object(entry, where, required=True)
            self.keys(field_obj, where, ("type", "name", "expr", "nodes"))
            built = self.attempt(where, functools.partial(FlattenField.from_dict, dict(field_obj)))
            if built is not None:
                fields.append(built)
        return self.attempt(
            path, lambda: FlattenSpec(True if discovery is None else discovery, tuple(fields))
        )


def _has_intervals(schema: SchemaParts) -> bool:
    """Whether the task gives intervals (an unreadable granularitySpec's problems say
    enough: no more about it)."""
    if not schema.granularity.ok:
        return True
    return schema.intervals is not None and bool(schema.intervals.fields["intervals"])


def _error(problems: Sequence[str]) -> SpecError:
    return spec_error("this Druid task cannot run on segmentlake", problems)
