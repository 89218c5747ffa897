"""Transactional publish: lock check + segment records + pending cleanup + lock release, in
ONE commit (Druid's SegmentTransactionalInsertAction).

Either every segment of a publish becomes used or none does. Publishing is idempotent: the
segment rows are inserted only if absent, so a retry after an unknown outcome cannot
duplicate them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.interval_index import IntervalIndex
from segmentlake.core.locks import LockGranularity, TaskLock
from segmentlake.core.segment import DataSegment
from segmentlake.errors import LockRefused, SegmentLakeError, SpecError
from segmentlake.metadata.lockbox import (
    Lockbox,
    UnusedIds,
    expired_lock_deletes,
    group_scope,
    in_use,
    span_scope,
    unused_ids,
)
from segmentlake.metadata.records import (
    LOCK,
    PENDING,
    SEGMENT,
    Row,
    lease_row,
    lock_from_row,
    segment_from_row,
    segment_row,
    segment_table,
)
from segmentlake.metadata.scope import NOTHING, Scope
from segmentlake.metadata.store import Change, ChangeBatch, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, Requirement, transact
from segmentlake.metadata.upgrade import upgrades
from segmentlake.metadata.visibility import affected_scope, visibility_changes

__all__ = [
    "PublishResult",
    "check_new_ids",
    "new_segment_changes",
    "publish",
    "segment_inserts",
]


@dataclass(frozen=True, slots=True)
class PublishResult:
    segments: int
    locks_released: int
    upgraded: tuple[DataSegment, ...] = ()


def publish(
    lockbox: Lockbox,
    datasource: str,
    segments: Sequence[DataSegment],
    *,
    group_id: str,
    release_locks: bool = True,
    extra_rows: Sequence[Row] | Callable[[list[DataSegment]], Sequence[Row]] = (),
    replaced: frozenset[str] | None = None,
    appended: bool = False,
    requirements: Sequence[Requirement] = (),
    reads: pc.Expression | None = None,
    extra_changes: Callable[[PartitionState], Sequence[Change]] | None = None,
    extra_scope: Scope = NOTHING,
) -> PublishResult:
    """Publish ``segments`` (all of ``datasource``) under the locks of ``group_id``;
    ``extra_rows`` (e.g. the task's report; or a function of the upgraded copies giving them)
    are upserted in the same commit.

    Every segment must be covered by a live (held, unrevoked, unexpired) lock of the group with
    the segment's version, and every ``requirements`` check must pass on the state the commit
    is decided on; otherwise :class:`LockRefused` (or the check's error) says why and nothing
    is published; the rows ``reads`` matches within ``extra_scope`` are part of that state,
    and ``extra_changes`` of it join the commit (the compaction manager's selection update).
    The same commit adds the upgraded copies of concurrently appended segments
    (:mod:`segmentlake.metadata.upgrade`): a replacing publish passes ``replaced``, the ids of
    every used segment it read; an append passes ``appended``.
    """
    for seg in segments:
        if seg.datasource != datasource:
            raise SpecError(f"segment {seg.id} is not of datasource {datasource!r}")
    condition = ((pc.field("kind") == LOCK) & (pc.field("group_id") == group_id)) | (
        pc.field("kind").isin([SEGMENT, PENDING]) & in_use()
    )
    if reads is not None:
        condition = condition | reads
    changed = [s.interval for s in segments]
    store = lockbox.store

    asked: list[Scope] = []

    def scope() -> Scope:
        # The group's locks, the segments' chunks, and the chunks a replacing publish
        # re-publishes appended segments into. First just the segments' own intervals: the
        # visibility decision raises ScopeTooNarrow when a segment it read reaches further,
        # and then the scope grows by what overlaps them (one read saved in the usual case:
        # a segment joins a chunk of its own interval).
        around = span_scope(changed) if not asked else affected_scope(store, datasource, changed)
        asked.append(around)
        return group_scope(store, datasource, group_id) | around | extra_scope

    def decide(state: PartitionState) -> Decision[PublishResult]:
        at = now_ms()
        for requirement in requirements:
            requirement(state)
        # The group's lock rows as Arrow, not lock objects: a bulk publish holds 10^4
        # segment locks.
        locks = state.table_of(LOCK)
        covering = _LockCover(datasource, locks.filter(pc.equal(locks["group_id"], group_id)), at)
        for seg in segments:
            if not covering.covers(seg):
                mine = [lock_from_row(r) for r in state.of(LOCK) if r["group_id"] == group_id]
                raise LockRefused(_uncovered(seg, mine, at))
        unused = unused_ids(store, datasource, changed)
        check_new_ids(state, segments, unused)
        published = [str(seg.id) for seg in segments]
        copies = upgrades(
            state, segments, replaced=replaced, appended=appended, unused=lambda: unused
        )
        changes = new_segment_changes(state, [*segments, *copies], at)
        rows = extra_rows(copies) if callable(extra_rows) else extra_rows
        changes += [Change("upsert", row) for row in rows]
        if extra_changes is not None:
            changes += extra_changes(state)
        changes += _pending_deletes(state, published)
        released = 0
        if release_locks:
            changes += _deletes(state, LOCK)
            changes += [Change("delete", lease_row(datasource, group_id, expires_ms=0, now_ms=at))]
            released = covering.live
        else:
            changes += expired_lock_deletes(state, at)
        return Decision(changes, PublishResult(len(segments), released, tuple(copies)))

    return transact(
        lockbox.store,
        datasource,
        decide,
        operation="publish",
        condition=condition,
        scope=scope,
        policy=lockbox.retry,
    )


# From this many segments on a publish writes its records as one Arrow batch; fewer are row
# changes (Arrow's fixed cost per call is more than a few rows' dicts).
_BULK_SEGMENTS = 64


def new_segment_changes(
    state: PartitionState, new: Sequence[DataSegment], at: int
) -> list[Change | ChangeBatch]:
    """The records of the segments a publish adds (those not already used: a retry), with
    the visibility changes they make to the used segments ``state`` read."""
    used = [r for r in state.of(SEGMENT) if r["used"]]
    used_ids = {r["id"] for r in used}
    states, updates = visibility_changes(
        used,
        added=[s for s in new if str(s.id) not in used_ids],
        changed=[s.interval for s in new],
        scope=state.scope,
        now_ms=at,
    )
    return [*segment_inserts(new, at, states), *updates]


def segment_inserts(
    new: Sequence[DataSegment], at: int, states: Mapping[str, str]
) -> list[Change | ChangeBatch]:
    """The records of the segments a publish adds."""
    if len(new) >= _BULK_SEGMENTS:
        return [ChangeBatch("insert", segment_table(new, used=True, now_ms=at, visibility=states))]
    return [
        Change("insert", segment_row(seg, used=True, now_ms=at, visibility=states.get(str(seg.id))))
        for seg in new
    ]


def _deletes(state: PartitionState, kind: str) -> list[Change | ChangeBatch]:
    """Deletes of every row of ``kind`` the publish read: one batch when they are many."""
    if state.few_rows:
        return [Change("delete", row) for row in state.of(kind)]
    return [ChangeBatch("delete", state.table_of(kind))]


def _pending_deletes(state: PartitionState, published: list[str]) -> list[Change | ChangeBatch]:
    """Deletes of the pending allocations of the ids published."""
    if state.few_rows:
        ids = set(published)
        return [Change("delete", row) for row in state.of(PENDING) if row["payload"] in ids]
    pending = state.table_of(PENDING)
    mine = pc.fill_null(pc.is_in(pending["payload"], value_set=pa.array(published)), False)
    return [ChangeBatch("delete", pending.filter(mine))]


class _LockCover:
    """Whether a group's live locks entitle it to publish a segment, in O(log n) per segment:
    segment locks by (interval, version, partition), time-chunk locks by interval. Built
    from the group's lock rows column by column (a bulk publish holds 10^4 segment locks)."""

    def __init__(self, datasource: str, locks: pa.Table, at: int) -> None:
        segment = LockGranularity.SEGMENT.value
        names = ("start_ms", "end_ms", "version", "partition_num", "lock_granularity")
        columns = [locks[n].to_pylist() for n in (*names, "revoked", "expires_ms")]
        self._segment_locks: set[tuple[tuple[int, int], str, int]] = set()
        chunk_rows = []
        self.live = 0
        for i, (start, end, version, partition, granularity, revoked, expires) in enumerate(
            zip(*columns, strict=True)
        ):
            if revoked or at >= int(expires):
                continue
            self.live += 1
            if granularity == segment:
                self._segment_locks.add(((start, end), version, partition))
            else:
                chunk_rows.append(i)
        chunk_rows_read = (
            locks.take(pa.array(chunk_rows, pa.int64())).to_pylist() if chunk_rows else []
        )
        chunk_locks = (lock_from_row({"datasource": datasource, **r}) for r in chunk_rows_read)
        self._chunk_locks = IntervalIndex(
            (lk.interval.start_millis, lk.interval.end_millis, lk) for lk in chunk_locks
        )

    def covers(self, segment: DataSegment) -> bool:
        key = (segment.interval.key, segment.version, segment.shard_spec.partition_num)
        if key in self._segment_locks:
            return True
        start, end = segment.interval.key
        return any(
            lk.covers(segment.interval, segment.version, segment.shard_spec.partition_num)
            for lk in self._chunk_locks.overlapping(start, end)
        )


def check_new_ids(
    state: PartitionState, segments: Sequence[DataSegment], unused: UnusedIds
) -> None:
    """An id already published, used or not (``unused``: the unused segments the decision
    knows of), must be this very segment (a retried publish); another segment under the
    same id would be dropped silently by the insert-if-absent."""
    known = {r["id"]: r for r in unused.rows_of({str(seg.id) for seg in segments})}
    known.update((r["id"], r) for r in state.of(SEGMENT))
    seen: dict[str, DataSegment] = {}
    for seg in segments:
        sid = str(seg.id)
        other = seen.setdefault(sid, seg)
        row = known.get(sid)
        stored = None if row is None else dict(segment_from_row(row).load_spec)
        if (other is not seg and other.load_spec != seg.load_spec) or (
            stored is not None and stored != dict(seg.load_spec)
        ):
            whose = "an unused segment's " if row is not None and not row["used"] else ""
            raise SegmentLakeError(
                f"publish of {sid} refused: that id already names {whose}other rows "
                f"({stored or dict(other.load_spec)}); ids come from lake.allocate, one per "
                "segment, and stay taken while a segment is unused"
            )


def _uncovered(seg: DataSegment, mine: list[TaskLock], at: int) -> str:
    why = "the group holds no lock covering it"
    for lk in mine:
        if lk.covers(seg.interval, seg.version, seg.shard_spec.partition_num):
            why = "its lock was revoked" if lk.revoked else "its lock's lease expired"
            break
    return (
        f"publish of {seg.id} refused: {why}; a segment needs a live lock of its group with "
        f"version {seg.version} over {seg.interval}"
    )
