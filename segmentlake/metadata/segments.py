"""The segment records of a datasource: read the used ones, mark some used or unused.

Marking a segment used or unused changes the timeline around it, so the same commit rewrites
the visibility of every used segment whose state that changes (:mod:`.visibility`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.metadata.records import (
    SEGMENT,
    SEGMENT_COLUMNS,
    segment_records,
    segments_from_rows,
    segments_from_table,
)
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact
from segmentlake.metadata.visibility import affected_scope, visibility_changes

__all__ = ["set_used", "used_segment_rows", "used_segments", "used_timeline"]

logger = logging.getLogger(__name__)


def _overlapping(interval: Interval) -> pc.Expression:
    return (pc.field("start_ms") < interval.end_millis) & (
        pc.field("end_ms") > interval.start_millis
    )


def used_segment_rows(
    store: MetadataStore, datasource: str, interval: Interval | None = None
) -> pa.Table:
    """The used segment records of ``datasource`` (overlapping ``interval``) as Arrow."""
    condition = pc.field("used")
    if interval is not None and interval != ETERNITY:
        condition = condition & _overlapping(interval)
    return store.arrow(datasource, condition, kinds=[SEGMENT])


def used_segments(
    store: MetadataStore, datasource: str, interval: Interval | None = None
) -> list[DataSegment]:
    """The used segments of ``datasource`` (overlapping ``interval``)."""
    condition = pc.field("used")
    if interval is not None and interval != ETERNITY:
        condition = condition & _overlapping(interval)
    return segments_from_table(
        datasource, store.arrow(datasource, condition, kinds=[SEGMENT], columns=SEGMENT_COLUMNS)
    )


def used_timeline(store: MetadataStore, datasource: str) -> VersionedIntervalTimeline:
    """The timeline of the used segments of ``datasource``, loaded lazily from their records:
    reading it costs the records' columns; a segment is built when a lookup, change or
    iteration first touches its chunk."""
    table = store.arrow(datasource, pc.field("used"), kinds=[SEGMENT], columns=SEGMENT_COLUMNS)
    return VersionedIntervalTimeline.from_records(segment_records(datasource, table))


def set_used(
    store: MetadataStore,
    datasource: str,
    ids: Iterable[str],
    *,
    used: bool,
    operation: str,
    policy: RetryPolicy | None = None,
) -> list[str]:
    """Mark the segments ``ids`` of ``datasource`` used (or unused) in one commit, with the
    visibility of every segment that changes; return the ids that changed (unknown ids and
    segments already so are left alone)."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    known = store.rows(
        datasource, pc.field("id").isin(wanted), kinds=[SEGMENT], columns=("start_ms", "end_ms")
    )
    changed = [Interval.of_millis(r["start_ms"], r["end_ms"]) for r in known]
    if not changed:
        return []

    def scope() -> Scope:
        return affected_scope(store, datasource, changed)

    def decide(state: PartitionState) -> Decision[list[str]]:
        at = now_ms()
        rows = state.of(SEGMENT)
        flips = [r for r in rows if r["id"] in set(wanted) and bool(r["used"]) != used]
        if not flips:
            return Decision((), [])
        flipped = {r["id"] for r in flips}
        before = [r for r in rows if r["used"]]
        after = [r for r in before if r["id"] not in flipped]
        added = segments_from_rows(flips) if used else []
        states, updates = visibility_changes(
            after,
            added=added,
            changed=[*changed, *(s.interval for s in added)],
            scope=state.scope,
            now_ms=at,
        )
        changes = [
            Change(
                "upsert",
                {**r, "used": used, "visibility": states.get(r["id"]), "updated_ms": at},
            )
            for r in flips
        ]
        changes += updates
        return Decision(changes, sorted(flipped))

    done = transact(
        store,
        datasource,
        decide,
        operation=operation,
        condition=pc.field("kind") == SEGMENT,
        scope=scope,
        policy=policy,
    )
    if done:
        logger.info("%s: %d segment(s) of %s", operation, len(done), datasource)
    return done
