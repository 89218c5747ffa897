"""The operator's handles on the compaction manager: a datasource's config, user compaction
requests, and the status (holds, selections, queued and running jobs, user compactions)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from segmentlake.compact.manager_state import MANAGER_READS, read_manager_state
from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_jobs import CompactionJob, RunningCompaction, Selection
from segmentlake.core.interval import Interval
from segmentlake.core.spec_reader import check_int, check_text
from segmentlake.druid.auto_compaction import (
    compaction_config_from_druid,
    is_druid_compaction_config,
)
from segmentlake.metadata.compaction_records import (
    CONFIG,
    KINDS,
    USER,
    UserCompaction,
    config_row,
    job_from_json,
    job_to_json,
    user_from_row,
    user_row,
)
from segmentlake.metadata.queries import of_kind
from segmentlake.metadata.records import Row, metadata_row, rows_scope
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact

__all__ = [
    "MANAGERS_PARTITION",
    "CompactionStatus",
    "ManagerSnapshot",
    "compaction_status",
    "publish_manager_snapshot",
    "read_config",
    "request_user_compaction",
    "set_config",
    "user_compactions",
]

# Managers report their queues under their own partition, so a status write never conflicts
# with a datasource's commits.
MANAGERS_PARTITION = "_compaction_managers"
MANAGER = "compaction_manager"
_SNAPSHOT_JOBS = 20


def set_config(
    store: MetadataStore, datasource: str, config: CompactionConfig | Mapping[str, Any]
) -> CompactionConfig:
    """Store ``datasource``'s compaction config (validated first): segmentlake's own JSON, or
    Druid's automatic compaction config (:mod:`segmentlake.druid.auto_compaction`); return
    it."""
    if is_druid_compaction_config(config):
        config = compaction_config_from_druid(config, datasource=datasource)
    elif not isinstance(config, CompactionConfig):
        config = CompactionConfig.from_json(config)
    row = config_row(datasource, config.to_json(), now_ms=now_ms())

    def decide(state: PartitionState) -> Decision[None]:
        return Decision([Change("upsert", row)], None)

    # A blind upsert reads nothing but its own row: an append or a compaction committing
    # meanwhile on the datasource is no reason to decide again.
    transact(
        store,
        datasource,
        decide,
        operation="compaction_config",
        condition=of_kind(CONFIG),
        scope=rows_scope([row]),
    )
    return config


def read_config(store: MetadataStore, datasource: str) -> CompactionConfig:
    rows = store.rows(datasource, kinds=[CONFIG])
    if not rows:
        return CompactionConfig()
    return CompactionConfig.from_json(orjson.loads(rows[0]["payload"]))


def check_user_compaction_options(
    max_rows_per_segment: object, max_segments_per_job: object, compaction_id: object = None
) -> None:
    """Refuse a user compaction's options that are not integers in range, or an id that is
    not a non-empty string (SpecError)."""
    if compaction_id is not None:
        check_text(compaction_id, "compaction_id", what="a non-empty id or None")
    for name, value, least in (
        ("max_segments_per_job", max_segments_per_job, 2),
        ("max_rows_per_segment", max_rows_per_segment, 1),
    ):
        if value is not None:
            check_int(value, name, minimum=least)


def request_user_compaction(
    store: MetadataStore,
    datasource: str,
    interval: Interval,
    *,
    max_rows_per_segment: int | None = None,
    max_segments_per_job: int | None = None,
    compaction_id: str | None = None,
    policy: RetryPolicy | None = None,
) -> UserCompaction:
    """Record a user compaction of ``interval``: the chunks serving it now are its work. The
    manager holds and selects them; its jobs compact each selection to its final form. An id
    already requested returns that compaction unchanged (a retried request)."""
    check_user_compaction_options(max_rows_per_segment, max_segments_per_job, compaction_id)
    if compaction_id is None:
        compaction_id = f"user_{datasource}_{uuid.uuid4().hex[:12]}"

    def decide(state: PartitionState) -> Decision[UserCompaction]:
        at = now_ms()
        ms = read_manager_state(state, at)
        known = [u for u in ms.users if u.compaction_id == compaction_id]
        if known:
            return Decision((), known[0])
        chunks = tuple(
            chunk_id
            for chunk_id, view in sorted(ms.views.items())
            if view.visible and view.chunk.interval.overlaps(interval)
        )
        user = UserCompaction(
            compaction_id,
            interval,
            chunks,
            max_rows_per_segment=max_rows_per_segment or ms.config.max_rows_per_segment,
            max_segments_per_job=max_segments_per_job or ms.config.max_segments_per_job,
            requested_ms=at,
            finished_ms=None if chunks else at,
        )
        return Decision([Change("insert", user_row(datasource, user, now_ms=at))], user)

    return transact(
        store,
        datasource,
        decide,
        operation="user_compaction",
        condition=MANAGER_READS,
        policy=policy,
    )


def user_compactions(store: MetadataStore, datasource: str) -> list[UserCompaction]:
    rows = store.rows(datasource, kinds=[USER])
    return sorted(map(user_from_row, rows), key=lambda u: (u.requested_ms, u.compaction_id))


@dataclass(frozen=True, slots=True)
class ManagerSnapshot:
    """What a live manager last reported: its queues' sizes and best jobs, its counters."""

    manager_id: str
    queued: Mapping[str, int]
    top: tuple[CompactionJob, ...]
    outcomes: Mapping[str, int]
    reported_ms: int
    expires_ms: int


