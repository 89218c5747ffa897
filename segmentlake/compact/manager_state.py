"""What the compaction manager reads of a datasource: its chunks as planners see them, the
user compactions, the selectors' last runs and the config — all from one metadata state, so a
decision made on it commits only if none of it changed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_jobs import ChunkKey, ChunkView, RunningCompaction, Selection
from segmentlake.core.interval import ETERNITY
from segmentlake.core.segment import DataSegment
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.metadata.compaction_records import (
    CONFIG,
    KINDS,
    RUNNING,
    SELECTION,
    SELECTOR_RUN,
    USER,
    UserCompaction,
    running_from_row,
    selection_from_row,
    user_from_row,
)
from segmentlake.metadata.queries import USED_SEGMENTS, either, of_kind
from segmentlake.metadata.records import SEGMENT, Row, segments_from_rows
from segmentlake.metadata.store import PartitionState

__all__ = ["MANAGER_READS", "ManagerState", "ViewCache", "read_manager_state"]

# The rows every manager decision reads: used segments and every compaction record.
MANAGER_READS = either(of_kind(*KINDS), USED_SEGMENTS)


@dataclass(frozen=True, slots=True)
class ManagerState:
    """One datasource's compaction picture at one metadata version."""

    views: dict[str, ChunkView]
    users: tuple[UserCompaction, ...]
    selector_runs: dict[str, str]
    config: CompactionConfig
    expired: tuple[Row, ...]


def _visible_chunks(segments: list[DataSegment]) -> dict[ChunkKey, tuple[DataSegment, ...]]:
    """Each chunk serving some of the timeline of ``segments``, with its visible ones."""
    timeline = VersionedIntervalTimeline(segments)
    visible: dict[ChunkKey, dict[DataSegment, None]] = {}
    for holder in timeline.lookup(ETERNITY):
        key = ChunkKey(holder.chunk_interval, holder.version)
        visible.setdefault(key, {}).update(dict.fromkeys(holder.segments))
    return {
        key: tuple(sorted(members, key=lambda s: s.shard_spec.partition_num))
        for key, members in visible.items()
    }


def _attach(
    visible: dict[ChunkKey, tuple[DataSegment, ...]],
    running: Iterable[RunningCompaction],
    selections: Iterable[Selection],
) -> dict[str, ChunkView]:
    by_chunk: dict[ChunkKey, list[RunningCompaction]] = {}
    for r in running:
        by_chunk.setdefault(r.job.chunk, []).append(r)
    selected = {s.chunk: s for s in selections}
    views = {}
    for key, members in visible.items():
        views[key.row_id] = ChunkView(key, members, tuple(by_chunk.get(key, ())), selected.get(key))
    # Records of chunks that no longer serve anything still matter to the duties.
    for key in set(by_chunk) | set(selected):
        if key.row_id not in views:
            views[key.row_id] = ChunkView(key, (), tuple(by_chunk.get(key, ())), selected.get(key))
    return views


_Visible = dict[ChunkKey, tuple[DataSegment, ...]]


class ViewCache:
    """Chunk views of one datasource, recomputed only where segment records changed.

    Chunks whose intervals overlap form a *cluster* (only inside one can a version hide
    another); a cluster whose segment rows are the same as last time keeps its visible
    segments, and a row parsed once is not parsed again. So a pass over 10^5 idle chunks does
    no timeline work and parses nothing.
    """

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, int], DataSegment] = {}
        self._clusters: dict[
            frozenset[tuple[str, int]], dict[ChunkKey, tuple[DataSegment, ...]]
        ] = {}

    def visible(self, rows: list[Row]) -> dict[ChunkKey, tuple[DataSegment, ...]]:
        by_span: dict[tuple[int, int], list[Row]] = {}
        for row in rows:
            by_span.setdefault((row["start_ms"], row["end_ms"]), []).append(row)
        clusters: dict[frozenset[tuple[str, int]], _Visible] = {}
        parsed: dict[tuple[str, int], DataSegment] = {}
        out: dict[ChunkKey, tuple[DataSegment, ...]] = {}
        for cluster_rows in _clusters(by_span):
            keys = frozenset((r["id"], r["updated_ms"]) for r in cluster_rows)
            found = self._clusters.get(keys)
            if found is None:
                found = _visible_chunks(self._segments(cluster_rows, parsed))
            else:
                for r in cluster_rows:
                    key = (r["id"], r["updated_ms"])
                    parsed[key] = self._parsed[key]
            clusters[keys] = found
            out.update(found)
        self._parsed, self._clusters = parsed, clusters
        return out

    def _segments(
        self, rows: list[Row], parsed: dict[tuple[str, int], DataSegment]
    ) -> list[DataSegment]:
        fresh = [r for r in rows if (r["id"], r["updated_ms"]) not in self._parsed]
        for row, seg in zip(fresh, segments_from_rows(fresh), strict=True):
            self._parsed[(row["id"], row["updated_ms"])] = seg
        out = []
        for r in rows:
            key = (r["id"], r["updated_ms"])
            parsed[key] = self._parsed[key]
            out.append(parsed[key])
        return out


def _clusters(by_span: dict[tuple[int, int], list[Row]]) -> Iterable[list[Row]]:
    """The rows of each group of overlapping intervals (a sweep over sorted starts)."""
    current: list[Row] = []
    end = None
    for span in sorted(by_span):
        if end is not None and span[0] >= end:
            yield current
            current, end = [], None
        current.extend(by_span[span])
        end = span[1] if end is None else max(end, span[1])
    if current:
        yield current


def read_manager_state(
    state: PartitionState, at_ms: int, cache: ViewCache | None = None
) -> ManagerState:
    """The manager's picture of ``state`` (read with :data:`MANAGER_READS`) at ``at_ms``:
    expired reservations are left out of the views and listed apart. ``cache`` keeps the
    visible segments of unchanged chunks from one call to the next."""
    running_rows = state.of(RUNNING)
    live = [running_from_row(r) for r in running_rows if r["expires_ms"] > at_ms]
    expired = tuple(r for r in running_rows if r["expires_ms"] <= at_ms)
    used = [r for r in state.of(SEGMENT) if r["used"]]
    visible = (cache or ViewCache()).visible(used)
    views = _attach(visible, live, [selection_from_row(r) for r in state.of(SELECTION)])
    configs = state.of(CONFIG)
    config = (
        CompactionConfig.from_json(orjson.loads(configs[0]["payload"]))
        if configs
        else CompactionConfig()
    )
    return ManagerState(
        views,
        tuple(user_from_row(r) for r in state.of(USER)),
        {r["id"]: r["payload"] for r in state.of(SELECTOR_RUN)},
        config,
        expired,
    )
