"""Segment records as columns, and the index a timeline loads them through lazily.

A datasource's used segments arrive as typed columns (its metadata records). Building a
:class:`~segmentlake.core.segment.DataSegment` and a timeline entry for each of 10^6 records
costs seconds, while most questions touch a few chunks. So a timeline built
:meth:`~segmentlake.core.timeline.VersionedIntervalTimeline.from_records` keeps only this
index: the records grouped into chunks (interval and version) in numpy arrays, found by
interval, and handed to the timeline chunk by chunk, as DataSegments built by a
:class:`SegmentSource`, the first time something touches them.

This module knows nothing of Arrow or Delta: the metadata layer supplies the columns and the
source (the pure core may use numpy; it already does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from segmentlake.core.segment import DataSegment

__all__ = ["ListSource", "LoadedChunk", "RecordIndex", "SegmentRecords", "SegmentSource"]

IntArray = npt.NDArray[np.int64]


class SegmentSource(Protocol):
    """Builds the DataSegments of some records, on demand."""

    def segments(self, rows: IntArray) -> Sequence[DataSegment]:
        """The segments of records ``rows`` (positions in the columns), in that order."""
        ...


@dataclass(frozen=True, slots=True)
class SegmentRecords:
    """The used segment records of one datasource as columns (one entry per record): what
    a timeline needs to find a chunk, and a source for the rest of each segment.

    ``version`` holds codes into ``versions``; any order of the distinct version strings
    will do (the index compares strings, not codes).
    """

    datasource: str
    start: IntArray
    end: IntArray
    version: IntArray
    versions: tuple[str, ...]
    partition: IntArray
    source: SegmentSource

    @classmethod
    def of_segments(cls, datasource: str, segments: Sequence[DataSegment]) -> SegmentRecords:
        """Records of segments already built (tests, and callers holding a list)."""
        versions = sorted({s.version for s in segments})
        code = {v: i for i, v in enumerate(versions)}
        return cls(
            datasource=datasource,
            start=_ints(s.interval.start_millis for s in segments),
            end=_ints(s.interval.end_millis for s in segments),
            version=_ints(code[s.version] for s in segments),
            versions=tuple(versions),
            partition=_ints(s.shard_spec.partition_num for s in segments),
            source=ListSource(tuple(segments)),
        )

    def __len__(self) -> int:
        return len(self.start)


@dataclass(frozen=True, slots=True)
class ListSource:
    """A :class:`SegmentSource` over segments already built."""

    held: tuple[DataSegment, ...]

    def segments(self, rows: IntArray) -> Sequence[DataSegment]:
        held = self.held
        return [held[i] for i in rows.tolist()]


def _ints(values: Iterable[int]) -> IntArray:
    return np.fromiter(values, dtype=np.int64)


class LoadedChunk(NamedTuple):
    """One chunk handed over to the timeline: its interval, version and segments. A named
    tuple, not a frozen dataclass: 10^6 of them may be made at once, and a frozen
    dataclass's ``__init__`` costs several times as much."""

    start: int
    end: int
    version: str
    segments: Sequence[DataSegment]


