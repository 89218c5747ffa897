"""The metadata Delta table: create/open, read a datasource's rows, commit a conditional change.

The table is partitioned by datasource. A transaction reads one partition as of a table
version, decides, and commits its row changes on top of exactly that version
(:mod:`segmentlake.metadata.deltalog`): Delta's conflict checker fails the commit if any commit
since then added or removed a file of that partition, so a decision is only ever applied to
the state it was made on, and datasources never conflict with each other.

Reads need no Spark job: the store follows the Delta log and keeps the rows of the files it
has read, which are immutable. A commit is copy-on-write at file granularity: the files
holding changed rows are replaced by one new file with their surviving rows and the new ones,
and small files are folded in on the way so that a partition keeps a bounded number of files.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from segmentlake.core.names import sql_path
from segmentlake.errors import MetadataVersionError, SpecError
from segmentlake.faults import crash_point
from segmentlake.metadata.deltalog import DeltaLogClient, LoggedFile, safe_name
from segmentlake.metadata.records import FILE_SCHEMA, SCHEMA_DDL, Row
from segmentlake.metadata.turns import Turns

__all__ = ["METADATA_VERSION", "Change", "MetadataStore", "PartitionState", "now_ms"]

logger = logging.getLogger(__name__)

METADATA_VERSION = 1
PARTITION_COLUMN = "datasource"
_VERSION_PROPERTY = "segmentlake.metadataVersion"
_USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Session confs are shared by every thread of a process: one labelled commit at a time.
_COMMIT_LOCK = threading.Lock()
# Copy-on-write keeps a partition at few files: when a commit would leave more than
# _MAX_FILES, it also rewrites every file of at most _SMALL_FILE_ROWS rows.
_MAX_FILES = 16
_SMALL_FILE_ROWS = 20_000
_KEY_SEPARATOR = "\x1f"


@dataclass(frozen=True, slots=True)
class Change:
    """One row change of a commit: ``insert`` (only if absent), ``upsert`` or ``delete``, keyed
    by (datasource, kind, id). When one commit changes a row twice, the later change wins."""

    op: str
    row: Row

    def __post_init__(self) -> None:
        if self.op not in ("insert", "upsert", "delete"):
            raise SpecError(f"change op must be insert, upsert or delete, got {self.op!r}")

    @property
    def key(self) -> str:
        return _key(self.row["kind"], self.row["id"])


@dataclass(frozen=True, slots=True)
class _CachedFile:
    file: LoggedFile
    table: pa.Table
    keys: pa.Array


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a transaction read: the table version, and the rows it asked for, by kind."""

    datasource: str
    version: int
    rows: tuple[Row, ...]
    by_kind: dict[str, list[Row]] = field(default_factory=dict)
    snapshot: Any = field(default=None, repr=False, compare=False)
    files: tuple[_CachedFile, ...] = field(default=(), repr=False, compare=False)

    def of(self, kind: str) -> list[Row]:
        return self.by_kind.get(kind, [])


