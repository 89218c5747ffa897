"""The visible table of a datasource: a Delta table whose current version holds exactly the
rows of the visible timeline, so plain Delta readers — a SQL view in any session, ``spark-sql``
or a Thrift client, time travel — read the timeline with no segmentlake code at query time.

Why a second table: the datasource table (DESIGN §1) holds every segment's rows, published or
not, overshadowed or not, and the metadata decides what is visible. A view that joins the two
gets no partition pruning (DESIGN §6c), and one that inlines the visible keys goes stale at the
next publish. Here the *snapshot* is the visible set: its add actions name the datasource
table's files by absolute URI (Delta's shallow-clone form; nothing is copied), partitioned by
``__segment``, with the datasource table's schema and the files' stats, so Delta prunes by them
as usual. A segment the timeline serves only in part (a newer version of finer granularity
covers the rest) cannot be named by its files: its served rows are written once to a *clip*
file inside the visible table (:mod:`.visible_clips`).

Each metadata commit that changes segment records is followed by a sync: the visible records
(maintained per commit, :mod:`.visibility`) are diffed against the table's files and the
difference committed with Delta's application transaction ``(segmentlake.visible, metadata
version)``. A sync commits only at the table version it read and only when the version it
records is newer than the one there, so a slow sync never puts an older timeline back and a
metadata version is applied once. A process killed between its metadata commit and the sync
leaves the table one step behind until the next sync of that datasource (any commit, any
``lake.read``, or ``segmentlake view <datasource>``).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.schema import Schema
from deltalake.transaction import AddAction, RemoveAction

from segmentlake.core.interval import Interval
from segmentlake.core.names import SEGMENT_KEY_COLUMN, datasource_table_path
from segmentlake.core.timeline import VISIBLE, winning_pieces
from segmentlake.metadata.records import SEGMENT
from segmentlake.metadata.segment_files import SegmentFiles, same_schema
from segmentlake.metadata.store import MetadataStore
from segmentlake.metadata.table_log import TableLog, local_path
from segmentlake.metadata.visible_changes import (
    RECORDS_SCANNED,
    ROW_VERSION,
    Synced,
    around,
    changed_keys,
    changes_timeline,
)
from segmentlake.metadata.visible_clips import Clip, write_clip

__all__ = [
    "VISIBLE_APP_ID",
    "SyncReport",
    "current_version",
    "sync_visible_table",
    "syncs_are_deferred",
    "syncs_deferred",
    "visible_table_path",
]

logger = logging.getLogger(__name__)

VISIBLE_APP_ID = "segmentlake.visible"
# Also recorded by each sync's entry: the datasource table's version it diffed against, and
# (in the app id) the metadata table whose version VISIBLE_APP_ID gives. With them a new
# process can take up from that entry as the process that wrote it would (_memo_at_tip).
SOURCE_APP_ID = "segmentlake.visible.source"
METADATA_APP_PREFIX = "segmentlake.visible.metadata."
ENGINE_INFO = "segmentlake-visible"
_ATTEMPTS = 20
_WAIT_S = 60.0  # for another thread's sync of the same datasource (a rebuild at 10^5: ~8 s)
_CHECKPOINT_EVERY = 50  # versions: Spark replays the log after the last one on every query
# An entry of at least this many actions, and a quarter of the table's files, is checkpointed
# at once: every new reader would parse it as JSON (a rebuild's at 10^6: 4.6 s against 2.1 s
# from a checkpoint) until the next interval's checkpoint, up to 49 versions later.
_LARGE_ENTRY = 10_000
_RETAIN_LOG = "interval 2 days"  # time travel on the visible table reaches this far back


_deferred: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "visible_syncs_deferred", default=False
)


@contextmanager
def syncs_deferred() -> Iterator[None]:
    """Within the block, metadata commits leave the visible tables behind; the caller syncs
    once after it (many publishes in a row, or a benchmark timing a sync alone).

    >>> with syncs_deferred():  # doctest: +SKIP
    ...     for batch in batches: lake.append(batch, "wiki", spec)
    >>> sync_visible_table(lake.metadata, "wiki")  # doctest: +SKIP
    """
    token = _deferred.set(True)
    try:
        yield
    finally:
        _deferred.reset(token)


def syncs_are_deferred() -> bool:
    return _deferred.get()


def visible_table_path(warehouse: str, datasource: str) -> str:
    """The visible table of ``datasource``: ``<warehouse>/_segmentlake/visible/<datasource>``.

    >>> visible_table_path("/data/wh", "wiki")
    '/data/wh/_segmentlake/visible/wiki'
    """
    return f"{warehouse.rstrip('/')}/_segmentlake/visible/{datasource}"


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a sync did: the metadata version (at least) the visible table now shows, its
    table version (None when the datasource has no rows yet), the files added and removed,
    the clip files written, whether a newer sync had already done the work, the segment keys
    it diffed, and whether those were all the served keys (it could not tell which can have
    changed since this process's last sync)."""

    datasource: str
    metadata_version: int
    table_version: int | None
    added: int = 0
    removed: int = 0
    clipped: int = 0
    already_current: bool = False
    keys_diffed: int = 0
    whole_diff: bool = False


