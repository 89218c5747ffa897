"""Which Druid task a JSON is: a native batch ingestion task (``index_parallel``, ``index``),
a ``compact`` task or a ``kill`` task, read by that task's reader (:func:`read_druid_task`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from segmentlake.core.spec_reader import safe_repr
from segmentlake.druid.compact_task import COMPACT, DruidCompactTask, read_compact_task
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid.kill_task import KILL, DruidKillTask, read_kill_task
from segmentlake.errors import SpecError

__all__ = ["DruidTask", "read_druid_task", "task_json"]

DruidTask = DruidIngestTask | DruidCompactTask | DruidKillTask


def task_json(text: str | bytes) -> Any:
    """The parsed JSON of a task spec's text; :class:`SpecError` saying where it is not JSON."""
    if not isinstance(text, str | bytes):
        raise SpecError(f"a task spec's JSON must be text, got {type(text).__name__}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(
            f"the task spec is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
        ) from e
    except (ValueError, RecursionError) as e:  # a number of 4300+ digits; deep nesting
        raise SpecError(f"the task spec is not valid JSON: {safe_repr(e)}") from e


def read_druid_task(value: Any) -> DruidTask:
    """The task of a Druid task JSON (parsed), by its ``type``: ``compact``, ``kill``, or a
    native batch ingestion task (anything else is read, and refused, as one)."""
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind == COMPACT:
        return read_compact_task(value)
    if kind == KILL:
        return read_kill_task(value)
    return DruidIngestTask.from_dict(value)
