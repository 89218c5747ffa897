"""The compaction manager's domain, without Spark: chunks, jobs, selections and running
compactions, as the manager plans them and the metadata records them.

Accumulo's compaction coordinator maps onto segments like this: its *tablet* is our time
chunk (an interval and a version), its *files* are the chunk's visible segments, and a
compaction *job* is a set of whole atomic update groups of one chunk that a minor compaction
merges into overwrite segments (Druid's segment-lock compaction).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.errors import SpecError

__all__ = [
    "DEFAULT_BATCH_JOBS",
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_BATCH_SEGMENTS",
    "DEFAULT_GROUP",
    "ChunkKey",
    "ChunkView",
    "CompactionJob",
    "CompactionKind",
    "RunningCompaction",
    "Selection",
    "SelectionState",
    "job_priority",
    "segment_set_hash",
]

DEFAULT_GROUP = "default"

# A compactor batches up to this many minor jobs of one datasource (one per chunk) into one
# Spark job and one publish: a small job's fixed cost (Spark job, four commits) dominates it.
# 64 rather than 16: a drain of 60 small jobs ran at 279 jobs/min in batches of 16 and 556 in
# one batch (docs/performance.md), since every batch pays a pass, a reservation and a publish.
DEFAULT_BATCH_JOBS = 64
# ... up to this many input segments in all ...
DEFAULT_BATCH_SEGMENTS = 512
# ... and up to this many input rows: a batch holds its chunks' locks for its whole Spark
# job, so its size is bounded by work, not by job count (1.2 M rows take ~15 s on 2 cores).
# A single job larger than this still runs, alone.
DEFAULT_BATCH_ROWS = 5_000_000

# A job's priority is one int so the queue compares ints: the kind in the high bits, the
# planner's need score (clipped) below.
_SCORE_BITS = 32
_MAX_SCORE = (1 << _SCORE_BITS) - 1


class CompactionKind(StrEnum):
    """Who started a compaction; by default user above selector above system."""

    SYSTEM = "system"
    SELECTOR = "selector"
    USER = "user"

    @property
    def rank(self) -> int:
        return {"system": 0, "selector": 1, "user": 2}[self.value]


def job_priority(kind: CompactionKind, score: int) -> int:
    """The queue priority of a job of ``kind`` whose planner scored it ``score`` (how badly the
    chunk needs it, e.g. its segment count): kind first, then score; higher runs first."""
    if score < 0:
        raise SpecError(f"a job's score must be >= 0 (how badly the chunk needs it), got {score}")
    return (kind.rank << _SCORE_BITS) | min(score, _MAX_SCORE)


@dataclass(frozen=True, slots=True)
class ChunkKey:
    """A time chunk: the interval and version every segment of the chunk shares."""

    interval: Interval
    version: str

    def __str__(self) -> str:
        return f"{self.interval}@{self.version}"

    @property
    def row_id(self) -> str:
        """The chunk's key in metadata rows (millis, so it sorts and parses cheaply)."""
        return f"{self.interval.start_millis}_{self.interval.end_millis}_{self.version}"


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """Segments of one chunk to compact together, as queued and reserved.

    ``segments`` are ids of whole, visible atomic update groups; ``final`` marks the job that
    finishes its owner's selection in the chunk; ``major`` a system job that re-chunks the
    chunk to the datasource's target granularity and partitioning (a major compaction of
    every segment in it). The id is derived from the content, so the same job planned twice
    (two passes, two managers) is one job.
    """

    chunk: ChunkKey
    kind: CompactionKind
    segments: tuple[str, ...]
    priority: int
    group: str = DEFAULT_GROUP
    owner: str | None = None
    final: bool = False
    max_rows_per_segment: int = 5_000_000
    datasource: str = ""
    major: bool = False
    job_id: str = field(default="", compare=False)
    # Rows of the input segments when planned (0: unknown). Sizes batches only: not part of
    # the job's identity, since the same segments are the same job whatever was counted.
    input_rows: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not self.segments:
            raise SpecError(f"a compaction job of chunk {self.chunk} needs at least one segment")
        if len(set(self.segments)) != len(self.segments):
            raise SpecError(f"a compaction job lists a segment twice: {sorted(self.segments)}")
        if self.kind is not CompactionKind.SYSTEM and not self.owner:
            raise SpecError(f"a {self.kind.value} compaction job needs its owner's id")
        if self.max_rows_per_segment < 1:
            raise SpecError(f"max_rows_per_segment must be >= 1, got {self.max_rows_per_segment}")
        if self.input_rows < 0:
            raise SpecError(f"input_rows must be >= 0 (0: unknown), got {self.input_rows}")
        if self.major and self.kind is not CompactionKind.SYSTEM:
            raise SpecError("only the system planner schedules major compaction jobs")
        if not self.job_id:
            object.__setattr__(self, "job_id", self._content_id())

    def _content_id(self) -> str:
        text = "|".join(
            [
                self.datasource,
                str(self.chunk),
                self.kind.value,
                self.owner or "",
                *(["major"] if self.major else []),
                *sorted(self.segments),
            ]
        )
        return f"cj_{hashlib.sha1(text.encode()).hexdigest()[:20]}"


