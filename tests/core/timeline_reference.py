"""A brute-force reference for the visibility rules of DESIGN.md §3.

Written from the rules text only, for tests: slow, literal and easy to check by eye. Nothing
here is indexed or cached between calls. Every function takes the whole set of used segments.

Rule 1 (inside a chunk), rule 2 (chunk completeness) and rule 3 (across chunks) are applied
literally. Time is cut into *elementary pieces*: the spans between consecutive interval
boundaries (of every segment and of the query). Inside one elementary piece every instant is
contained in exactly the same chunk intervals, so deciding the visible chunk once per
elementary piece is the same as deciding it for every millisecond of it.

The rules do not say which of two *equal* versions wins where chunks of different intervals
overlap; the reference refuses such inputs (:class:`AmbiguousTimeline`) instead of guessing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from segmentlake.core.segment import DataSegment

__all__ = [
    "AmbiguousTimeline",
    "Aug",
    "RefHolder",
    "aug_overshadows",
    "chunk_is_complete",
    "chunks_of",
    "complete_chunks",
    "is_overshadowed",
    "lookup",
    "visible_augs",
    "visible_chunk_at",
    "visible_segments_of_chunk",
]

ChunkKey = tuple[tuple[int, int], str]  # ((start millis, end millis), version)


class AmbiguousTimeline(AssertionError):
    """Two chunks of the same version but different intervals overlap: the rules do not say
    which one serves the overlap."""


@dataclass(frozen=True)
class Aug:
    """An atomic update group: the segments of a chunk with the same root range and minor."""

    root_start: int
    root_end: int
    minor: int
    members: tuple[DataSegment, ...]

    @property
    def wanted_size(self) -> int:
        sizes = {s.shard_spec.atomic_update_group_size for s in self.members}
        assert len(sizes) == 1, f"members of one AUG disagree on its size: {self.members}"
        return sizes.pop()

    @property
    def complete(self) -> bool:
        # "An AUG is complete when it holds atomic_update_group_size segments."
        return len(self.members) >= self.wanted_size

    def root_ids(self) -> set[int]:
        return set(range(self.root_start, self.root_end))


def aug_overshadows(a: Aug, b: Aug) -> bool:
    """AUG A overshadows B when A's root range contains B's and A.minor > B.minor (§3)."""
    return a.root_start <= b.root_start and b.root_end <= a.root_end and a.minor > b.minor


def chunks_of(segments: Iterable[DataSegment]) -> dict[ChunkKey, list[DataSegment]]:
    """Chunk = all used segments with the same interval and version (§3)."""
    chunks: dict[ChunkKey, list[DataSegment]] = {}
    for seg in segments:
        chunks.setdefault((seg.interval.key, seg.version), []).append(seg)
    return chunks


def augs_of(chunk: list[DataSegment]) -> list[Aug]:
    groups: dict[tuple[int, int, int], list[DataSegment]] = {}
    for seg in chunk:
        spec = seg.shard_spec
        key = (spec.start_root_partition_id, spec.end_root_partition_id, spec.minor_version)
        groups.setdefault(key, []).append(seg)
    return [Aug(k[0], k[1], k[2], tuple(v)) for k, v in groups.items()]


def visible_augs(chunk: list[DataSegment]) -> list[Aug]:
    """Rule 1, word by word."""
    augs = augs_of(chunk)
    complete = [a for a in augs if a.complete]
    incomplete = [a for a in augs if not a.complete]

    # "every complete AUG not overshadowed by a complete AUG"
    visible_complete = [a for a in complete if not any(aug_overshadows(c, a) for c in complete)]

    # "plus any incomplete AUG X that no complete AUG overshadows and whose root range those
    # complete, visible AUGs do not fully cover"
    covered_by_visible_complete: set[int] = set()
    for a in visible_complete:
        covered_by_visible_complete |= a.root_ids()
    fallbacks = [
        x
        for x in incomplete
        if not any(aug_overshadows(c, x) for c in complete)
        and not x.root_ids() <= covered_by_visible_complete
    ]

    # "X then stays visible ... and hides what it overshadows"
    candidates = visible_complete + fallbacks
    return [a for a in candidates if not any(aug_overshadows(x, a) for x in fallbacks)]


def chunk_is_complete(chunk: list[DataSegment]) -> bool:
    """Rule 2: the visible AUGs cover root partitions 0..num_core_partitions-1.

    The chunk's core partition count is the one its first-generation segments record (appends
    record 0 or the chunk's count; overwrite segments record none), so the maximum over the
    chunk. A tombstone chunk (tombstone: partition 0 of 1 core partition) is complete."""
    core = max(s.shard_spec.num_core_partitions for s in chunk)
    covered: set[int] = set()
    for a in visible_augs(chunk):
        covered |= a.root_ids()
    return set(range(core)) <= covered


def visible_segments_of_chunk(chunk: list[DataSegment]) -> list[DataSegment]:
    """Visible segments of a chunk (tombstones included), ordered by partition number."""
    segs = [s for a in visible_augs(chunk) for s in a.members]
    return sorted(segs, key=lambda s: s.shard_spec.partition_num)


def complete_chunks(chunks: dict[ChunkKey, list[DataSegment]]) -> set[ChunkKey]:
    """The keys of the complete chunks (rule 2), computed once per question."""
    return {key for key, chunk in chunks.items() if chunk_is_complete(chunk)}


def visible_chunk_at(complete: set[ChunkKey], lo: int, hi: int) -> ChunkKey | None:
    """Rule 3 for the elementary piece ``[lo, hi)``: the complete chunk of highest version whose
    interval contains it (None when no complete chunk does)."""
    containing = [key for key in complete if key[0][0] <= lo and hi <= key[0][1]]
    if not containing:
        return None
    top = max(version for _, version in containing)
    best = [key for key in containing if key[1] == top]
    if len(best) > 1:
        raise AmbiguousTimeline(f"equal versions overlap at [{lo}, {hi}): {best}")
    return best[0]


def _elementary_pieces(
    chunks: dict[ChunkKey, list[DataSegment]], start: int, end: int
) -> list[tuple[int, int]]:
    bounds = {start, end}
    for (s, e), _ in chunks:
        bounds.update(b for b in (s, e) if start < b < end)
    ordered = sorted(bounds)
    return [(a, b) for a, b in itertools.pairwise(ordered) if a < b]


@dataclass(frozen=True)
class RefHolder:
    """What the reference expects of one holder (plain values, easy to compare)."""

    interval: tuple[int, int]
    version: str
    segment_ids: tuple[str, ...]
    chunk_interval: tuple[int, int]


def lookup(segments: Iterable[DataSegment], start: int, end: int) -> list[RefHolder]:
    """The visible pieces of ``[start, end)`` in time order: one per maximal run of elementary
    pieces served by the same chunk; pieces whose chunk has no rows (tombstones) are dropped."""
    chunks = chunks_of(segments)
    if end <= start:
        return []
    complete = complete_chunks(chunks)
    runs: list[list] = []  # [lo, hi, chunk key]
    for lo, hi in _elementary_pieces(chunks, start, end):
        key = visible_chunk_at(complete, lo, hi)
        if key is None:
            continue
        if runs and runs[-1][2] == key and runs[-1][1] == lo:
            runs[-1][1] = hi
        else:
            runs.append([lo, hi, key])
    holders = []
    for lo, hi, key in runs:
        data = [s for s in visible_segments_of_chunk(chunks[key]) if not s.is_tombstone]
        if data:
            holders.append(RefHolder((lo, hi), key[1], tuple(str(s.id) for s in data), key[0]))
    return holders


def is_overshadowed(segments: Iterable[DataSegment], segment: DataSegment) -> bool:
    """The timeline docstring's definition: nothing of ``segment`` is visible because whole,
    visible data replaces it — every instant of its interval is served by a higher version (or
    a tombstone of one), or by the segment's own chunk in which a visible segment overshadows
    it (same chunk: root range containing its own, higher minor version). "Whole" data: the
    overshadowing segment must belong to a complete AUG; an incomplete AUG that is visible only
    because nothing whole was left does not replace what it hides."""
    chunks = chunks_of(segments)
    start, end = segment.interval.key
    if start >= end:
        return False
    own = (segment.interval.key, segment.version)
    complete = complete_chunks(chunks)
    for lo, hi in _elementary_pieces(chunks, start, end):
        key = visible_chunk_at(complete, lo, hi)
        if key is None:
            return False
        if key[1] > segment.version:
            continue
        if key == own and any(
            _spec_overshadows(v.shard_spec, segment.shard_spec)
            for aug in visible_augs(chunks[key])
            if aug.complete  # "whole" data: an incomplete fallback AUG does not count
            for v in aug.members
        ):
            continue
        return False
    return True


def _spec_overshadows(a, b) -> bool:
    return (
        a.start_root_partition_id <= b.start_root_partition_id
        and b.end_root_partition_id <= a.end_root_partition_id
        and a.minor_version > b.minor_version
    )


def visibility_states(segments: Iterable[DataSegment]) -> dict[str, str]:
    """Each segment's state by id: ``visible`` when its chunk serves an elementary piece and
    the segment is among the chunk's visible ones (tombstones too), else ``overshadowed``
    when :func:`is_overshadowed`, else ``standby``."""
    segments = list(segments)
    chunks = chunks_of(segments)
    complete = complete_chunks(chunks)
    lo = min((s.interval.start_millis for s in segments), default=0)
    hi = max((s.interval.end_millis for s in segments), default=0)
    serving = {visible_chunk_at(complete, a, b) for a, b in _elementary_pieces(chunks, lo, hi)}
    visible = {
        str(s.id)
        for key in serving
        if key is not None
        for s in visible_segments_of_chunk(chunks[key])
    }
    return {
        str(s.id): "visible"
        if str(s.id) in visible
        else "overshadowed"
        if is_overshadowed(segments, s)
        else "standby"
        for s in segments
    }
