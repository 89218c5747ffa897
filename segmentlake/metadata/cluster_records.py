"""Metadata rows of the storage tiers: volumes, the coordinator's config, and segment copies.

* partition ``_cluster`` — ``volume`` rows (one per volume, its JSON) and the
  ``coordinator_config`` row;
* partition ``_copies.<datasource>`` — one ``segment_copy`` row per (segment, volume): its
  state (``LOADING``, ``LOADED``, ``DROPPING``), why it loads, the move it belongs to, the
  ``__segment`` key of its rows and the volume table version its rows landed in.

Copies live beside, not in, their datasource's partition: the coordinator changes many copies
per run, and ingestion and compaction commits on the datasource must not conflict with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson
import pyarrow.compute as pc

from segmentlake.core.spec_reader import safe_repr
from segmentlake.core.storage_tiers import CoordinatorConfig, CopyState, LoadReason, Volume
from segmentlake.errors import SpecError
from segmentlake.metadata.queries import of_kind
from segmentlake.metadata.records import Row, metadata_row
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import (
    Change,
    MetadataStore,
    PartitionState,
    ScopeTooNarrow,
    now_ms,
)
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact

__all__ = [
    "CLUSTER",
    "COPY",
    "SegmentCopy",
    "add_volume",
    "coordinator_config",
    "copies_of",
    "copies_partition",
    "copy_from_row",
    "copy_row",
    "copy_rows_scope",
    "record_copy_changes",
    "record_dropped",
    "record_loaded",
    "remove_volume",
    "set_coordinator_config",
    "set_decommissioning",
    "volumes",
]

CLUSTER = "_cluster"
VOLUME = "volume"
CONFIG = "coordinator_config"
COPY = "segment_copy"
_COPIES_PREFIX = "_copies."


def copies_partition(datasource: str) -> str:
    """The metadata partition of ``datasource``'s segment copies."""
    return _COPIES_PREFIX + datasource


@dataclass(frozen=True, slots=True)
class SegmentCopy:
    """A copy of a segment's rows on a volume (see the module). ``table_version`` is the
    volume table's Delta version once the rows are there: readers read that table as of the
    newest such version of the copies they use, so a later drop cannot pull rows away from
    under a read planned before it."""

    datasource: str
    segment_id: str
    volume: str
    state: CopyState
    reason: LoadReason
    key: str
    start_ms: int
    end_ms: int
    size_bytes: int
    move_from: str | None = None
    table_version: int | None = None
    since_ms: int = 0

    @property
    def row_id(self) -> str:
        return f"{self.segment_id}@{self.volume}"


def copy_rows_scope(row_ids: Iterable[str]) -> Scope:
    """The scope of the copy rows ``row_ids`` (``<segment id>@<volume>``): a copy row has no
    time range in a scope, so each is its key. A commit that reads only these conflicts only
    with commits that changed one of them: two volumes' loaders, or a loader and the
    coordinator's run over other copies, never decide again for each other."""
    return Scope.of(keys=(f"{COPY}:{row_id}" for row_id in row_ids))


def copy_row(copy: SegmentCopy, *, now_ms: int) -> Row:
    payload = {
        "reason": copy.reason.name,
        "moveFrom": copy.move_from,
        "key": copy.key,
        "sinceMs": copy.since_ms,
    }
    return metadata_row(
        copies_partition(copy.datasource),
        COPY,
        copy.row_id,
        now_ms,
        start_ms=copy.start_ms,
        end_ms=copy.end_ms,
        group_id=copy.volume,
        previous_id=copy.segment_id,
        sequence_name=copy.state.name,
        seq=copy.table_version,
        size_bytes=copy.size_bytes,
        payload=orjson.dumps(payload).decode(),
    )


def copy_from_row(row: Row) -> SegmentCopy:
    data = orjson.loads(row["payload"])
    partition = row["datasource"]
    return SegmentCopy(
        datasource=partition[len(_COPIES_PREFIX) :],
        segment_id=row["previous_id"],
        volume=row["group_id"],
        state=CopyState[row["sequence_name"]],
        reason=LoadReason[data["reason"]],
        key=data["key"],
        start_ms=row["start_ms"],
        end_ms=row["end_ms"],
        size_bytes=row["size_bytes"] or 0,
        move_from=data.get("moveFrom"),
        table_version=row["seq"],
        since_ms=data.get("sinceMs") or 0,
    )


def copies_of(store: MetadataStore, datasource: str) -> list[SegmentCopy]:
    """Every copy of ``datasource``'s segments, in any state."""
    rows = store.rows(copies_partition(datasource), pc.field("kind") == COPY)
    return [copy_from_row(r) for r in rows]


# -- volumes ---------------------------------------------------------------------------------


