"""Open a warehouse written by an earlier metadata engine, or migrate it with one command.

segmentlake 0.1 kept its metadata in ``<warehouse>/_segmentlake/metadata``, committed through
Delta's JVM classes, one row per record (no row versions), shard specs and visibility inside a
JSON payload. The current engine keeps row versions in ``_segmentlake/metadata_v2``, with typed
shard-spec columns, each segment's visibility and group leases. :func:`migrate` reads the old
table (with delta-rs, like everything else), converts every row and writes the new table in
one commit per datasource; the old table is left as it was. Run it once, with no task running
on the warehouse::

    segmentlake migrate --warehouse /data/warehouse
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from segmentlake.core.segment import DataSegment
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import MetadataVersionError
from segmentlake.metadata.metadata_table import PARTITION_COLUMN
from segmentlake.metadata.records import (
    COLUMNS,
    LEASE,
    LOCK,
    SEGMENT,
    TABLE_SCHEMA,
    Row,
    segment_row,
    segments_from_rows,
)
from segmentlake.metadata.store import MetadataStore
from segmentlake.metadata.table_log import TableLog

__all__ = ["MigrationReport", "check_metadata_version", "legacy_path", "migrate"]

logger = logging.getLogger(__name__)


def legacy_path(warehouse: str) -> str:
    return f"{warehouse.rstrip('/')}/_segmentlake/metadata"


def check_metadata_version(warehouse: str, store: MetadataStore) -> None:
    """Refuse to open a warehouse whose metadata only the old engine wrote (say how to
    migrate it); a current one is checked when first read."""
    if store.exists():
        store.table.check_version()
        return
    if TableLog(legacy_path(warehouse), storage_options=store.table.storage_options).exists():
        raise MetadataVersionError(
            f"the warehouse at {warehouse} was written by segmentlake 0.1 (metadata at "
            f"{legacy_path(warehouse)}); migrate it once, with no task running on it: "
            f"segmentlake migrate --warehouse {warehouse}"
        )


@dataclass(frozen=True, slots=True)
class MigrationReport:
    datasources: int
    rows: int
    segments: int
    already_migrated: bool = False

    def summary(self) -> str:
        if self.already_migrated:
            return "the warehouse's metadata is current: nothing to migrate"
        return (
            f"migrated {self.rows:,} metadata rows ({self.segments:,} segment records) of "
            f"{self.datasources} partition(s) to the current engine"
        )


def migrate(warehouse: str, *, storage_options: Mapping[str, str] | None = None) -> MigrationReport:
    """Convert the old metadata table of ``warehouse`` into the current one (see the module)."""
    store = MetadataStore(warehouse, storage_options=storage_options)
    if store.exists():
        return MigrationReport(0, 0, 0, already_migrated=True)
    old = TableLog(legacy_path(warehouse), storage_options=storage_options)
    if not old.exists():
        raise MetadataVersionError(f"no segmentlake metadata at {legacy_path(warehouse)}")
    table = old.table().to_pyarrow_dataset().to_table()
    by_partition: dict[str, list[Row]] = defaultdict(list)
    for row in table.to_pylist():
        by_partition[row[PARTITION_COLUMN]].append(row)
    store.create()
    total = segments = 0
    for datasource, rows in sorted(by_partition.items()):
        converted = _convert(rows)
        segments += sum(1 for r in converted if r["kind"] == SEGMENT)
        total += len(converted)
        file_rows = pa.Table.from_pylist(
            [{c: r.get(c) for c in COLUMNS if c != PARTITION_COLUMN} for r in converted],
            schema=pa.schema([f for f in TABLE_SCHEMA if f.name != PARTITION_COLUMN]),
        )
        store.table.refresh()
        add = store.table.write_rows(datasource, file_rows)
        record = {"id": f"migrate:{datasource}", "op": "migrate", "ds": datasource}
        store.table.commit([add], record=record)
        logger.info("migrated %d rows of %s", len(converted), datasource)
    return MigrationReport(len(by_partition), total, segments)


def _convert(rows: list[Row]) -> list[Row]:
    """One partition's old rows as current ones: row versions, typed shard columns and
    visibility for segments, one lease per lock-holding group."""
    out: list[Row] = []
    leases: dict[str, int] = {}
    for old in rows:
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update({k: v for k, v in old.items() if k in row})
        row["rev"], row["deleted"] = 1, False
        if old["kind"] == SEGMENT:
            segment = DataSegment.from_json(old["payload"])
            row.update(segment_row(segment, used=bool(old["used"]), now_ms=old["updated_ms"]))
            row["rev"], row["deleted"] = 1, False
        if old["kind"] == LOCK and old.get("group_id"):
            group = old["group_id"]
            leases[group] = max(leases.get(group, 0), int(old.get("expires_ms") or 0))
        out.append(row)
    used = [r for r in out if r["kind"] == SEGMENT and r["used"]]
    if used:
        timeline = VersionedIntervalTimeline(segments_from_rows(used))
        states = {str(s.id): state for s, state in timeline.visibility_states().items()}
        for row in used:
            row["visibility"] = states.get(row["id"])
    datasource = rows[0][PARTITION_COLUMN] if rows else ""
    for group, expires in leases.items():
        lease: dict[str, Any] = dict.fromkeys(COLUMNS)
        lease.update(
            datasource=datasource,
            kind=LEASE,
            id=group,
            group_id=group,
            expires_ms=expires,
            rev=1,
            deleted=False,
            updated_ms=expires,
        )
        out.append(lease)
    return out