@dataclass(frozen=True, slots=True)
class _ChunkId:
    start: int
    end: int
    version: str


@dataclass(frozen=True, slots=True)
class _Served:
    """A segment key the timeline serves: its table, and the time ranges to keep (None: all
    its rows)."""

    load_path: str
    ranges: tuple[tuple[int, int], ...] | None


def sync_visible_table(store: MetadataStore, datasource: str) -> SyncReport:
    """Bring the visible table of ``datasource`` to the metadata's current visible timeline
    (see the module); returns what it did. Safe to call from any number of processes at once.

    >>> sync_visible_table(lake.metadata, "wiki").table_version  # doctest: +SKIP
    7
    """
    storage = TableLog(
        datasource_table_path(store.warehouse, datasource),
        storage_options=store.table.storage_options,
    )
    if not _has_table(storage):
        return SyncReport(datasource, store.version(), None)
    visible = TableLog(
        visible_table_path(store.warehouse, datasource), storage_options=storage.storage_options
    )
    with _followed_for(visible) as followed:
        report = _sync(store, datasource, storage, visible, followed)
        held = followed.tables.get(visible.uri)
        files = 0 if held is None else held.file_count
    written = report.added + report.removed
    if report.table_version is not None and written:
        # Outside the followers' lock: a checkpoint holds up no other thread's sync.
        _upkeep(visible, report.table_version, written=written, files=files)
    return report


def _sync(
    store: MetadataStore,
    datasource: str,
    storage: TableLog,
    visible: TableLog,
    followed: _Followed,
) -> SyncReport:
    for attempt in range(_ATTEMPTS):
        # The version first: the records read next are at least this new, so the table is
        # never labelled newer than what it shows (a later sync would skip the difference).
        metadata_version = store.table.refresh()
        if not followed.follows(visible):
            tip = _tip(visible)
            if tip is not None and _shows(store, datasource, tip[1], metadata_version):
                return SyncReport(datasource, metadata_version, tip[0], already_current=True)
            # Both are needed now; at the versions the latest entry names, if it is a sync's,
            # so that what changed since is followed, not diffed whole.
            at = _versions_at_tip(store, tip)
            followed.preload(visible, storage, at=at)
            if followed.synced is None:
                followed.synced = _memo_at_tip(store, datasource, visible, storage, at, followed)
        try:
            table = followed.visible(visible)
        except DeltaError as e:  # a log listing caught mid-link past its retries: a race
            logger.debug("loading %s: %s; again", visible.uri, e)
            time.sleep(random.uniform(0.005, 0.03) * (attempt + 1))
            continue
        if table is None:
            _create(visible, storage)
            continue
        base = table.version
        latest_txns = table.latest_entry_transactions()
        if _shows(store, datasource, latest_txns, metadata_version):
            return SyncReport(datasource, metadata_version, base, already_current=True)
        # A write that is no sync after the last one (a user's DELETE) on a timeline that has
        # not changed since: put it right, and end the log with a sync's entry even if
        # nothing differs, so the next look at the latest entry finds the table current.
        applied = table.transaction_version(VISIBLE_APP_ID)
        foreign_tip = (
            VISIBLE_APP_ID not in latest_txns
            and applied is not None
            and _unchanged(store, datasource, applied, metadata_version)
        )
        if foreign_tip and applied is not None and applied > metadata_version:
            continue  # a newer sync since the version was read: read the metadata again
        source = followed.table(storage)
        records = _visible_records(store, datasource)
        adds, removes, wanted, diffed = _difference(
            store, datasource, metadata_version, records, table, source, followed
        )
        whole = diffed is None
        keys_diffed = wanted.served if diffed is None else diffed
        done = Synced(store.table.table_id, metadata_version, table.mark, source.mark, records)
        if not adds and not removes and not foreign_tip:
            followed.synced = done
            return SyncReport(
                datasource, metadata_version, base,
                keys_diffed=keys_diffed, whole_diff=whole,
            )  # fmt: skip
        schema = _schema_change(source, table)
        synced_with = (metadata_version, source.version, store.table.table_id)
        version = _commit(visible, table, adds, removes, schema, synced_with)
        if version is not None:
            # The table now serves the metadata at `metadata_version`. A local entry was taken
            # as written (the mark moved past it): its keys need no second look. An object
            # store's, written by delta-rs, is followed next time (its keys looked at again).
            followed.synced = replace(done, table=table.mark)
            logger.info(
                "visible table of %s at version %d (metadata %d): +%d -%d files, %d clipped",
                datasource, version, metadata_version, len(adds), len(removes), wanted.clipped,
            )  # fmt: skip
            return SyncReport(
                datasource, metadata_version, version, len(adds), len(removes), wanted.clipped,
                keys_diffed=keys_diffed, whole_diff=whole,
            )  # fmt: skip
        time.sleep(random.uniform(0.005, 0.03) * (attempt + 1))
    raise TimeoutError(
        f"the visible table of {datasource!r} lost {_ATTEMPTS} commit races in a row; "
        "it catches up at the next sync"
    )


