"""Metadata rows of the compaction manager, next to the segments and locks they condition on
(so a reservation, a publish and a selection change are each one commit).

* ``compaction_selection`` — one per chunk: a user or selector compaction's hold or selection;
* ``compaction_running`` — a reserved job (Accumulo's external-compaction entry), its lease
  renewed with its locks by the same heartbeat;
* ``compaction_user`` — a user compaction: its interval, target, chunks and which are done;
* ``compaction_selector_run`` — the hash of a chunk's segment set and a selector's config when
  the selector last ran there;
* ``compaction_config`` — the datasource's planner, selectors and groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from segmentlake.core.compaction_jobs import (
    ChunkKey,
    CompactionJob,
    CompactionKind,
    RunningCompaction,
    Selection,
)
from segmentlake.core.interval import Interval
from segmentlake.errors import SpecError
from segmentlake.metadata.records import Row, metadata_row

__all__ = [
    "CONFIG",
    "RUNNING",
    "SELECTION",
    "SELECTOR_RUN",
    "USER",
    "UserCompaction",
    "chunk_of",
    "config_row",
    "job_from_json",
    "job_to_json",
    "running_from_row",
    "running_row",
    "selection_from_row",
    "selection_row",
    "selector_run_row",
    "user_from_row",
    "user_row",
]

SELECTION = "compaction_selection"
RUNNING = "compaction_running"
USER = "compaction_user"
SELECTOR_RUN = "compaction_selector_run"
CONFIG = "compaction_config"
KINDS = (SELECTION, RUNNING, USER, SELECTOR_RUN, CONFIG)


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def chunk_of(row: Row) -> ChunkKey:
    return ChunkKey(Interval.of_millis(row["start_ms"], row["end_ms"]), row["version"])


def _chunk_columns(chunk: ChunkKey) -> dict[str, Any]:
    return {
        "start_ms": chunk.interval.start_millis,
        "end_ms": chunk.interval.end_millis,
        "version": chunk.version,
    }


def selection_row(datasource: str, selection: Selection, *, now_ms: int) -> Row:
    return metadata_row(
        datasource,
        SELECTION,
        selection.chunk.row_id,
        now_ms,
        group_id=selection.owner,
        payload=_dumps(selection.to_json()),
        **_chunk_columns(selection.chunk),
    )


def selection_from_row(row: Row) -> Selection:
    return Selection.from_json(chunk_of(row), orjson.loads(row["payload"]))


def job_to_json(job: CompactionJob) -> dict[str, Any]:
    return {
        "jobId": job.job_id,
        "datasource": job.datasource,
        "start": job.chunk.interval.start_millis,
        "end": job.chunk.interval.end_millis,
        "version": job.chunk.version,
        "kind": job.kind.value,
        "segments": list(job.segments),
        "priority": job.priority,
        "group": job.group,
        "owner": job.owner,
        "final": job.final,
        "maxRowsPerSegment": job.max_rows_per_segment,
        "major": job.major,
        "inputRows": job.input_rows,
    }


def job_from_json(data: Mapping[str, Any]) -> CompactionJob:
    return CompactionJob(
        ChunkKey(Interval.of_millis(data["start"], data["end"]), data["version"]),
        CompactionKind(data["kind"]),
        tuple(data["segments"]),
        int(data["priority"]),
        data.get("group") or "default",
        data.get("owner"),
        bool(data.get("final")),
        int(data["maxRowsPerSegment"]),
        data.get("datasource", ""),
        bool(data.get("major")),
        job_id=data["jobId"],
        input_rows=int(data.get("inputRows") or 0),
    )


def running_row(datasource: str, running: RunningCompaction, *, task_id: str, now_ms: int) -> Row:
    """The reservation of ``running.job`` by a compactor; its locks' group is ``task_id``."""
    payload = {
        "job": job_to_json(running.job),
        "compactor": running.compactor,
        "startedMs": running.started_ms,
    }
    return metadata_row(
        datasource,
        RUNNING,
        running.job.job_id,
        now_ms,
        group_id=task_id,
        task_id=task_id,
        expires_ms=running.expires_ms,
        payload=_dumps(payload),
        **_chunk_columns(running.job.chunk),
    )


def running_from_row(row: Row) -> RunningCompaction:
    data = orjson.loads(row["payload"])
    return RunningCompaction(
        job_from_json(data["job"]), data["compactor"], int(data["startedMs"]), row["expires_ms"]
    )


@dataclass(frozen=True, slots=True)
class UserCompaction:
    """A user compaction: what it compacts, with which target, and how far it got. ``chunks``
    are the chunks its interval held when it was requested; a chunk is done once its selection
    was compacted to its final form (or the chunk was replaced meanwhile)."""

    compaction_id: str
    interval: Interval
    chunks: tuple[str, ...]
    done: tuple[str, ...] = ()
    max_rows_per_segment: int = 5_000_000
    max_segments_per_job: int = 32
    requested_ms: int = 0
    finished_ms: int | None = None

    def __post_init__(self) -> None:
        if not set(self.done) <= set(self.chunks):
            raise SpecError(f"user compaction {self.compaction_id}: done chunks not among its own")

    @property
    def status(self) -> str:
        return "SUCCESS" if self.finished_ms is not None else "RUNNING"

    @property
    def pending(self) -> tuple[str, ...]:
        done = set(self.done)
        return tuple(c for c in self.chunks if c not in done)

    def to_json(self) -> dict[str, Any]:
        return {
            "compactionId": self.compaction_id,
            "status": self.status,
            "chunks": list(self.chunks),
            "done": list(self.done),
            "maxRowsPerSegment": self.max_rows_per_segment,
            "maxSegmentsPerJob": self.max_segments_per_job,
            "requestedMs": self.requested_ms,
            "finishedMs": self.finished_ms,
        }


def user_row(datasource: str, user: UserCompaction, *, now_ms: int) -> Row:
    return metadata_row(
        datasource,
        USER,
        user.compaction_id,
        now_ms,
        start_ms=user.interval.start_millis,
        end_ms=user.interval.end_millis,
        payload=_dumps(user.to_json()),
    )


def user_from_row(row: Row) -> UserCompaction:
    data = orjson.loads(row["payload"])
    return UserCompaction(
        row["id"],
        Interval.of_millis(row["start_ms"], row["end_ms"]),
        tuple(data["chunks"]),
        tuple(data["done"]),
        int(data["maxRowsPerSegment"]),
        int(data["maxSegmentsPerJob"]),
        int(data["requestedMs"]),
        data.get("finishedMs"),
    )


def selector_run_row(
    datasource: str, selector: str, chunk: ChunkKey, digest: str, *, now_ms: int
) -> Row:
    return metadata_row(
        datasource,
        SELECTOR_RUN,
        f"{selector}|{chunk.row_id}",
        now_ms,
        group_id=selector,
        payload=digest,
        **_chunk_columns(chunk),
    )


def config_row(datasource: str, config: Mapping[str, Any], *, now_ms: int) -> Row:
    return metadata_row(datasource, CONFIG, "config", now_ms, payload=_dumps(dict(config)))
