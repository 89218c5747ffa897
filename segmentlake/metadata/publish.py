"""Transactional publish: lock check + segment records + pending cleanup + lock release, in
ONE commit (Druid's SegmentTransactionalInsertAction).

Either every segment of a publish becomes used or none does. Publishing is idempotent: the
segment rows are inserted only if absent, so a retry after an unknown outcome cannot
duplicate them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.compute as pc

from segmentlake.core.segment import DataSegment
from segmentlake.errors import LockRefused, SpecError
from segmentlake.metadata.lockbox import Lockbox, expired_lock_deletes
from segmentlake.metadata.records import LOCK, PENDING, Row, lock_from_row, segment_row
from segmentlake.metadata.store import Change, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, transact

__all__ = ["PublishResult", "publish"]


@dataclass(frozen=True, slots=True)
class PublishResult:
    segments: int
    locks_released: int


def publish(
    lockbox: Lockbox,
    datasource: str,
    segments: Sequence[DataSegment],
    *,
    group_id: str,
    release_locks: bool = True,
    extra_rows: Sequence[Row] = (),
) -> PublishResult:
    """Publish ``segments`` (all of ``datasource``) under the locks of ``group_id``;
    ``extra_rows`` (e.g. the task's report) are upserted in the same commit.

    Every segment must be covered by a live (held, unrevoked, unexpired) lock of the group with
    the segment's version; otherwise :class:`LockRefused` names the first uncovered segment
    and nothing is published.
    """
    for seg in segments:
        if seg.datasource != datasource:
            raise SpecError(f"segment {seg.id} is not of datasource {datasource!r}")
    condition = pc.field("group_id") == group_id

    def decide(state: PartitionState) -> Decision[PublishResult]:
        at = now_ms()
        mine = [lk for lk in map(lock_from_row, state.of(LOCK)) if lk.group_id == group_id]
        live = [lk for lk in mine if lk.is_live(at)]
        for seg in segments:
            spec = seg.shard_spec
            if not any(lk.covers(seg.interval, seg.version, spec.partition_num) for lk in live):
                raise LockRefused(_uncovered(seg, mine, at))
        published = {str(seg.id) for seg in segments}
        changes = [Change("insert", segment_row(seg, used=True, now_ms=at)) for seg in segments]
        changes += [Change("upsert", row) for row in extra_rows]
        changes += [
            Change("delete", row) for row in state.of(PENDING) if row["payload"] in published
        ]
        released = 0
        if release_locks:
            changes += [Change("delete", row) for row in state.of(LOCK)]
            released = len(live)
        else:
            changes += expired_lock_deletes(state, at)
        return Decision(changes, PublishResult(len(segments), released))

    return transact(
        lockbox.store,
        datasource,
        decide,
        operation="publish",
        condition=condition,
        policy=lockbox.retry,
    )


def _uncovered(seg: DataSegment, mine: list, at: int) -> str:
    why = "the group holds no lock covering it"
    for lk in mine:
        if lk.covers(seg.interval, seg.version, seg.shard_spec.partition_num):
            why = "its lock was revoked" if lk.revoked else "its lock's lease expired"
            break
    return (
        f"publish of {seg.id} refused: {why}; a segment needs a live lock of its group with "
        f"version {seg.version} over {seg.interval}"
    )