def _difference(
    store: MetadataStore,
    datasource: str,
    metadata_version: int,
    records: pa.Table,
    table: SegmentFiles,
    source: SegmentFiles,
    followed: _Followed,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], _Wanted, int | None]:
    """The add and remove actions that make ``table`` serve ``records``, and the number of
    keys diffed: those that can have changed since this process's last sync when that is
    known, else (None) every key (a whole diff is linear in the datasource; docs/decisions.md,
    "The visible table")."""
    keys = None
    if _one_storage(records, source.log):
        keys = changed_keys(
            store, datasource, followed.synced,
            metadata_version=metadata_version, table=table, source=source, records=records,
        )  # fmt: skip
    if keys is None:
        current = table.files
        wanted = _wanted_files(_served(records), table.log, source, followed)
        adds = wanted.adds(sorted(wanted.paths.keys() - current.keys()))
        removes = [_remove(p, current[p]) for p in sorted(current.keys() - wanted.paths.keys())]
        return adds, removes, wanted, None
    served = _served(around(records, keys)) if keys else {}
    wanted = _wanted_files({k: served[k] for k in keys if k in served}, table.log, source, followed)
    # Every wanted file is of one of `keys` (a file is filed under its key in both tables),
    # so those keys' files are all the table's that the difference needs.
    held = {p: file for k in keys for p, file in table.files_of(k).items()}
    adds = wanted.adds(sorted(p for p in wanted.paths if p not in held))
    removes = [_remove(p, held[p]) for p in sorted(held.keys() - wanted.paths.keys())]
    return adds, removes, wanted, len(keys)


def _one_storage(records: pa.Table, storage: TableLog) -> bool:
    """Whether every record's files are in the datasource table (the changes followed are
    that table's)."""
    texts = pc.unique(records["shared"]).to_pylist()
    return all(path in ("", storage.uri) for path in _load_paths(texts).values())


class _Followed:
    """What this process knows of one visible table, shared by its threads: the tables it
    follows (the visible table, its datasource table, any other a load path names) by their
    logs' new entries instead of loading them again (a cost that grows with the table's files;
    docs/decisions.md, "Measurements behind the code"), and what the last sync left. A sync
    holds :attr:`lock` throughout: the file lists are not for sharing while they change."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tables: dict[str, SegmentFiles] = {}
        self.synced: Synced | None = None

    def follows(self, log: TableLog) -> bool:
        return log.uri in self.tables

    def preload(
        self, visible: TableLog, storage: TableLog, *, at: _TipVersions | None = None
    ) -> None:
        """Load the visible table and the datasource table (those not followed yet) at the
        same time: delta-rs reads a log with the GIL released (two tables of 10^5 files: 1.0 s
        instead of 1.85 s). ``at`` gives the versions to load them at (the latest by default;
        they are followed from there). A load that fails is left for :meth:`table` to do
        again and report."""
        logs = [log for log in (visible, storage) if not self.follows(log) and _has_table(log)]
        if len(logs) < 2:
            return

        def load(log: TableLog) -> SegmentFiles | None:
            version = None if at is None else at.table if log is visible else at.source
            return _loaded_or_none(log, log is not visible, version)

        with ThreadPoolExecutor(len(logs), thread_name_prefix="segmentlake-load") as pool:
            loaded = list(pool.map(load, logs))
        for log, files in zip(logs, loaded, strict=True):
            if files is not None:
                self.tables[log.uri] = files

    def table(self, log: TableLog, *, keep_adds: bool = True) -> SegmentFiles:
        """The latest version of the table at ``log``: followed, or loaded the first time
        (keeping its add actions, for files added to the visible table, if ``keep_adds``)."""
        files = self.tables.get(log.uri)
        if files is not None:
            return files.refresh()
        self.tables[log.uri] = files = SegmentFiles(log, keep_adds=keep_adds)
        return files

    def visible(self, log: TableLog) -> SegmentFiles | None:
        """The visible table's latest version, None when there is none yet."""
        if not _has_table(log):
            return None
        try:
            return self.table(log, keep_adds=False)
        except TableNotFoundError:
            return None


def _loaded_or_none(log: TableLog, keep_adds: bool, version: int | None) -> SegmentFiles | None:
    try:
        return SegmentFiles(log, keep_adds=keep_adds, version=version)
    except Exception as e:  # the sync loads it again, and reports what fails then
        logger.debug("preloading %s: %s", log.uri, e)
        return None


def _current_at_tip(
    store: MetadataStore, datasource: str, visible: TableLog, metadata_version: int
) -> int | None:
    """The visible table's latest version if its log entry is a sync that shows the timeline
    of ``metadata_version``, else None (the entry is no sync's: the table's creation, a
    user's ``DELETE``; or it cannot be read). One entry read: all a process that follows
    nothing yet needs to tell that the table is current, where loading its files takes
    ~1.2 s and ~0.35 GB at 10^5."""
    tip = _tip(visible)
    if tip is None or not _shows(store, datasource, tip[1], metadata_version):
        return None
    return tip[0]