def _volume_row(volume: Volume, *, now: int) -> Row:
    return metadata_row(
        CLUSTER, VOLUME, volume.name, now, payload=orjson.dumps(volume.to_json()).decode()
    )


def volumes(store: MetadataStore) -> tuple[Volume, ...]:
    """Every registered volume, by name."""
    rows = store.rows(CLUSTER, pc.field("kind") == VOLUME)
    found = [Volume.from_json(orjson.loads(r["payload"])) for r in rows]
    return tuple(sorted(found, key=lambda v: v.name))


def add_volume(
    store: MetadataStore, volume: Volume, *, policy: RetryPolicy | None = None
) -> Volume:
    """Register ``volume`` (or update it: same name); two volumes may not share a path."""

    def decide(state: PartitionState) -> Decision[Volume]:
        for row in state.of(VOLUME):
            other = Volume.from_json(orjson.loads(row["payload"]))
            if other.name != volume.name and _same_path(other.path, volume.path):
                raise SpecError(
                    f"volume {volume.name!r} has the path of volume {other.name!r} "
                    f"({other.path}); each volume needs its own directory"
                )
        return Decision([Change("upsert", _volume_row(volume, now=now_ms()))], volume)

    return transact(
        store,
        CLUSTER,
        decide,
        operation="add_volume",
        condition=pc.field("kind") == VOLUME,
        policy=policy,
    )


def remove_volume(store: MetadataStore, name: str, *, policy: RetryPolicy | None = None) -> bool:
    """Deregister volume ``name``; False if there was none. Its copies become dead copies
    that the next coordinator run forgets."""

    def decide(state: PartitionState) -> Decision[bool]:
        rows = [r for r in state.of(VOLUME) if r["id"] == name]
        return Decision([Change("delete", r) for r in rows], bool(rows))

    return transact(
        store,
        CLUSTER,
        decide,
        operation="remove_volume",
        condition=pc.field("kind") == VOLUME,
        policy=policy,
    )


def set_decommissioning(
    store: MetadataStore, name: str, decommissioning: bool, *, policy: RetryPolicy | None = None
) -> Volume:
    """Start (or stop) decommissioning volume ``name``."""

    def decide(state: PartitionState) -> Decision[Volume]:
        for row in state.of(VOLUME):
            if row["id"] == name:
                data = orjson.loads(row["payload"])
                volume = Volume.from_json({**data, "decommissioning": decommissioning})
                return Decision([Change("upsert", _volume_row(volume, now=now_ms()))], volume)
        known = sorted(r["id"] for r in state.of(VOLUME))
        raise SpecError(f"no volume {name!r}; registered volumes: {known}")

    return transact(
        store,
        CLUSTER,
        decide,
        operation="decommission_volume",
        condition=pc.field("kind") == VOLUME,
        policy=policy,
    )


