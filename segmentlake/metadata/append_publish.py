"""An append's ids and records in ONE commit: allocation and publish together.

Druid allocates an appending task's segment ids (with APPEND segment locks) before it writes,
because its tasks write after they know where. A segmentlake append writes first (its rows
sit under keys no segment names until published) and only then needs ids, so the two
metadata commits Druid's order implies — allocate (insert pending ids and locks, then
release them) and publish — collapse into one that decides the ids and publishes the
segments on the same read state. Nothing is lost by it:

* an id is unique because the same commit that picks it inserts the segment (a concurrent
  allocator of the chunk conflicts with the commit and decides again);
* the lock an append would hold protects only the window between allocate and publish,
  which no longer exists; the check that no exclusive lock of another group holds a chunk
  (an overwrite) is made exactly as allocation makes it, and refuses the same way;
* a replacing task (compaction) that published first gets the appended segments upgraded
  into its version by this commit; one that publishes after upgrades them in its own.

It halves an append's metadata round trips and leaves no pending or lock rows behind to
delete (each of which is a row change the metadata table keeps until it is compacted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow.compute as pc

from segmentlake.core.interval_index import IntervalIndex
from segmentlake.core.locks import LockGranularity, LockRequest, LockType, decide_lock
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.metadata.allocation import (
    AllocateRequest,
    ChunkRows,
    ChunkSlot,
    check_space,
    chunk_for,
    refused,
)
from segmentlake.metadata.lockbox import (
    Lockbox,
    UnusedIds,
    expired_lock_deletes,
    in_use,
    span_scope,
    unused_ids,
)
from segmentlake.metadata.publish import check_new_ids, new_segment_changes
from segmentlake.metadata.records import LOCK, PENDING, SEGMENT, Row, lock_from_row, lock_row
from segmentlake.metadata.scope import NOTHING, Scope
from segmentlake.metadata.store import Change, ChangeBatch, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, Requirement, transact
from segmentlake.metadata.upgrade import upgrades
from segmentlake.metadata.visibility import affected_scope

__all__ = ["AppendResult", "publish_append"]

# (the request, its segment id, the core partitions of its chunk) -> the segment
SegmentMaker = Callable[[AllocateRequest, SegmentId, int], DataSegment]


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The segments an append published (in request order) and their upgraded copies."""

    segments: tuple[DataSegment, ...]
    upgraded: tuple[DataSegment, ...]


def publish_append(
    lockbox: Lockbox,
    datasource: str,
    requests: Sequence[AllocateRequest],
    make: SegmentMaker,
    *,
    group_id: str,
    priority: int = 0,
    extra_rows: Callable[[list[DataSegment]], Sequence[Row]] | None = None,
    requirements: Sequence[Requirement] = (),
    reads: pc.Expression | None = None,
    extra_scope: Scope = NOTHING,
) -> AppendResult:
    """Give each request a first-generation id in its chunk's current version, make its
    segment with ``make(request, segment id, core partitions of the chunk)`` and publish them all,
    with their upgraded copies and ``extra_rows(copies)`` (the task's report), in one commit.

    Raises :class:`LockRefused` when another group's lock refuses an append in a chunk (an
    overwrite's exclusive time-chunk lock of equal or higher priority), as allocation would;
    nothing is published then.
    """
    intervals = [r.interval for r in requests]
    condition = (pc.field("kind") == LOCK) | (pc.field("kind").isin([SEGMENT, PENDING]) & in_use())
    if reads is not None:
        condition = condition | reads
    store = lockbox.store
    asked: list[Scope] = []

    def scope() -> Scope:
        # The requests' own intervals first; when a chunk reaches further (an HOUR append
        # into a DAY chunk), the visibility decision asks for more and the scope grows by
        # what overlaps them.
        around = (
            span_scope(intervals) if not asked else affected_scope(store, datasource, intervals)
        )
        asked.append(around)
        return around | extra_scope

    def decide(state: PartitionState) -> Decision[AppendResult]:
        at = now_ms()
        for requirement in requirements:
            requirement(state)
        # Of the requests' chunks (each overlaps its request); copies go into other chunks,
        # whose unused segments are read only when a copy is made.
        unused = unused_ids(store, datasource, intervals)
        segments, changes = _segments(
            lockbox, datasource, requests, make, state, group_id, priority, at, unused
        )
        check_new_ids(state, segments, unused)
        copies = upgrades(
            state,
            segments,
            replaced=None,
            appended=True,
            unused=lambda: unused_ids(store, datasource, [s.interval for s in segments]),
        )
        changes += new_segment_changes(state, [*segments, *copies], at)
        if extra_rows is not None:
            changes += [Change("upsert", row) for row in extra_rows(copies)]
        changes += expired_lock_deletes(state, at)
        return Decision(changes, AppendResult(tuple(segments), tuple(copies)))

    return transact(
        store,
        datasource,
        decide,
        operation="publish",
        condition=condition,
        scope=scope,
        policy=lockbox.retry,
    )


def _segments(
    lockbox: Lockbox,
    datasource: str,
    requests: Sequence[AllocateRequest],
    make: SegmentMaker,
    state: PartitionState,
    group_id: str,
    priority: int,
    at: int,
    unused: UnusedIds,
) -> tuple[list[DataSegment], list[Change | ChangeBatch]]:
    """The segments of ``requests`` with their ids, and the lock changes deciding them made
    (revocations of lower-priority locks); LockRefused as allocation refuses."""
    locks = IntervalIndex(
        (lk.interval.start_millis, lk.interval.end_millis, lk)
        for lk in map(lock_from_row, state.of(LOCK))
    )
    rows = ChunkRows(state.of(SEGMENT) + state.of(PENDING), unused=unused)
    slots: dict[tuple[tuple[int, int], str], ChunkSlot] = {}
    ids: list[tuple[AllocateRequest, SegmentId, ChunkSlot]] = []
    revoked: dict[str, Change] = {}
    for req in requests:
        found = chunk_for(rows, req.interval, None, at, joins=req.joins_chunk)
        slot = slots.setdefault((found.interval.key, found.version), found)
        sid = SegmentId(datasource, slot.interval, slot.version, slot.next_partition)
        check_space(sid.partition_num, False)
        slot.next_partition += 1
        request = LockRequest(
            group_id,
            group_id,
            datasource,
            slot.interval,
            LockType.APPEND,
            LockGranularity.SEGMENT,
            priority,
            slot.version,
            sid.partition_num,
        )
        verdict = decide_lock(
            request,
            locks.overlapping(slot.interval.start_millis, slot.interval.end_millis),
            existing_versions=(),
            now_millis=at,
            lease_millis=lockbox.lease_ms,
        )
        if verdict.granted is None:
            raise refused("append to", datasource, slot.interval, verdict.conflicting)
        for lock in verdict.revoke:  # once each, however many requests it stood in the way of
            row = lock_row(replace(lock, revoked=True), now_ms=at)
            revoked[row["id"]] = Change("upsert", row)
        ids.append((req, sid, slot))
    return [make(req, sid, slot.num_core_partitions) for req, sid, slot in ids], list(
        revoked.values()
    )
