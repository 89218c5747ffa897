"""The metadata Delta table: create/open, read a datasource's state, commit a guarded change.

Compare-and-swap on Delta (DESIGN.md §2). Each datasource partition has a *guard* row with a
counter ``seq``. A transaction reads the partition (guard ``S`` included), decides, and commits
its changes plus ``seq = S + 1`` as ONE MERGE run with Delta's idempotent-DML settings
``txnAppId = segmentlake/<datasource>`` and ``txnVersion = S + 1``:

* nobody committed since the read: the MERGE runs and records ``(appId, S + 1)``;
* somebody did (the app id's version is already >= S + 1): Delta skips the whole MERGE — no
  commit, an empty result — and we re-read and decide again;
* somebody commits while the MERGE runs: Delta's conflict checker fails it (it read the app id
  and the partition's files), a concurrency exception we translate and retry.

So a decision is applied only to the exact state it was made on, and datasources never
conflict (their guards, app ids and partitions differ). The MERGE's ON clause carries a literal
partition predicate so Delta prunes to, and conflict-checks, that partition only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.errors import MetadataVersionError, SpecError
from segmentlake.metadata.records import COLUMNS, GUARD, SCHEMA_DDL, Row

__all__ = ["METADATA_VERSION", "Change", "MetadataStore", "PartitionState", "now_ms"]

logger = logging.getLogger(__name__)

METADATA_VERSION = 1
_VERSION_PROPERTY = "segmentlake.metadataVersion"
_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
_USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Session confs are shared by every thread of a process: one guarded MERGE at a time.
_COMMIT_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Change:
    """One row change of a commit: ``insert`` (only if absent), ``upsert`` or ``delete``, keyed
    by (datasource, kind, id). When one commit changes a row twice, the later change wins."""

    op: str
    row: Row

    def __post_init__(self) -> None:
        if self.op not in ("insert", "upsert", "delete"):
            raise SpecError(f"change op must be insert, upsert or delete, got {self.op!r}")


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a transaction read: the guard counter and the rows it asked for, by kind."""

    datasource: str
    guard: int
    rows: tuple[Row, ...]
    by_kind: dict[str, list[Row]] = field(default_factory=dict)

    def of(self, kind: str) -> list[Row]:
        return self.by_kind.get(kind, [])


