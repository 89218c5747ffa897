"""Druid's manual compaction task (``"type": "compact"``) as one frozen object, and its
validating reader.

A compaction task rewrites every segment of an interval: on segmentlake that is a major
compaction (:meth:`segmentlake.Lake.compact` with ``mode="major"``): the interval's whole
chunks re-ingested under a new version, REPLACE-locked so appends go on meanwhile. The task's
``granularitySpec`` (or the deprecated top-level ``segmentGranularity``) sets the new segment
and query granularities and rollup, each defaulting to what the segments have, as in Druid;
its ``tuningConfig.partitionsSpec`` the partitioning, ``dynamic`` by default as in Druid (each
chunk rolled up whole, then cut to ``maxRowsPerSegment``). The interval comes from
``ioConfig.inputSpec`` (type ``interval``) or the deprecated top-level ``interval``.

As with ingestion tasks, every key is understood, without effect (logged at INFO) or refused,
and all problems are reported together in ONE :class:`SpecError` with their JSON paths. Refused
with what to do instead: a custom ``dimensionsSpec``, ``metricsSpec`` or ``transformSpec`` (a
compaction keeps the segments' dimensions, metrics and rows), a ``segments`` inputSpec, and
``allowNonAlignedInterval: true`` (segmentlake compacts whole chunks only).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.partitions_spec import (
    DynamicPartitionsSpec,
    PartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.core.spec_reader import (
    at,
    check_flag,
    check_text,
    safe_repr,
    show,
    spec_error,
)
from segmentlake.druid.ingest_task import check_context, check_task_id, context_json
from segmentlake.druid.ingest_task_reader import TaskReader
from segmentlake.druid.no_effect import TASK_NO_EFFECT
from segmentlake.errors import SpecError

__all__ = ["DruidCompactTask", "read_compact_task"]

logger = logging.getLogger(__name__)

COMPACT = "compact"
_NOT_CHANGED = (
    "a segmentlake compaction keeps the segments' dimensions, metrics and rows (the union of "
    "the segments' dimensions and their metrics, combined); to change them, re-ingest the "
    "interval with an index_parallel task or lake.overwrite(lake.read(...), ...)"
)
_TOP_NO_EFFECT: Mapping[str, str] = {
    **TASK_NO_EFFECT,
    "compactionRunner": "Spark runs the compaction (a native or MSQ runner is Druid's choice)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DruidCompactTask:
    """One Druid ``compact`` task: compact ``datasource`` in ``interval`` (whole chunks of the
    target segment granularity) to ``segment_granularity`` / ``query_granularity`` /
    ``rollup`` (None: what the segments have) with ``partitions_spec`` (Druid's default:
    dynamic). ``task_id``, ``priority`` and ``lock_timeout_ms`` come from the task's ``id``
    and ``context``.

    >>> DruidCompactTask.from_dict({"type": "compact", "dataSource": "wiki",
    ...     "interval": "2015-09-12/2015-09-13"}).interval
    Interval('2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z')
    """

    datasource: str
    interval: Interval
    segment_granularity: Granularity | None = None
    query_granularity: Granularity | None = None
    rollup: bool | None = None
    partitions_spec: PartitionsSpec = field(default_factory=DynamicPartitionsSpec)
    task_id: str | None = None
    priority: int | None = None
    lock_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        check_text(self.datasource, "dataSource", what="a non-empty name")
        if not isinstance(self.interval, Interval):
            object.__setattr__(self, "interval", Interval.parse(self.interval))
        if self.interval.is_empty():
            raise SpecError(f"interval {self.interval} is empty: nothing to compact")
        for name in ("segment_granularity", "query_granularity"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Granularity):
                object.__setattr__(self, name, Granularity.parse(value))
        if self.rollup is not None:
            check_flag(self.rollup, "granularitySpec.rollup")
        if isinstance(self.partitions_spec, Mapping):
            object.__setattr__(
                self, "partitions_spec", partitions_spec_from_dict(self.partitions_spec)
            )
        if not isinstance(self.partitions_spec, PartitionsSpec):
            raise SpecError(
                f"partitions_spec must be a partitions spec, got {safe_repr(self.partitions_spec)}"
            )
        # The id and context are checked as an ingestion task's are.
        if self.task_id is not None:
            check_task_id(self.task_id)
        check_context(self.priority, self.lock_timeout_ms)

    @classmethod
    def from_dict(cls, task: Any) -> DruidCompactTask:
        """Read a Druid ``compact`` task JSON (see the module); ONE :class:`SpecError` lists
        every refused key and bad value with its JSON path."""
        return read_compact_task(task)

    @classmethod
    def from_json(cls, text: str) -> DruidCompactTask:
        """:meth:`from_dict` of a JSON text."""
        from segmentlake.druid.tasks import task_json  # it reads every kind of task

        return cls.from_dict(task_json(text))

    def to_dict(self) -> dict[str, Any]:
        """Druid's JSON for this task, in the current form (``ioConfig.inputSpec``)."""
        task: dict[str, Any] = {"type": COMPACT}
        if self.task_id is not None:
            task["id"] = self.task_id
        task["dataSource"] = self.datasource
        task["ioConfig"] = {
            "type": COMPACT,
            "inputSpec": {"type": "interval", "interval": str(self.interval)},
        }
        granularity: dict[str, Any] = {}
        if self.segment_granularity is not None:
            granularity["segmentGranularity"] = self.segment_granularity.name
        if self.query_granularity is not None:
            granularity["queryGranularity"] = self.query_granularity.name
        if self.rollup is not None:
            granularity["rollup"] = self.rollup
        if granularity:
            task["granularitySpec"] = granularity
        task["tuningConfig"] = {
            "type": "index_parallel",
            "partitionsSpec": self.partitions_spec.to_json(),
        }
        task.update(context_json(self.priority, self.lock_timeout_ms))
        return task

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)