@dataclass(frozen=True, slots=True)
class CompactionStatus:
    """A datasource's compaction picture: selections (held or selected), running jobs, user
    compactions, and the jobs live managers have queued."""

    datasource: str
    selections: tuple[Selection, ...]
    running: tuple[RunningCompaction, ...]
    users: tuple[UserCompaction, ...]
    managers: tuple[ManagerSnapshot, ...]

    @property
    def holds(self) -> tuple[Selection, ...]:
        return tuple(s for s in self.selections if s.state.value == "held")

    @property
    def queued(self) -> tuple[CompactionJob, ...]:
        return tuple(j for m in self.managers for j in m.top if j.datasource == self.datasource)


def compaction_status(store: MetadataStore, datasource: str) -> CompactionStatus:
    at = now_ms()
    # The compaction records only: the status shows no segment, so it builds no timeline.
    state = store.read(datasource, of_kind(*KINDS))
    ms = read_manager_state(state, at)
    views = ms.views.values()
    return CompactionStatus(
        datasource,
        tuple(v.selection for v in views if v.selection is not None),
        tuple(r for v in views for r in v.running),
        ms.users,
        tuple(m for m in manager_snapshots(store) if m.expires_ms > at),
    )


def publish_manager_snapshot(
    store: MetadataStore, snapshot: ManagerSnapshot, *, policy: RetryPolicy | None = None
) -> None:
    payload = {
        "queued": dict(snapshot.queued),
        "top": [job_to_json(j) for j in snapshot.top[:_SNAPSHOT_JOBS]],
        "outcomes": dict(snapshot.outcomes),
    }
    row = metadata_row(
        MANAGERS_PARTITION,
        MANAGER,
        snapshot.manager_id,
        snapshot.reported_ms,
        expires_ms=snapshot.expires_ms,
        payload=orjson.dumps(payload).decode(),
    )

    def stale(rows: Iterable[Row]) -> list[Row]:
        # Other managers' expired rows; a manager's own row is refreshed whatever its age
        # (deleting it too would drop the row the upsert refreshes).
        return [
            r
            for r in rows
            if r["id"] != snapshot.manager_id and r["expires_ms"] <= snapshot.reported_ms
        ]

    def scope() -> Scope:
        # The own row and the expired rows to delete, by key: managers reporting at once
        # commit side by side, and conflict only when both delete the same expired row.
        return rows_scope([row, *stale(store.rows(MANAGERS_PARTITION, kinds=[MANAGER]))])

    def decide(state: PartitionState) -> Decision[None]:
        expired = stale(state.of(MANAGER))
        return Decision([Change("upsert", row), *(Change("delete", r) for r in expired)], None)

    transact(
        store,
        MANAGERS_PARTITION,
        decide,
        operation="manager_status",
        condition=of_kind(MANAGER),
        scope=scope,
        policy=policy,
    )


def manager_snapshots(store: MetadataStore) -> list[ManagerSnapshot]:
    snapshots = []
    for row in store.rows(MANAGERS_PARTITION, kinds=[MANAGER]):
        data = orjson.loads(row["payload"])
        snapshots.append(
            ManagerSnapshot(
                row["id"],
                data["queued"],
                tuple(job_from_json(j) for j in data["top"]),
                data["outcomes"],
                row["updated_ms"],
                row["expires_ms"],
            )
        )
    return snapshots
