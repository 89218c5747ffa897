"""segmentlake's load spec: where a segment's rows are, as Druid's ``loadSpec`` says it.

A segment record keeps its data location apart from its id (DESIGN §3), so a compaction can
re-publish rows under a new id or version: several records may then name one ``__segment``
key of the datasource table, and only the load spec says which key a record reads.
"""

from __future__ import annotations

from typing import Any

from segmentlake.core.segment import DataSegment
from segmentlake.errors import SpecError

__all__ = ["data_key", "delta_load_spec", "segment_key"]


def delta_load_spec(path: str | None, key: str | None) -> dict[str, Any]:
    """The load spec of rows under ``key`` in the datasource table at ``path`` (a record
    written without either leaves it out)."""
    spec: dict[str, Any] = {"type": "delta"}
    if path is not None:
        spec["path"] = path
    if key is not None:
        spec["segment"] = key
    return spec


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