def _sql_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class MetadataStore:
    """The metadata table at ``<warehouse>/_segmentlake/metadata`` (created on first use)."""

    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        self.path = warehouse.rstrip("/") + "/_segmentlake/metadata"
        self._ensure_table()

    # -- table lifecycle ---------------------------------------------------------------------

    def _ensure_table(self) -> None:
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(self.spark, self.path):
            self._create_table()
        found = self._stored_version()
        if found > METADATA_VERSION:
            raise MetadataVersionError(
                f"warehouse metadata at {self.path} has schema version {found}, but this "
                f"segmentlake understands up to {METADATA_VERSION}; upgrade segmentlake"
            )

    def _create_table(self) -> None:
        try:
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS delta.`{self.path}` ({SCHEMA_DDL}) USING delta "
                f"PARTITIONED BY (datasource) TBLPROPERTIES ("
                f"'{_VERSION_PROPERTY}' = '{METADATA_VERSION}', "
                "'delta.autoOptimize.autoCompact' = 'true', "
                "'delta.checkpointInterval' = '20')"
            )
        except Exception as e:
            from delta.tables import DeltaTable

            if not DeltaTable.isDeltaTable(self.spark, self.path):
                raise
            logger.debug("metadata table created concurrently: %s", e)

    def _stored_version(self) -> int:
        rows = self.spark.sql(f"SHOW TBLPROPERTIES delta.`{self.path}`").collect()
        props = {r["key"]: r["value"] for r in rows}
        return int(props.get(_VERSION_PROPERTY, METADATA_VERSION))

    # -- reads -------------------------------------------------------------------------------

    def table(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def read(self, datasource: str, condition: Any = None) -> PartitionState:
        """Read the guard and the rows of ``datasource`` matching ``condition`` (a Column over
        the metadata columns; all rows when None) in one snapshot."""
        df = self.table().where(F.col("datasource") == datasource)
        wanted = F.col("kind") == GUARD
        df = df.where(wanted | condition) if condition is not None else df
        rows = tuple(r.asDict() for r in df.collect())
        by_kind: dict[str, list[Row]] = {}
        guard = 0
        for row in rows:
            if row["kind"] == GUARD:
                guard = int(row["seq"])
            else:
                by_kind.setdefault(row["kind"], []).append(row)
        return PartitionState(datasource, guard, rows, by_kind)

    def rows(self, condition: Any) -> list[Row]:
        """Rows matching a Column condition, outside any transaction (reads, views)."""
        return [r.asDict() for r in self.table().where(condition).collect()]

    # -- the guarded commit -------------------------------------------------------------------

    def commit(
        self, datasource: str, guard: int, changes: Sequence[Change], *, commit_id: str
    ) -> bool:
        """Apply ``changes`` iff the partition's guard is still ``guard``; True if it landed.

        Raises Delta's concurrency exceptions (see :mod:`segmentlake.metadata.conflicts`) when a
        concurrent commit wins during the MERGE.
        """
        from delta.tables import DeltaTable

        guard_row: Row = dict.fromkeys(COLUMNS)
        guard_row.update(
            datasource=datasource, kind=GUARD, id=GUARD, seq=guard + 1, updated_ms=now_ms()
        )
        # A MERGE may touch each target row once (else DELTA_MULTIPLE_SOURCE_ROW_MATCHING_...):
        # e.g. a re-requested lock whose expired row is also deleted, or one lock revoked by
        # several allocations of a batch. Keep the last change of each row.
        latest: dict[tuple[Any, Any, Any], Change] = {}
        for change in [*changes, Change("upsert", guard_row)]:
            key = (change.row["datasource"], change.row["kind"], change.row["id"])
            latest.pop(key, None)
            latest[key] = change
        source = self._source_frame(latest.values())
        ds = _sql_literal(datasource)
        target = DeltaTable.forPath(self.spark, self.path)
        merge = (
            target.alias("t")
            .merge(
                source.alias("s"),
                f"t.datasource = {ds} AND s.datasource = {ds} AND t.kind = s.kind AND t.id = s.id",
            )
            .whenMatchedDelete(condition="s.op = 'delete'")
            .whenMatchedUpdate(condition="s.op = 'upsert'", set={c: f"s.{c}" for c in COLUMNS})
            .whenNotMatchedInsert(
                condition="s.op != 'delete'", values={c: f"s.{c}" for c in COLUMNS}
            )
        )
        conf = self.spark.conf
        with _COMMIT_LOCK:
            conf.set(_APP_ID_CONF, f"segmentlake/{datasource}")
            conf.set(_TXN_VERSION_CONF, str(guard + 1))
            conf.set(_USER_METADATA_CONF, commit_id)
            try:
                metrics = merge.execute()
                landed = metrics is None or len(metrics.collect()) > 0
            finally:
                conf.unset(_APP_ID_CONF)
                conf.unset(_TXN_VERSION_CONF)
                conf.unset(_USER_METADATA_CONF)
        return landed

    def _source_frame(self, changes: Iterable[Change]) -> DataFrame:
        data = [(*(ch.row.get(c) for c in COLUMNS), ch.op) for ch in changes]
        schema = f"{SCHEMA_DDL.replace(' NOT NULL', '')}, op STRING"
        return self.spark.createDataFrame(data, schema=schema)

    def landed(self, commit_id: str, *, limit: int = 50) -> bool:
        """Whether a commit with this id is among the table's latest ``limit`` commits (used
        when a commit's outcome is unknown)."""
        from delta.tables import DeltaTable

        history = DeltaTable.forPath(self.spark, self.path).history(limit)
        return history.where(F.col("userMetadata") == commit_id).limit(1).count() > 0


def now_ms() -> int:
    """Wall-clock epoch milliseconds: the clock of leases, versions and row updates."""
    return int(time.time() * 1000)
