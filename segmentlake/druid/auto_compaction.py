"""Druid's automatic compaction config (the JSON a Druid user POSTs to
``/druid/coordinator/v1/config/compaction``) read into a :class:`CompactionConfig` for the
compaction manager (:func:`compaction_config_from_druid`).

What it means here:

* ``granularitySpec.segmentGranularity``: the target chunking; the manager re-chunks chunks of
  another granularity with major compactions.
* ``tuningConfig.partitionsSpec``: ``dynamic`` (Druid's default) sets the size minor
  compactions cut segments to (``maxRowsPerSegment``), and is the major compactions'
  partitioning when a segmentGranularity is given; ``hashed``, ``range`` and ``single_dim``
  make the manager re-partition chunks not made that way (major compactions).
* ``skipOffsetFromLatest`` (default ``P1D``, as in Druid): no system compaction touches a
  chunk ending after the datasource's latest data end minus that period.

Every key is understood, without effect (logged at INFO) or refused, and all problems are
reported together in ONE :class:`SpecError` with their JSON paths. Refused, saying what to do:
``queryGranularity`` and ``rollup`` (the manager keeps the segments'), custom
``dimensionsSpec`` / ``metricsSpec`` / ``transformSpec`` / ``projections``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Period, is_zero_period
from segmentlake.core.partitions_spec import (
    DEFAULT_MAX_ROWS_PER_SEGMENT,
    DynamicPartitionsSpec,
    PartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.core.spec_reader import DataSchemaReader, at, show, spec_error

__all__ = ["DRUID_ONLY_KEYS", "compaction_config_from_druid", "is_druid_compaction_config"]

logger = logging.getLogger(__name__)

_NO_EFFECT: Mapping[str, str] = {
    "taskPriority": "the manager's compactions take lock priority 0, so they never revoke an "
    "ingestion's locks; appends go on during them anyway",
    "inputSegmentSizeBytes": "a manager's batch is bounded by its batch_rows and "
    "batch_segments (lake.compaction_manager)",
    "taskContext": "Spark runs the compactions; the manager has no Druid task context",
    "engine": "Spark runs the compactions (Druid's native or MSQ engine is Druid's choice)",
}
_REFUSED = {
    "dimensionsSpec": "the manager's compactions keep the union of the segments' dimensions",
    "metricsSpec": "the manager's compactions keep the segments' metrics (combined)",
    "transformSpec": "the manager's compactions keep every row",
    "projections": "segmentlake segments have no projections",
}
# Keys only Druid's form has: a config with one of them is read as Druid's
# (``maxRowsPerSegment`` and ``skipOffsetFromLatest`` are segmentlake's own keys too).
DRUID_ONLY_KEYS = frozenset(
    {"dataSource", "granularitySpec", "tuningConfig", "ioConfig", *_NO_EFFECT, *_REFUSED}
)
_DRUID_SKIP_OFFSET = "P1D"


def is_druid_compaction_config(obj: object) -> bool:
    """Whether ``obj`` is Druid's automatic compaction config rather than segmentlake's own
    (:meth:`CompactionConfig.from_json`): it has a key only Druid's form has."""
    return isinstance(obj, Mapping) and any(k in DRUID_ONLY_KEYS for k in obj)


def compaction_config_from_druid(obj: Any, *, datasource: str | None = None) -> CompactionConfig:
    """The manager config of Druid's automatic compaction config ``obj`` (see the module),
    for ``datasource`` (its ``dataSource`` must name it, when given); ONE :class:`SpecError`
    listing every refused key and bad value with its JSON path.

    >>> compaction_config_from_druid({"dataSource": "wikipedia_hour",
    ...     "granularitySpec": {"segmentGranularity": "DAY"}}).segment_granularity.name
    'DAY'
    """
    reader = _Reader(logger)
    config = reader.config(obj, datasource)
    if reader.problems or config is None:
        raise spec_error("this Druid compaction config cannot be used", reader.problems)
    return config


class _Reader(DataSchemaReader):
    def config(self, value: Any, datasource: str | None) -> CompactionConfig | None:
        obj = self.object(value, "(config)", required=True)
        understood = (
            "dataSource",
            "granularitySpec",
            "tuningConfig",
            "skipOffsetFromLatest",
            "maxRowsPerSegment",
            "ioConfig",
            *_REFUSED,
        )
        self.keys(obj, "", understood, _NO_EFFECT)
        named = self.text(obj, "dataSource", "", required=True)
        if named is not None and datasource is not None and named != datasource:
            self.problem(
                "dataSource",
                f"{show(named)} is not the datasource being configured, {datasource!r}",
            )
        for key, why in _REFUSED.items():
            if obj.get(key) not in (None, {}, []):
                self.problem(key, f"a custom {key} is not supported: {why}")
        io = self.object(obj.get("ioConfig"), "ioConfig")
        self.keys(io, "ioConfig", ("dropExisting",))
        self.flag(io, "dropExisting", "ioConfig")  # chunks are replaced whole either way
        granularity = self.segment_granularity(obj.get("granularitySpec"))
        partitions = self.partitioning(obj)
        offset = self.skip_offset(obj)
        if self.problems or partitions is None:
            return None
        dynamic = isinstance(partitions, DynamicPartitionsSpec)
        rows = partitions.segment_row_limit if dynamic else None
        return self.attempt(
            "(config)",
            lambda: CompactionConfig(
                max_rows_per_segment=rows or DEFAULT_MAX_ROWS_PER_SEGMENT,
                segment_granularity=granularity,
                partitions_spec=None if dynamic and granularity is None else partitions,
                skip_offset_from_latest=offset,
            ),
        )

    def segment_granularity(self, value: Any) -> Granularity | None:
        path = "granularitySpec"
        obj = self.object(value, path)
        self.keys(obj, path, ("segmentGranularity", "queryGranularity", "rollup"))
        for key in ("queryGranularity", "rollup"):
            if obj.get(key) is not None:
                self.problem(
                    at(path, key),
                    "not supported by the compaction manager, which keeps the segments' own; "
                    "change it once with lake.compact(..., mode='major', query_granularity=..., "
                    "rollup=...)",
                )
        text = obj.get("segmentGranularity")
        if text is None:
            return None
        where = at(path, "segmentGranularity")
        return self.attempt(where, functools.partial(Granularity.parse, text))

    def partitioning(self, obj: Mapping[str, Any]) -> PartitionsSpec | None:
        tuning = self.tuning(obj.get("tuningConfig"), "tuningConfig", None)
        old = self.integer(obj, "maxRowsPerSegment", "", 1)
        if tuning.partitions is None:
            return self.attempt(
                "maxRowsPerSegment",
                lambda: DynamicPartitionsSpec(old or DEFAULT_MAX_ROWS_PER_SEGMENT),
            )
        if old is not None:
            self.no_effect("maxRowsPerSegment", "tuningConfig.partitionsSpec says it (Druid too)")
        section = tuning.partitions
        return self.attempt(section.path, lambda: partitions_spec_from_dict(section.fields))

    def skip_offset(self, obj: Mapping[str, Any]) -> Period | None:
        text = obj.get("skipOffsetFromLatest", _DRUID_SKIP_OFFSET)
        if not isinstance(text, str):
            self.problem("skipOffsetFromLatest", f"must be an ISO-8601 period, got {show(text)}")
            return None
        if is_zero_period(text):
            return None  # nothing skipped
        return self.attempt("skipOffsetFromLatest", functools.partial(Period.parse, text))