def _tip(visible: TableLog) -> tuple[int, Mapping[str, int]] | None:
    """The visible table's latest version and the application transactions its entry
    records; None when there is no entry or it cannot be read."""
    try:
        version = visible.version()
        txns = visible.entry_transactions(version) if version >= 0 else None
    except OSError as e:
        logger.debug("reading the latest entry of %s: %s", visible.uri, e)
        return None
    return None if txns is None else (version, txns)


@dataclass(frozen=True, slots=True)
class _TipVersions:
    """What a sync's entry, the visible table's latest, says it did: the table at version
    ``table`` held exactly what the metadata at ``metadata`` served from the datasource
    table at version ``source``."""

    table: int
    metadata: int
    source: int


def _versions_at_tip(
    store: MetadataStore, tip: tuple[int, Mapping[str, int]] | None
) -> _TipVersions | None:
    """The versions a sync's entry at the tip records, None when it is no sync's, is one
    written before entries recorded them, or applied another metadata table's version."""
    if tip is None:
        return None
    version, txns = tip
    metadata, source = txns.get(VISIBLE_APP_ID), txns.get(SOURCE_APP_ID)
    if metadata is None or source is None or store.table.table_id is None:
        return None
    if txns.get(METADATA_APP_PREFIX + store.table.table_id) != metadata:
        return None
    return _TipVersions(version, metadata, source)


def _memo_at_tip(
    store: MetadataStore,
    datasource: str,
    visible: TableLog,
    storage: TableLog,
    at: _TipVersions | None,
    followed: _Followed,
) -> Synced | None:
    """What the sync that wrote the visible table's latest entry left, for a process that
    loaded both tables at the versions it names (:meth:`_Followed.preload`): its sync then
    diffs only the keys that can have changed since, as that sync's process would, instead
    of every key (docs/decisions.md, "The visible table"). The visible records it read are
    not known; every segment record now stands for them (a superset, with the time they
    covered), unless a commit since deleted one (then the sync diffs everything)."""
    if at is None:
        return None
    table, source = followed.tables.get(visible.uri), followed.tables.get(storage.uri)
    if table is None or source is None:
        return None
    if table.loaded_at[1] != at.table or source.loaded_at[1] != at.source:
        return None  # a version that could not be loaded: the latest was
    records = store.arrow(datasource, kinds=[SEGMENT], columns=("load_key", "start_ms", "end_ms"))
    return Synced(
        store.table.table_id, at.metadata, table.loaded_at, source.loaded_at, records,
        records_later=True,
    )  # fmt: skip


def _shows(
    store: MetadataStore, datasource: str, latest_txns: Mapping[str, int], metadata_version: int
) -> bool:
    """Whether a table whose latest entry recorded ``latest_txns`` shows the timeline of
    ``metadata_version``: that entry is a sync's (not a user's ``DELETE`` after it, whose rows
    are to be put back) and no commit since the metadata version it applied changed the
    timeline."""
    applied = latest_txns.get(VISIBLE_APP_ID)
    return applied is not None and _unchanged(store, datasource, applied, metadata_version)


_followed: dict[str, _Followed] = {}  # by the visible table's URI
_followed_lock = threading.Lock()


@contextmanager
def _followed_for(visible: TableLog) -> Iterator[_Followed]:
    """The process's followers of ``visible``, held for the block (another thread's sync of
    the datasource would do the same work, then lose the commit race). A thread that waits
    longer than :data:`_WAIT_S` (a sync stuck on a slow store) goes on with followers of its
    own, as another process would, rather than queue behind it."""
    with _followed_lock:
        followed = _followed.get(visible.uri)
        if followed is None:
            followed = _followed[visible.uri] = _Followed()
    if not followed.lock.acquire(timeout=_WAIT_S):
        logger.warning(
            "a sync of %s has held its followers for %.0f s; going on without them",
            visible.uri, _WAIT_S,
        )  # fmt: skip
        yield _Followed()
        return
    try:
        yield followed
    finally:
        followed.lock.release()


def _forget_followed() -> None:
    """Start afresh (a forked child: the parent's other threads, and the locks they held,
    did not come along)."""
    global _followed_lock
    _followed.clear()
    _followed_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_followed)


def current_version(store: MetadataStore, datasource: str) -> int | None:
    """The visible table's version if it shows the metadata's current timeline of
    ``datasource``, else None (no table yet, or behind); reads only, commits nothing."""
    visible = TableLog(
        visible_table_path(store.warehouse, datasource),
        storage_options=store.table.storage_options,
    )
    metadata_version = store.table.refresh()
    with _followed_for(visible) as followed:
        if not followed.follows(visible):
            current = _current_at_tip(store, datasource, visible, metadata_version)
            if current is not None:
                return current
        table = followed.visible(visible)
        if table is None:
            return None
        txns = table.latest_entry_transactions()
        return table.version if _shows(store, datasource, txns, metadata_version) else None


