"""What a compaction reads: the used segments of an interval, as the metadata has them now."""

from __future__ import annotations

from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.errors import SpecError
from segmentlake.metadata.segments import used_segments

__all__ = ["chunk_granularity", "used_segments"]  # used_segments: re-exported for engines


def chunk_granularity(segments: list[DataSegment]) -> Granularity:
    """The segment granularity every one of ``segments`` is a chunk of; SpecError if they
    differ (a compaction must then be told which one it makes)."""
    found = {_granularity_of(s.interval) for s in segments}
    if len(found) != 1 or None in found:
        names = sorted(g.name if g else "irregular" for g in found)
        raise SpecError(
            f"the segments to compact have different or irregular chunk sizes ({names}); "
            "pass segment_granularity=..., e.g. 'DAY'"
        )
    (granularity,) = found
    assert granularity is not None
    return granularity


def _granularity_of(interval: Interval) -> Granularity | None:
    for granularity in Granularity:
        if granularity in (Granularity.NONE, Granularity.ALL):
            continue
        if granularity.bucket(interval.start_millis) == interval:
            return granularity
    return None
