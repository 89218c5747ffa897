"""The live files of a table partitioned by ``__segment`` (a datasource table, or its visible
table), kept current by following its log.

The visible table's sync needs, on every metadata commit of a datasource, both tables' files
by segment key. A delta-rs snapshot update rebuilds the whole file list each time (24 ms per
table at 10^4 files, growing with the table), and its flattened add actions cost as much again
to turn into Python. Here a table is loaded through delta-rs once (checkpoint + log), then
followed entry by entry: each new ``<version>.json`` is read once and its add and remove
actions applied to the files kept here, so a sync after one append reads one or two small
entries whatever the table's size. A table is loaded again when following cannot be trusted:
after a pause longer than half its log retention (entries may have been cleaned up behind a
checkpoint), a protocol change, a missing entry below the latest checkpoint, or a long way
behind. The paths each followed entry touched are kept a while, so a sync can diff only the
keys that changed (:meth:`SegmentFiles.touched_since`).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import re
import time
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from segmentlake.core.names import SEGMENT_KEY_COLUMN
from segmentlake.metadata.file_index import File, FileIndex
from segmentlake.metadata.metadata_table import FOLLOW_GAP_S
from segmentlake.metadata.table_log import (
    Stamp,
    TableLog,
    epoch_millis,
    load_through_gaps,
    local_path,
)

__all__ = ["Mark", "SegmentFiles", "follow_gap_s", "same_schema", "uri_root"]

logger = logging.getLogger(__name__)

_KEY = f"partition.{SEGMENT_KEY_COLUMN}"
# A follower's position: its load (unique in the process) and the version followed to.
Mark = tuple[int, int]
_GENERATIONS = itertools.count(1)
# Entries followed one by one before a snapshot load is the shorter way (it starts from the
# latest checkpoint).
_MAX_FOLLOWED = 500
# Followed entries whose touched paths are kept for :meth:`SegmentFiles.touched_since`.
_JOURNAL = 1000
# Add actions looked up by scanning the loaded ones rather than through an index of them.
_SCANNED = 1000


class SegmentFiles:
    """A table's live files at :attr:`version`: ``files`` maps each file's path (as its add
    action names it) to its size and ``__segment`` value. :meth:`refresh` brings it to the
    latest version; :meth:`add_actions` gives a file's add action with its stats. Loaded
    at ``version`` (default: the latest), it is followed from there, so the entries since are
    journaled (:meth:`touched_since`). Not for sharing between threads.

    >>> files = SegmentFiles(TableLog("/data/wh/wiki"))  # doctest: +SKIP
    >>> files.refresh().paths_of("1356998400000.0.aa")  # doctest: +SKIP
    {'__segment=1356998400000.0.aa/part-0.parquet': 'file:///data/wh/wiki/__segment=...'}
    """

    def __init__(
        self, log: TableLog, *, keep_adds: bool = True, version: int | None = None
    ) -> None:
        self.log = log
        self.root = uri_root(log.uri) + "/"  # a relative path appended makes a file's URI
        # Whether :meth:`add_actions` is wanted: the datasource table's files are added to the
        # visible table; the visible table's own are never added anywhere, and their add
        # actions (with stats) would cost ~0.3 GB per 10^6 files for nothing.
        self.keep_adds = keep_adds
        self.version = -1
        self.schema_json = ""
        self.metadata: dict[str, Any] = {}
        self._index: FileIndex  # set by every whole load, the first one below
        self._snapshot: DeltaTable | None = None
        self._snapshot_rows: dict[str, int] | None = None  # path -> row, built when needed
        self._snapshot_actions: pa.Table | None = None
        self._followed_adds: dict[str, Mapping[str, Any]] = {}
        self._txns: dict[str, int] = {}
        self._latest_txns: dict[str, int] | None = None  # those of entry `version`, if read
        self._followed = 0.0
        self._stamp: Stamp | None = None  # of entry `version`: the table is the same
        # The paths (with their keys) each followed entry added or removed, oldest first,
        # from version `_journal_from` on (what an incremental diff needs to look at).
        self._journal: deque[tuple[int, dict[str, str | None]]] = deque()
        self._journal_from = -1
        self._generation = 0
        self.loads = 0  # snapshot loads, the first included (following needs none)
        self.loaded_at: Mark = (0, -1)  # the last whole load's mark
        self._load(version)

    # -- keeping current -----------------------------------------------------------------------

    def refresh(self) -> SegmentFiles:
        """Follow the log to its latest version (or load it whole when following cannot be
        trusted); returns self."""
        fresh_enough = time.monotonic() - self._followed < follow_gap_s(self.metadata)
        try:
            if fresh_enough and self._follow():
                return self
        except Exception as e:  # an unreadable entry, a listing caught mid-write: load it whole
            logger.debug("following %s: %s; loading it whole", self.log.uri, e)
        self._load()
        return self

    def _load(self, version: int | None = None) -> None:
        """Load the table whole, at ``version`` (default: the latest); a version that cannot
        be loaded (its entries cleaned up) gives the latest."""
        try:
            table = self.log.table(version)
        except (DeltaError, OSError) as e:
            if version is None:
                raise
            logger.debug("loading %s at %d: %s; loading the latest", self.log.uri, version, e)
            table = self.log.table()
        self.loads += 1
        actions = pa.table(table.get_add_actions(flatten=True))
        self._index = FileIndex(self.root, *_columns(actions))
        self._snapshot = table
        self._snapshot_actions = actions if self.keep_adds else None
        self._snapshot_rows = None
        self._followed_adds = {}
        self._txns = {}
        self._latest_txns = None
        self.version = int(table.version())
        self._journal = deque()
        self._journal_from = self.version
        self._generation = next(_GENERATIONS)
        self.loaded_at = self.mark
        self._stamp = self.log.entry_stamp(self.version)
        self.schema_json = table.schema().to_json()
        metadata = table.metadata()
        self.metadata = {
            "id": metadata.id,
            "configuration": dict(metadata.configuration),
            "createdTime": metadata.created_time,
        }
        self._followed = time.monotonic()

    def _follow(self) -> bool:
        """Apply each entry after :attr:`version`; False when the table must be loaded whole."""
        followed = self.log.follow(self.version, self._stamp, self._apply, limit=_MAX_FOLLOWED)
        if followed is None:
            return False
        self.version, self._stamp = followed
        self._followed = time.monotonic()
        return True

    def committed(self, version: int, actions: Sequence[Mapping[str, Any]]) -> bool:
        """Take this process's own commit of ``actions``, written as entry ``version`` right
        after :attr:`version`, without reading it back (a rebuild's entry is ~30 MB of JSON
        at 10^5 files and ~10x that at 10^6: 0.65 s and 8.7 s to follow). Only for an entry
        written from exactly these actions; False (nothing taken: it is followed later) when
        it does not come right after. Marks from before it are no longer answered
        (:meth:`touched_since` says None): the sync that wrote it moves its memo past it, and
        the paths it touched (all of them in a rebuild) need not be kept."""
        if version != self.version + 1 or not self._apply(version, actions):
            return False
        self._journal.clear()
        self._journal_from = version
        self.version = version
        self._stamp = self.log.entry_stamp(version)
        self._followed = time.monotonic()
        return True

    def _apply(self, version: int, actions: Sequence[Mapping[str, Any]]) -> bool:
        """Apply entry ``version``; False (applying nothing) when it changes the protocol."""
        if any("protocol" in a for a in actions):
            return False
        touched: dict[str, str | None] = {}
        txns: dict[str, int] = {}
        index, kept = self._index, self._followed_adds
        # Removes first: a commit may remove a path and add it again (a new deletion vector).
        for action in actions:
            if "remove" in action:
                remove = action["remove"]
                path, values = remove["path"], remove.get("partitionValues")
                keyed = values is not None and SEGMENT_KEY_COLUMN in values
                key = values[SEGMENT_KEY_COLUMN] if keyed else None
                found = index.find(path, key=key, keyed=keyed)
                touched[path] = found[1] if found is not None else None
                if found is not None:
                    index.drop(path, found[1])
                    kept.pop(path, None)
        for action in actions:
            add = action.get("add")
            if add is not None:  # per file, up to 10^6 of them in a rebuild's entry: kept lean
                path = add["path"]
                key = (add.get("partitionValues") or {}).get(SEGMENT_KEY_COLUMN)
                touched[path] = key
                found = index.find(path, key=key)
                if found is not None:
                    index.drop(path, found[1])
                index.add(path, int(add.get("size") or 0), key)
                if self.keep_adds:
                    kept[path] = add
            elif "txn" in action:
                txns[action["txn"]["appId"]] = int(action["txn"]["version"])
            elif "metaData" in action:
                meta = action["metaData"]
                self.schema_json = meta["schemaString"]
                self.metadata = {
                    "id": meta.get("id"),
                    "configuration": dict(meta.get("configuration") or {}),
                    "createdTime": meta.get("createdTime"),
                }
        self._txns.update(txns)
        self._latest_txns = txns
        self._journal.append((version, touched))
        if len(self._journal) > _JOURNAL:
            dropped, _ = self._journal.popleft()
            self._journal_from = dropped
        return True

    # -- reads ---------------------------------------------------------------------------------

    @property
    def mark(self) -> Mark:
        """Where this follower is: its load and version, for :meth:`touched_since`."""
        return (self._generation, self.version)

    def touched_since(self, mark: Mark) -> dict[str, str | None] | None:
        """The paths (each with its ``__segment`` key; None for a removed path this follower
        never saw) that entries after ``mark`` added or removed; None when that is not
        known: the table was loaded whole since (a version number alone would not tell: the
        table may have been created again), or the mark is older than the entries kept.
        Everything else is as it was at the mark.

        >>> files.touched_since(files.mark)  # doctest: +SKIP
        {}
        """
        generation, version = mark
        if generation != self._generation or not self._journal_from <= version <= self.version:
            return None
        out: dict[str, str | None] = {}
        for entry, touched in self._journal:
            if entry > version:
                out.update(touched)
        return out

    def transaction_version(self, app_id: str) -> int | None:
        """The latest version application ``app_id`` recorded (Delta's ``txn``)."""
        followed = self._txns.get(app_id)
        if followed is not None:
            return followed
        assert self._snapshot is not None
        found = self._snapshot.transaction_version(app_id)
        return None if found is None else int(found)

    def delta_table(self) -> DeltaTable:
        """A delta-rs handle of the table at :attr:`version`, for a commit on top of it: the
        snapshot of the last whole load brought forward, which reads only the entries since
        (a commit on it took 0.67 of a fresh load's and commit's time at 10^5 files on moto's
        S3, 0.40-0.47 at 10^4), or loaded again when those are gone."""
        assert self._snapshot is not None
        snapshot, version = self._snapshot, self.version
        if int(snapshot.version()) != version:
            try:
                load_through_gaps(lambda: snapshot.load_as_version(version))
            except DeltaError as e:
                logger.debug("bringing %s to %d: %s; loading it", self.log.uri, version, e)
                snapshot = self.log.table(version)
            # Its transactions at `version` are those this follower knows: still true.
            self._snapshot = snapshot
        return snapshot

    def latest_entry_transactions(self) -> Mapping[str, int]:
        """The application transactions the entry of :attr:`version` recorded (none for a
        write by another application, e.g. a user's ``DELETE``)."""
        if self._latest_txns is None:
            self._latest_txns = self.log.entry_transactions(self.version) or {}
        return self._latest_txns

    @property
    def files(self) -> Mapping[str, File]:
        """Every live file: path -> its size and ``__segment`` value. What a whole diff
        needs; the first use after a load indexes every file (~1.5 s per 10^6)."""
        return self._index.as_dict()

    @property
    def file_count(self) -> int:
        """How many files are live (without indexing them)."""
        return len(self._index)

    def paths_of(self, key: str) -> Mapping[str, str]:
        """The live files of segment key ``key``: path -> URI (read only)."""
        return self._index.paths_of(key)

    def files_of(self, key: str) -> dict[str, File]:
        """The live files of segment key ``key``: path -> its size and key."""
        return self._index.files_of(key)

    def add_actions(self, files: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """Add actions for ``(path, uri)`` pairs of live files: each names its file by ``uri``,
        with the file's size, ``__segment`` value and stats."""
        assert self.keep_adds, f"the add actions of {self.log.uri} are not kept"
        out = [_add(self._followed_adds[p], uri) for p, uri in files if p in self._followed_adds]
        loaded = [(p, uri) for p, uri in files if p not in self._followed_adds]
        if loaded:
            assert self._snapshot_actions is not None
            rows = _rows(self._snapshot_actions, self._rows_of([p for p, _ in loaded]))
            out += _snapshot_adds(rows, [uri for _, uri in loaded])
        return out

    def _rows_of(self, paths: Sequence[str]) -> list[int]:
        """The rows of the loaded add actions naming ``paths``: found by one scan for a
        sync's few (24 ms at 10^6 files), through an index built once for a whole diff's many
        (0.45 s at 10^6, which a process's first sync would otherwise pay for a few files)."""
        assert self._snapshot_actions is not None
        column = self._snapshot_actions["path"]
        if self._snapshot_rows is None and len(paths) <= _SCANNED:
            hits = pc.indices_nonzero(pc.is_in(column, value_set=pa.array(paths, pa.string())))
            at = dict(zip(column.take(hits).to_pylist(), hits.to_pylist(), strict=True))
            return [at[p] for p in paths]
        if self._snapshot_rows is None:
            self._snapshot_rows = {p: i for i, p in enumerate(column.to_pylist())}
        return [self._snapshot_rows[p] for p in paths]


def _columns(actions: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The paths, sizes and ``__segment`` values of delta-rs's flattened add actions."""
    if _KEY in actions.column_names:
        keys = actions[_KEY].combine_chunks().cast(pa.string())
    else:
        keys = pa.nulls(actions.num_rows, pa.string())
    return (
        actions["path"].combine_chunks().cast(pa.string()),
        actions["size_bytes"].combine_chunks().cast(pa.int64()),
        keys,
    )


def _rows(table: pa.Table, indices: Sequence[int]) -> pa.Table:
    """Rows of a loaded table's add actions; a few by slicing (``take`` of one row from a
    large table in many chunks costs as much as taking them all)."""
    if len(indices) > 64:
        return table.take(indices)
    return pa.concat_tables([table.slice(i, 1) for i in indices])


_UNIT_S = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_DEFAULT_RETENTION_S = 30 * 86400  # Delta's delta.logRetentionDuration when unset
_MAX_GAP_S = 3600.0


def follow_gap_s(metadata: Mapping[str, Any]) -> float:
    """How long a follower may pause and still follow the log rather than load the table:
    half the table's log retention (entries older than that may be cleaned up behind a
    checkpoint, which following also detects), at most an hour and at least the metadata
    table's gap. A stream triggered every few minutes then follows its tables between
    batches instead of loading 10^5 files each time.

    >>> follow_gap_s({"configuration": {"delta.logRetentionDuration": "interval 2 days"}})
    3600.0
    >>> follow_gap_s({"configuration": {"delta.logRetentionDuration": "interval 3 minutes"}})
    120.0
    """
    text = (metadata.get("configuration") or {}).get("delta.logRetentionDuration")
    retention = _DEFAULT_RETENTION_S if text is None else _seconds(str(text))
    if retention is None:
        return FOLLOW_GAP_S
    return max(FOLLOW_GAP_S, min(_MAX_GAP_S, retention / 2))


def _seconds(interval: str) -> float | None:
    """The seconds in a Delta interval text (``interval 2 days``, ``1 week``); None when it
    names no unit known here."""
    parts = re.findall(r"(\d+)\s*(second|minute|hour|day|week)s?\b", interval.lower())
    if not parts:
        return None
    return float(sum(int(n) * _UNIT_S[unit] for n, unit in parts))


def uri_root(uri: str) -> str:
    """A table root as the absolute URI its add actions' relative paths are appended to."""
    local = local_path(uri)
    if local is None:
        return uri.rstrip("/")
    return "file://" + quote(os.path.abspath(local))


def _add(add: Mapping[str, Any], uri: str) -> dict[str, Any]:
    """A followed add action, naming its file by ``uri`` (its stats as the writer wrote them)."""
    return {
        "path": uri,
        "partitionValues": {
            SEGMENT_KEY_COLUMN: (add.get("partitionValues") or {}).get(SEGMENT_KEY_COLUMN)
        },
        "size": int(add.get("size") or 0),
        "modificationTime": int(add.get("modificationTime") or 0),
        "dataChange": True,
        "stats": add.get("stats"),
    }


def _snapshot_adds(actions: pa.Table, uris: Sequence[str]) -> list[dict[str, Any]]:
    """Add actions for rows of delta-rs's flattened add actions, with their stats rebuilt."""
    stats = _Stats(actions)
    keys = actions[_KEY].to_pylist() if _KEY in actions.column_names else [None] * len(uris)
    return [
        {
            "path": uri,
            "partitionValues": {SEGMENT_KEY_COLUMN: key},
            "size": int(size),
            "modificationTime": epoch_millis(mtime),
            "dataChange": True,
            "stats": stats.json(i),
        }
        for i, (uri, size, mtime, key) in enumerate(
            zip(
                uris,
                actions["size_bytes"].to_pylist(),
                actions["modification_time"].to_pylist(),
                keys,
                strict=True,
            )
        )
    ]


class _Stats:
    """Delta's stats JSON of each file, rebuilt from delta-rs's flattened columns."""

    def __init__(self, actions: pa.Table) -> None:
        self.records = (
            actions["num_records"].to_pylist() if "num_records" in actions.column_names else None
        )
        self.parts: dict[str, dict[str, list[Any]]] = {
            "minValues": {},
            "maxValues": {},
            "nullCount": {},
        }
        for name in actions.column_names:
            for prefix, part in (
                ("min.", "minValues"),
                ("max.", "maxValues"),
                ("null_count.", "nullCount"),
            ):
                if name.startswith(prefix):
                    self.parts[part][name.removeprefix(prefix)] = actions[name].to_pylist()

    def json(self, i: int) -> str | None:
        if self.records is None or self.records[i] is None:
            return None
        stats: dict[str, Any] = {"numRecords": int(self.records[i])}
        for part, columns in self.parts.items():
            values = {c: _stat(v[i]) for c, v in columns.items() if v[i] is not None}
            if values:
                stats[part] = _nested(values)
        return orjson.dumps(stats).decode()


def _stat(value: Any) -> Any:
    """A min/max value as Delta's stats JSON holds it, or None to leave it out (a reader then
    reads the file: slower, never wrong)."""
    if isinstance(value, datetime):  # ISO-8601 with milliseconds; UTC marked when zoned
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + "Z" if value.tzinfo is not None else text
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bool | int | str):
        return value
    return None  # decimals, binary, nested values: no stat


def _nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` as ``{"a": {"b": 1}}`` (delta-rs flattens struct columns' stats)."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        if value is None:
            continue
        *parents, leaf = name.split(".")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return out


def same_schema(a: str, b: str) -> bool:
    """Whether two schema JSON texts describe one schema (delta-rs and Spark write the same
    schema in different texts)."""
    return a == b or orjson.loads(a) == orjson.loads(b) or _canonical(a) == _canonical(b)


def _canonical(text: str) -> str:
    from deltalake.schema import Schema

    return str(Schema.from_json(text).to_json())
