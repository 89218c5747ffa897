"""Concurrent append and replace: re-publish appended segments under a replacing version.

A compaction (or any task holding REPLACE locks) publishes a new version over whole chunks
while appends (APPEND locks) go on into the old version. Without more, the new version would
hide every row appended after the compaction read its inputs. Druid's answer, taken here: the
appended segments are *upgraded* — each gets a copy of its record in the replacing chunk,
under a new partition id, pointing to the same rows (the same load spec). Nothing is
rewritten: an upgrade is metadata only.

Both orders of the two commits are handled, each in the commit that comes second:

* the append published first: the replace's publish copies every used segment in its chunks
  that is older than its version and was not among what it read (``replaced``);
* the replace published first: the append's publish copies its own segments into every
  newer-version chunk they overlap (only a REPLACE lock lets a newer version appear while an
  append holds its lock: an exclusive overwrite's lock conflicts with the append's). An
  append into a chunk part of which an older overwrite of a finer granularity replaced is
  copied into that newer chunk too: appended rows are visible wherever they land (Druid
  hides them there).

A copy keeps its rows' interval in the load spec (``"interval"``), so a reader clips the rows
to the part of the copy's chunk that is visible when the chunk is finer than the rows.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import FIRST_GENERATION_PARTITION_ID_MAX, NumberedShardSpec
from segmentlake.errors import SpecError
from segmentlake.metadata.lockbox import UnusedIds
from segmentlake.metadata.records import (
    PENDING,
    SEGMENT,
    Row,
    first_free_root_partition,
    segments_from_rows,
)
from segmentlake.metadata.store import PartitionState

__all__ = ["upgrades"]

_ChunkKey = tuple[int, int, str]  # (start ms, end ms, version)


def upgrades(
    state: PartitionState,
    published: Sequence[DataSegment],
    *,
    replaced: frozenset[str] | None,
    appended: bool,
    unused: Callable[[], UnusedIds],
) -> list[DataSegment]:
    """The upgraded copies a publish of ``published`` must add (see the module): for a
    replacing publish, ``replaced`` is the ids of every used segment it read; an append's
    publish (``appended``) copies its segments into newer chunks. Other publishes (an
    exclusive overwrite, a minor compaction) replace data on purpose and add none.
    ``unused()`` gives what the unused segments of the chunks copied into hold: copies are
    numbered past them (asked only when a copy is made)."""
    used = [r for r in state.of(SEGMENT) if r["used"]]
    known: list[UnusedIds] = []

    def unused_once() -> UnusedIds:
        if not known:
            known.append(unused())
        return known[0]

    chunks = _Chunks(used, lambda: state.of(PENDING), published, unused_once)
    copies: list[DataSegment] = []
    data = [s for s in published if not s.is_tombstone]
    if replaced is not None:
        for source in _appended_meanwhile(used, data, replaced):
            copies += chunks.copy_into_newer(source, only_published=True)
    elif appended:
        for seg in data:
            copies += chunks.copy_into_newer(seg, only_published=False)
    return copies


def _appended_meanwhile(
    used: list[Row], published: Sequence[DataSegment], replaced: frozenset[str]
) -> list[DataSegment]:
    """Used data segments overlapping a published chunk, older than it, and not read by the
    replacing task: rows appended while it ran."""
    chunks = _ChunkIndex.of(published)
    found = [
        row
        for row in used
        if row["id"] not in replaced
        and chunks.newer_overlapping(row["version"], row["start_ms"], row["end_ms"])
    ]
    return [s for s in segments_from_rows(found) if not s.is_tombstone]


@dataclass
class _TargetChunk:
    interval: Interval
    version: str
    keys: set[str]  # load-spec keys already served by the chunk
    next_partition: int
    core: int
    tombstone: bool


class _Chunks:
    """The chunks copies may go into, with their next free first-generation partition id."""

    def __init__(
        self,
        used: list[Row],
        pending: Callable[[], list[Row]],
        published: Sequence[DataSegment],
        unused: Callable[[], UnusedIds],
    ) -> None:
        self.used = used
        self.unused = unused
        # The pending rows, made into dicts only when a copy needs a chunk's next partition
        # (a bulk publish reads 10^4 of them and usually copies nothing).
        self.pending = pending
        self.published = published
        self.known: dict[_ChunkKey, _TargetChunk] = {}
        # Distinct chunks, indexed once: a publish of 10^4 segments over 10^4 used ones must
        # not compare every pair (it did: 10^8 comparisons, 5 s of a 10^4-segment append).
        self.used_chunks = _ChunkIndex({(r["start_ms"], r["end_ms"], r["version"]) for r in used})
        self.published_chunks = _ChunkIndex.of(published)

    def copy_into_newer(self, source: DataSegment, *, only_published: bool) -> list[DataSegment]:
        """A copy of ``source`` in each newer chunk overlapping it that lacks one."""
        span = source.rows_interval.start_millis, source.rows_interval.end_millis
        newer = self.published_chunks.newer_overlapping(source.version, *span)
        if not only_published:
            newer.update(self.used_chunks.newer_overlapping(source.version, *span))
        copies = []
        for key in sorted(newer):
            chunk = self._chunk(key)
            if chunk.tombstone or _key(source) in chunk.keys:
                continue
            copies.append(_copy(source, chunk))
        return copies

    def _chunk(self, key: _ChunkKey) -> _TargetChunk:
        chunk = self.known.get(key)
        if chunk is None:
            start, end, version = key
            rows = [
                r
                for r in self.used + self.pending()
                if (r["start_ms"], r["end_ms"], r["version"]) == key
            ]
            members = segments_from_rows([r for r in rows if r["kind"] == SEGMENT])
            members += [p for p in self.published if (*p.interval.key, p.version) == key]
            # Past what the chunk's segments hold and its overwrites cover (a copy numbered
            # inside a minor compaction's root range would be overshadowed by it).
            first = max(
                first_free_root_partition(rows),
                max((m.shard_spec.end_root_partition_id for m in members), default=0),
                self.unused().next_root.get(key, 0),  # unused segments keep their ids
            )
            chunk = _TargetChunk(
                Interval.of_millis(start, end),
                version,
                {_key(m) for m in members},
                first,
                max((m.shard_spec.num_core_partitions for m in members), default=0),
                bool(members) and all(m.is_tombstone for m in members),
            )
            self.known[key] = chunk
        return chunk


class _ChunkIndex:
    """Chunks by length and start, to find those of a newer version overlapping an interval
    without looking at every chunk: a chunk of length L overlapping ``[start, end)`` starts
    in ``(start - L, end)``. Grouping by length keeps one YEAR chunk from widening that
    window for 10^4 HOUR ones (a datasource has a few segment granularities)."""

    def __init__(self, chunks: set[_ChunkKey]) -> None:
        by_length: dict[int, list[_ChunkKey]] = {}
        for chunk in chunks:
            by_length.setdefault(chunk[1] - chunk[0], []).append(chunk)
        self.groups = [
            (length, [c[0] for c in group], group)
            for length, group in ((n, sorted(g)) for n, g in by_length.items())
        ]
        self.newest = max((c[2] for c in chunks), default="")

    @classmethod
    def of(cls, segments: Sequence[DataSegment]) -> _ChunkIndex:
        return cls({(s.interval.start_millis, s.interval.end_millis, s.version) for s in segments})

    def newer_overlapping(self, version: str, start: int, end: int) -> set[_ChunkKey]:
        """The chunks of a version newer than ``version`` overlapping ``[start, end)`` ms."""
        if self.newest <= version:  # the common case: nothing newer at all
            return set()
        found: set[_ChunkKey] = set()
        for length, starts, group in self.groups:
            low = bisect_right(starts, start - length)
            high = bisect_left(starts, end)
            found.update(c for c in group[low:high] if c[2] > version)
        return found


def _key(segment: DataSegment) -> str:
    return str(segment.load_spec.get("segment"))


def _copy(source: DataSegment, chunk: _TargetChunk) -> DataSegment:
    if chunk.next_partition > FIRST_GENERATION_PARTITION_ID_MAX:
        raise SpecError(f"chunk {chunk.interval} {chunk.version} is out of partition ids")
    load_spec = dict(source.load_spec)
    load_spec.setdefault("interval", str(source.interval))
    load_spec.setdefault("upgradedFrom", str(source.id))
    copy = DataSegment(
        source.datasource,
        chunk.interval,
        chunk.version,
        NumberedShardSpec(chunk.next_partition, chunk.core),
        load_spec=load_spec,
        dimensions=source.dimensions,
        metrics=source.metrics,
        size=source.size,
        num_rows=source.num_rows,
        schema=source.schema,
    )
    chunk.next_partition += 1
    chunk.keys.add(_key(source))
    return copy