def read_compact_task(value: Any) -> DruidCompactTask:
    """The task of a Druid ``compact`` task JSON (parsed); ONE :class:`SpecError` listing
    every refused key and bad value with its JSON path."""
    return _CompactTaskReader().compact_task(value)


class _CompactTaskReader(TaskReader):
    """Reads one compact task JSON, collecting every problem (JSON path: message)."""

    def compact_task(self, value: Any) -> DruidCompactTask:
        top = self.object(value, "(task)", required=True)
        understood = (
            "type",
            "id",
            "dataSource",
            "ioConfig",
            "interval",
            "granularitySpec",
            "segmentGranularity",
            "tuningConfig",
            "context",
            "dimensionsSpec",
            "dimensions",
            "metricsSpec",
            "transformSpec",
        )
        self.keys(top, "", understood, _TOP_NO_EFFECT)
        if top.get("type") != COMPACT:
            self.problem("type", f"{show(top.get('type'))} is not a compaction task ('compact')")
        for key in ("dimensionsSpec", "dimensions", "metricsSpec", "transformSpec"):
            if top.get(key) not in (None, {}, []):
                self.problem(key, f"a custom {key} is not supported: {_NOT_CHANGED}")
        options: dict[str, Any] = {
            "datasource": self.text(top, "dataSource", "", required=True),
            "task_id": self.text(top, "id", ""),
            "interval": self.interval(top),
            **self.granularities(top),
            **self.context(top.get("context"), "context"),
        }
        options["partitions_spec"] = self.partitioning(top.get("tuningConfig"))
        if self.problems:
            raise _error(self.problems)
        task = self.attempt("(task)", lambda: DruidCompactTask(**options))
        if task is None:
            raise _error(self.problems)
        return task

    def interval(self, top: Mapping[str, Any]) -> Interval | None:
        """The interval of ``ioConfig.inputSpec``, or of the deprecated top-level key."""
        io = self.object(top.get("ioConfig"), "ioConfig")
        self.keys(io, "ioConfig", ("type", "inputSpec", "dropExisting", "allowNonAlignedInterval"))
        if io.get("type", COMPACT) != COMPACT:
            self.problem("ioConfig.type", f"{show(io['type'])} must be 'compact'")
        # Either way, every used segment of the locked chunks is replaced (Druid's true), and
        # no chunk without data gets a segment (nothing is there to drop).
        self.flag(io, "dropExisting", "ioConfig")
        if self.flag(io, "allowNonAlignedInterval", "ioConfig"):
            self.problem(
                "ioConfig.allowNonAlignedInterval",
                "true is not supported: segmentlake compacts whole chunks of the segment "
                "granularity; give an interval made of whole chunks",
            )
        given = "inputSpec" in io, "interval" in top
        if given == (False, False):
            self.problem(
                "ioConfig.inputSpec",
                'is required: {"type": "interval", "interval": "2024-01-01/2024-02-01"}',
            )
            return None
        if all(given):
            self.problem("interval", "given twice: here and in ioConfig.inputSpec; keep one")
            return None
        if given[1]:
            return self.parsed_interval(top, "interval", "")
        where = "ioConfig.inputSpec"
        spec = self.object(io["inputSpec"], where, required=True)
        self.keys(spec, where, ("type", "interval", "segments"))
        kind = spec.get("type")
        if kind == "segments":
            self.problem(
                at(where, "type"),
                "'segments' is not supported: give the segments' umbrella interval with "
                '{"type": "interval", "interval": ...}; every segment in it is compacted',
            )
            return None
        if kind != "interval":
            self.problem(at(where, "type"), f"{show(kind)} is not supported; accepted: interval")
            return None
        return self.parsed_interval(spec, "interval", where)

    def parsed_interval(self, obj: Mapping[str, Any], key: str, path: str) -> Interval | None:
        text = self.text(obj, key, path, required=True)
        if text is None:
            return None
        interval = self.attempt(at(path, key), lambda: Interval.parse(text))
        if interval is not None and interval.is_empty():
            self.problem(at(path, key), f"interval {text!r} is empty: nothing to compact")
            return None
        return interval

    def granularities(self, top: Mapping[str, Any]) -> dict[str, Any]:
        path = "granularitySpec"
        obj = self.object(top.get(path), path)
        self.keys(obj, path, ("type", "segmentGranularity", "queryGranularity", "rollup"))
        if obj.get("type", "uniform") != "uniform":
            kind = show(obj["type"])
            self.problem(at(path, "type"), f"{kind} is not supported; accepted: uniform")
        found: dict[str, Any] = {"rollup": self.flag(obj, "rollup", path)}
        segment = obj.get("segmentGranularity")
        old = top.get("segmentGranularity")
        if segment is not None and old is not None and segment != old:
            self.problem(
                "segmentGranularity",
                f"{show(old)} contradicts granularitySpec.segmentGranularity {show(segment)} "
                "(Druid fails such a task too); keep the granularitySpec's",
            )
        for name, where, value in (
            ("segment_granularity", "granularitySpec.segmentGranularity", segment),
            ("segment_granularity", "segmentGranularity", None if segment else old),
            ("query_granularity", "granularitySpec.queryGranularity", obj.get("queryGranularity")),
        ):
            if value is not None:
                parsed = self.attempt(where, functools.partial(Granularity.parse, value))
                if parsed is not None:
                    found[name] = parsed
        return found

    def partitioning(self, value: Any) -> PartitionsSpec | None:
        """The tuningConfig's partitionsSpec (Druid's deprecated keys too); dynamic when it
        says nothing, as in Druid."""
        tuning = self.tuning(value, "tuningConfig", None)
        section = tuning.partitions
        if section is None:
            return DynamicPartitionsSpec()
        spec = self.attempt(section.path, lambda: partitions_spec_from_dict(section.fields))
        force = tuning.force_guaranteed_rollup
        if spec is not None and force is not None and force != spec.perfect_rollup:
            self.problem(
                "tuningConfig.forceGuaranteedRollup",
                f"{str(force).lower()} contradicts partitionsSpec type {spec.type_name!r}",
            )
        return spec


def _error(problems: list[str]) -> SpecError:
    return spec_error("this Druid compaction task cannot run on segmentlake", problems)