class RecordIndex:
    """The chunks of some records that the timeline has not taken yet.

    Records are sorted by (start, end, version, partition); a chunk is a run of equal
    (start, end, version). A record repeating an earlier one's (chunk, partition) is dropped,
    as adding it to a timeline would replace the earlier one. Chunks are found by interval
    as the timeline finds its own: per distinct chunk length, bisecting sorted starts.
    """

    __slots__ = (
        "_bounds",
        "_by_length",
        "_chunk_start",
        "_codes",
        "_end",
        "_loaded",
        "_order",
        "_records",
        "_version",
        "remaining",
    )

    def __init__(self, records: SegmentRecords) -> None:
        self._records = records
        order = _sorted_unique(records)
        start, end, version = records.start[order], records.end[order], records.version[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (start[1:] != start[:-1]) | (end[1:] != end[:-1]) | (version[1:] != version[:-1])
        first = np.flatnonzero(new)
        self._order = order
        self._bounds = np.append(first, len(order))
        self._chunk_start, self._end = start[first], end[first]
        self._version = version[first]
        self._codes = {v: i for i, v in enumerate(records.versions)}
        self._loaded = np.zeros(len(first), dtype=bool)
        self._by_length = _length_index(self._chunk_start, self._end)
        self.remaining = len(order)  # records not handed over yet

    @property
    def datasource(self) -> str:
        return self._records.datasource

    def overlapping(self, start: int, end: int) -> IntArray:
        """Ids of the chunks not taken yet whose interval overlaps ``[start, end)``."""
        found = []
        for length, (starts, ids) in self._by_length.items():
            lo = np.searchsorted(starts, start - length, side="right")
            hi = np.searchsorted(starts, end, side="left")
            if lo < hi:
                found.append(ids[lo:hi])
        if not found:
            return np.zeros(0, dtype=np.int64)
        chunks = np.concatenate(found)
        return chunks[~self._loaded[chunks]]

    def find(self, start: int, end: int, version: str) -> IntArray:
        """The id of chunk (start, end, version) if not taken yet (an array of 0 or 1)."""
        code = self._codes.get(version)
        if code is None:
            return np.zeros(0, dtype=np.int64)
        lo = int(np.searchsorted(self._chunk_start, start, side="left"))
        hi = int(np.searchsorted(self._chunk_start, start, side="right"))
        same = lo + np.flatnonzero((self._end[lo:hi] == end) & (self._version[lo:hi] == code))
        return same[~self._loaded[same]].astype(np.int64)

    def pending(self) -> IntArray:
        """Ids of every chunk not taken yet."""
        return np.flatnonzero(~self._loaded).astype(np.int64)

    def take(self, chunks: IntArray) -> list[LoadedChunk]:
        """Build the segments of ``chunks`` (ids not taken yet) and hand them over, once."""
        chunks = np.unique(chunks)
        if not len(chunks):
            return []
        lo, hi = self._bounds[chunks], self._bounds[chunks + 1]
        counts = hi - lo
        # Positions lo..hi-1 of every chunk, in one array: a running index minus, per chunk,
        # the offset that makes its run start at lo.
        offsets = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        rows = self._order[np.arange(int(counts.sum())) + offsets]
        segments = self._records.source.segments(rows)
        self._loaded[chunks] = True
        self.remaining -= len(rows)
        versions = self._records.versions
        # Plain lists, not per-element numpy scalars: 10^6 chunks may be handed over at once.
        starts = self._chunk_start[chunks].tolist()
        ends = self._end[chunks].tolist()
        codes = self._version[chunks].tolist()
        cuts = np.cumsum(counts).tolist()
        return [
            LoadedChunk(starts[k], ends[k], versions[codes[k]], segments[at:cut])
            for k, (at, cut) in enumerate(zip([0, *cuts[:-1]], cuts, strict=True))
        ]


def _sorted_unique(records: SegmentRecords) -> IntArray:
    """Record positions sorted by (start, end, version, partition), the last of equal ones."""
    keys = (records.partition, records.version, records.end, records.start)
    # Stable: equal records keep their order, so the last stays last.
    order: IntArray = np.lexsort(keys).astype(np.int64)
    if len(order) < 2:
        return order
    same = np.ones(len(order) - 1, dtype=bool)
    for column in keys:
        sorted_column = column[order]
        same &= sorted_column[1:] == sorted_column[:-1]
    keep = np.append(~same, True)
    unique: IntArray = order[keep]
    return unique


def _length_index(start: IntArray, end: IntArray) -> dict[int, tuple[IntArray, IntArray]]:
    """Per distinct chunk length: the chunks' sorted starts and their ids (one sort, however
    many distinct lengths there are)."""
    lengths = end - start
    ids = np.lexsort((start, lengths)).astype(np.int64)
    ordered = lengths[ids]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return {
        int(ordered[group[0]]): (start[ids[group]], ids[group])
        for group in np.split(np.arange(len(ids)), cuts)
        if len(group)
    }
