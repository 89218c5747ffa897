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

The reading itself is :mod:`segmentlake.druid.ingest_task_reader`.
:meth:`DruidIngestTask.to_dict` writes Druid's JSON back (``from_dict(to_dict(t)) == t``). A
task runs on a ``Lake`` with :func:`segmentlake.druid_runner.run_druid_task`; the fields and
their meaning on Spark are tabulated in docs/druid-specs.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import Interval
from segmentlake.core.spec_reader import (
    INT32_MAX,
    TASK_TYPES,
    check_flag,
    check_int,
    check_text,
    safe_repr,
)
from segmentlake.druid.input import (
    CombiningInputSource,
    DruidInputSource,
    InlineInputSource,
    InputFormat,
    InputSource,
    LocalInputSource,
    reads_files,
    sources_of,
)
from segmentlake.errors import SpecError

__all__ = [
    "DOUBLE_QUOTES",
    "DruidIngestTask",
    "aligned_interval",
    "check_context",
    "check_task_id",
    "context_json",
    "mode_problems",
]

_TASK_ID = re.compile(r"[A-Za-z0-9_-]+")


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


def check_task_id(task_id: object) -> None:
    """Refuse a task id that is not letters, digits, ``_`` and ``-``."""
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
        raise SpecError(
            f"task id {safe_repr(task_id)} must be letters, digits, '_' and '-' only "
            "(it names the task's storage partitions)"
        )


def mode_problems(
    *, append: bool, drop: bool, has_intervals: bool, perfect_rollup: bool
) -> list[tuple[str, str]]:
    """(field, message) for every contradiction between the task's mode and its spec."""
    problems = []
    if drop and not has_intervals:
        problems.append(
            (
                "intervals",
                "required with dropExisting: true (Druid requires them too): it replaces every "
                'chunk of the intervals, e.g. "intervals": ["2024-01-01/2024-01-08"]; without '
                "intervals and dropExisting, the chunks the rows fall in are replaced",
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
    input_source: InputSource
    input_format: InputFormat | None
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
        if not isinstance(
            self.input_source,
            LocalInputSource | InlineInputSource | DruidInputSource | CombiningInputSource,
        ):
            raise SpecError(
                "input_source must be a local, inline, druid or combining input source, got "
                + safe_repr(self.input_source)
            )
        self._check_format()
        if not isinstance(self.task_type, str) or self.task_type not in TASK_TYPES:
            raise SpecError(f"task type {safe_repr(self.task_type)} is not one of {TASK_TYPES}")
        self._check_options()
        object.__setattr__(self, "intervals", self._intervals())
        problems = mode_problems(
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

    def _check_format(self) -> None:
        fmt = self.input_format
        if fmt is not None and not isinstance(fmt, InputFormat):
            raise SpecError(f"input_format must be an InputFormat, got {safe_repr(fmt)}")
        if fmt is None and reads_files(self.input_source):
            raise SpecError(
                'ioConfig.inputFormat is required to parse the input\'s rows, e.g. {"type": '
                '"json"} (only a druid inputSource has rows of its own format)'
            )
        inline = any(isinstance(s, InlineInputSource) for s in sources_of(self.input_source))
        if inline and fmt is not None and fmt.type == "parquet":
            raise SpecError("inline data is text: its inputFormat is json, csv or tsv, not parquet")

    def _check_options(self) -> None:
        if self.task_id is not None:
            check_task_id(self.task_id)
        check_flag(self.append_to_existing, "ioConfig.appendToExisting")
        check_flag(self.drop_existing, "ioConfig.dropExisting")
        check_context(self.priority, self.lock_timeout_ms)

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
        chunks of ``intervals``; None when no intervals are given (an overwrite then replaces
        the chunks its rows fall in, as in Druid)."""
        if not self.intervals:
            return None
        return aligned_interval(self.intervals, self.spec.granularity_spec.segment_granularity)

    # -- JSON --------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, task: Any) -> DruidIngestTask:
        """Read a Druid ``index_parallel`` / ``index`` task JSON (see the module). Raises ONE
        :class:`SpecError` listing every refused key and bad value with its JSON path."""
        # The reader builds the task it read: importing it at the top would be circular.
        from segmentlake.druid.ingest_task_reader import read_task

        return read_task(task)

    @classmethod
    def from_json(cls, text: str) -> DruidIngestTask:
        """:meth:`from_dict` of a JSON text."""
        from segmentlake.druid.tasks import task_json  # it reads every kind of task

        return cls.from_dict(task_json(text))

    def to_dict(self) -> dict[str, Any]:
        """Druid's task JSON for this task, in the current ``{"type", "spec"}`` form."""
        base = self.spec.to_dict()
        schema = {"dataSource": self.datasource, **base["dataSchema"]}
        if self.intervals:
            schema["granularitySpec"]["intervals"] = [str(i) for i in self.intervals]
        io_config = {
            "type": self.task_type,
            "inputSource": self.input_source.to_dict(),
            "appendToExisting": self.append_to_existing,
            "dropExisting": self.drop_existing,
        }
        if self.input_format is not None:
            io_config["inputFormat"] = self.input_format.to_dict()
        task: dict[str, Any] = {"type": self.task_type}
        if self.task_id is not None:
            task["id"] = self.task_id
        task["spec"] = {
            "dataSchema": schema,
            "ioConfig": io_config,
            "tuningConfig": {"type": self.task_type, **base["tuningConfig"]},
        }
        task.update(context_json(self.priority, self.lock_timeout_ms))
        return task

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)


def check_context(priority: object, lock_timeout_ms: object) -> None:
    """Refuse a task's ``context.priority`` or ``context.lockTimeoutMillis`` out of range."""
    if priority is not None:
        # Druid's priority is a Java int; the lock table keeps it in an INT column.
        check_int(priority, "context.priority", minimum=-INT32_MAX - 1, maximum=INT32_MAX)
    if lock_timeout_ms is not None:
        check_int(lock_timeout_ms, "context.lockTimeoutMillis", minimum=0)


def context_json(priority: int | None, lock_timeout_ms: int | None) -> dict[str, Any]:
    """``{"context": {...}}`` with the ones given, for a task's JSON (empty: none given)."""
    context = {"priority": priority, "lockTimeoutMillis": lock_timeout_ms}
    given = {k: v for k, v in context.items() if v is not None}
    return {"context": given} if given else {}


# The message for a transform written in Druid's expression language, where the reader finds it
# (with its JSON path) and where a task built in Python is checked.
DOUBLE_QUOTES = (
    "transform {name!r}: Druid quotes column names with double quotes, Spark SQL reads "
    "\"...\" as a string; write `column` (backticks) for a column or 'text' for a string"
)


def _check_druid_form(spec: IngestionSpec) -> None:
    """Refuse what Druid's JSON cannot say, so every task can be written back and re-read."""
    if spec.dimensions_spec.dimensions == ():
        raise SpecError("a Druid task lists at least one dimension, or none to discover them")
    for t in spec.transform_spec.transforms:
        if '"' in t.expression:
            raise SpecError(DOUBLE_QUOTES.format(name=t.name))