class MetadataStore:
    """The metadata table at ``<warehouse>/_segmentlake/metadata``. Opening writes nothing:
    the table is created by :meth:`create` or by the first commit."""

    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        self.path = warehouse.rstrip("/") + "/_segmentlake/metadata"
        self._client = DeltaLogClient(spark, self.path)
        self._created = self.exists()
        if self._created:
            self._check_version()
        self.turns = Turns(spark, warehouse.rstrip("/") + "/_segmentlake/turns")
        self._lock = threading.RLock()
        self._version = -1
        self._snapshot: Any = None
        self._files: dict[str, LoggedFile] = {}
        self._tables: dict[str, _CachedFile] = {}

    # -- table lifecycle ---------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the table has been created (its version 0 is committed)."""
        return self._exists()

    def create(self) -> None:
        """Create the table unless it exists (another driver may be creating it too)."""
        if self._created:
            return
        if not self._exists():
            self._create_table()
        self._check_version()
        self._created = True

    def _create_table(self) -> None:
        # Properties a platform might default differently (Databricks turns deletion vectors
        # on) are pinned: the store writes plain files.
        try:
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {sql_path(self.path)} ({SCHEMA_DDL}) USING delta "
                f"PARTITIONED BY ({PARTITION_COLUMN}) TBLPROPERTIES ("
                f"'{_VERSION_PROPERTY}' = '{METADATA_VERSION}', "
                "'delta.autoOptimize.autoCompact' = 'false', "
                "'delta.enableDeletionVectors' = 'false', "
                "'delta.enableRowTracking' = 'false', "
                "'delta.checkpointInterval' = '200')"
            )
        except Exception as e:
            # Another driver creating the table at the same moment: its log directory exists
            # a little before its first commit does, so wait for that commit.
            if not self._created_by_another(timeout_s=30.0):
                raise
            logger.debug("metadata table created concurrently: %s", e)

    def _exists(self) -> bool:
        # Asks the log itself (not a cached answer) whether version 0 has been committed.
        return int(self._client.snapshot().version()) >= 0

    def _created_by_another(self, *, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self._exists():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def _check_version(self) -> None:
        stored = self._client.table_property(self._client.snapshot(), _VERSION_PROPERTY)
        found = int(stored or METADATA_VERSION)
        if found > METADATA_VERSION:
            raise MetadataVersionError(
                f"warehouse metadata at {self.path} has schema version {found}, but this "
                f"segmentlake understands up to {METADATA_VERSION}; upgrade segmentlake"
            )

    # -- reads -------------------------------------------------------------------------------

    def table(self) -> DataFrame:
        """The whole table as a Spark DataFrame (SQL views; not used by transactions)."""
        return self.spark.read.format("delta").load(self.path)

    def read(self, datasource: str, condition: pc.Expression | None = None) -> PartitionState:
        """The rows of ``datasource`` matching ``condition`` (a pyarrow expression over the
        metadata columns; all rows when None) as of the table's latest version."""
        version, snapshot, files = self._latest(datasource)
        rows = tuple(_rows(datasource, [f.table for f in files], condition))
        by_kind: dict[str, list[Row]] = {}
        for row in rows:
            by_kind.setdefault(row["kind"], []).append(row)
        return PartitionState(datasource, version, rows, by_kind, snapshot, files)

    def rows(
        self,
        datasource: str,
        condition: pc.Expression | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> list[Row]:
        """Rows of ``datasource`` matching ``condition``, outside any transaction, with only
        ``columns`` (and ``datasource``) when given: fewer columns convert faster."""
        files = self._latest(datasource)[2]
        return _rows(datasource, [f.table for f in files], condition, columns)

    def datasources(self) -> list[str]:
        """Every datasource with rows in the table, sorted (reserved names start with ``_``)."""
        with self._lock:
            self._follow_log()
            found = {f.partition_values.get(PARTITION_COLUMN) for f in self._files.values()}
        return sorted(d for d in found if d)

    def _latest(self, datasource: str) -> tuple[int, Any, tuple[_CachedFile, ...]]:
        """The latest version, its snapshot and the datasource's files (rows loaded)."""
        with self._lock:
            self._follow_log()
            files = tuple(
                self._cached(f)
                for f in self._files.values()
                if f.partition_values.get(PARTITION_COLUMN) == datasource
            )
            return self._version, self._snapshot, files

    def _follow_log(self) -> None:
        snapshot = self._client.snapshot()
        latest = int(snapshot.version())
        if latest == self._version:
            return
        if self._version < 0:
            self._load(snapshot)
        else:
            try:
                self._apply_changes(latest)
            except Exception as e:  # log files cleaned up since we last looked
                logger.info("metadata log not replayable from %d (%s); reloading", self._version, e)
                self._load(snapshot)
        self._version, self._snapshot = latest, snapshot

    def _load(self, snapshot: Any) -> None:
        self._files = {f.path: f for f in self._client.all_files(snapshot)}
        self._tables = {p: t for p, t in self._tables.items() if p in self._files}

    def _apply_changes(self, latest: int) -> None:
        for change in self._client.changes(self._version + 1, latest):
            for path in change.removed:
                self._files.pop(path, None)
                self._tables.pop(path, None)
            for logged in change.added:
                self._files[logged.path] = logged
            if change.metadata_changed:
                self._check_version()

    def _cached(self, logged: LoggedFile) -> _CachedFile:
        cached = self._tables.get(logged.path)
        if cached is None:
            cached = _cache_entry(logged, _conform(self._client.read_table(logged.path)))
            self._tables[logged.path] = cached
        return cached

    # -- the conditional commit ---------------------------------------------------------------

    def commit(self, state: PartitionState, changes: Sequence[Change], *, commit_id: str) -> bool:
        """Apply ``changes`` to ``state``'s datasource on top of the version ``state`` was read
        at; True once committed (also when the changes turn out to change nothing).

        Raises Delta's concurrency exceptions (see :mod:`segmentlake.metadata.conflicts`) when a
        commit since that version added or removed a file of the datasource.
        """
        latest = _last_change_per_row(changes)
        existing = _existing_keys(state.files, set(latest))
        effective = {
            key: ch
            for key, ch in latest.items()
            if (ch.op == "upsert")
            or (ch.op == "insert" and key not in existing)
            or (ch.op == "delete" and key in existing)
        }
        if not effective:
            return True
        replaced = {k for k, ch in effective.items() if ch.op != "insert"}
        rewrite = _files_to_rewrite(state.files, replaced)
        if state.files and not rewrite:
            # Every commit replaces at least one file of the partition it read, so any two
            # commits decided on the same state conflict by a file check (see deltalog.py).
            rewrite = [min(state.files, key=lambda f: f.table.num_rows)]
        written = [ch.row for ch in effective.values() if ch.op != "delete"]
        new_table = _rewritten(rewrite, replaced, written)
        add = None
        if new_table.num_rows:
            directory = f"{PARTITION_COLUMN}={safe_name(state.datasource)}"
            add = self._client.write_table(
                new_table, {PARTITION_COLUMN: state.datasource}, directory
            )
        operation = commit_id.split(":", 1)[0]
        crash_point(f"commit.{operation}.before_log")
        conf = self.spark.conf
        with _COMMIT_LOCK:
            conf.set(_USER_METADATA_CONF, commit_id)
            try:
                version = self._client.commit(
                    state.snapshot,
                    partition=(PARTITION_COLUMN, state.datasource) if not state.files else None,
                    read=[f.file for f in state.files],
                    add=add,
                    remove=[f.file for f in rewrite],
                )
            finally:
                conf.unset(_USER_METADATA_CONF)
        crash_point(f"commit.{operation}.after_log")
        if add is not None:
            with self._lock:  # our own new file needs no re-read when the log is followed
                self._tables[add.path] = _cache_entry(add, new_table)
        logger.debug("metadata commit %s landed as version %d", commit_id, version)
        return True

    def landed(self, commit_id: str, *, limit: int = 50) -> bool:
        """Whether a commit with this id is among the table's latest ``limit`` commits (used
        when a commit's outcome is unknown)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        history = DeltaTable.forPath(self.spark, self.path).history(limit)
        return history.where(F.col("userMetadata") == commit_id).limit(1).count() > 0


def now_ms() -> int:
    """Wall-clock epoch milliseconds: the clock of leases, versions and row updates."""
    return int(time.time() * 1000)


# -- helpers: rows as Arrow tables ------------------------------------------------------------


def _key(kind: str, row_id: str) -> str:
    return f"{kind}{_KEY_SEPARATOR}{row_id}"


def _conform(table: pa.Table) -> pa.Table:
    """``table`` with exactly FILE_SCHEMA's columns and types (files written by another
    writer may order or type them differently)."""
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in FILE_SCHEMA
    ]
    return pa.Table.from_arrays(columns, schema=FILE_SCHEMA)


def _cache_entry(logged: LoggedFile, table: pa.Table) -> _CachedFile:
    keys = pc.binary_join_element_wise(table["kind"], table["id"], _KEY_SEPARATOR)
    return _CachedFile(logged, table, keys.combine_chunks())


def _rows(
    datasource: str,
    tables: list[pa.Table],
    condition: pc.Expression | None,
    columns: Sequence[str] | None = None,
) -> list[Row]:
    if not tables:
        return []
    table = pa.concat_tables(tables)
    if condition is not None:
        table = table.filter(condition)
    if columns is not None:
        table = table.select([c for c in columns if c != PARTITION_COLUMN])
    return [{"datasource": datasource, **row} for row in table.to_pylist()]


def _last_change_per_row(changes: Iterable[Change]) -> dict[str, Change]:
    latest: dict[str, Change] = {}
    for change in changes:
        latest.pop(change.key, None)
        latest[change.key] = change
    return latest


def _existing_keys(files: Sequence[_CachedFile], keys: set[str]) -> set[str]:
    if not keys:
        return set()
    wanted = pa.array(sorted(keys), pa.string())
    found: set[str] = set()
    for f in files:
        found.update(pc.filter(f.keys, pc.is_in(f.keys, value_set=wanted)).to_pylist())
    return found


def _files_to_rewrite(files: Sequence[_CachedFile], replaced: set[str]) -> list[_CachedFile]:
    wanted = pa.array(sorted(replaced), pa.string())
    rewrite = [f for f in files if replaced and pc.any(pc.is_in(f.keys, value_set=wanted)).as_py()]
    if len(files) - len(rewrite) + 1 > _MAX_FILES:
        rewrite += [f for f in files if f not in rewrite and f.table.num_rows <= _SMALL_FILE_ROWS]
    return rewrite


def _rewritten(rewrite: Sequence[_CachedFile], replaced: set[str], new_rows: list[Row]) -> pa.Table:
    wanted = pa.array(sorted(replaced), pa.string())
    kept = [f.table.filter(pc.invert(pc.is_in(f.keys, value_set=wanted))) for f in rewrite]
    fresh = pa.Table.from_pylist(
        [{name: row.get(name) for name in FILE_SCHEMA.names} for row in new_rows],
        schema=FILE_SCHEMA,
    )
    return pa.concat_tables([*kept, fresh]).combine_chunks()
