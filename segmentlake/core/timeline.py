"""The versioned interval timeline: which segments a reader sees (DESIGN.md §3).

Vocabulary (Druid's): a *chunk* is all segments of one interval and version; an *atomic update
group* (AUG) is the segments of a chunk sharing root partition range and minor version.

* In a chunk, visible are the complete AUGs that no complete AUG overshadows, plus incomplete
  AUGs that no complete AUG overshadows and that the visible complete AUGs do not fully cover
  (nothing whole to fall back to); such an incomplete AUG hides whatever it overshadows.
* A chunk is complete when its visible AUGs cover its core root partitions.
* At every instant the complete chunk of highest version wins; tombstone chunks win and serve
  nothing.

The structure is built for Druid-sized timelines (10^6 segments): adding and removing only touch
one chunk and mark it dirty; a chunk's visible set is recomputed on the next lookup that needs
it. Lookups find candidate chunks by bisecting sorted start times kept per distinct chunk
length, then sweep the candidates in time order with a heap of versions.

A timeline loaded :meth:`~VersionedIntervalTimeline.from_records` starts with no chunk built:
a :class:`~segmentlake.core.timeline_records.RecordIndex` over the records hands each chunk
over, with its segments, the first time a lookup, a change or an iteration touches it. Every
method behaves as if all segments had been added up front.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from segmentlake.core.collection import collection_paused
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.core.timeline_records import LoadedChunk, RecordIndex, SegmentRecords
from segmentlake.errors import SpecError

__all__ = [
    "OVERSHADOWED",
    "STANDBY",
    "VISIBLE",
    "TimelineObjectHolder",
    "VersionedIntervalTimeline",
    "winning_pieces",
]

VISIBLE, OVERSHADOWED, STANDBY = "visible", "overshadowed", "standby"

_RootKey = tuple[int, int, int]  # (start root, end root, minor version) of an AUG


@dataclass(frozen=True, slots=True)
class TimelineObjectHolder:
    """One visible piece of the timeline: the piece's interval (clipped to the query), the
    version of the chunk that serves it, that chunk's whole interval and its visible segments
    ordered by partition number."""

    interval: Interval
    version: str
    segments: tuple[DataSegment, ...]
    chunk_interval: Interval


# TimelineObjectHolder's slot setters: a lookup of all time may return 10^6 holders, and a
# frozen dataclass's __init__ (object.__setattr__ by name) costs several times as much.
_HOLDER_SETTERS = tuple(
    getattr(TimelineObjectHolder, name).__set__
    for name in ("interval", "version", "segments", "chunk_interval")
)


def _holder(
    interval: Interval, version: str, segments: tuple[DataSegment, ...], chunk_interval: Interval
) -> TimelineObjectHolder:
    """A holder from values the timeline already holds (nothing to check)."""
    holder = object.__new__(TimelineObjectHolder)
    set_interval, set_version, set_segments, set_chunk_interval = _HOLDER_SETTERS
    set_interval(holder, interval)
    set_version(holder, version)
    set_segments(holder, segments)
    set_chunk_interval(holder, chunk_interval)
    return holder


def _piece_holder(start: int, end: int, chunk: _Chunk) -> TimelineObjectHolder | None:
    """The holder of a piece ``[start, end)`` that ``chunk`` serves; None for a tombstone."""
    data = chunk.data()
    if not data:
        return None
    # A chunk's segments carry its interval: reuse it (building an Interval costs two
    # datetimes, and a lookup of all time may return 10^6 pieces).
    chunk_interval = data[0].interval
    piece = (
        chunk_interval
        if (start, end) == (chunk.start, chunk.end)
        else Interval.of_millis(start, end)
    )
    return _holder(piece, chunk.version, data, chunk_interval)


class _Chunk:
    """All segments of one (interval, version); its visible set is cached until it changes."""

    __slots__ = ("_complete", "_data", "_visible", "_whole", "end", "segments", "start", "version")

    def __init__(self, start: int, end: int, version: str) -> None:
        self.start = start
        self.end = end
        self.version = version
        self.segments: dict[int, DataSegment] = {}
        self._visible: tuple[DataSegment, ...] | None = None
        self._data: tuple[DataSegment, ...] = ()
        self._whole: tuple[DataSegment, ...] | None = None
        self._complete = False

    def invalidate(self) -> None:
        self._visible = None

    def visible(self) -> tuple[DataSegment, ...]:
        """Visible segments (tombstones included), ordered by partition number."""
        if self._visible is None:
            self._refresh()
        assert self._visible is not None
        return self._visible

    def data(self) -> tuple[DataSegment, ...]:
        """Visible segments that hold rows (tombstones excluded)."""
        if self._visible is None:
            self._refresh()
        return self._data

    def whole(self) -> tuple[DataSegment, ...]:
        """Visible segments of complete AUGs (not those of an incomplete fallback AUG)."""
        if self._visible is None:
            self._refresh()
        if self._whole is None:
            members: dict[_RootKey, int] = {}
            sizes: dict[_RootKey, int] = {}
            for seg in self.segments.values():  # AUG completeness as in _visible_groups
                key = _root_key(seg)
                members[key] = members.get(key, 0) + 1
                sizes[key] = max(sizes.get(key, 0), seg.shard_spec.atomic_update_group_size)
            assert self._visible is not None
            self._whole = tuple(
                s for s in self._visible if members[_root_key(s)] >= sizes[_root_key(s)]
            )
        return self._whole

    def is_complete(self) -> bool:
        if self._visible is None:
            self._refresh()
        return self._complete

    def is_tombstone(self) -> bool:
        """A complete chunk whose visible segments are all tombstones: it hides, serves nothing."""
        return self.is_complete() and not self._data

    def _refresh(self) -> None:
        if self._refresh_first_generation() or (len(self.segments) == 1 and self._refresh_single()):
            return
        visible_keys, cover = _visible_groups(self.segments.values())
        visible = tuple(
            seg for _, seg in sorted(self.segments.items()) if _root_key(seg) in visible_keys
        )
        core = max((s.shard_spec.num_core_partitions for s in self.segments.values()), default=0)
        self._visible = visible
        self._whole = None
        self._data = tuple(s for s in visible if not s.shard_spec.is_tombstone)
        self._complete = _covers(cover, 0, core)

    def _refresh_first_generation(self) -> bool:
        """:meth:`_refresh` for a chunk of only first-generation numbered segments (the common
        case: appends and overwrites not yet compacted). Each is its own complete AUG with
        root range [p, p+1) and minor 0, so all are visible and the chunk is complete when
        partitions 0..core-1 are all there. False (nothing done) for any other chunk."""
        core = 0
        for segment in self.segments.values():
            spec = segment.shard_spec
            if type(spec) is not NumberedShardSpec:  # exactly: a subclass may differ
                return False
            if spec.num_core_partitions > core:
                core = spec.num_core_partitions
        partitions = self.segments
        self._visible = self._data = tuple(partitions[p] for p in sorted(partitions))
        self._whole = None
        self._complete = all(p in partitions for p in range(core))
        return True

    def _refresh_single(self) -> bool:
        """:meth:`_refresh` for a chunk of one segment whose AUG is complete (one segment per
        chunk is common: 10^6 HOUR chunks): it is visible, nothing to weigh it against.
        False (nothing done) for any other single segment."""
        (segment,) = self.segments.values()
        spec = segment.shard_spec
        if spec.atomic_update_group_size > 1:
            return False
        self._visible = (segment,)
        self._whole = None
        self._data = () if spec.is_tombstone else self._visible
        cover = _merge_ranges([_root_key(segment)])
        self._complete = _covers(cover, 0, spec.num_core_partitions)
        return True


def _root_key(segment: DataSegment) -> _RootKey:
    spec = segment.shard_spec
    return (spec.start_root_partition_id, spec.end_root_partition_id, spec.minor_version)


def _visible_groups(segments: Iterable[DataSegment]) -> tuple[set[_RootKey], list[list[int]]]:
    """The AUG keys visible in a chunk and the merged root ranges they cover (rule 1)."""
    members: dict[_RootKey, int] = {}
    sizes: dict[_RootKey, int] = {}
    for seg in segments:
        key = _root_key(seg)
        members[key] = members.get(key, 0) + 1
        sizes[key] = max(sizes.get(key, 0), seg.shard_spec.atomic_update_group_size)
    complete = [k for k, n in members.items() if n >= sizes[k]]
    incomplete = [k for k, n in members.items() if n < sizes[k]]
    if len(members) == len(complete) and all(k[2] == 0 for k in complete):
        # Only first-generation segments: nothing overshadows anything (the common case).
        return set(complete), _merge_ranges(complete)
    shadowed_by_complete = _Overshadowing(complete)
    visible_complete = [k for k in complete if not shadowed_by_complete.overshadows(k)]
    cover = _merge_ranges(visible_complete)
    fallbacks = [
        k
        for k in incomplete
        if not shadowed_by_complete.overshadows(k) and not _covers(cover, k[0], k[1])
    ]
    if not fallbacks:
        return set(visible_complete), cover
    shadowed_by_fallback = _Overshadowing(fallbacks)
    visible = {k for k in visible_complete + fallbacks if not shadowed_by_fallback.overshadows(k)}
    return visible, _merge_ranges(list(visible))


class _Overshadowing:
    """Answers "does any of these AUGs overshadow key k?" in O(log n) per question.

    A overshadows B when A's root range contains B's and A's minor version is higher. Ranges
    are grouped by minor version; per group, sorted starts with a running maximum of ends
    tell whether some range starting at or before B's start reaches B's end.
    """

    __slots__ = ("_levels",)

    def __init__(self, keys: Iterable[_RootKey]) -> None:
        by_minor: dict[int, list[tuple[int, int]]] = {}
        for start, end, minor in keys:
            by_minor.setdefault(minor, []).append((start, end))
        self._levels: list[tuple[int, list[int], list[int]]] = []
        for minor, ranges in by_minor.items():
            ranges.sort()
            starts = [r[0] for r in ranges]
            reach: list[int] = []
            best = -1
            for _, end in ranges:
                best = max(best, end)
                reach.append(best)
            self._levels.append((minor, starts, reach))

    def overshadows(self, key: _RootKey) -> bool:
        start, end, minor = key
        for level_minor, starts, reach in self._levels:
            if level_minor > minor:
                i = bisect_right(starts, start)
                if i and reach[i - 1] >= end:
                    return True
        return False


def _merge_ranges(keys: Iterable[_RootKey]) -> list[list[int]]:
    merged: list[list[int]] = []
    for start, end, _ in sorted(keys):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _covers(merged: list[list[int]], start: int, end: int) -> bool:
    """True when the merged ranges cover ``[start, end)`` (always, when it is empty)."""
    if start >= end:
        return True
    i = bisect_right(merged, [start, float("inf")]) - 1
    return i >= 0 and merged[i][0] <= start and merged[i][1] >= end


class _StartIndex:
    """Sorted start times of the chunk intervals of one length; additions are sorted lazily."""

    __slots__ = ("_pending", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._pending: list[int] = []

    def add(self, start: int) -> None:
        self._pending.append(start)

    def remove(self, start: int) -> None:
        starts = self.sorted()
        del starts[bisect_left(starts, start)]

    def sorted(self) -> list[int]:
        if self._pending:
            self._starts.extend(self._pending)
            self._pending = []
            self._starts.sort()
        return self._starts

    def __len__(self) -> int:
        return len(self._starts) + len(self._pending)


class VersionedIntervalTimeline:
    """Druid's versioned interval timeline for one datasource.

    >>> from segmentlake.core.shard_spec import NumberedShardSpec
    >>> tl = VersionedIntervalTimeline()
    >>> day = Interval.parse("2024-01-01/P1D")
    >>> tl.add(DataSegment("wiki", day, "v1", NumberedShardSpec(0, 1)))
    >>> [h.version for h in tl.lookup(day)]
    ['v1']
    """

    def __init__(self, segments: Iterable[DataSegment] = ()) -> None:
        self._chunks: dict[tuple[int, int], dict[str, _Chunk]] = {}
        self._by_length: dict[int, _StartIndex] = {}
        self._datasource: str | None = None
        self._size = 0
        self._lazy: RecordIndex | None = None  # chunks of records not built yet
        self.add_all(segments)

    @classmethod
    def from_records(cls, records: SegmentRecords) -> VersionedIntervalTimeline:
        """The timeline of ``records``, built lazily: a chunk's segments are made (by the
        records' source) the first time something touches the chunk, so loading 10^6
        segments to look at a day costs an index of arrays, not 10^6 objects."""
        timeline = cls()
        if len(records):
            timeline._datasource = records.datasource
            timeline._lazy = RecordIndex(records)
        return timeline

    # -- lazy loading ------------------------------------------------------------------------

    def _load_overlapping(self, start: int, end: int) -> None:
        """Build the record chunks overlapping ``[start, end)`` (a lookup's candidates)."""
        if self._lazy is not None:
            self._take(self._lazy, self._lazy.overlapping(start, end))

    def _load_chunk(self, segment: DataSegment) -> None:
        """Build the record chunk ``segment`` would join (before it is added or removed)."""
        if self._lazy is not None:
            start, end = segment.interval.key
            self._take(self._lazy, self._lazy.find(start, end, segment.version))

    def _load_all(self) -> None:
        """Build every record chunk (iteration and whole-timeline questions need them)."""
        if self._lazy is not None:
            lazy, self._lazy = self._lazy, None
            self._take(lazy, lazy.pending())

    def _take(self, lazy: RecordIndex, chunks: npt.NDArray[np.int64]) -> None:
        """Build ``chunks`` of the record index and put them into the timeline's structures.
        No datasource check: the index holds records of the timeline's own datasource."""
        if len(chunks):
            with collection_paused():
                self._absorb_chunks(lazy.take(chunks))

    def _absorb_chunks(self, loaded: list[LoadedChunk]) -> None:
        for item in loaded:
            key = (item.start, item.end)
            versions = self._chunks.get(key)
            if versions is None:
                versions = self._chunks[key] = {}
                self._index_for(key).add(item.start)
            chunk = versions.get(item.version)
            if chunk is None:
                chunk = versions[item.version] = _Chunk(item.start, item.end, item.version)
            partitions = chunk.segments
            before = len(partitions)
            if len(item.segments) == 1:  # the common case at 10^6 chunks: no generator
                only = item.segments[0]
                partitions[only.shard_spec.partition_num] = only
            else:
                partitions.update({s.shard_spec.partition_num: s for s in item.segments})
            self._size += len(partitions) - before
            chunk._visible = None

    # -- changes -----------------------------------------------------------------------------

    def add(self, segment: DataSegment) -> None:
        """Add (or replace, same id) a segment; visibility is recomputed lazily."""
        if self._datasource != segment.datasource:
            self._check_datasource(segment)
        self._load_chunk(segment)
        key = segment.interval.key
        versions = self._chunks.get(key)
        if versions is None:
            versions = self._chunks[key] = {}
            self._index_for(key).add(key[0])
        chunk = versions.get(segment.version)
        if chunk is None:
            chunk = versions[segment.version] = _Chunk(key[0], key[1], segment.version)
        partitions = chunk.segments
        size_before = len(partitions)
        partitions[segment.shard_spec.partition_num] = segment
        self._size += len(partitions) - size_before
        chunk._visible = None

    def add_all(self, segments: Iterable[DataSegment]) -> None:
        """Add many segments (what loading a datasource's used segments does): :meth:`add`
        inlined, as loading 10^6 segments spends a third of its time here."""
        chunks = self._chunks
        grown = 0
        for segment in segments:
            if self._datasource != segment.datasource:
                self._check_datasource(segment)
            if self._lazy is not None:
                self._load_chunk(segment)
            interval = segment.interval
            key = (interval.start_millis, interval.end_millis)
            versions = chunks.get(key)
            if versions is None:
                versions = chunks[key] = {}
                self._index_for(key).add(key[0])
            version = segment.version
            chunk = versions.get(version)
            if chunk is None:
                chunk = versions[version] = _Chunk(key[0], key[1], version)
            partitions = chunk.segments
            before = len(partitions)
            partitions[segment.shard_spec.partition_num] = segment
            grown += len(partitions) - before
            chunk._visible = None
        self._size += grown

    def remove(self, segment: DataSegment) -> DataSegment | None:
        """Remove a segment (by id); return it, or None when the timeline does not hold it."""
        self._load_chunk(segment)
        key = segment.interval.key
        versions = self._chunks.get(key)
        chunk = versions.get(segment.version) if versions else None
        if versions is None or chunk is None:
            return None
        if segment.shard_spec.partition_num not in chunk.segments:
            return None
        removed = chunk.segments.pop(segment.shard_spec.partition_num)
        self._size -= 1
        chunk.invalidate()
        if not chunk.segments:
            del versions[segment.version]
            if not versions:
                del self._chunks[key]
                index = self._by_length[key[1] - key[0]]
                index.remove(key[0])
                if not len(index):
                    del self._by_length[key[1] - key[0]]
        return removed

    def _check_datasource(self, segment: DataSegment) -> None:
        if self._datasource is None:
            self._datasource = segment.datasource
            return
        raise SpecError(
            f"segment {segment.id} belongs to datasource {segment.datasource!r}, but this "
            f"timeline holds {self._datasource!r}; use one timeline per datasource"
        )

    def _index_for(self, key: tuple[int, int]) -> _StartIndex:
        length = key[1] - key[0]
        index = self._by_length.get(length)
        if index is None:
            index = self._by_length[length] = _StartIndex()
        return index

    # -- queries -----------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of segments held (visible or not)."""
        return self._size + (self._lazy.remaining if self._lazy is not None else 0)

    def __iter__(self) -> Iterator[DataSegment]:
        """Every segment held, ordered by interval, version and partition number."""
        self._load_all()
        for key in sorted(self._chunks):
            versions = self._chunks[key]
            for version in sorted(versions):
                yield from (s for _, s in sorted(versions[version].segments.items()))

    def lookup(self, interval: Interval) -> list[TimelineObjectHolder]:
        """The visible pieces overlapping ``interval``, in time order, clipped to it."""
        with collection_paused():  # a lookup of all time may build 10^6 chunks' visible sets
            pieces = self._pieces(interval.start_millis, interval.end_millis)
            return [holder for piece in pieces if (holder := _piece_holder(*piece)) is not None]

    def visible_segments(self, interval: Interval = ETERNITY) -> list[DataSegment]:
        """Each visible (non-tombstone) segment overlapping ``interval`` once, in time order."""
        seen: dict[DataSegment, None] = {}
        for holder in self.lookup(interval):
            seen.update(dict.fromkeys(holder.segments))
        return list(seen)

    def is_overshadowed(self, segment: DataSegment) -> bool:
        """True when nothing of ``segment`` is visible because whole, visible data replaces it:
        every instant of its interval is served by a higher version (or a tombstone of one), or
        by its own chunk in which a visible segment of a complete AUG overshadows it (a segment
        hidden only by an incomplete fallback AUG is not: its removal could uncover another
        incomplete AUG). Such segments can be marked unused without changing what readers
        see."""
        interval = segment.interval
        return self._overshadowed_in(
            segment, self._pieces(interval.start_millis, interval.end_millis)
        )

    def find_fully_overshadowed(self) -> list[DataSegment]:
        """Every held segment that :meth:`is_overshadowed` (what cleanup marks unused), in
        the order of :meth:`__iter__`."""
        self._load_all()
        return self._fully_overshadowed(self._pieces(ETERNITY.start_millis, ETERNITY.end_millis))

    def _fully_overshadowed(self, pieces: list[tuple[int, int, _Chunk]]) -> list[DataSegment]:
        piece_starts = [p[0] for p in pieces]
        found = []
        for key in sorted(self._chunks):
            lo = max(bisect_right(piece_starts, key[0]) - 1, 0)
            hi = bisect_left(piece_starts, key[1])
            overlapping = pieces[lo:hi]
            versions = self._chunks[key]
            for version in sorted(versions):
                found += self._overshadowed_of(versions[version], overlapping)
        return found

    def _overshadowed_of(
        self, chunk: _Chunk, overlapping: list[tuple[int, int, _Chunk]]
    ) -> list[DataSegment]:
        """The segments of ``chunk`` that ``overlapping`` (the pieces overlapping its
        interval) fully overshadow, by partition number."""
        serves = any(piece[2] is chunk for piece in overlapping)
        if serves and not any(v.shard_spec.minor_version for v in chunk.visible()):
            return []  # nothing of a serving chunk is overshadowed but by minor versions
        segments = [seg for _, seg in sorted(chunk.segments.items())]
        if serves:
            # The chunk serves part of its interval, so a segment of it is overshadowed only
            # if a visible segment of a complete AUG of the chunk overshadows it, which needs
            # a minor version above 0: filter once per segment, not once per (segment, piece,
            # visible segment).
            shadow = _Overshadowing(
                _root_key(v) for v in chunk.whole() if v.shard_spec.minor_version
            )
            segments = [seg for seg in segments if shadow.overshadows(_root_key(seg))]
        return [seg for seg in segments if self._overshadowed_in(seg, overlapping)]

    def visibility_states(self) -> dict[DataSegment, str]:
        """Every held segment's state, as Druid's OvershadowableManager names them:
        ``visible`` (it serves some instant; a visible tombstone hides what is under it),
        ``overshadowed`` (:meth:`is_overshadowed`: cleanup may mark it unused) or ``standby``
        (neither: e.g. part of a chunk or atomic update group that is not complete yet)."""
        with collection_paused():  # 10^5 chunks' visible sets and states
            return self._visibility_states()

    def _visibility_states(self) -> dict[DataSegment, str]:
        self._load_all()
        states: dict[DataSegment, str] = {}
        lone = self._lone_chunks()
        for chunk in lone:
            states.update(self._lone_states(chunk))
        if len(lone) == len(self._chunks):
            return states
        # The rest (overlapping intervals, several versions of one): the whole sweep, over a
        # timeline of just them (a bulk publish into empty HOUR chunks is all lone ones).
        rest = self
        if lone:
            rest = VersionedIntervalTimeline()
            lone_ids = {id(c) for c in lone}
            rest.add_all(
                seg
                for versions in self._chunks.values()
                for chunk in versions.values()
                if id(chunk) not in lone_ids
                for seg in chunk.segments.values()
            )
        pieces = rest._pieces(ETERNITY.start_millis, ETERNITY.end_millis)
        found = dict.fromkeys(rest._fully_overshadowed(pieces), OVERSHADOWED)
        for _, _, chunk in pieces:
            found.update(dict.fromkeys(chunk.visible(), VISIBLE))
        for versions in rest._chunks.values():
            for chunk in versions.values():
                for seg in chunk.segments.values():
                    states[seg] = found.get(seg, STANDBY)
        return states

    def _lone_chunks(self) -> list[_Chunk]:
        """The chunks alone in their interval: one version, and no other interval overlapping
        it. Nothing weighs against them, so each decides its segments' states by itself."""
        keys = sorted(self._chunks)
        lone: list[_Chunk] = []
        reach = keys[0][0] if keys else 0  # the furthest end of the intervals before this one
        for i, (start, end) in enumerate(keys):
            alone = start >= reach and (i + 1 == len(keys) or keys[i + 1][0] >= end)
            reach = max(reach, end)
            if alone:
                versions = self._chunks[(start, end)]
                if len(versions) == 1:
                    lone += versions.values()
        return lone

    def _lone_states(self, chunk: _Chunk) -> dict[DataSegment, str]:
        """:meth:`visibility_states` of a chunk alone in its interval: it is its own only
        piece when complete; else nothing serves its interval and every segment waits."""
        if not chunk.is_complete():
            return dict.fromkeys(chunk.segments.values(), STANDBY)
        if len(chunk.segments) == 1 and len(chunk.visible()) == 1:
            return {chunk.visible()[0]: VISIBLE}  # one HOUR chunk each: 10^5 of them
        states = dict.fromkeys(chunk.segments.values(), STANDBY)
        if len(states) > len(chunk.visible()):
            piece = [(chunk.start, chunk.end, chunk)]
            states.update(dict.fromkeys(self._overshadowed_of(chunk, piece), OVERSHADOWED))
        states.update(dict.fromkeys(chunk.visible(), VISIBLE))
        return states

    def _overshadowed_in(self, segment: DataSegment, pieces: list[tuple[int, int, _Chunk]]) -> bool:
        start, end = segment.interval.key
        covered_to = start
        for p_start, p_end, chunk in pieces:
            if p_end <= start or p_start >= end:
                continue
            if p_start > covered_to:
                return False  # a gap: part of the segment is served by nothing newer
            if chunk.version < segment.version:
                return False
            if chunk.version == segment.version and (
                (chunk.start, chunk.end) != (start, end)
                or not any(v.shard_spec.overshadows(segment.shard_spec) for v in chunk.whole())
            ):
                return False
            covered_to = max(covered_to, p_end)
        return covered_to >= end and start < end

    def _candidates(self, start: int, end: int) -> list[_Chunk]:
        """Complete chunks overlapping ``[start, end)``."""
        self._load_overlapping(start, end)
        found = []
        for length, index in self._by_length.items():
            starts = index.sorted()
            lo = bisect_right(starts, start - length)
            for s in starts[lo : bisect_left(starts, end)]:
                for chunk in self._chunks[(s, s + length)].values():
                    if chunk.is_complete():
                        found.append(chunk)
        return found

    def _pieces(self, start: int, end: int) -> list[tuple[int, int, _Chunk]]:
        """``(piece start, piece end, winning chunk)`` over ``[start, end)``, time-ordered;
        adjacent pieces of the same chunk merged; instants no chunk serves left out."""
        if end <= start:
            return []
        return winning_pieces(self._candidates(start, end), start, end)


class ChunkSpan(Protocol):
    """What the sweep weighs of a chunk: its interval in millis and its version."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def version(self) -> str: ...


Span = TypeVar("Span", bound=ChunkSpan)


def winning_pieces(chunks: list[Span], start: int, end: int) -> list[tuple[int, int, Span]]:
    """``(piece start, piece end, winning chunk)`` over ``[start, end)`` among complete
    ``chunks`` (sorted here in place), time-ordered: at each instant the highest version
    wins, equal versions the later-starting, then shorter chunk; adjacent pieces of one
    chunk merged, instants no chunk covers left out. The timeline's lookups and a listing
    of visible records (whose chunks are the winners) share this rule."""
    if not chunks or end <= start:
        return []
    if len(chunks) == 1:
        only = chunks[0]
        return [(max(start, only.start), min(end, only.end), only)]
    chunks.sort(key=lambda c: c.start)
    if _disjoint(chunks):  # nothing to weigh (e.g. one HOUR chunk each): no sweep
        return [(max(start, c.start), min(end, c.end), c) for c in chunks]
    rank = {v: i for i, v in enumerate(sorted({c.version for c in chunks}))}
    bounds = sorted(
        {start, end}
        | {c.start for c in chunks if c.start > start}
        | {c.end for c in chunks if c.end < end}
    )
    pieces: list[tuple[int, int, Span]] = []
    heap: list[tuple[int, int, int, int, Span]] = []
    nxt = 0
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        while nxt < len(chunks) and chunks[nxt].start <= lo:
            c = chunks[nxt]
            # Highest version first; equal versions: the later-starting, then shorter chunk.
            heapq.heappush(heap, (-rank[c.version], -c.start, c.end, nxt, c))
            nxt += 1
        while heap and heap[0][2] <= lo:
            heapq.heappop(heap)
        if not heap:
            continue
        winner = heap[0][4]
        if pieces and pieces[-1][2] is winner and pieces[-1][1] == lo:
            pieces[-1] = (pieces[-1][0], hi, winner)
        else:
            pieces.append((lo, hi, winner))
    return pieces


def _disjoint(chunks: Sequence[ChunkSpan]) -> bool:
    """True when chunks sorted by start are non-empty and overlap none of the others: each
    then serves its whole interval alone (what the sweep would find, one piece each)."""
    previous_end = None
    for chunk in chunks:
        if chunk.start >= chunk.end or (previous_end is not None and chunk.start < previous_end):
            return False
        previous_end = chunk.end
    return True
