"""Which existing chunks an append would join whole: the layout read before an append
writes, so that it writes one segment per chunk it joins, not one per bucket.

After a compaction to a coarser segment granularity (HOUR appends, DAY chunks), each bucket
of an append joins the DAY chunk that holds it (:func:`~segmentlake.metadata.allocation.
chunk_for`). Written by bucket, an append of 72 hours added 72 segments to 3 chunks — 24 a
day where Druid's appenderator adds one per chunk per sequence — and every later decision
read them. Keyed by the chunk instead, the rows of all its buckets make one segment.

What is read here is a hint, taken from what this process last read (a process that never
read the datasource reads it once: a batch job is a new driver, and its one append would
otherwise write by bucket); the publish decides on a fresh read. A joined chunk that newer,
finer chunks overshadow by then gets the segment copied into them, as any append into it does
(:mod:`~segmentlake.metadata.upgrade`); one that is gone (marked unused) is refused with
``ChunkLayoutChanged``, and the append writes again by bucket.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.granularity import Granularity, bucket_granularities
from segmentlake.core.interval import Interval
from segmentlake.core.interval_index import IntervalIndex
from segmentlake.core.joined_chunks import JoinedChunks
from segmentlake.metadata.lockbox import in_use
from segmentlake.metadata.records import SEGMENT
from segmentlake.metadata.scope import EVERYTHING, Scope
from segmentlake.metadata.store import MetadataStore

__all__ = ["joinable_chunks", "last_read_joinable_chunks"]

_DAY_MS = 86_400_000
_COLUMNS = ("start_ms", "end_ms", "version", "used")


def last_read_joinable_chunks(
    store: MetadataStore,
    datasource: str,
    granularity: Granularity,
    interval: Interval | None = None,
) -> JoinedChunks:
    """:func:`joinable_chunks` of what this process last read of ``datasource``, reading it
    first (within ``interval``, when the append names one) only if it never did. The later
    reads of a process are not refreshed for a hint: its publish refreshes them anyway, and
    the publish, not this, decides."""
    segments = store.last_read(datasource, [SEGMENT], _COLUMNS)
    if segments is None:
        # Its publish would read as much (a cold read of 10^5 records: 0.3-0.7 s) and then
        # only catches up; here it tells the write which chunks to join.
        store.read(datasource, scope=_scope_of(interval))
        segments = store.last_read(datasource, [SEGMENT], _COLUMNS)
    return JoinedChunks.empty() if segments is None else joinable_chunks(segments, granularity)


def _scope_of(interval: Interval | None) -> Scope:
    if interval is None:
        return EVERYTHING
    return Scope.of(ranges=[(interval.start_millis, interval.end_millis)])


def joinable_chunks(segments: pa.Table, granularity: Granularity) -> JoinedChunks:
    """The chunks of ``segments`` (start_ms, end_ms, version, used) coarser than
    ``granularity``'s buckets and made of whole ones, each in a version newer than that of
    every other chunk it overlaps: an append of ``granularity`` joins such a chunk with every
    bucket it holds, so its rows there can be one segment. Sorted by start."""
    if granularity is Granularity.ALL or segments.num_rows == 0:
        return JoinedChunks.empty()
    longest = granularity.fixed_millis or granularity.months * 31 * _DAY_MS
    # The length test first, on every record: in the usual case (every chunk a bucket of
    # this granularity) nothing passes it, and no filtered copy of 10^6 records is made.
    coarse = pc.greater(pc.subtract(segments["end_ms"], segments["start_ms"]), longest)
    if not pc.any(coarse).as_py():
        return JoinedChunks.empty()
    used = segments.filter(in_use())
    coarse = pc.greater(pc.subtract(used["end_ms"], used["start_ms"]), longest)
    grouped = _grouped_by_chunk(used.filter(coarse))
    if grouped.num_rows == 0:
        return JoinedChunks.empty()
    nearby = functools.reduce(
        pc.and_,
        [
            pc.invert(coarse),
            pc.less(used["start_ms"], pc.max(grouped["end_ms"])),
            pc.greater(used["end_ms"], pc.min(grouped["start_ms"])),
            pc.greater(used["version"], pc.min(grouped["version_max"])),
        ],
    )
    others = used.filter(nearby)
    starts = grouped["start_ms"].to_numpy()
    ends = grouped["end_ms"].to_numpy()
    whole = granularity.starts_buckets(starts) & granularity.starts_buckets(ends)
    a_bucket = functools.reduce(
        np.logical_or, bucket_granularities(starts, ends).values(), np.zeros(len(starts), bool)
    )
    keep = whole & a_bucket & _newest_over_their_interval(grouped, others)
    return JoinedChunks(starts[keep], ends[keep])


def _newest_over_their_interval(grouped: pa.Table, others: pa.Table) -> np.ndarray:
    """Which chunks of ``grouped`` (start_ms, end_ms, version_max; sorted) are in a version
    newer than every other chunk overlapping them, among ``grouped``'s and ``others``'
    chunks, as a mask. Compacted chunks usually overlap nothing: then nothing is indexed
    (10^4 chunks took 0.1 s a call to index and ask)."""
    starts = grouped["start_ms"].to_numpy()
    ends = grouped["end_ms"].to_numpy()
    if others.num_rows == 0 and bool(np.all(ends[:-1] <= starts[1:])):
        return np.ones(len(starts), dtype=bool)
    candidates = _rows_of(grouped)
    index = IntervalIndex((s, e, v) for s, e, v in [*_newest_by_chunk(others), *candidates])
    newest = [(s, e) for s, e, v in candidates if all(o <= v for o in index.overlapping(s, e))]
    # Two overlapping chunks of one version (which publishes never make) are both newest:
    # a row there has no one chunk to join, so neither is joined.
    alone = IntervalIndex((s, e, (s, e)) for s, e in newest)
    joined = {c for c in newest if alone.overlapping(*c) == [c]}
    return np.array([(s, e) in joined for s, e, _ in candidates], dtype=bool)


def _newest_by_chunk(segments: pa.Table) -> list[tuple[int, int, str]]:
    """(start, end, highest version) of each distinct chunk interval of ``segments``."""
    return _rows_of(_grouped_by_chunk(segments)) if segments.num_rows else []


def _grouped_by_chunk(segments: pa.Table) -> pa.Table:
    """Each distinct chunk interval of ``segments`` with its highest version
    (``start_ms``, ``end_ms``, ``version_max``), sorted."""
    grouped = segments.group_by(["start_ms", "end_ms"]).aggregate([("version", "max")])
    return grouped.sort_by([("start_ms", "ascending"), ("end_ms", "ascending")])


def _rows_of(grouped: pa.Table) -> list[tuple[int, int, str]]:
    return list(
        zip(
            grouped["start_ms"].to_pylist(),
            grouped["end_ms"].to_pylist(),
            grouped["version_max"].to_pylist(),
            strict=True,
        )
    )
