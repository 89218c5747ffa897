"""The segment records of a datasource: read the used ones, mark some used or unused.

Marking a segment used or unused changes the timeline around it, so the same commit rewrites
the visibility of every used segment whose state that changes (:mod:`.visibility`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import TombstoneShardSpec
from segmentlake.core.timeline import VISIBLE, VersionedIntervalTimeline, winning_pieces
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

__all__ = [
    "VisibleChunk",
    "VisiblePiece",
    "set_used",
    "used_segment_rows",
    "used_segments",
    "used_timeline",
    "visible_pieces",
]

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


@dataclass(frozen=True, slots=True)
class VisibleChunk:
    """The visible segments of one chunk (interval and version) as their records give them:
    partition numbers and rows of those holding data (tombstones only hide)."""

    start: int
    end: int
    version: str
    partitions: tuple[int, ...]
    num_rows: int


@dataclass(frozen=True, slots=True)
class VisiblePiece:
    """One piece of the visible timeline: what :meth:`VersionedIntervalTimeline.lookup`
    returns as a holder, summed up (interval clipped to the query, the serving chunk)."""

    interval: Interval
    chunk: VisibleChunk


def visible_pieces(
    store: MetadataStore, datasource: str, interval: Interval = ETERNITY
) -> list[VisiblePiece]:
    """The visible pieces of ``datasource`` overlapping ``interval``, in time order, from the
    records' maintained visibility: the chunks holding visible segments are exactly the ones
    that serve some instant, so sweeping them alone gives the timeline's pieces with no
    segment built."""
    condition = pc.field("visibility") == VISIBLE
    if interval != ETERNITY:
        condition = condition & _overlapping(interval)
    table = store.arrow(
        datasource,
        condition,
        kinds=[SEGMENT],
        columns=("start_ms", "end_ms", "version", "partition_num", "num_rows", "shard_type"),
    )
    chunks = _visible_chunks(table)
    pieces = winning_pieces(chunks, interval.start_millis, interval.end_millis)
    return [
        VisiblePiece(Interval.of_millis(start, end), chunk)
        for start, end, chunk in pieces
        if chunk.partitions
    ]


def _visible_chunks(table: pa.Table) -> list[VisibleChunk]:
    data = table.filter(pc.field("shard_type") != TombstoneShardSpec.type_name)
    # Every chunk, tombstone-only ones too: they win their instants and serve nothing.
    keys = ["start_ms", "end_ms", "version"]
    served = data.group_by(keys, use_threads=False).aggregate(
        [("partition_num", "list"), ("num_rows", "sum")]
    )
    found = {
        (start, end, version): (tuple(sorted(parts)), rows or 0)
        for start, end, version, parts, rows in zip(
            *(served.column(c).to_pylist() for c in (*keys, "partition_num_list")),
            served.column("num_rows_sum").to_pylist(),
            strict=True,
        )
    }
    every = table.select(keys).group_by(keys, use_threads=False).aggregate([])
    return [
        VisibleChunk(start, end, version, *found.get((start, end, version), ((), 0)))
        for start, end, version in zip(*(every.column(c).to_pylist() for c in keys), strict=True)
    ]


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
        asked = set(wanted)
        flips = [r for r in rows if r["id"] in asked and bool(r["used"]) != used]
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
