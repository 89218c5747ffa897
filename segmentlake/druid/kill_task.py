"""Druid's kill task (``"type": "kill"``) as one frozen object, and its validating reader.

A kill task permanently deletes a datasource's **unused** segments wholly inside its interval:
on segmentlake, :meth:`segmentlake.Lake.kill` with that interval (records in one commit, then
the rows no used segment serves, then VACUUM with the table's retention). As in Druid, every
unused segment in the interval goes, however recently it was marked unused, unless
``maxUsedStatusLastUpdatedTime`` says only those marked unused at or before that time; used
segments are never touched. The deprecated ``markAsUnused: true`` first marks the used
segments wholly inside the interval unused (Druid's old one-step delete).

Every key is understood, without effect (logged at INFO) or refused, and all problems are
reported together in ONE :class:`SpecError` with their JSON paths. Refused, saying what to do:
``versions`` and ``limit`` (segmentlake kills every unused segment of the interval).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from segmentlake.core.interval import Interval, format_timestamp, parse_timestamp, to_millis
from segmentlake.core.spec_reader import (
    JsonReader,
    check_flag,
    check_int,
    check_text,
    show,
    spec_error,
)
from segmentlake.druid.ingest_task import check_task_id
from segmentlake.druid.no_effect import TASK_NO_EFFECT

__all__ = ["DruidKillTask", "read_kill_task"]

logger = logging.getLogger(__name__)

KILL = "kill"
_NO_EFFECT: Mapping[str, str] = {
    **TASK_NO_EFFECT,
    "batchSize": "segmentlake deletes the records in one metadata commit and the rows in one "
    "Delta commit",
}
_CONTEXT_NO_EFFECT = (
    "a kill deletes only unused segments, which no task locks: it waits for no lock"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DruidKillTask:
    """One Druid ``kill`` task: delete ``datasource``'s unused segments wholly inside
    ``interval`` — those marked unused at or before ``max_used_status_last_updated_ms`` when
    given — after marking its used ones unused if ``mark_as_unused``.

    >>> DruidKillTask.from_dict({"type": "kill", "dataSource": "deletion-tutorial",
    ...     "interval": "2015-09-12/2015-09-13"}).interval
    Interval('2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z')
    """

    datasource: str
    interval: Interval
    mark_as_unused: bool = False
    max_used_status_last_updated_ms: int | None = None
    task_id: str | None = None

    def __post_init__(self) -> None:
        check_text(self.datasource, "dataSource", what="a non-empty name")
        if not isinstance(self.interval, Interval):
            object.__setattr__(self, "interval", Interval.parse(self.interval))
        check_flag(self.mark_as_unused, "markAsUnused")
        if self.max_used_status_last_updated_ms is not None:
            check_int(self.max_used_status_last_updated_ms, "maxUsedStatusLastUpdatedTime")
        if self.task_id is not None:
            check_task_id(self.task_id)

    def older_than_ms(self, now_ms: int) -> int:
        """How long, at ``now_ms``, a segment must have been unused to be killed."""
        if self.max_used_status_last_updated_ms is None:
            return 0
        return max(0, now_ms - self.max_used_status_last_updated_ms)

    @classmethod
    def from_dict(cls, task: Any) -> DruidKillTask:
        """Read a Druid ``kill`` task JSON (see the module); ONE :class:`SpecError` lists
        every refused key and bad value with its JSON path."""
        return read_kill_task(task)

    def to_dict(self) -> dict[str, Any]:
        """Druid's JSON for this task."""
        task: dict[str, Any] = {"type": KILL}
        if self.task_id is not None:
            task["id"] = self.task_id
        task["dataSource"] = self.datasource
        task["interval"] = str(self.interval)
        if self.mark_as_unused:
            task["markAsUnused"] = True
        if self.max_used_status_last_updated_ms is not None:
            stamp = format_timestamp(self.max_used_status_last_updated_ms)
            task["maxUsedStatusLastUpdatedTime"] = stamp
        return task


def read_kill_task(value: Any) -> DruidKillTask:
    """The task of a Druid ``kill`` task JSON (parsed); ONE :class:`SpecError` listing every
    refused key and bad value with its JSON path."""
    reader = JsonReader(logger)
    top = reader.object(value, "(task)", required=True)
    understood = (
        "type",
        "id",
        "dataSource",
        "interval",
        "markAsUnused",
        "maxUsedStatusLastUpdatedTime",
        "versions",
        "limit",
        "context",
    )
    reader.keys(top, "", understood, _NO_EFFECT)
    if top.get("type") != KILL:
        reader.problem("type", f"{show(top.get('type'))} is not a kill task ('kill')")
    for key, instead in (
        ("versions", "mark the segments of other versions used, or kill them all"),
        ("limit", "kill a shorter interval"),
    ):
        if top.get(key) is not None:
            reader.problem(
                key,
                f"not supported: segmentlake kills every unused segment wholly inside the "
                f"interval; to keep some, {instead}",
            )
    context = reader.object(top.get("context"), "context")
    reader.keys(context, "context", (), dict.fromkeys(context, _CONTEXT_NO_EFFECT))
    text = reader.text(top, "interval", "", required=True)
    interval = None if text is None else reader.attempt("interval", lambda: Interval.parse(text))
    options: dict[str, Any] = {
        "datasource": reader.text(top, "dataSource", "", required=True),
        "interval": interval,
        "mark_as_unused": bool(reader.flag(top, "markAsUnused", "")),
        "task_id": reader.text(top, "id", ""),
        "max_used_status_last_updated_ms": _instant(reader, top),
    }
    if not reader.problems:
        task = reader.attempt("(task)", lambda: DruidKillTask(**options))
        if task is not None:
            return task
    raise spec_error("this Druid kill task cannot run on segmentlake", reader.problems)


def _instant(reader: JsonReader, top: Mapping[str, Any]) -> int | None:
    key = "maxUsedStatusLastUpdatedTime"
    text = reader.text(top, key, "")
    if text is None:
        return None
    instant = reader.attempt(key, lambda: parse_timestamp(text))
    return None if instant is None else to_millis(instant)