def _unchanged(store: MetadataStore, datasource: str, applied: int, latest: int) -> bool:
    """Whether no metadata commit after ``applied`` up to ``latest`` touched ``datasource``
    (from the commits' records, which name it; the other datasources' commits move the
    version too). A long way behind, or a commit without a record, counts as changed."""
    if applied >= latest:
        return True
    if latest - applied > RECORDS_SCANNED:
        return False
    return all(
        record is not None
        and record.get("ds") is not None
        and not changes_timeline(record, datasource)
        for _, record in store.table.records(applied, latest)
    )


def _has_table(log: TableLog) -> bool:
    local = local_path(log.uri)
    if local is not None:
        return os.path.isdir(os.path.join(local, "_delta_log"))
    return log.exists()


def _visible_records(store: MetadataStore, datasource: str) -> pa.Table:
    """The visible segment records of ``datasource``, with what serving them needs."""
    records = store.arrow(
        datasource,
        kinds=[SEGMENT],
        columns=(*_SERVING_COLUMNS, "visibility"),
    )
    # Filtered after the columns are picked, so the records' other columns are not copied.
    visible = pc.fill_null(pc.equal(records["visibility"], VISIBLE), False)
    return records.select(_SERVING_COLUMNS).filter(visible)


# With the row versions, by which the next sync tells the records that changed.
_SERVING_COLUMNS = (
    "start_ms", "end_ms", "version", "shard_type", "load_key", "shared", "payload", *ROW_VERSION
)  # fmt: skip


def _served(records: pa.Table) -> dict[str, _Served]:
    """Every segment key the timeline serves, from the visible records: whole, or in the
    ranges its chunk wins (within where its rows lie). Exact for a key when ``records``
    hold every visible record overlapping its records' chunks."""
    if records.num_rows == 0:
        return {}
    # Chunks once each, numbered by Arrow (10^4 records share far fewer chunks, or are
    # 10^4 chunks of one segment: either way no per-record chunk object).
    ids = pc.binary_join_element_wise(
        pc.cast(records["start_ms"], pa.string()),
        pc.cast(records["end_ms"], pa.string()),
        records["version"],
        "|",
    )
    encoded = pc.dictionary_encode(ids).combine_chunks()
    plain = pc.invert(pc.fill_null(pc.match_substring(records["payload"], '"interval"'), False))
    served_rows = pc.is_valid(records["load_key"])  # a tombstone hides and serves no rows
    if _disjoint_chunks(records):
        # Each chunk wins all of its interval (one HOUR chunk per segment, say): no chunk
        # objects and no sweep, which took 0.1 s of Python per 10^4 chunks on every sync.
        texts = encoded.dictionary

        def chunk_at(i: int) -> _ChunkId:
            return _chunk_of(texts[i].as_py())

        def wins_of(chunk: _ChunkId) -> list[tuple[int, int]]:
            return [(chunk.start, chunk.end)]

        fast = pc.and_(plain, served_rows)
    else:
        chunks = [_chunk_of(text) for text in encoded.dictionary.to_pylist()]
        wins: dict[_ChunkId, list[tuple[int, int]]] = {}
        for start, end, chunk in winning_pieces(list(chunks), -(2**62), 2**62):
            wins.setdefault(chunk, []).append((start, end))

        def chunk_at(i: int) -> _ChunkId:
            return chunks[i]

        def wins_of(chunk: _ChunkId) -> list[tuple[int, int]]:
            return wins.get(chunk, [])

        # Nearly every chunk wins all of its interval: its plain segments are served whole.
        whole = [i for i, c in enumerate(chunks) if wins.get(c) == [(c.start, c.end)]]
        in_whole = pc.is_in(encoded.indices, pa.array(whole, encoded.indices.type))
        fast = pc.and_(pc.and_(in_whole, plain), served_rows)
    keys = records["load_key"].to_pylist()
    # The load path's JSON, a few distinct texts: by number (10^4 Python strings of it took
    # 39 ms a sync).
    shared_codes = pc.dictionary_encode(records["shared"]).combine_chunks()
    load_texts: list[str | None] = [*shared_codes.dictionary.to_pylist(), None]
    no_text = len(load_texts) - 1
    shared = [no_text if c is None else c for c in shared_codes.indices.to_pylist()]
    by_text = _load_paths(load_texts)
    paths = [by_text[text] for text in load_texts]
    all_rows = [_Served(path, None) for path in paths]
    is_fast = fast.to_pylist()
    # A key also named by a record served in part goes the slow way in record order.
    slow_keys = {k for k, f in zip(keys, is_fast, strict=True) if not f and k is not None}
    served: dict[str, _Served] = {}
    slow = []
    for i, (key, quick) in enumerate(zip(keys, is_fast, strict=True)):
        if quick and key not in slow_keys:
            served.setdefault(key, all_rows[shared[i]])
        elif key is not None:
            slow.append(i)
    if not slow:
        return served
    index = encoded.indices.to_pylist()
    payloads = records["payload"].to_pylist()
    for i in slow:
        key, chunk, payload = keys[i], chunk_at(index[i]), payloads[i]
        if is_fast[i] and key not in served:
            served[key] = all_rows[shared[i]]
            continue
        rows = _rows_range(payload, chunk)
        ranges = _clipped(wins_of(chunk), rows)
        earlier = served.get(key)
        if earlier is not None:  # two records naming one key's rows: serve the union
            ranges = _union(earlier.ranges, ranges, rows)
        served[key] = _Served(paths[shared[i]], ranges)
    return {k: s for k, s in served.items() if s.ranges is None or s.ranges}


