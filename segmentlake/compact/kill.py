"""The kill task: physically remove unused segments (Druid's ``kill`` task), then VACUUM.

Marking a segment unused only changes metadata; its rows stay in the datasource's Delta table
(invisible) so that ``mark_used`` can bring it back. ``kill_unused`` ends that for segments that
have been unused longer than a retention:

1. **Records** — one conditional metadata commit deletes the records of the candidates: unused
   segments (wholly inside ``interval``, if given) marked unused at least ``older_than_ms``
   ago, whose data key no used segment references. The check runs inside the commit's
   decision, so a concurrent ``mark_used`` either lands first (the segment is no longer a
   candidate) or finds no record afterwards: a killed segment can never come back.
2. **Rows** — one Delta ``DELETE … WHERE __segment IN (…)`` for the killed segments' keys that
   no remaining record (used or unused) references: a compaction can re-publish a segment's
   record under a new version pointing at the same key, so a key is shared until its last
   record goes.
3. **Orphans** (whole-datasource kills only) — keys in the table that no record references at
   all and whose newest file is older than the retention: rows of failed tasks, and of kills
   that crashed between steps 1 and 2. A recent unreferenced key is a task's write that is not
   published yet (tasks write rows before they publish records) and is left alone.
4. **VACUUM** — removes the deleted files from storage once Delta's own retention allows it
   (``delta.deletedFileRetentionDuration``, 7 days by default; time travel until then).
   Delta's retention check stays on: a retention shorter than the table's is refused.
   Optional (``vacuum=False``): it lists the whole table, seconds even for a small one.

Used data is never touched: every deleted key is unreferenced by any used segment.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from segmentlake.core.interval import Interval
from segmentlake.core.load_spec import data_key
from segmentlake.core.names import datasource_table_path
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.spec_reader import check_flag
from segmentlake.errors import SpecError
from segmentlake.faults import crash_point
from segmentlake.metadata.queries import of_kind, unused_segments_since
from segmentlake.metadata.records import SEGMENT, SEGMENT_COLUMNS, Row, segments_from_rows
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import (
    Change,
    MetadataStore,
    PartitionState,
    ScopeTooNarrow,
    now_ms,
)
from segmentlake.metadata.table_log import TableLog
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact
from segmentlake.metadata.visible_clips import drop_unreferenced_clips
from segmentlake.metadata.visible_table import visible_table_path
from segmentlake.storage.deletion import (
    DEFAULT_RETENTION_HOURS,
    RETENTION_PROPERTY,
    check_vacuum_retention,
    delete_keys,
    vacuum_table,
)
from segmentlake.storage.table_files import files_per_key

__all__ = ["KillReport", "check_kill_arguments", "kill_unused"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KillReport:
    """What one kill removed.

    ``killed``: the segments whose records were deleted; ``kept``: unused segments past the
    retention that were not killed because a used segment serves their rows; ``keys_deleted``:
    the killed segments' ``__segment`` keys whose rows were deleted (a key still referenced by
    another record stays); ``orphan_keys_deleted``: unreferenced keys deleted; ``rows_deleted``:
    rows of both (from the files' statistics); ``files_vacuumed``: files VACUUM removed from
    storage (None if Delta did not say or VACUUM did not run); ``phases``: seconds per step
    (``records``, ``list``, ``delete``, ``vacuum``); ``clips_removed``: clip files of the
    visible table (:mod:`segmentlake.metadata.visible_clips`) it no longer held, removed with
    the same retention as VACUUM's.
    """

    datasource: str
    killed: tuple[SegmentId, ...] = ()
    kept: tuple[SegmentId, ...] = ()
    keys_deleted: tuple[str, ...] = ()
    orphan_keys_deleted: tuple[str, ...] = ()
    rows_deleted: int = 0
    files_vacuumed: int | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    clips_removed: int = 0

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "datasource": self.datasource,
            "killed": [str(i) for i in self.killed],
            "kept": [str(i) for i in self.kept],
            "keys_deleted": list(self.keys_deleted),
            "orphan_keys_deleted": list(self.orphan_keys_deleted),
            "clips_removed": self.clips_removed,
            "rows_deleted": self.rows_deleted,
            "files_vacuumed": self.files_vacuumed,
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
        }

    def summary(self) -> str:
        """A few human lines, as the CLI prints them."""
        if "vacuum" not in self.phases:
            vacuumed = "not run"
        elif self.files_vacuumed is None:
            vacuumed = "ran (files removed not reported)"
        else:
            vacuumed = f"{self.files_vacuumed:,} file(s) removed from storage"
        lines = [
            f"kill {self.datasource}: {len(self.killed):,} segment(s) killed in "
            f"{self.seconds:.1f}s"
            + (f", {len(self.kept):,} kept (their rows serve used segments)" if self.kept else ""),
            f"  rows: {self.rows_deleted:,} deleted under {len(self.keys_deleted):,} segment "
            f"key(s) and {len(self.orphan_keys_deleted):,} orphan key(s)",
            f"  vacuum: {vacuumed}",
        ]
        if self.phases:
            lines.append("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.phases.items()))
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Killed:
    killed: tuple[SegmentId, ...]
    kept: tuple[SegmentId, ...]
    keys: frozenset[str]


def kill_unused(
    spark: SparkSession,
    warehouse: str,
    store: MetadataStore,
    datasource: str,
    *,
    older_than_ms: int,
    interval: Interval | None = None,
    vacuum_retention_hours: float | None = None,
    vacuum: bool = True,
    policy: RetryPolicy | None = None,
) -> KillReport:
    """Kill ``datasource``'s segments unused for at least ``older_than_ms`` (wholly inside
    ``interval`` if given), delete their rows and, without ``interval``, the orphan rows older
    than that; then, if ``vacuum``, VACUUM with ``vacuum_retention_hours`` (None: the table's
    retention). See the module for the order of the steps and why.

    >>> kill_unused(spark, wh, store, "wiki", older_than_ms=3_600_000).summary()  # doctest: +SKIP
    """
    check_kill_arguments(older_than_ms, vacuum_retention_hours)
    path = datasource_table_path(warehouse, datasource)
    log = TableLog(path, storage_options=store.table.storage_options)
    has_table = log.version() >= 0
    if has_table and vacuum and vacuum_retention_hours is not None:
        check_vacuum_retention(spark, log, vacuum_retention_hours)
    phases: dict[str, float] = {}

    started = time.monotonic()
    decided = _delete_records(store, datasource, older_than_ms, interval, policy)
    phases["records"] = time.monotonic() - started
    if decided.killed:
        logger.info("killed %d segment record(s) of %s", len(decided.killed), datasource)
    report = KillReport(datasource, decided.killed, decided.kept, phases=phases)
    if not has_table:
        return report

    started = time.monotonic()
    listed = files_per_key(log)
    # Read again after our commit: any record committed since (by anyone) protects its key.
    referenced = _referenced_keys(store, datasource)
    segment_keys = sorted(k for k in decided.keys if k in listed and k not in referenced)
    orphans: list[str] = []
    if interval is None:
        cutoff = now_ms() - older_than_ms
        orphans = sorted(
            k
            for k, files in listed.items()
            if k not in referenced and k not in decided.keys and files.newest_ms <= cutoff
        )
    phases["list"] = time.monotonic() - started

    started = time.monotonic()
    doomed = segment_keys + orphans
    if doomed:
        delete_keys(spark, log, doomed)
        logger.info(
            "deleted the rows of %d segment key(s) and %d orphan key(s) from %s",
            len(segment_keys),
            len(orphans),
            path,
        )
    phases["delete"] = time.monotonic() - started
    crash_point("kill.after_delete")

    vacuumed = None
    clips = 0
    if vacuum:
        started = time.monotonic()
        vacuumed = vacuum_table(spark, log, vacuum_retention_hours, directories=len(listed))
        hours = (
            DEFAULT_RETENTION_HOURS if vacuum_retention_hours is None else vacuum_retention_hours
        )
        visible = TableLog(
            visible_table_path(warehouse, datasource), storage_options=log.storage_options
        )
        clips = drop_unreferenced_clips(visible, older_than_ms=now_ms() - int(hours * 3_600_000))
        phases["vacuum"] = time.monotonic() - started
    report = KillReport(
        datasource,
        decided.killed,
        decided.kept,
        tuple(segment_keys),
        tuple(orphans),
        sum(listed[k].rows for k in doomed),
        vacuumed,
        phases,
        clips,
    )
    logger.debug("%s", report.summary())
    return report


def check_kill_arguments(
    older_than_ms: int, vacuum_retention_hours: float | None, vacuum: object = True
) -> None:
    check_flag(vacuum, "vacuum")
    if isinstance(older_than_ms, bool) or not isinstance(older_than_ms, int) or older_than_ms < 0:
        raise SpecError(
            f"older_than_ms must be a non-negative integer of milliseconds, got "
            f"{older_than_ms!r}; e.g. 3600000 kills segments unused for over an hour"
        )
    if vacuum_retention_hours is None:
        return
    if (
        isinstance(vacuum_retention_hours, bool)
        or not isinstance(vacuum_retention_hours, int | float)
        or not math.isfinite(vacuum_retention_hours)
        or vacuum_retention_hours < 0
    ):
        raise SpecError(
            f"vacuum_retention_hours must be a non-negative number of hours or None (the "
            f"table's {RETENTION_PROPERTY}), got {vacuum_retention_hours!r}; e.g. 168"
        )


# -- step 1: the records -----------------------------------------------------------------------


def _delete_records(
    store: MetadataStore,
    datasource: str,
    older_than_ms: int,
    interval: Interval | None,
    policy: RetryPolicy | None,
) -> _Killed:
    cutoff = now_ms() - older_than_ms

    def decide(state: PartitionState) -> Decision[_Killed]:
        rows = state.of(SEGMENT)
        segments = segments_from_rows(rows)
        used_keys = {data_key(s) for row, s in zip(rows, segments, strict=True) if row["used"]}
        used_keys.discard(None)
        doomed: list[tuple[Row, DataSegment]] = []
        kept: list[SegmentId] = []
        for row, segment in zip(rows, segments, strict=True):
            if not _candidate(row, segment, cutoff, interval):
                continue
            if not _all_read(state.scope, segment):  # marked unused since the scope was made
                raise ScopeTooNarrow(f"unused segment {segment.id} reaches beyond the read")
            if data_key(segment) in used_keys:
                kept.append(segment.id)
            else:
                doomed.append((row, segment))
        ids = {s.id for _, s in doomed}
        still_referenced = {
            k for s in segments if s.id not in ids and (k := data_key(s)) is not None
        }
        keys = frozenset(
            k for _, s in doomed if (k := data_key(s)) is not None and k not in still_referenced
        )
        result = _Killed(tuple(s.id for _, s in doomed), tuple(kept), keys)
        return Decision([Change("delete", row) for row, _ in doomed], result)

    def scope() -> Scope:
        return _candidates_scope(store, datasource, cutoff, interval)

    return transact(
        store,
        datasource,
        decide,
        operation="kill",
        condition=of_kind(SEGMENT),
        scope=scope,
        policy=policy,
    )


def _candidate(row: Row, segment: DataSegment, cutoff: int, interval: Interval | None) -> bool:
    """Whether a segment record is one to kill: unused since ``cutoff`` or before, and
    wholly inside ``interval`` when one is given."""
    if row["used"] or row["updated_ms"] is None or row["updated_ms"] > cutoff:
        return False
    return interval is None or interval.contains(segment.interval)


def _all_read(scope: Scope, segment: DataSegment) -> bool:
    """Whether ``scope`` holds every record that may share ``segment``'s rows: those are
    upgraded copies of them, whose intervals overlap the rows' interval
    (:mod:`segmentlake.metadata.upgrade`), so the segment's interval and its rows' must be
    read whole."""
    spans = (segment.interval, segment.rows_interval)
    return all(scope.covers_range(s.start_millis, s.end_millis) for s in spans)


def _candidates_scope(
    store: MetadataStore, datasource: str, cutoff: int, interval: Interval | None
) -> Scope:
    """The time ranges of the segments a kill would remove (their intervals and their rows'),
    found by a read outside the transaction: the kill reads and decides on only those days.
    A kill of old unused segments then never decides again over appends to other days, and
    never re-reads a datasource of 10^5 records to do so (it did: its scope was all of it)."""
    columns = (*SEGMENT_COLUMNS, "used", "updated_ms")
    rows = store.rows(datasource, unused_segments_since(cutoff), kinds=[SEGMENT], columns=columns)
    ranges: list[tuple[int, int]] = []
    for row, segment in zip(rows, segments_from_rows(rows), strict=True):
        if _candidate(row, segment, cutoff, interval):
            for span in (segment.interval, segment.rows_interval):
                ranges.append((span.start_millis, span.end_millis))
    return Scope.of(ranges)


def _referenced_keys(store: MetadataStore, datasource: str) -> set[str]:
    rows = store.rows(datasource, kinds=[SEGMENT], columns=SEGMENT_COLUMNS)
    return {k for s in segments_from_rows(rows) if (k := data_key(s)) is not None}
