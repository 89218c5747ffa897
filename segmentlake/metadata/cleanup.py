"""The cleanup duty: mark fully overshadowed segments unused (Druid coordinator's
``MarkOvershadowedSegmentsAsUnused``).

A used segment that no instant of the timeline can ever serve again — a newer complete chunk
covers all of its interval, or a complete atomic update group of its own chunk overshadows it —
only costs every timeline build. Marking it unused changes no read (the timeline is the same
without it) and makes it a candidate for ``kill`` once its retention has passed.

The decision is made inside one conditional metadata commit, on the state that commit is based
on: a segment published concurrently (say, an append into the chunk an overwrite is replacing)
makes the commit lose its race and the decision is made again on the fresh state, so a segment
is only ever marked on the timeline it is overshadowed in.
"""

from __future__ import annotations

import logging

import pyarrow.compute as pc

from segmentlake.core.segment import SegmentId
from segmentlake.core.spec_reader import check_int
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.metadata.records import SEGMENT, segments_from_rows
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact

__all__ = ["mark_overshadowed_unused"]

logger = logging.getLogger(__name__)


def mark_overshadowed_unused(
    store: MetadataStore,
    datasource: str,
    *,
    overshadowed_for_ms: int = 0,
    policy: RetryPolicy | None = None,
) -> list[SegmentId]:
    """Mark every fully overshadowed used segment of ``datasource`` unused (``updated_ms`` =
    now, the start of its kill retention) in one commit; return their ids (none: no commit).
    With ``overshadowed_for_ms``, only those whose record has not changed for that long: a
    record's ``visibility`` is rewritten, with ``updated_ms``, by the commit that overshadows
    it, so that is how long it has been overshadowed at least (the coordinator's delay).

    >>> [str(i) for i in mark_overshadowed_unused(store, "wiki")]  # doctest: +SKIP
    ['wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_2024-05-01T00:00:00.000Z']
    """

    check_int(overshadowed_for_ms, "overshadowed_for_ms", minimum=0)

    def decide(state: PartitionState) -> Decision[list[SegmentId]]:
        rows = state.of(SEGMENT)
        segments = segments_from_rows(rows)  # in the order of rows
        overshadowed = {s.id for s in VersionedIntervalTimeline(segments).find_fully_overshadowed()}
        if not overshadowed:
            return Decision((), [])
        at = now_ms()
        since = at - overshadowed_for_ms
        changes = []
        marked = []
        for row, segment in zip(rows, segments, strict=True):
            if segment.id in overshadowed and row["updated_ms"] <= since:
                # Overshadowed: no other segment's state depends on it.
                changes.append(
                    Change("upsert", {**row, "used": False, "visibility": None, "updated_ms": at})
                )
                marked.append(segment.id)
        return Decision(changes, marked)

    marked = transact(
        store,
        datasource,
        decide,
        operation="mark_overshadowed_unused",
        condition=(pc.field("kind") == SEGMENT) & pc.field("used"),
        policy=policy,
    )
    if marked:
        logger.info("marked %d overshadowed segment(s) of %s unused", len(marked), datasource)
    else:
        logger.debug("no overshadowed segment in %s", datasource)
    return marked