def _same_path(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


# -- the coordinator's config ----------------------------------------------------------------


def coordinator_config(store: MetadataStore) -> CoordinatorConfig:
    """The stored coordinator config, or the defaults (a config stored before smart loading
    loads too: :meth:`CoordinatorConfig.from_stored_json`)."""
    rows = store.rows(CLUSTER, pc.field("kind") == CONFIG)
    if not rows:
        return CoordinatorConfig()
    return CoordinatorConfig.from_stored_json(orjson.loads(rows[0]["payload"]))


def set_coordinator_config(
    store: MetadataStore,
    config: CoordinatorConfig | Mapping[str, Any],
    *,
    policy: RetryPolicy | None = None,
) -> CoordinatorConfig:
    """Store the coordinator config (a :class:`CoordinatorConfig` or Druid-style JSON, whose
    missing keys keep the stored values; queue shares it names are re-split from those
    alone, :meth:`CoordinatorConfig.updated`)."""
    if not isinstance(config, CoordinatorConfig):
        if not isinstance(config, Mapping):
            raise SpecError(
                f"the coordinator config must be a JSON object, got {safe_repr(config)}; "
                'e.g. {"balancerMinCostReduction": 0.02}'
            )
        config = coordinator_config(store).updated(config)
    row = metadata_row(
        CLUSTER, CONFIG, "config", now_ms(), payload=orjson.dumps(config.to_json()).decode()
    )

    def decide(state: PartitionState) -> Decision[None]:
        return Decision([Change("upsert", row)], None)

    transact(
        store,
        CLUSTER,
        decide,
        operation="coordinator_config",
        condition=pc.field("kind") == CONFIG,
        policy=policy,
    )
    return config


# -- the coordinator's commits of copies -----------------------------------------------------
# Each reads only the copy rows it decides on (copy_rows_scope): at 10^5 copies of a
# datasource and a loader per volume, a scope of the whole partition made every loader decide
# again (re-reading every copy) whenever another volume's loader or the run committed first.

CopyChange = tuple[str, "SegmentCopy | None", SegmentCopy]


def record_copy_changes(
    store: MetadataStore,
    datasource: str,
    items: Sequence[CopyChange],
    *,
    policy: RetryPolicy | None = None,
) -> int:
    """Commit a coordinator run's planned copy changes of ``datasource``, each only if the
    copy is still as the plan saw it: ``("insert", None, new)`` a new LOADING copy (none by
    its id yet), ``("drop", old, new)`` a LOADED copy now DROPPING, ``("delete", old, old)``
    a copy still in ``old``'s state forgotten. Returns the changes made."""

    def decide(state: PartitionState) -> Decision[int]:
        now = now_ms()
        current = {r["id"]: r for r in state.of(COPY)}
        out: list[Change] = []
        for op, old, new in items:
            row = current.get(new.row_id)
            if op == "insert" and row is None:
                out.append(Change("insert", copy_row(new, now_ms=now)))
            elif op == "drop" and row is not None and row["sequence_name"] == "LOADED":
                out.append(Change("upsert", copy_row(new, now_ms=now)))
            elif (
                op == "delete"
                and old is not None
                and row is not None
                and row["sequence_name"] == old.state.name
            ):
                out.append(Change("delete", row))
        return Decision(out, len(out))

    row_ids = [new.row_id for _, _, new in items]
    return _transact_copies(store, datasource, decide, "coordinator_run", row_ids, policy)


def record_loaded(
    store: MetadataStore,
    datasource: str,
    batch: Sequence[SegmentCopy],
    table_version: int,
    *,
    policy: RetryPolicy | None = None,
) -> int:
    """Mark the copies of ``batch`` still LOADING as LOADED at their volume table's
    ``table_version`` (one cancelled meanwhile is left for the next drop) and, for a move,
    its source copy DROPPING; returns the copies marked."""
    ids = {c.row_id for c in batch}
    wanted = ids | {f"{c.segment_id}@{c.move_from}" for c in batch if c.move_from}

    def decide(state: PartitionState) -> Decision[int]:
        now = now_ms()
        current = {r["id"]: r for r in state.of(COPY)}
        out: list[Change] = []
        for row_id in ids:
            row = current.get(row_id)
            if row is None or row["sequence_name"] != "LOADING":
                continue  # cancelled meanwhile: its rows go with the next drop
            copy = replace(
                copy_from_row(row), state=CopyState.LOADED, table_version=table_version,
                since_ms=now,
            )  # fmt: skip
            out.append(Change("upsert", copy_row(copy, now_ms=now)))
            if copy.move_from:
                source_id = f"{copy.segment_id}@{copy.move_from}"
                if not _read(state, source_id):  # the copy was planned again, from elsewhere
                    raise ScopeTooNarrow(f"copy {row_id} now moves from {copy.move_from}")
                source = current.get(source_id)
                if source is not None and source["sequence_name"] == "LOADED":
                    leaving = replace(copy_from_row(source), state=CopyState.DROPPING, since_ms=now)
                    out.append(Change("upsert", copy_row(leaving, now_ms=now)))
        return Decision(out, sum(1 for c in out if c.row["id"] in ids))

    return _transact_copies(store, datasource, decide, "segment_loaded", wanted, policy)


def _transact_copies(
    store: MetadataStore,
    datasource: str,
    decide: Callable[[PartitionState], Decision[int]],
    operation: str,
    row_ids: Iterable[str],
    policy: RetryPolicy | None,
) -> int:
    """One commit of ``datasource``'s copy rows, reading only ``row_ids``."""
    return transact(
        store,
        copies_partition(datasource),
        decide,
        operation=operation,
        condition=of_kind(COPY),
        scope=copy_rows_scope(row_ids),
        policy=policy,
    )


def _read(state: PartitionState, row_id: str) -> bool:
    """Whether ``state`` read copy row ``row_id`` (whether or not there is one)."""
    return state.scope.everything or f"{COPY}:{row_id}" in state.scope.keys


def record_dropped(
    store: MetadataStore,
    datasource: str,
    row_ids: Iterable[str],
    *,
    policy: RetryPolicy | None = None,
) -> int:
    """Forget the copies ``row_ids`` that are still DROPPING (their rows are gone from their
    volume's table); returns how many."""
    ids = set(row_ids)

    def decide(state: PartitionState) -> Decision[int]:
        rows = [
            r
            for r in state.of(COPY)
            if r["id"] in ids and r["sequence_name"] == CopyState.DROPPING.name
        ]
        return Decision([Change("delete", r) for r in rows], len(rows))

    return _transact_copies(store, datasource, decide, "segment_dropped", ids, policy)