class SelectionState(StrEnum):
    """A selection is first *held* (compactions were running in the chunk: no new system
    compaction may start there) and *selected* once none runs."""

    HELD = "held"
    SELECTED = "selected"


@dataclass(frozen=True, slots=True)
class Selection:
    """The segments a user or selector compaction took in one chunk and must compact down to
    their final form; an intermediate job's outputs replace its inputs here."""

    chunk: ChunkKey
    owner: str
    kind: CompactionKind
    state: SelectionState
    segments: tuple[str, ...] = ()
    max_rows_per_segment: int = 5_000_000
    max_segments_per_job: int = 32

    def __post_init__(self) -> None:
        if self.kind is CompactionKind.SYSTEM:
            raise SpecError("system compactions make no selections (only user and selector)")
        if self.state is SelectionState.HELD and self.segments:
            raise SpecError(f"a held selection of {self.chunk} has no segments yet")
        if self.max_segments_per_job < 2:
            raise SpecError(
                f"max_segments_per_job must be >= 2 to make progress, got "
                f"{self.max_segments_per_job}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "kind": self.kind.value,
            "state": self.state.value,
            "segments": list(self.segments),
            "maxRowsPerSegment": self.max_rows_per_segment,
            "maxSegmentsPerJob": self.max_segments_per_job,
        }

    @classmethod
    def from_json(cls, chunk: ChunkKey, data: Mapping[str, Any]) -> Selection:
        return cls(
            chunk,
            data["owner"],
            CompactionKind(data["kind"]),
            SelectionState(data["state"]),
            tuple(data.get("segments") or ()),
            int(data["maxRowsPerSegment"]),
            int(data["maxSegmentsPerJob"]),
        )


@dataclass(frozen=True, slots=True)
class RunningCompaction:
    """A reserved job (Accumulo's external-compaction entry): which compactor runs it and until
    when its lease holds without renewal."""

    job: CompactionJob
    compactor: str
    started_ms: int
    expires_ms: int

    def is_live(self, at_ms: int) -> bool:
        return at_ms < self.expires_ms


@dataclass(frozen=True, slots=True)
class ChunkView:
    """What a planner or selector sees of one chunk: its visible data segments (with sizes,
    row counts and compaction states), the compactions running in it, and its selection."""

    chunk: ChunkKey
    visible: tuple[DataSegment, ...]
    running: tuple[RunningCompaction, ...] = ()
    selection: Selection | None = None

    @property
    def busy_ids(self) -> frozenset[str]:
        """Ids of segments a running compaction holds."""
        return frozenset(i for r in self.running for i in r.job.segments)

    @property
    def selected_ids(self) -> frozenset[str]:
        return frozenset(self.selection.segments) if self.selection else frozenset()

    @property
    def held(self) -> bool:
        """No new system compaction may start here: a selection waits for running ones."""
        return self.selection is not None and self.selection.state is SelectionState.HELD


def segment_set_hash(segment_ids: Iterable[str], config: Mapping[str, Any]) -> str:
    """The hash a selector's last run is remembered by: the chunk's segment set and the
    selector's config; the selector runs again only when it changes."""
    text = "\x1f".join([repr(sorted(config.items())), *sorted(segment_ids)])
    return hashlib.sha1(text.encode()).hexdigest()
