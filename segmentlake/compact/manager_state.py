"""What the compaction manager reads of a datasource: its chunks as planners see them, the
user compactions, the selectors' last runs and the config — all from one metadata state, so a
decision made on it commits only if none of it changed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import orjson
import pyarrow.compute as pc

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
    chunk_of,
    running_from_row,
    selection_from_row,
    user_from_row,
)
from segmentlake.metadata.records import SEGMENT, Row, segments_from_rows
from segmentlake.metadata.store import PartitionState

__all__ = ["MANAGER_READS", "ManagerState", "chunk_views", "read_manager_state"]

# The rows every manager decision reads: used segments and every compaction record.
MANAGER_READS = pc.field("kind").isin(list(KINDS)) | (
    (pc.field("kind") == SEGMENT) & pc.field("used")
)


@dataclass(frozen=True, slots=True)
class ManagerState:
    """One datasource's compaction picture at one metadata version."""

    views: dict[str, ChunkView]
    users: tuple[UserCompaction, ...]
    selector_runs: dict[str, str]
    config: CompactionConfig
    expired: tuple[Row, ...]


def chunk_views(
    segments: Iterable[DataSegment],
    running: Iterable[RunningCompaction] = (),
    selections: Iterable[Selection] = (),
) -> dict[str, ChunkView]:
    """A view per chunk that serves some of the timeline (keyed by ``ChunkKey.row_id``): its
    visible data segments in root order, its running compactions and its selection."""
    timeline = VersionedIntervalTimeline(segments)
    visible: dict[ChunkKey, dict[DataSegment, None]] = {}
    for holder in timeline.lookup(ETERNITY):
        key = ChunkKey(holder.chunk_interval, holder.version)
        visible.setdefault(key, {}).update(dict.fromkeys(holder.segments))
    by_chunk: dict[ChunkKey, list[RunningCompaction]] = {}
    for r in running:
        by_chunk.setdefault(r.job.chunk, []).append(r)
    selected = {s.chunk: s for s in selections}
    views = {}
    for key, members in visible.items():
        ordered = sorted(members, key=lambda s: s.shard_spec.partition_num)
        views[key.row_id] = ChunkView(
            key, tuple(ordered), tuple(by_chunk.get(key, ())), selected.get(key)
        )
    # Records of chunks that no longer serve anything still matter to the duties.
    for key in set(by_chunk) | set(selected):
        if key.row_id not in views:
            views[key.row_id] = ChunkView(key, (), tuple(by_chunk.get(key, ())), selected.get(key))
    return views


def read_manager_state(state: PartitionState, at_ms: int) -> ManagerState:
    """The manager's picture of ``state`` (read with :data:`MANAGER_READS`) at ``at_ms``:
    expired reservations are left out of the views and listed apart."""
    running_rows = state.of(RUNNING)
    live = [running_from_row(r) for r in running_rows if r["expires_ms"] > at_ms]
    expired = tuple(r for r in running_rows if r["expires_ms"] <= at_ms)
    used = [r for r in state.of(SEGMENT) if r["used"]]
    views = chunk_views(
        segments_from_rows(used), live, [selection_from_row(r) for r in state.of(SELECTION)]
    )
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


def chunk_row_id(row: Row) -> str:
    return chunk_of(row).row_id