def _chunk_of(text: str) -> _ChunkId:
    start, end, version = text.split("|", 2)
    return _ChunkId(int(start), int(end), version)


def _disjoint_chunks(records: pa.Table) -> bool:
    """Whether the records' distinct chunks (interval and version) overlap none of the
    others, told in Arrow: sorted by start, each chunk ends where or before the next begins
    (two versions of one interval, or a DAY over its HOURs, overlap)."""
    chunks = (
        records.select(["start_ms", "end_ms", "version"])
        .group_by(["start_ms", "end_ms", "version"])
        .aggregate([])
    )
    if chunks.num_rows < 2:
        return True
    order = pc.sort_indices(chunks, [("start_ms", "ascending"), ("end_ms", "ascending")])
    starts = pc.take(chunks["start_ms"], order).to_numpy()
    ends = pc.take(chunks["end_ms"], order).to_numpy()
    return bool((ends[:-1] <= starts[1:]).all())


def _load_paths(shared: Sequence[str | None]) -> dict[str | None, str]:
    """The table path in each distinct ``shared`` text (a few per datasource)."""
    out: dict[str | None, str] = {}
    for text in set(shared):
        out[text] = "" if text is None else str(orjson.loads(text).get("loadPath") or "")
    return out


def _rows_range(payload: str | None, chunk: _ChunkId) -> tuple[int, int]:
    """Where a segment's rows lie: its chunk, or for an upgraded copy the interval of the
    segment it copies (its load spec's ``interval``)."""
    if payload is not None and '"interval"' in payload:
        load = orjson.loads(payload).get("loadSpec") or {}
        text = load.get("interval")
        if isinstance(text, str):
            return _span_of(text)
    return chunk.start, chunk.end


@functools.lru_cache(maxsize=4096)
def _span_of(interval_text: str) -> tuple[int, int]:
    """An interval's text in epoch ms. Cached: every sync meets the same few texts again,
    one per segment an upgraded copy copies (docs/decisions.md, "Measurements behind the
    code")."""
    interval = Interval.parse(interval_text)
    return interval.start_millis, interval.end_millis


def _clipped(
    wins: list[tuple[int, int]], rows: tuple[int, int]
) -> tuple[tuple[int, int], ...] | None:
    """The parts of ``rows`` the chunk wins; None when that is all of it."""
    kept = [(max(s, rows[0]), min(e, rows[1])) for s, e in wins if s < rows[1] and e > rows[0]]
    merged = _merge(kept)
    if merged == [rows]:
        return None
    return tuple(merged)


def _union(
    a: tuple[tuple[int, int], ...] | None,
    b: tuple[tuple[int, int], ...] | None,
    rows: tuple[int, int],
) -> tuple[tuple[int, int], ...] | None:
    if a is None or b is None:
        return None
    merged = _merge([*a, *b])
    return None if merged == [rows] else tuple(merged)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class _Wanted:
    """The files the visible table should hold: their paths, and their add actions built
    only for the ones it lacks (most syncs add a few files to thousands)."""

    def __init__(self) -> None:
        # A file of a table (its URI is the table's root and its path), or a clip's add.
        self.paths: dict[str, SegmentFiles | dict[str, Any]] = {}
        self.clipped = 0
        self.served = 0  # keys

    def adds(self, uris: Sequence[str]) -> list[dict[str, Any]]:
        ready = [a for a in map(self.paths.__getitem__, uris) if isinstance(a, dict)]
        by_table: dict[int, tuple[SegmentFiles, list[tuple[str, str]]]] = {}
        for uri in uris:
            found = self.paths[uri]
            if not isinstance(found, dict):
                pair = (uri.removeprefix(found.root), uri)
                by_table.setdefault(id(found), (found, []))[1].append(pair)
        for table, files in by_table.values():
            ready += table.add_actions(files)
        return ready


