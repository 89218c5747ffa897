"""The metadata Delta table, read and committed from Python through delta-rs (no JVM).

What this module does, and nothing else:

* create the table (protocol 1/2 features only, so Spark and delta-rs read it alike) and
  follow its latest version: loaded once through delta-rs (checkpoint + log), then followed
  entry by entry (each new ``<version>.json`` read once, its add/remove actions applied to the
  file list kept here), which costs a small file read per new version instead of a delta-rs
  snapshot update (a cost that grows with the files and entries since the checkpoint);
* list a partition's data files and read them (Parquet through pyarrow);
* write one Parquet file of rows and commit it as the next log version **only if** that is
  the version right after the one this process read (``max_commit_retries=0``: delta-rs then
  does a put-if-absent of ``<read version + 1>.json`` and rebases nothing itself; on a local
  file system the entry is written here, as a hard link of a complete temporary file, the
  same put-if-absent delta-rs does, without its snapshot bookkeeping). A commit
  carries a *record* in its ``commitInfo`` (what it wrote, see :mod:`.scope`), so a writer
  that lost the race can tell whether the winners touched what it read;
* read those records back for a range of versions.

The rows' meaning, the fold of row versions and the retry policy live in
:mod:`.state`, :mod:`.store` and :mod:`.transaction`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from segmentlake.errors import CommitStateUnknown, MetadataVersionError, WarehouseNotFound
from segmentlake.metadata.table_log import Stamp, TableLog, load_through_gaps

__all__ = [
    "COMMIT_RECORD_KEY",
    "DataFile",
    "FileOrigin",
    "LostRace",
    "MetadataTable",
]

logger = logging.getLogger(__name__)

COMMIT_RECORD_KEY = "segmentlake"
PARTITION_COLUMN = "datasource"
DESCRIPTION_PREFIX = "segmentlake metadata, schema version "
# Table properties written at creation. Spark and delta-rs both read (1, 2) tables without
# surprises; deletion vectors, column mapping and row tracking break or mislead delta-rs
# (DESIGN §6b), so they stay off even where a platform defaults them on (delta-rs's kernel
# refuses to parse an explicit delta.enableRowTracking, and never enables it by itself).
TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
    "delta.autoOptimize.autoCompact": "false",
    "delta.checkpointInterval": "100",
    "delta.logRetentionDuration": "interval 7 days",
    # Files the upkeep folded away are vacuumed after this. Every checkpoint carries a remove
    # action per such file until then (an hour of one-file commits made checkpoints of a
    # megabyte), and no reader opens a removed file: each refreshes
    # before it reads, and a fold keeps rows in memory, not file handles.
    "delta.deletedFileRetentionDuration": "interval 10 minutes",
}


# A reader that paused this long reloads through delta-rs rather than replaying every entry
# since (the log cleanup keeps entries for 2 minutes: store.LOG_RETENTION_MS).
FOLLOW_GAP_S = 120.0
# Commit records kept from followed entries (a lost race asks for the winners' since its read).
_RECORDS_KEPT = 4096
_THREADED_READ_ROWS = 16_384  # rows from which a file is read with threads
# Parquet key of a full fold's row count before its deletions (write_rows).
_LIVE_ROWS_KEY = "segmentlake.live_rows"
ENGINE_INFO = "segmentlake-metadata"


class LostRace(Exception):
    """Another commit took the log version this one needed; nothing was written."""


@dataclass(frozen=True, slots=True)
class DataFile:
    """One data file of the table: its path (relative to the table), partition and size."""

    path: str
    datasource: str
    size: int
    num_records: int


@dataclass(frozen=True, slots=True)
class FileOrigin:
    """The commit that added a file, as the log follower saw it: its record and the files
    the same commit removed (an upkeep's fold replaces the files it removed)."""

    version: int
    record: Mapping[str, Any] | None
    removed: tuple[str, ...]


class MetadataTable:
    """The Delta table at ``uri`` (a local path or an object-store URI)."""

    def __init__(
        self,
        uri: str,
        *,
        schema: pa.Schema,
        version: int,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.uri = uri.rstrip("/")
        self.schema = schema  # every column, the partition column included
        self.file_schema = pa.schema([f for f in schema if f.name != PARTITION_COLUMN])
        self.metadata_version = version
        self.storage_options = dict(storage_options or {})
        self.log = TableLog(self.uri, storage_options=self.storage_options)
        self._fs = self.log.fs
        self._lock = threading.RLock()
        self._table: DeltaTable | None = None
        # The followed version and its data files (None until the first refresh).
        self._files: dict[str, DataFile] | None = None
        self._at = -1
        self._followed = 0.0
        # Entry `_at`'s modification time and size: a follower tells by it that the table was
        # not deleted and created again under it (an entry, once written, never changes).
        self._stamp: Stamp | None = None
        # Delta's id of the table loaded: a table deleted and created again has another.
        self.table_id: str | None = None
        self._records: dict[int, dict[str, Any] | None] = {}
        # Where each live file seen by following the log came from (none for the files of
        # a delta-rs load: who added those is not known here).
        self._origins: dict[str, FileOrigin] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether version 0 of the table is committed (asks storage, not a cache)."""
        return self._table is not None or self.log.exists()

    def create(self) -> None:
        """Create the table unless it exists; a concurrent creator's table is as good."""
        if self.exists():
            self.check_version()
            return
        empty = self.schema.empty_table()
        try:
            write_deltalake(
                self.log.delta_uri,
                empty,
                partition_by=[PARTITION_COLUMN],
                mode="ignore",
                configuration=TABLE_PROPERTIES,
                # delta-rs refuses table properties outside delta.*; the description carries
                # the schema version instead, in the same (first) commit.
                description=f"{DESCRIPTION_PREFIX}{self.metadata_version}",
                storage_options=self.storage_options or None,
            )
        except DeltaError as e:
            if not self.exists():
                raise
            logger.debug("metadata table created concurrently: %s", e)
        self.check_version()

    def check_version(self) -> None:
        description = self.table().metadata().description or ""
        stored = description.removeprefix(DESCRIPTION_PREFIX)
        found = int(stored) if stored.isdigit() else self.metadata_version
        if found > self.metadata_version:
            raise MetadataVersionError(
                f"warehouse metadata at {self.uri} has schema version {found}, but this "
                f"segmentlake understands up to {self.metadata_version}; upgrade segmentlake"
            )

    def table(self) -> DeltaTable:
        """The delta-rs handle (loaded on first use)."""
        with self._lock:
            if self._table is None:
                self._table = self.log.table()
            return self._table

    # -- reads ---------------------------------------------------------------------------------

    def refresh(self) -> int:
        """Follow the log to its latest version; return it. The first refresh (and one after
        a long pause, when entries after the followed version may have been cleaned up, or a
        change of the table's metadata) loads through delta-rs; later ones read only the new
        entries."""
        with self._lock:
            fresh_enough = time.monotonic() - self._followed < FOLLOW_GAP_S
            if self._files is not None and fresh_enough and self._follow():
                return self._at
            return self._reload()

    def _follow(self) -> bool:
        """Apply each log entry after the followed version; False when one needs a full
        reload (it changes the table's metadata or protocol, or the table was deleted and
        created again)."""
        followed = self.log.follow(self._at, self._stamp, self._apply)
        if followed is None:
            return False
        self._at, self._stamp = followed
        self._followed = time.monotonic()
        return True

    def _apply(self, version: int, actions: Sequence[Mapping[str, Any]]) -> bool:
        assert self._files is not None
        if any("metaData" in a or "protocol" in a for a in actions):
            return False
        record: dict[str, Any] | None = None
        added, removed = [], []
        for action in actions:
            if "add" in action:
                added.append(_data_file(action["add"]))
            elif "remove" in action:
                removed.append(action["remove"]["path"])
            elif "commitInfo" in action:
                record = _commit_record(action["commitInfo"])
        self._remember(version, record)
        for path in removed:
            self._files.pop(path, None)
            self._origins.pop(path, None)
        origin = FileOrigin(version, record, tuple(removed))
        for file in added:
            self._files[file.path] = file
            self._origins[file.path] = origin
        return True

    def origin(self, path: str) -> FileOrigin | None:
        """The commit that added live file ``path``, if this process followed it."""
        with self._lock:
            return self._origins.get(path)

    def _reload(self) -> int:
        """Load the latest version through delta-rs: its files and version."""
        if self._files is not None and self.log.entry_stamp(self._at) != self._stamp:
            # Another table now (or our entry cleaned up): start from a new handle, and
            # forget the records of versions that may now be other commits.
            self._table = None
            self._records = {}
        try:
            table = self.table()
        except TableNotFoundError as e:
            if self.table_id is None:
                raise
            raise WarehouseNotFound(
                f"the metadata table at {self.uri} was deleted under this process (it read "
                "it before): the warehouse is gone; create it again (Lake.create, or a first "
                "write) or open the warehouse where it now lives"
            ) from e
        try:
            load_through_gaps(table.update_incremental)
        except DeltaError as e:
            if "not found" not in str(e).lower():
                raise
            logger.info("metadata log entries behind this reader were cleaned; reloading")
            table = self._table = self.log.table()
        actions = table.get_add_actions(flatten=True)
        self._files = {f.path: f for f in _data_files(actions)}
        self._origins = {}
        self._at = int(table.version())
        self._stamp = self.log.entry_stamp(self._at)
        self.table_id = str(table.metadata().id)
        self._followed = time.monotonic()
        return self._at

    def version(self) -> int:
        """The version followed (loading the table on first use)."""
        with self._lock:
            return self._at if self._files is not None else self.refresh()

    def files(self) -> list[DataFile]:
        """The data files of the version followed."""
        with self._lock:
            if self._files is None:
                self.refresh()
            assert self._files is not None
            return list(self._files.values())

    def read_file(self, path: str, *, dictionary: Sequence[str] = ()) -> pa.Table:
        """A data file's rows with the file schema's columns and types (``dictionary``:
        columns kept dictionary-encoded in memory, for long repeated strings)."""
        return self._read(path, dictionary, live_only=False).rows

    def read_live_rows(self, path: str, *, dictionary: Sequence[str] = ()) -> FileRows:
        """:meth:`read_file` without a full fold's deletions (:meth:`write_rows`), for a
        reader that holds no row of the partition yet: they delete nothing it has."""
        return self._read(path, dictionary, live_only=True)

    def _read(self, path: str, dictionary: Sequence[str], *, live_only: bool) -> FileRows:
        # ParquetFile, not read_table: its dataset machinery costs three times the read of a
        # file of a few rows, which is most files here. Only a large (folded) file is worth
        # the thread pool: columns decoded in parallel halve a cold 10^5-row read.
        with self._fs.open_input_file(self.log.full(path)) as handle:
            file = pq.ParquetFile(handle, read_dictionary=list(dictionary) or None)
            threads = file.metadata.num_rows >= _THREADED_READ_ROWS
            groups = _live_row_groups(file) if live_only else None
            if groups is None:
                table = file.read(use_threads=threads)
            else:
                table = file.read_row_groups(groups, use_threads=threads)
        return FileRows(_conform(table, self.file_schema, dictionary), groups is not None)

    def records(self, after: int, upto: int) -> list[tuple[int, dict[str, Any] | None]]:
        """Each version in ``(after, upto]`` with its segmentlake commit record (None for a
        commit another writer made, or one whose entry is gone)."""
        out = []
        for version in range(after + 1, upto + 1):
            with self._lock:
                known = version in self._records
                record = self._records.get(version)
            if not known:
                record = self._record(version)
            out.append((version, record))
        return out

    def _record(self, version: int) -> dict[str, Any] | None:
        for action in self.log.commit_actions(version):
            info = action.get("commitInfo")
            if info is not None:
                return _commit_record(info)
        return None

    def _remember(self, version: int, record: dict[str, Any] | None) -> None:
        """Keep a followed entry's record: a writer that lost a race asks for the winners'."""
        self._records[version] = record
        if len(self._records) > 2 * _RECORDS_KEPT:
            for old in sorted(self._records)[:-_RECORDS_KEPT]:
                del self._records[old]

    # -- the conditional commit ----------------------------------------------------------------

    def write_rows(
        self, datasource: str, rows: pa.Table, *, full_fold_deletions: pa.Table | None = None
    ) -> AddAction:
        """Write ``rows`` (file schema) as a new Parquet file of ``datasource``'s partition;
        the add action that commits it. A full fold passes its deletions apart: they follow
        the rows in row groups of their own, which a reader starting from nothing skips
        (after a big publish they are two thirds of the file: its allocations and locks)."""
        relative = f"{PARTITION_COLUMN}={_escape(datasource)}/part-{uuid.uuid4().hex}.parquet"
        full = self.log.full(relative)
        if self.log.local:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        count = rows.num_rows
        if full_fold_deletions is None or not full_fold_deletions.num_rows:
            pq.write_table(rows, full, filesystem=self._fs, compression="zstd")
        else:
            schema = rows.schema.with_metadata({_LIVE_ROWS_KEY: str(rows.num_rows)})
            with pq.ParquetWriter(full, schema, filesystem=self._fs, compression="zstd") as out:
                out.write_table(rows.replace_schema_metadata(schema.metadata))
                out.write_table(full_fold_deletions.replace_schema_metadata(schema.metadata))
            count += full_fold_deletions.num_rows
        size = self._fs.get_file_info(full).size
        return AddAction(
            relative,
            int(size or 0),
            {PARTITION_COLUMN: datasource},
            int(time.time() * 1000),
            True,
            json.dumps({"numRecords": count}),
        )

    def commit(
        self,
        adds: Sequence[AddAction],
        removes: Sequence[DataFile] = (),
        *,
        record: Mapping[str, Any],
        data_change: bool = True,
        base: int | None = None,
    ) -> int:
        """Commit ``adds`` and ``removes`` as version ``base + 1`` (default: right after the
        followed version) and return it; :class:`LostRace` if that version is taken or the
        followed version is not ``base`` (nothing written). ``record`` goes to the commit's
        ``commitInfo``."""
        with self._lock:
            loaded = self.version()
            if base is not None and loaded != base:
                raise LostRace(f"the table is at version {loaded}, not {base}")
            version = loaded + 1
            if self.log.local:
                entry = _entry(adds, removes, record, data_change=data_change)
                if not self.log.put_entry_if_absent(version, entry):
                    raise LostRace(f"log version {version} is taken")
                # Our own entry needs no reading back.
                if self._apply(version, [json.loads(line) for line in entry.splitlines()]):
                    self._at = version
                    self._stamp = self.log.entry_stamp(version)
            else:
                self._commit_through_delta_rs(
                    loaded, adds, removes, record=record, data_change=data_change
                )
            return version

    def _commit_through_delta_rs(
        self,
        base: int,
        adds: Sequence[AddAction],
        removes: Sequence[DataFile],
        *,
        record: Mapping[str, Any],
        data_change: bool,
    ) -> None:
        """An object store's put-if-absent (a conditional PUT) is delta-rs's: its handle is
        brought to ``base`` first, so it writes exactly ``base + 1``."""
        table = self.table()
        if int(table.version()) != base:
            load_through_gaps(table.update_incremental)
            if int(table.version()) != base:
                raise LostRace(f"the table is at version {table.version()}, not {base}")
        actions: list[AddAction | RemoveAction] = list(adds)
        stamp = int(time.time() * 1000)
        actions += [
            RemoveAction(f.path, data_change, stamp, f.size, {PARTITION_COLUMN: f.datasource})
            for f in removes
        ]
        properties = CommitProperties(
            custom_metadata={COMMIT_RECORD_KEY: json.dumps(record, separators=(",", ":"))},
            max_commit_retries=0,
        )
        try:
            table.create_write_transaction(
                actions,
                "append",
                table.schema(),
                partition_by=[PARTITION_COLUMN],
                commit_properties=properties,
                # Checkpoints and log cleanup are the upkeep duty's: a commit that stops to
                # write one would stall its caller (DESIGN §6b).
                post_commithook_properties=PostCommitHookProperties(
                    create_checkpoint=False, cleanup_expired_logs=False
                ),
            )
        except CommitFailedError as e:
            if "Failed to commit transaction" in str(e):
                raise LostRace(str(e)) from e
            raise

    def landed(self, commit_id: str, *, after: int) -> bool:
        """Whether a commit with ``commit_id`` landed after version ``after`` (for a commit
        whose outcome an error left unknown)."""
        try:
            latest = self.refresh()
            return any(
                (record or {}).get("id") == commit_id for _, record in self.records(after, latest)
            )
        except (DeltaError, OSError, TableNotFoundError) as e:
            raise CommitStateUnknown(
                f"cannot tell whether commit {commit_id} landed in {self.uri}: {e}"
            ) from e


# The longest partition value kept whole in a directory name: ``datasource=`` and it stay
# well under the 255 bytes a file name may have (a 255-character datasource name, or the
# ``_copies.`` partition of one, failed its first commit with "File name too long").
_MAX_DIRECTORY_VALUE = 200


def _escape(value: str) -> str:
    """A partition value as a directory name that needs no URI escaping in the log (readers
    take the partition value from the log, so the name only has to be a safe path, and
    distinct enough to keep partitions apart on disk: a long value keeps its first
    characters and ends with a digest of the whole)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in value)
    if len(safe) <= _MAX_DIRECTORY_VALUE:
        return safe
    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
    return f"{safe[: _MAX_DIRECTORY_VALUE - len(digest) - 1]}-{digest}"


@dataclass(frozen=True)
class FileRows:
    """The rows read from a metadata file, and whether its full fold's deletions were left
    out (:meth:`MetadataTable.read_live_rows`)."""

    rows: pa.Table
    skipped_deletions: bool = False


def _live_row_groups(file: pq.ParquetFile) -> list[int] | None:
    """The row groups holding a full fold's rows before its deletions; None when the file
    is no full fold with deletions (read all of it)."""
    metadata = file.schema_arrow.metadata or {}
    text = metadata.get(_LIVE_ROWS_KEY.encode())
    if text is None:
        return None
    wanted, total, groups = int(text), 0, []
    for i in range(file.metadata.num_row_groups):
        if total >= wanted:
            break
        groups.append(i)
        total += file.metadata.row_group(i).num_rows
    return groups if total == wanted else None


def _conform(table: pa.Table, schema: pa.Schema, dictionary: Sequence[str]) -> pa.Table:
    """``table`` with exactly ``schema``'s columns and types (another writer may order or
    type them differently, or lack columns added later)."""
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            if field.name not in dictionary and column.type != field.type:
                column = column.cast(field.type)
            columns.append(column)
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    names = [f.name for f in schema]
    return pa.Table.from_arrays(columns, names=names)


def _data_file(add: Mapping[str, Any]) -> DataFile:
    """A data file from an ``add`` action of the log."""
    stats = add.get("stats")
    records = json.loads(stats).get("numRecords", 0) if stats else 0
    partition = (add.get("partitionValues") or {}).get(PARTITION_COLUMN)
    return DataFile(add["path"], partition or "", int(add.get("size") or 0), int(records or 0))


def _data_files(actions: pa.RecordBatch | pa.Table) -> list[DataFile]:
    """The data files of delta-rs's flattened add actions."""
    columns = actions.column_names
    partition = f"partition.{PARTITION_COLUMN}"
    paths = actions.column("path").to_pylist()
    parts = actions.column(partition).to_pylist() if partition in columns else [None] * len(paths)
    sizes = actions.column("size_bytes").to_pylist()
    counts = (
        actions.column("num_records").to_pylist() if "num_records" in columns else [0] * len(paths)
    )
    return [
        DataFile(p, d or "", int(s or 0), int(n or 0))
        for p, d, s, n in zip(paths, parts, sizes, counts, strict=True)
    ]


def _commit_record(info: Mapping[str, Any]) -> dict[str, Any]:
    """The segmentlake record of a ``commitInfo`` (``foreign`` for another writer's)."""
    raw = info.get(COMMIT_RECORD_KEY)
    if raw is None:
        return {"foreign": True, "operation": info.get("operation")}
    return orjson.loads(raw) if isinstance(raw, str) else dict(raw)


def _entry(
    adds: Sequence[AddAction],
    removes: Sequence[DataFile],
    record: Mapping[str, Any],
    *,
    data_change: bool,
) -> str:
    """A log entry (newline-delimited actions) as delta-rs writes one for an append: a
    ``commitInfo`` carrying the record, then the add and remove actions."""
    stamp = int(time.time() * 1000)
    info = {
        "timestamp": stamp,
        "operation": "WRITE",
        "operationParameters": {"mode": "Append", "partitionBy": f'["{PARTITION_COLUMN}"]'},
        "engineInfo": ENGINE_INFO,
        COMMIT_RECORD_KEY: json.dumps(record, separators=(",", ":")),
        "clientVersion": ENGINE_INFO,
    }
    lines = [{"commitInfo": info}]
    lines += [
        {
            "add": {
                "path": add.path,
                "partitionValues": dict(add.partition_values),
                "size": add.size,
                "modificationTime": add.modification_time,
                "dataChange": add.data_change,
                "stats": add.stats,
            }
        }
        for add in adds
    ]
    lines += [
        {
            "remove": {
                "path": f.path,
                "deletionTimestamp": stamp,
                "dataChange": data_change,
                "extendedFileMetadata": True,
                "partitionValues": {PARTITION_COLUMN: f.datasource},
                "size": f.size,
            }
        }
        for f in removes
    ]
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
