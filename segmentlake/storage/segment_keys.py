"""Where a segment's rows are: its ``__segment`` key, the Delta partition value its load spec
names, and the keys tasks write under.

A segment record keeps its data location (Druid's load spec) apart from its id (DESIGN §3), so
a compaction can re-publish rows under a new id or version: several records may then name one
key, and only the load spec says which key a record reads.
"""

from __future__ import annotations

from typing import Any

from segmentlake.core.segment import DataSegment
from segmentlake.errors import SpecError

__all__ = ["data_key", "delta_load_spec", "key_order", "segment_key"]


def delta_load_spec(path: str, key: str) -> dict[str, Any]:
    """The load spec of rows under ``key`` in the datasource table at ``path``."""
    return {"type": "delta", "path": path, "segment": key}


def data_key(segment: DataSegment) -> str | None:
    """The ``__segment`` key a segment's rows are under (None for tombstones and load specs
    that are not segmentlake's)."""
    spec = segment.load_spec
    key = spec.get("segment")
    return key if spec.get("type") == "delta" and isinstance(key, str) else None


def segment_key(segment: DataSegment) -> str:
    """The ``__segment`` key of ``segment``'s rows; :class:`SpecError` if its load spec names
    none (a reader cannot find its rows)."""
    key = data_key(segment)
    if key is None:
        raise SpecError(
            f"segment {segment.id} has load spec {dict(segment.load_spec)}; segmentlake reads "
            "{'type': 'delta', 'path': ..., 'segment': <__segment value>}"
        )
    return key


def key_order(key: str) -> tuple[int, ...]:
    """(chunk ms[, bucket]) of a key a task wrote: ``<chunk ms>.<token>``, or
    ``<chunk ms>.<bucket>.<token>`` of a split or a perfect rollup.

    The task's random token makes a key unique to the task, so rows of a task that fails
    before publishing are never read (only published keys are). The chunk comes first and the
    key stays short: Spark sorts rows by it before writing, and long shared prefixes made the
    write measurably slower."""
    return tuple(int(part) for part in key.split(".")[:-1])