def _wanted_files(
    served: Mapping[str, _Served], visible: TableLog, source: SegmentFiles, followed: _Followed
) -> _Wanted:
    """Every file of the served keys (the datasource table's, or a clip)."""
    tables: dict[str, tuple[TableLog, SegmentFiles, list[str]]] = {}
    wanted = _Wanted()
    wanted.served = len(served)
    for key, serving in served.items():
        found = tables.get(serving.load_path)
        if found is None:
            found = tables[serving.load_path] = _table_at(serving.load_path, source, followed)
        log, files, whole = found
        uris = files.paths_of(key).values()
        if not uris:
            continue
        if serving.ranges is None:
            whole.extend(uris)  # per key, not per file: 10^4 keys a sync
            continue
        clip = _clip(log, visible, key, sorted(uris), serving.ranges)
        wanted.paths[clip.add["path"]] = clip.add
        wanted.clipped += 1
    for _, files, whole in tables.values():
        wanted.paths.update(dict.fromkeys(whole, files))
    return wanted


def _table_at(
    load_path: str, source: SegmentFiles, followed: _Followed
) -> tuple[TableLog, SegmentFiles, list[str]]:
    """The table a load path names (most often the datasource table), its files, and a list
    for the URIs of its files served whole."""
    if not load_path or load_path == source.log.uri:
        return source.log, source, []
    log = TableLog(load_path, storage_options=source.log.storage_options)
    return log, followed.table(log), []


def _clip(
    storage: TableLog,
    visible: TableLog,
    key: str,
    files: Sequence[str],
    ranges: tuple[tuple[int, int], ...],
) -> Clip:
    """The clip file of ``key`` in ``ranges``: named by what it holds, so a retry or another
    process finds it written and reuses it."""
    digest = hashlib.sha256(orjson.dumps([key, sorted(files), list(ranges)])).hexdigest()[:24]
    return write_clip(storage, visible, key, files, ranges, name=digest)


def _remove(path: str, file: tuple[int, str | None]) -> dict[str, Any]:
    return {"path": path, "size": file[0], "partitionValues": {SEGMENT_KEY_COLUMN: file[1]}}


def _create(visible: TableLog, storage: TableLog) -> None:
    """Version 0 of the visible table: the datasource table's protocol and schema."""
    source = storage.table()
    metadata = _metadata_action(source)
    protocol = source.protocol()
    versions: dict[str, Any] = {
        "minReaderVersion": protocol.min_reader_version,
        "minWriterVersion": protocol.min_writer_version,
    }
    if protocol.reader_features:
        versions["readerFeatures"] = list(protocol.reader_features)
    if protocol.writer_features:
        versions["writerFeatures"] = list(protocol.writer_features)
    entry: list[dict[str, Any]] = [
        {
            "commitInfo": {
                "timestamp": _now(),
                "operation": "CREATE TABLE",
                "engineInfo": ENGINE_INFO,
            }
        },
        {"protocol": versions},
        {"metaData": metadata},
    ]
    if visible.local:
        os.makedirs(visible.full("_delta_log"), exist_ok=True)
        visible.put_entry_if_absent(0, _lines(entry))
        return
    try:
        DeltaTable.create(
            visible.delta_uri,
            Schema.from_json(metadata["schemaString"]),
            partition_by=[SEGMENT_KEY_COLUMN],
            configuration=metadata["configuration"],
            storage_options=visible.storage_options or None,
            mode="ignore",
        )
    except DeltaError as e:
        logger.debug("creating %s: %s (another process created it)", visible.uri, e)


def _metadata_action(source: DeltaTable) -> dict[str, Any]:
    """The visible table's ``metaData``: the datasource table's schema, ``__segment``
    partitions, and the log kept a short while (one entry per visible change)."""
    return {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": source.schema().to_json(),
        "partitionColumns": [SEGMENT_KEY_COLUMN],
        "configuration": {
            "delta.logRetentionDuration": _RETAIN_LOG,
            "delta.checkpointInterval": str(_CHECKPOINT_EVERY),
        },
        "createdTime": _now(),
    }


def _schema_change(source: SegmentFiles, table: SegmentFiles) -> dict[str, Any] | None:
    """A new ``metaData`` when the datasource table's schema grew (a new dimension)."""
    if same_schema(source.schema_json, table.schema_json):
        return None
    return {
        "id": table.metadata["id"],
        "format": {"provider": "parquet", "options": {}},
        "schemaString": source.schema_json,
        "partitionColumns": [SEGMENT_KEY_COLUMN],
        "configuration": table.metadata["configuration"],
        "createdTime": table.metadata["createdTime"],
    }


def _commit(
    visible: TableLog,
    table: SegmentFiles,
    adds: Sequence[dict[str, Any]],
    removes: Sequence[dict[str, Any]],
    metadata: dict[str, Any] | None,
    synced_with: tuple[int, int, str | None],
) -> int | None:
    """Commit the difference on top of ``table``'s version; the version it landed as, None
    when a concurrent commit took that version. ``synced_with`` is what it makes the table
    show: the metadata version, the datasource table's version and the metadata table's id
    (recorded as application transactions)."""
    if not visible.local:
        return _commit_through_delta_rs(table, adds, removes, metadata, synced_with)
    base = table.version
    stamp = _now()
    entry: list[dict[str, Any]] = [
        {
            "commitInfo": {
                "timestamp": stamp,
                "operation": "WRITE",
                "engineInfo": ENGINE_INFO,
                "operationParameters": {
                    "mode": "Overwrite",
                    "partitionBy": json.dumps([SEGMENT_KEY_COLUMN]),
                },
            }
        },
        *[
            {"txn": {"appId": app, "version": version, "lastUpdated": stamp}}
            for app, version in _synced_transactions(synced_with)
        ],
    ]
    if metadata is not None:
        entry.append({"metaData": metadata})
    entry += [{"add": add} for add in adds]
    entry += [
        {
            "remove": {
                **r,
                "deletionTimestamp": stamp,
                "dataChange": True,
                "extendedFileMetadata": True,
            }
        }
        for r in removes
    ]
    if not visible.put_entry_if_absent(base + 1, _lines(entry)):
        return None
    table.committed(base + 1, entry)  # written from these actions: nothing to read back
    return base + 1


