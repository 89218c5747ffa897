"""The metadata Delta table, read and committed from Python through delta-rs (no JVM).

What this module does, and nothing else:

* create the table (protocol 1/2 features only, so Spark and delta-rs read it alike) and
  follow its latest version;
* list a partition's data files and read them (Parquet through pyarrow);
* write one Parquet file of rows and commit it as the next log version **only if** that is
  the version right after the one this process read (``max_commit_retries=0``: delta-rs then
  does a put-if-absent of ``<read version + 1>.json`` and rebases nothing itself). A commit
  carries a *record* in its ``commitInfo`` (what it wrote, see :mod:`.scope`), so a writer
  that lost the race can tell whether the winners touched what it read;
* read those records back for a range of versions.

The rows' meaning, the fold of row versions and the retry policy live in
:mod:`.state`, :mod:`.store` and :mod:`.transaction`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from segmentlake.errors import CommitStateUnknown, MetadataVersionError
from segmentlake.metadata.table_log import TableLog

__all__ = [
    "COMMIT_RECORD_KEY",
    "DataFile",
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
    # action per such file until then (an hour of one-file commits at 20/s made 0.8 MB
    # checkpoints every 50 versions), and no reader opens a removed file: each refreshes
    # before it reads, and a fold keeps rows in memory, not file handles.
    "delta.deletedFileRetentionDuration": "interval 10 minutes",
}


class LostRace(Exception):
    """Another commit took the log version this one needed; nothing was written."""


@dataclass(frozen=True, slots=True)
class DataFile:
    """One data file of the table: its path (relative to the table), partition and size."""

    path: str
    datasource: str
    size: int
    num_records: int


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
        """Follow the log to its latest version; return it. A handle so far behind that the
        entries it needs were cleaned up loads afresh from the latest checkpoint."""
        with self._lock:
            table = self.table()
            try:
                table.update_incremental()
            except DeltaError as e:
                if "not found" not in str(e).lower():
                    raise
                logger.info("metadata log entries behind this reader were cleaned; reloading")
                table = self._table = self.log.table()
            return int(table.version())

    def version(self) -> int:
        with self._lock:
            return int(self.table().version())

    def files(self) -> list[DataFile]:
        """The data files of the loaded version."""
        with self._lock:
            actions = self.table().get_add_actions(flatten=True)
        columns = actions.column_names
        partition = f"partition.{PARTITION_COLUMN}"
        paths = actions.column("path").to_pylist()
        parts = (
            actions.column(partition).to_pylist() if partition in columns else [None] * len(paths)
        )
        sizes = actions.column("size_bytes").to_pylist()
        counts = (
            actions.column("num_records").to_pylist()
            if "num_records" in columns
            else [0] * len(paths)
        )
        return [
            DataFile(p, d or "", int(s or 0), int(n or 0))
            for p, d, s, n in zip(paths, parts, sizes, counts, strict=True)
        ]

    def read_file(self, path: str, *, dictionary: Sequence[str] = ()) -> pa.Table:
        """A data file's rows with the file schema's columns and types (``dictionary``:
        columns kept dictionary-encoded in memory, for long repeated strings)."""
        table = pq.read_table(
            self.log.full(path), filesystem=self._fs, read_dictionary=list(dictionary) or None
        )
        return _conform(table, self.file_schema, dictionary)

    def records(self, after: int, upto: int) -> list[tuple[int, dict[str, Any] | None]]:
        """Each version in ``(after, upto]`` with its segmentlake commit record (None for a
        commit another writer made, or one whose entry is gone)."""
        out = []
        for version in range(after + 1, upto + 1):
            out.append((version, self._record(version)))
        return out

    def _record(self, version: int) -> dict[str, Any] | None:
        for action in self.log.commit_actions(version):
            info = action.get("commitInfo")
            if info is None:
                continue
            raw = info.get(COMMIT_RECORD_KEY)
            if raw is None:
                return {"foreign": True, "operation": info.get("operation")}
            return json.loads(raw) if isinstance(raw, str) else dict(raw)
        return None

    # -- the conditional commit ----------------------------------------------------------------

    def write_rows(self, datasource: str, rows: pa.Table) -> AddAction:
        """Write ``rows`` (file schema) as a new Parquet file of ``datasource``'s partition;
        the add action that commits it."""
        relative = f"{PARTITION_COLUMN}={_escape(datasource)}/part-{uuid.uuid4().hex}.parquet"
        full = self.log.full(relative)
        if self.log.local:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        pq.write_table(rows, full, filesystem=self._fs, compression="zstd")
        size = self._fs.get_file_info(full).size
        return AddAction(
            relative,
            int(size or 0),
            {PARTITION_COLUMN: datasource},
            int(time.time() * 1000),
            True,
            json.dumps({"numRecords": rows.num_rows}),
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
        loaded version) and return it; :class:`LostRace` if that version is taken or the
        loaded version is not ``base`` (nothing written). ``record`` goes to the commit's
        ``commitInfo``."""
        with self._lock:
            table = self.table()
            loaded = int(table.version())
            if base is not None and loaded != base:
                raise LostRace(f"the table is at version {loaded}, not {base}")
            base = loaded
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
                    # Checkpoints and log cleanup are the upkeep duty's: a commit that stops
                    # to write one would stall its caller (DESIGN §6b).
                    post_commithook_properties=PostCommitHookProperties(
                        create_checkpoint=False, cleanup_expired_logs=False
                    ),
                )
            except CommitFailedError as e:
                if "Failed to commit transaction" in str(e):
                    raise LostRace(str(e)) from e
                raise
            # The handle stays at ``base`` until the next refresh (every read starts with one).
            return base + 1

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


def _escape(value: str) -> str:
    """A partition value as a directory name that needs no URI escaping in the log (readers
    take the partition value from the log, so the name only has to be a safe path)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in value)


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