def _commit_through_delta_rs(
    table: SegmentFiles,
    adds: Sequence[dict[str, Any]],
    removes: Sequence[dict[str, Any]],
    metadata: dict[str, Any] | None,
    synced_with: tuple[int, int, str | None],
) -> int | None:
    """An object store's put-if-absent is delta-rs's conditional PUT, at the next version of
    the followed table's handle. delta-rs writes a schema only with an overwrite, so a grown
    schema is committed first, as the columns it added (one more version)."""
    handle = table.delta_table()
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    if metadata is not None:
        added = _added_columns(handle.schema(), metadata["schemaString"])
        if added:
            try:
                handle.alter.add_columns(
                    added,
                    commit_properties=CommitProperties(max_commit_retries=0),
                    post_commithook_properties=hooks,
                )
            except CommitFailedError as e:
                logger.debug("visible table columns at %d lost: %s", table.version + 1, e)
                return None
    base = int(handle.version())
    stamp = _now()
    actions: list[AddAction | RemoveAction] = [
        AddAction(
            a["path"],
            a["size"],
            a["partitionValues"],
            a["modificationTime"],
            True,
            a["stats"] or "",
        )
        for a in adds
    ]
    actions += [
        RemoveAction(r["path"], True, stamp, r["size"], r["partitionValues"]) for r in removes
    ]
    try:
        handle.create_write_transaction(
            actions,
            "append",
            handle.schema(),
            partition_by=[SEGMENT_KEY_COLUMN],
            commit_properties=CommitProperties(
                max_commit_retries=0,
                app_transactions=[
                    Transaction(app, version) for app, version in _synced_transactions(synced_with)
                ],
            ),
            post_commithook_properties=hooks,
        )
    except CommitFailedError as e:
        logger.debug("visible table commit at %d lost: %s", base + 1, e)
        return None
    return base + 1


def _synced_transactions(synced_with: tuple[int, int, str | None]) -> list[tuple[str, int]]:
    """The application transactions of a sync's entry (see :data:`SOURCE_APP_ID`)."""
    metadata_version, source_version, metadata_id = synced_with
    txns = [(VISIBLE_APP_ID, metadata_version), (SOURCE_APP_ID, source_version)]
    if metadata_id is not None:
        txns.append((METADATA_APP_PREFIX + metadata_id, metadata_version))
    return txns


def _added_columns(current: Schema, grown: str) -> list[Any]:
    """The top-level columns of schema ``grown`` (JSON) that ``current`` lacks: what a
    datasource table written with ``mergeSchema`` gains (a new dimension or metric). A column
    both have but type differently (a field added inside a struct) cannot be changed this
    way: it is logged, and the visible table keeps its own."""
    known = {f.name: f.to_json() for f in current.fields}
    fields = Schema.from_json(grown).fields
    changed = [f.name for f in fields if f.name in known and f.to_json() != known[f.name]]
    if changed:
        logger.warning(
            "the visible table keeps its own type of columns %s: only new columns are added "
            "on an object store", changed,
        )  # fmt: skip
    return [f for f in fields if f.name not in known]


def _upkeep(visible: TableLog, version: int, *, written: int, files: int) -> None:
    """A checkpoint (:func:`_checkpoint_due`), and the log behind it cleaned once past
    retention. Best effort: a failure leaves the next one to do it."""
    if _checkpoint_due(version, written=written, files=files):
        visible.checkpoint(version)


def _checkpoint_due(version: int, *, written: int, files: int) -> bool:
    """Whether the visible table's entry ``version``, which wrote ``written`` actions and
    left ``files`` files, is to be checkpointed: every :data:`_CHECKPOINT_EVERY` versions
    (Spark replays the log after the last checkpoint on each query), and right after a
    large entry (a rebuild, an overwrite of many segments), which every new reader would
    otherwise parse as JSON. A checkpoint writes every file again, so an entry small beside
    the table waits for the interval."""
    if version % _CHECKPOINT_EVERY == 0:
        return True
    return written >= max(_LARGE_ENTRY, files // 4)


def _lines(actions: Sequence[Mapping[str, Any]]) -> str:
    return "".join(orjson.dumps(a).decode() + "\n" for a in actions)


def _now() -> int:
    return int(time.time() * 1000)
