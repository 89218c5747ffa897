"""The metadata store: read a datasource's current rows, commit a conditional change.

Every read and commit runs in this Python process through delta-rs
(:mod:`.metadata_table`): no Spark job, no JVM. The table is partitioned by datasource; each
partition's current rows are folded from row versions (:mod:`.state`) and kept in memory, so a
transaction reads only the files committed since the last one.

A transaction reads rows within a *scope* (time ranges and keys, :mod:`.scope`), decides, and
commits the changed rows' new versions as the log version right after the one it read. When
another commit took that version first, it looks at what the winners wrote: if none of it is
in the scope it read, its decision still stands and it commits again on top of them without
deciding again; otherwise it must read and decide again. So transactions on different time
chunks of a datasource never redo each other's work.

Leases: rows held by a task group (locks, compaction reservations) carry ``group_id``; the
group's lease is one ``lease`` row whose ``expires_ms`` every read resolves into the held rows,
so a heartbeat renews all of a group's rows with one one-row commit.
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
import random
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
from deltalake.transaction import AddAction

from segmentlake.errors import CommitStateUnknown, SpecError
from segmentlake.faults import crash_point
from segmentlake.metadata.background import start_daemon
from segmentlake.metadata.metadata_table import PARTITION_COLUMN, DataFile, LostRace, MetadataTable
from segmentlake.metadata.records import (
    LEASE,
    LEASED_KINDS,
    PENDING,
    SEGMENT,
    TABLE_SCHEMA,
    TIME_KINDS,
    Row,
    forget_row_dicts,
    lease_key,
    scope_of_rows,
    scope_of_table,
)
from segmentlake.metadata.scope import EVERYTHING, Scope
from segmentlake.metadata.state import KEY_SEPARATOR, PartitionFold, key_column
from segmentlake.metadata.table_log import load_through_gaps

REBASE_PAUSE_S = 0.002
# Another process's announcement that it keeps losing makes transactions on its scope
# courteous for this long.
SHARED_WINDOW_S = 2.0
# Another process's claim of a partition's fold holds this long (a fold that died unclaims
# nothing: the claim just expires).
FOLD_CLAIM_S = 30.0
# A transaction announces that it keeps losing after this many decisions undone.
ANNOUNCE_AFTER_LOSSES = 2
# A file deferred this long is read anyway: the upkeep drops a deletion's tombstone after
# TOMBSTONE_RETENTION_MS, and a fold must see a tombstone before the versions it deletes go.
MAX_DEFERRAL_S = 300.0

__all__ = [
    "METADATA_VERSION",
    "Change",
    "ChangeBatch",
    "ChangeOp",
    "Conflict",
    "MetadataStore",
    "PartitionState",
    "ScopeTooNarrow",
    "UpkeepReport",
    "now_ms",
]

logger = logging.getLogger(__name__)

METADATA_VERSION = 2
# A partition with this many files is folded into one by the next commit's upkeep: delta-rs
# materializes every live file's metadata on each snapshot update (a cost linear in the
# files), so the hot path stays fast only while the table has few files.
UPKEEP_FILES = 16
# How long the upkeep keeps a deletion's tombstone in the files it folds (see state.py).
TOMBSTONE_RETENTION_MS = 3_600_000
CHECKPOINT_EVERY = 50
# ...and no sooner than this after the last one: a checkpoint carries an action per file
# within vacuum retention, so at high commit rates checkpoints every CHECKPOINT_EVERY
# versions wrote megabytes a second. Ten seconds of entries are a few hundred small files
# to replay.
CHECKPOINT_MIN_INTERVAL_S = 10.0
CLEANUP_EVERY = 500
CLEANUP_OVERDUE_S = 60.0
# Log entries below the latest checkpoint are deleted once this old. A transaction needs the
# entries after the version it read (the winners' records) for as long as it decides and
# commits: far less than this. A reader behind a deleted entry reloads from the checkpoint.
# Every load lists the log, and a listing that meets a commit being linked sees a gap
# (load_through_gaps): with minutes of entries kept at high commit rates, a listing is long
# enough to meet one nearly every time.
LOG_RETENTION_MS = 2 * 60_000
# Long repeated strings (segment descriptors, schemas) stay dictionary-encoded in memory.
_DICTIONARY_COLUMNS = ("shared",)

ChangeOp = Literal["insert", "upsert", "delete"]
# Checked at run time too: changes are built from untyped code and read back from commits.
_CHANGE_OPS: tuple[ChangeOp, ...] = get_args(ChangeOp)


def _check_op(op: str) -> None:
    if op not in _CHANGE_OPS:
        ops = ", ".join(_CHANGE_OPS[:-1]) + " or " + _CHANGE_OPS[-1]
        raise SpecError(f"change op must be {ops}, got {op!r}")


@dataclass(frozen=True, slots=True)
class Change:
    """One row change of a commit: ``insert`` (only if absent), ``upsert`` or ``delete``, keyed
    by (datasource, kind, id). When one commit changes a row twice, the later change wins."""

    op: ChangeOp
    row: Row

    def __post_init__(self) -> None:
        _check_op(self.op)

    @property
    def key(self) -> str:
        return f"{self.row['kind']}{KEY_SEPARATOR}{self.row['id']}"


# A state of at most this many rows makes all its rows into dicts on the first ``of``.
_SMALL_STATE_ROWS = 2048
# Rows of one kind from which a state takes their dicts from the process's memo (fewer are
# made faster than looked up), and the most dicts the memo keeps (~1.9 KB each: 63 MB).
_MEMO_FROM_ROWS = 256
_MEMO_ROWS = 32_768
_ROW_MEMO: dict[tuple[Any, ...], Row] = {}


@dataclass(frozen=True, slots=True)
class ChangeBatch:
    """The same change of many rows, held as Arrow: rows as a transaction read them (e.g.
    the 10^4 lock rows a bulk publish releases, :meth:`PartitionState.table_of`), changed
    like one :class:`Change` per row, without a Python dict per row. Keys must be unique."""

    op: ChangeOp
    table: pa.Table

    def __post_init__(self) -> None:
        _check_op(self.op)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a transaction read: the log version, the scope, and the rows it asked for (as
    Arrow; each kind's rows become dicts the first time a decision asks for them)."""

    datasource: str
    version: int
    table: pa.Table
    scope: Scope = EVERYTHING
    _tables: dict[str, pa.Table] = field(default_factory=dict, compare=False, repr=False)
    _rows: dict[str, list[Row]] = field(default_factory=dict, compare=False, repr=False)
    # The fold's token in the memo of row dicts (see _memo_pylist); None: rows made anew.
    _memo_token: int | None = field(default=None, compare=False, repr=False)

    @property
    def few_rows(self) -> bool:
        """Whether the rows read are few enough that dicts cost less than Arrow calls."""
        return bool(self.table.num_rows <= _SMALL_STATE_ROWS)

    @property
    def rows(self) -> tuple[Row, ...]:
        """Every row read, as dicts (made on each call)."""
        return tuple(_pylist(self.datasource, self.table))

    def of(self, kind: str) -> list[Row]:
        """The rows of ``kind`` read, as dicts (made once per state)."""
        rows = self._rows.get(kind)
        if rows is not None:
            return rows
        if self.few_rows and not self._rows:
            # Every kind in one pass: a filter per kind costs more than the rows.
            for row in _pylist(self.datasource, self.table):
                self._rows.setdefault(row["kind"], []).append(row)
            return self._rows.setdefault(kind, [])
        table = self.table_of(kind)
        if self._memo_token is None:
            rows = _pylist(self.datasource, table)
        else:
            rows = _memo_pylist(self.datasource, table, self._memo_token)
        self._rows[kind] = rows
        return rows

    def table_of(self, kind: str) -> pa.Table:
        """The rows of ``kind`` read, as Arrow (for a :class:`ChangeBatch`)."""
        found = self._tables.get(kind)
        if found is None:
            table = self.table
            if table.num_rows:
                table = table.filter(pc.equal(table["kind"], kind))
            found = self._tables[kind] = table
        return found


class MetadataStore:
    """The metadata table at ``<warehouse>/_segmentlake/metadata_v2``. Opening writes nothing:
    the table is created by :meth:`create` or by the first commit."""

    def __init__(self, warehouse: str, *, storage_options: Mapping[str, str] | None = None):
        self.warehouse = warehouse.rstrip("/")
        self.path = f"{self.warehouse}/_segmentlake/metadata_v2"
        self.table = MetadataTable(
            self.path,
            schema=TABLE_SCHEMA,
            version=METADATA_VERSION,
            storage_options=storage_options,
        )
        self._folds: dict[str, PartitionFold] = {}
        self._file_counts: dict[str, int] = {}
        # Commits that lost the race for the next log version and went on top of the winners
        # (no decision redone): a measure of log contention.
        self.rebases = 0
        self._upkeep: threading.Thread | None = None
        self._upkeep_follower: MetadataTable | None = None
        self._cleaned = time.monotonic()  # when this process last cleaned the log
        # Per datasource: other processes' announcements that they keep losing (courtesy).
        self._waiting: dict[str, list[tuple[float, Scope]]] = {}
        self._announcements_seen: dict[str, int] = {}
        self._announced: set[str] = set()
        # Per datasource: when another process claimed the partition's next fold.
        self._fold_claims: dict[str, float] = {}
        self._lock = threading.RLock()
        self._created = False
        self._table_id: str | None = None  # the Delta table id what is kept here was read from

    # -- lifecycle -----------------------------------------------------------------------------

    def exists(self) -> bool:
        return self._created or self.table.exists()

    def create(self) -> None:
        if not self._created:
            self.table.create()
            self._created = True

    # -- reads ---------------------------------------------------------------------------------

    def read(
        self,
        datasource: str,
        condition: pc.Expression | None = None,
        *,
        scope: Scope = EVERYTHING,
    ) -> PartitionState:
        """The current rows of ``datasource`` within ``scope`` matching ``condition``, with the
        leases of the held rows among them (which join the scope), as of the latest version."""
        with self._lock:  # the rows of exactly that version
            version, fold = self._current(datasource, scope=scope)
            if scope.everything:
                table = fold.live()
            else:
                table = fold.within(scope.ranges, scope.keys, TIME_KINDS)
            if condition is not None:
                table = _filtered(table, condition)
            # The held rows' leases are renewed by their groups' own commits, which wrote
            # only the lease: those must be read too.
            held = Scope.of(keys=(lease_key(g) for g in _held_groups(table)))
            self._catch_up(datasource, fold, held)
            leases = fold.of_kinds((LEASE,))
        table, scope = _with_leases(table, leases, scope)
        return PartitionState(datasource, version, table, scope, _memo_token=fold.memo_token)

    def rows(
        self,
        datasource: str,
        condition: pc.Expression | None = None,
        *,
        kinds: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        fresh: bool = True,
        scope: Scope = EVERYTHING,
    ) -> list[Row]:
        """Current rows of ``datasource`` (of ``kinds``, when given: the fast way; within
        ``scope``, when given: faster still) matching ``condition``, outside any transaction,
        with only ``columns`` (and ``datasource``) when given. ``fresh=False`` answers from
        what this process last read (a hint, e.g. the scope a transaction is about to read,
        which its read then checks)."""
        table = self.arrow(
            datasource, condition, kinds=kinds, columns=columns, fresh=fresh, scope=scope
        )
        return _pylist(datasource, table)

    def arrow(
        self,
        datasource: str,
        condition: pc.Expression | None = None,
        *,
        kinds: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        fresh: bool = True,
        scope: Scope = EVERYTHING,
    ) -> pa.Table:
        """:meth:`rows` as an Arrow table (no Python object per row), leases resolved (when
        ``expires_ms`` is among the columns: the only one a lease changes)."""
        wanted = None if kinds is None else tuple(sorted(kinds))
        resolve = columns is None or "expires_ms" in columns
        with self._lock:
            _, fold = self._current(datasource, fresh=fresh, scope=scope)
            if not scope.everything:
                table = fold.within(scope.ranges, scope.keys, TIME_KINDS, kinds=wanted)
            else:
                table = fold.live() if wanted is None else fold.of_kinds(wanted)
            leases = fold.of_kinds((LEASE,)) if resolve else None
        if condition is not None:
            table = _filtered(table, condition)
        if leases is not None:
            table, _ = _with_leases(table, leases, EVERYTHING)
        if columns is not None:
            table = table.select([c for c in columns if c != PARTITION_COLUMN])
        return table

    def unused_last_read(self, datasource: str, kind: str, scope: Scope) -> pa.Table:
        """The live rows of ``kind`` in ``scope`` whose ``used`` flag is false, as this
        process last read the partition (no read: call it inside a decision whose read
        covered ``scope``). A numpy mask kept with the rows: no Arrow pass over the rows in
        scope when, as usual, none is unused."""
        with self._lock:
            fold = self._folds.get(datasource)
            if fold is None:
                return FOLD_SCHEMA.empty_table()
            return fold.within(scope.ranges, scope.keys, TIME_KINDS, kinds=[kind], unused_only=True)

    def last_read(
        self, datasource: str, kinds: Sequence[str], columns: Sequence[str]
    ) -> pa.Table | None:
        """The live rows of ``kinds`` (``columns`` only) as this process last read the
        partition, making no read at all: None when it never read it. A hint for work done
        before a transaction (whose own read checks it), never for a decision."""
        with self._lock:
            fold = self._folds.get(datasource)
            if fold is None or fold.empty:
                return None
            table = fold.of_kinds(tuple(sorted(kinds)))
        return table.select(list(columns))

    def present(self, datasource: str, kind: str, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` with a current, undeleted row of ``kind`` as this process last
        read the partition (no refresh: a transaction's read just did it)."""
        with self._lock:
            fold = self._folds.get(datasource)
            if fold is None:
                return set()
            wanted = list(ids)
            # A pending allocation's commit names its key in its write scope (rows_scope);
            # of other timed kinds only the time is known: read whatever is deferred.
            keyed = kind not in TIME_KINDS or kind == PENDING
            named = Scope.of(keys=(f"{kind}:{i}" for i in wanted))
            self._catch_up(datasource, fold, named if keyed else EVERYTHING)
            found = fold.present(f"{kind}{KEY_SEPARATOR}{i}" for i in wanted)
        return {key.split(KEY_SEPARATOR, 1)[1] for key in found}

    def datasources(self) -> list[str]:
        """Every partition with rows, sorted (segmentlake's own start with ``_``)."""
        if not self.exists():
            return []
        with self._lock:
            self.table.refresh()
            return sorted({f.datasource for f in self.table.files() if f.datasource})

    def version(self) -> int:
        return self.table.version() if self.exists() else -1

    def _current(
        self, datasource: str, *, fresh: bool = True, scope: Scope = EVERYTHING
    ) -> tuple[int, PartitionFold]:
        """The latest version and the partition's fold, current within ``scope`` (files read
        once per process); with ``fresh=False``, what this process last read, if it read the
        partition before.

        Files other processes committed are read only when their commit's write scope
        overlaps ``scope`` (or is unknown); the others wait, *deferred*, until a read needs
        them, so a writer on one time chunk does not read every other chunk's commits."""
        if not self.exists():
            return -1, PartitionFold(FOLD_SCHEMA)
        with self._lock:
            fold = self._folds.get(datasource)
            if not fresh and fold is not None and not fold.stale(TOMBSTONE_RETENTION_MS):
                return fold.max_rev, fold
            version = self.table.refresh()
            if self.table.table_id != self._table_id:
                if self._table_id is not None:
                    self._forget_another_table()
                    fold = None
                self._table_id = self.table.table_id
            self._note_announcements(datasource, version)
            if fold is None or fold.stale(TOMBSTONE_RETENTION_MS):
                fold = self._folds[datasource] = PartitionFold(FOLD_SCHEMA)
            files = [f for f in self.table.files() if f.datasource == datasource]
            self._file_counts[datasource] = len(files)
            present = {f.path for f in files}
            new = [f for f in files if f.path not in fold.applied and f.path not in fold.deferred]
            for file in new:
                self._classify(datasource, fold, file)
            fold.forget_missing(present)
            if fold.deferred_since is not None and (
                time.monotonic() - fold.deferred_since > MAX_DEFERRAL_S
            ):
                scope = EVERYTHING  # deletions' tombstones must meet what they delete
            applied = self._catch_up(datasource, fold, scope)
            fold.refreshed = time.monotonic()
            if applied:
                fold.forget_tombstones(now_ms() - TOMBSTONE_RETENTION_MS)
            return version, fold

    def _forget_another_table(self) -> None:
        """Drop what was read from an earlier table at this path: the warehouse's metadata
        was deleted and created again under this process (its versions start over, so
        nothing kept by version or by file holds)."""
        logger.warning(
            "metadata table %s was deleted and created again; reading it anew", self.path
        )
        self._folds.clear()
        self._file_counts.clear()
        self._waiting.clear()
        self._announcements_seen.clear()
        self._announced.clear()
        self._fold_claims.clear()

    def _classify(self, datasource: str, fold: PartitionFold, file: DataFile) -> None:
        """Defer a new file with the write scope its commit recorded, or, for an upkeep's
        fold of files this process has all seen, adopt it without reading (it holds nothing
        newer than them)."""
        origin = self.table.origin(file.path)
        record = origin.record if origin is not None else None
        if origin is None or record is None or record.get("ds") != datasource:
            fold.defer(file.path, EVERYTHING)
        elif record.get("op") == "upkeep":
            # The fold holds the latest versions of the files it replaced. Those this
            # process applied it has (or newer); those it deferred it still owes, so the
            # fold is owed for what they wrote, and read only when a read needs that.
            removed = set(origin.removed)
            if removed <= fold.applied | set(fold.deferred):
                owed = [fold.deferred[p] for p in removed if p in fold.deferred]
                if owed:
                    fold.defer(file.path, functools.reduce(operator.or_, owed))
                else:
                    fold.applied.add(file.path)
            else:
                fold.defer(file.path, EVERYTHING)
        else:
            fold.defer(file.path, Scope.from_json(record.get("writes")))

    def _catch_up(self, datasource: str, fold: PartitionFold, scope: Scope) -> bool:
        """Apply the deferred files whose write scope overlaps ``scope``; whether any was."""
        due = fold.due(scope)
        if not due:
            return False
        if not self._apply_files(fold, due):
            # Vacuumed meanwhile (folded away long ago): read the partition afresh.
            logger.info("deferred metadata files vanished; reading the partition again")
            fold.reset()
            for file in self.table.files():
                if file.datasource == datasource:
                    fold.defer(file.path, EVERYTHING)
            if not self._apply_files(fold, list(fold.deferred)):
                raise CommitStateUnknown("metadata files vanished while they were read")
        return True

    def _apply_files(self, fold: PartitionFold, paths: Sequence[str]) -> bool:
        """Read and fold ``paths`` in; False (nothing folded) when one is gone from storage
        (vacuumed after an upkeep folded it away)."""
        try:
            if fold.empty:
                # A cold start: a full fold's deletions delete nothing here; unread, they
                # leave a third of the rows after a big publish (locks, allocations).
                reads = [
                    self.table.read_live_rows(path, dictionary=_DICTIONARY_COLUMNS)
                    for path in paths
                ]
                if any(r.skipped_deletions for r in reads):
                    fold.tombstones_skipped_ms = now_ms()
                loaded = [(path, r.rows) for path, r in zip(paths, reads, strict=True)]
            else:
                loaded = [
                    (path, self.table.read_file(path, dictionary=_DICTIONARY_COLUMNS))
                    for path in paths
                ]
        except FileNotFoundError:
            return False
        # Oldest first, so each file's versions are newer than what is folded.
        loaded.sort(key=lambda item: _min_rev(item[1]))
        for path, rows in loaded:
            fold.apply(path, rows)
        return True

    def courtesy(self, datasource: str, scope: Scope, typical_s: float) -> float:
        """How long a new transaction on ``scope`` should wait before it reads: one to three
        transactions' time when another process announced lately that it keeps losing
        within ``scope`` (:meth:`announce_waiting`), else 0. The writer that won last starts
        its next transaction before the losers have even learnt they lost, so without a
        word from them it keeps winning and they starve (one of four writers on a hot chunk
        made 116 of 120 commits). Writers on their own chunks never wait."""
        now = time.monotonic()
        with self._lock:
            waiting = self._waiting.get(datasource, ())
            recent = [s for t, s in waiting if now - t < SHARED_WINDOW_S]
        if not any(s.overlaps(scope) for s in recent):
            return 0.0
        return random.uniform(typical_s, 3 * typical_s)

    def announce_waiting(self, datasource: str, scope: Scope, commit_id: str) -> None:
        """Tell the other writers that transaction ``commit_id`` keeps losing within
        ``scope``: a commit of no rows (nobody conflicts with it) whose record they see as
        they follow the log, and answer with :meth:`courtesy`."""
        record: dict[str, Any] = {
            "id": f"waiting:{commit_id}",
            "op": "waiting",
            "ds": datasource,
            "neutral": True,
            "wants": scope.to_json(),
        }
        with self._lock:
            self._announced.add(record["id"])
        self.create()
        self._commit_empty(record)

    def _note_announcements(self, datasource: str, version: int) -> None:
        """Note other processes' announcements among the commits since the last look (their
        records are already in the follower's memory): losers waiting on a scope, and claims
        of the partition's fold (and the folds that end them)."""
        seen = self._announcements_seen.get(datasource, version)
        self._announcements_seen[datasource] = version
        if version <= seen:
            return
        now = time.monotonic()
        found = []
        for _, record in self.table.records(seen, version):
            if not record or record.get("ds") != datasource or record.get("id") in self._announced:
                continue
            if record.get("op") == "waiting":
                found.append(Scope.from_json(record.get("wants")))
            elif record.get("op") == "upkeep_claim":
                self._fold_claims[datasource] = now
            elif record.get("op") == "upkeep":
                self._fold_claims.pop(datasource, None)
        if found:
            kept = [
                (t, s) for t, s in self._waiting.get(datasource, ()) if now - t < SHARED_WINDOW_S
            ]
            self._waiting[datasource] = kept[-16:] + [(now, s) for s in found]

    # -- the conditional commit ----------------------------------------------------------------

    def commit(
        self,
        state: PartitionState,
        changes: Sequence[Change | ChangeBatch],
        *,
        commit_id: str,
        operation: str,
    ) -> int | None:
        """Commit ``changes`` decided on ``state``; the version it landed as (None: the changes
        change nothing, nothing committed). Raises :class:`Conflict` when a commit since
        ``state`` wrote within what ``state`` read (decide again)."""
        effective, batches, writes = self._effective(state, changes)
        if not effective and not batches:
            return None
        reads = state.scope | writes  # a write is a read: it relies on the row's old version
        rows = _versions(effective, batches, rev=state.version + 1)
        self.create()
        add = self.table.write_rows(state.datasource, rows)
        record: dict[str, Any] = {
            "id": commit_id,
            "op": operation,
            "ds": state.datasource,
            "writes": writes.to_json(),
        }
        segment_rows = pc.equal(rows["kind"], SEGMENT)
        if not pc.any(segment_rows).as_py():
            # The visible timeline is the segment records': a sync, or a reader asking
            # whether the visible table is current, passes over this commit.
            record["segments"] = False
        else:
            # A record deleted (a kill) leaves no trace of the time it covered: a sync that
            # knows the records before this commit only from those after it must see all.
            deleted = pc.and_(segment_rows, rows["deleted"])
            record["segments_deleted"] = int(pc.sum(pc.cast(deleted, pa.int64())).as_py() or 0)
        based_on = state.version
        lost = 0
        while True:
            crash_point(f"commit.{operation}.before_log")
            try:
                version = self.table.commit([add], record=record, base=based_on)
            except LostRace:
                self.rebases += 1
                lost += 1
                # A short jittered pause: writers that lost together do not all retry in the
                # same instant (each attempt costs a log read and a commit attempt).
                time.sleep(random.uniform(0, REBASE_PAUSE_S * 2 ** min(lost, 4)))
                latest = self.table.refresh()
                self._check_winners(state.datasource, reads, based_on, latest, operation)
                based_on = latest
                continue
            crash_point(f"commit.{operation}.after_log")
            logger.debug("commit %s (%s) landed as version %d", commit_id, operation, version)
            with self._lock:  # our own file needs no reading back
                fold = self._folds.get(state.datasource)
                if fold is not None:
                    fold.apply(add.path, _dictionary(rows, fold.schema))
            self._after_commit(state.datasource, version)
            return version

    # -- upkeep -------------------------------------------------------------------------------

    def _after_commit(self, datasource: str, version: int) -> None:
        """Start the upkeep this commit makes due, in the background: fold the partition's
        files when they are many, checkpoint every CHECKPOINT_EVERY versions, clean the log
        and vacuum every CLEANUP_EVERY."""
        jobs = []
        # The partition's files at exactly this version (the follower applied this commit
        # on top of the version it read). A fold is one process's work: the commit that
        # brings the partition to UPKEEP_FILES starts it, and only a partition left at twice
        # that (a fold that failed) makes every commit try. Several writers each folding
        # the same files, all but one in vain, cost every writer a large share of its CPU.
        files = sum(1 for f in self.table.files() if f.datasource == datasource)
        if files == UPKEEP_FILES or files >= 2 * UPKEEP_FILES:
            self._note_announcements(datasource, version)
            claimed = self._fold_claims.get(datasource)
            if claimed is None or time.monotonic() - claimed > FOLD_CLAIM_S:
                jobs.append(lambda: self._claimed_upkeep(datasource))
        if version % CHECKPOINT_EVERY == 0 and self._checkpoint_due():
            # Also clean up when this process has not for a while: the commit landing on a
            # multiple of CLEANUP_EVERY may find its upkeep thread busy and skip it, and at
            # high commit rates with folds that happened every time.
            overdue = time.monotonic() - self._cleaned > CLEANUP_OVERDUE_S
            cleanup = version % CLEANUP_EVERY == 0 or overdue
            jobs.append(lambda: self.checkpoint(cleanup=cleanup))
        if not jobs:
            return
        with self._lock:
            if self._upkeep is not None and self._upkeep.is_alive():
                return  # the running one picks up the next due work at a later commit
            self._upkeep = start_daemon(_run_all, args=(jobs,), name="segmentlake-upkeep")

    def _checkpoint_due(self) -> bool:
        age = self.table.log.last_checkpoint_age_s()
        return age is None or age >= CHECKPOINT_MIN_INTERVAL_S

    def settle(self, timeout_s: float = 60.0) -> None:
        """Wait for the background upkeep this process started, if any, to finish."""
        running = self._upkeep
        if running is not None:
            running.join(timeout_s)

    def checkpoint(self, *, cleanup: bool = False) -> None:
        """Write a checkpoint of the latest version (readers replay fewer commits); with
        ``cleanup``, also delete log entries past retention and vacuum removed files."""
        table = self.table.log.table()
        table.create_checkpoint()
        if cleanup:
            self._cleaned = time.monotonic()
            # Not delta-rs's cleanup_metadata: it keeps the table's logRetentionDuration
            # (days), and a busy metadata table commits 10^5 times a day; every refresh lists
            # the log, so its length is every transaction's cost.
            deleted = self.table.log.clean_log(older_than_ms=now_ms() - LOG_RETENTION_MS)
            logger.debug("metadata log cleanup: %d entries deleted", deleted)
            # full=True: delta-rs's default ("lite") vacuum only looks at tombstones the
            # snapshot still holds, which are exactly the ones not yet past retention, so it
            # never deletes the folded-away files. On a table loaded after the cleanup: the
            # snapshot above reads log entries the cleanup just deleted, and delta-rs fails
            # on them ("File not found"), so no file was ever vacuumed.
            load_through_gaps(
                lambda: self.table.log.table().vacuum(
                    dry_run=False, enforce_retention_duration=True, full=True
                )
            )

    def _claimed_upkeep(self, datasource: str) -> UpkeepReport | None:
        """:meth:`upkeep`, announced first by a commit of no rows: the other writers of the
        partition see the claim as they follow the log and leave the fold to this process
        for FOLD_CLAIM_S. On a busy partition a fold takes seconds of a background thread,
        long enough for every writer to start the same fold, all but one in vain."""
        record: dict[str, Any] = {
            "id": f"upkeep_claim:{uuid.uuid4()}",
            "op": "upkeep_claim",
            "ds": datasource,
            "neutral": True,
        }
        with self._lock:
            self._announced.add(record["id"])
        self._commit_empty(record)
        return self.upkeep(datasource)

    def _commit_empty(self, record: dict[str, Any]) -> None:
        """Commit a record with no rows (nobody conflicts with it), on top of whatever
        landed meanwhile. Best effort: an announcement or claim that does not land costs
        fairness or a duplicated fold, never a transaction."""
        for _ in range(10):
            try:
                self.table.commit([], record=record, base=self.table.refresh())
                return
            except LostRace:
                time.sleep(random.uniform(0, REBASE_PAUSE_S))
            except Exception:
                logger.warning("could not commit %s", record.get("op"), exc_info=True)
                return

    def upkeep(self, datasource: str, *, min_files: int = UPKEEP_FILES) -> UpkeepReport | None:
        """Fold ``datasource``'s files into one when it has at least ``min_files`` (the
        current version of each row; deletions dropped), as one commit that changes no row
        (``dataChange=false``: readers and other writers never conflict with it). None when
        there was nothing to do or another process did it first."""
        table = self._upkeep_table()
        if not table.exists():
            return None
        table.refresh()
        files = [f for f in table.files() if f.datasource == datasource]
        if len(files) < min_files:
            return None
        files, full = _to_fold(files)
        live = self._folded(table, datasource, files, full=full)
        adds = (
            [self._write_fold(table, datasource, _plain(live), full=full)] if live.num_rows else []
        )
        record = {"id": f"upkeep:{uuid.uuid4()}", "op": "upkeep", "ds": datasource, "neutral": True}
        while True:
            try:
                version = table.commit(adds, files, record=record, data_change=False)
                break
            except LostRace:
                latest_before = table.version()
                latest = table.refresh()
                if any(
                    (r or {}).get("op") == "upkeep" and (r or {}).get("ds") == datasource
                    for _, r in table.records(latest_before, latest)
                ):
                    return None  # another process folded these files first
        self._adopt_folded(datasource, files, adds)
        logger.info(
            "metadata upkeep of %s: %d files folded into %d (%d rows), version %d",
            datasource,
            len(files),
            len(adds),
            live.num_rows,
            version,
        )
        return UpkeepReport(datasource, len(files), live.num_rows, version)

    @staticmethod
    def _write_fold(
        table: MetadataTable, datasource: str, rows: pa.Table, *, full: bool
    ) -> AddAction:
        if not full:  # its deletions may delete rows of files left out: every reader needs them
            return table.write_rows(datasource, rows)
        deleted = pc.fill_null(rows["deleted"], False)
        return table.write_rows(
            datasource,
            rows.filter(pc.invert(deleted)),
            full_fold_deletions=rows.filter(deleted),
        )

    def _upkeep_table(self) -> MetadataTable:
        """The upkeep's own log follower (a fold must not hold the transactions' lock for
        the files it reads), kept between folds so that each follows only the new entries."""
        with self._lock:
            if self._upkeep_follower is None:
                self._upkeep_follower = MetadataTable(
                    self.path,
                    schema=TABLE_SCHEMA,
                    version=METADATA_VERSION,
                    storage_options=self.table.storage_options,
                )
            return self._upkeep_follower

    def _folded(
        self, table: MetadataTable, datasource: str, files: list[DataFile], *, full: bool
    ) -> pa.Table:
        """The latest version of every row in ``files``. A full fold (every file of the
        partition) leaves deletions past retention out, and comes from this process's fold
        when that has applied every file (no file read: its other rows are versions of newer
        files, which stay in the table). A partial fold keeps every deletion: the versions
        they delete may live in the file left out."""
        cutoff = now_ms() - TOMBSTONE_RETENTION_MS if full else _KEEP_EVERY_TOMBSTONE
        if full:
            with self._lock:
                mine = self._folds.get(datasource)
                wanted = {f.path for f in files}
                if mine is not None and wanted <= mine.applied | set(mine.deferred):
                    self._catch_up(datasource, mine, EVERYTHING)
                if mine is not None and wanted <= mine.applied and _has_every_deletion(mine):
                    return mine.without_old_tombstones(cutoff)
        return _latest_versions([table.read_file(f.path) for f in files], cutoff_ms=cutoff)

    def _adopt_folded(
        self, datasource: str, folded: Sequence[DataFile], adds: Sequence[AddAction]
    ) -> None:
        """The file the upkeep wrote holds nothing newer than the files it folded: a fold of
        this process that has applied all of them needs not read it back (10^5 rows)."""
        with self._lock:
            fold = self._folds.get(datasource)
            if fold is not None and {f.path for f in folded} <= fold.applied:
                fold.applied.update(add.path for add in adds)

    def _check_winners(
        self, datasource: str, reads: Scope, after: int, upto: int, operation: str
    ) -> None:
        for version, record in self.table.records(after, upto):
            if version == 0:
                continue  # the table's creation: it wrote no row
            if record is None or record.get("foreign"):
                raise Conflict(f"{operation}: version {version} was written by another writer")
            if record.get("ds") != datasource or record.get("neutral"):
                continue
            if Scope.from_json(record.get("writes")).overlaps(reads):
                raise Conflict(
                    f"{operation} on {datasource!r}: {record.get('op')} (version {version}) "
                    "changed what it read"
                )

    def _effective(
        self, state: PartitionState, changes: Sequence[Change | ChangeBatch]
    ) -> tuple[list[Change], list[ChangeBatch], Scope]:
        """The changes that change something, and their write scope: later changes of a row
        win; an insert of a present row and a delete of an absent one drop out."""
        latest: dict[str, Change] = {}
        batches: list[_KeyedBatch] = []
        for change in _small_batches_as_rows(state.datasource, changes):
            if isinstance(change, ChangeBatch):
                batch = _KeyedBatch(change)
                for key in batch.keyset.intersection(latest):
                    del latest[key]
                for earlier in batches:
                    earlier.drop(batch.keyset)
                batches.append(batch)
                continue
            if change.row.get("datasource", state.datasource) != state.datasource:
                raise SpecError(
                    f"a change of datasource {change.row['datasource']!r} in a transaction "
                    f"of {state.datasource!r}"
                )
            key = change.key
            latest.pop(key, None)
            latest[key] = change
            for earlier in batches:
                earlier.drop((key,))
        tables = [b.batch for b in batches]
        writes = _scope_of(latest.values(), tables)
        keys: dict[str, list[str]] = {}
        for key, change in latest.items():
            keys.setdefault(change.row["kind"], []).append(key)
        for batch in batches:
            for kind, of_kind in batch.kept_by_kind().items():
                keys.setdefault(kind, []).extend(of_kind)
        present = self._present(state.datasource, keys, writes)
        effective = [
            ch
            for key, ch in latest.items()
            if ch.op == "upsert"
            or (ch.op == "insert" and key not in present)
            or (ch.op == "delete" and key in present)
        ]
        kept = [b.effective(present) for b in batches]
        kept_batches = [b for b in kept if b.table.num_rows]
        dropped = len(effective) < len(latest) or any(
            a.table.num_rows < b.table.num_rows for a, b in zip(kept, tables, strict=True)
        )
        if dropped:  # (the scope of 10^4 rows costs a tenth of a second)
            writes = _scope_of(effective, kept_batches)
        return effective, kept_batches, writes

    def _present(self, datasource: str, keys: Mapping[str, list[str]], writes: Scope) -> set[str]:
        """Which of ``keys`` (grouped by kind, distinct) name a row that is not deleted."""
        with self._lock:
            fold = self._folds.get(datasource)
            if fold is None:
                return set()
            self._catch_up(datasource, fold, writes)
            return fold.present_of_kinds(keys)


# A batch of at most this many rows is committed as row changes: Arrow's per-call overhead
# (some 25 compute calls a batch) cost a one-segment publish a quarter of its time.
_SMALL_BATCH_ROWS = 64


def _small_batches_as_rows(
    datasource: str, changes: Sequence[Change | ChangeBatch]
) -> Iterator[Change | ChangeBatch]:
    for change in changes:
        if isinstance(change, ChangeBatch) and change.table.num_rows <= _SMALL_BATCH_ROWS:
            rows = _pylist(datasource, change.table)
            if len({(r["kind"], r["id"]) for r in rows}) < len(rows):
                raise SpecError("a change batch names a row twice; give each row once")
            yield from (Change(change.op, row) for row in rows)
        else:
            yield change


class _KeyedBatch:
    """A :class:`ChangeBatch` with its rows' keys, and those a later change of the same
    commit took over."""

    def __init__(self, batch: ChangeBatch) -> None:
        self.batch = batch
        self.keys: list[str] = key_column(batch.table).to_pylist() if batch.table.num_rows else []
        self.keyset = set(self.keys)
        if len(self.keyset) < len(self.keys):
            raise SpecError("a change batch names a row twice; give each row once")
        self._dropped: set[str] = set()

    def drop(self, keys: Iterable[str]) -> None:
        self._dropped.update(k for k in keys if k in self.keyset)

    def kept_by_kind(self) -> dict[str, list[str]]:
        """The keys no later change took over, grouped by kind."""
        table = self.batch.table
        if not table.num_rows:
            return {}
        kinds = table["kind"].unique().to_pylist()
        if len(kinds) == 1 and not self._dropped:
            return {kinds[0]: self.keys}
        grouped: dict[str, list[str]] = {}
        for kind, key in zip(table["kind"].to_pylist(), self.keys, strict=True):
            if key not in self._dropped:
                grouped.setdefault(kind, []).append(key)
        return grouped

    def effective(self, present: set[str]) -> ChangeBatch:
        """The rows whose change changes something and no later change took over."""
        op = self.batch.op
        if op == "upsert" and not self._dropped:
            return self.batch
        mask = [
            k not in self._dropped and (op == "upsert" or (k in present) == (op == "delete"))
            for k in self.keys
        ]
        if all(mask):
            return self.batch
        return ChangeBatch(op, self.batch.table.filter(pa.array(mask, pa.bool_())))


def _scope_of(changes: Iterable[Change], batches: Sequence[ChangeBatch]) -> Scope:
    """The write scope of row changes and batches, merged once."""
    ranges, keys = scope_of_rows(ch.row for ch in changes)
    for batch in batches:
        more_ranges, more_keys = scope_of_table(batch.table)
        ranges += more_ranges
        keys += more_keys
    return Scope.of(ranges, keys)


@dataclass(frozen=True, slots=True)
class UpkeepReport:
    """One upkeep of a partition: files folded into one, rows kept, the version it made."""

    datasource: str
    files_before: int
    rows_kept: int
    version: int | None


class Conflict(Exception):
    """A commit since the transaction's read wrote within what it read: decide again."""


class ScopeTooNarrow(Exception):
    """A decision found rows that depend on rows outside what its transaction read: read a
    wider scope and decide again."""


def now_ms() -> int:
    """Wall-clock epoch milliseconds: the clock of leases, versions and row updates."""
    return int(time.time() * 1000)


TABLE_SCHEMA_FILE = pa.schema([f for f in TABLE_SCHEMA if f.name != PARTITION_COLUMN])
# What a partition's rows look like in memory: long repeated strings dictionary-encoded.
FOLD_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in _DICTIONARY_COLUMNS else f
        for f in TABLE_SCHEMA_FILE
    ]
)


def _run_all(jobs: list[Any]) -> None:
    for job in jobs:
        try:
            job()
        except Exception:  # upkeep is best effort: the next due commit tries again
            logger.warning("metadata upkeep failed", exc_info=True)


_KEEP_EVERY_TOMBSTONE = -(2**62)
# A partition's largest file (its last full fold) is folded again only when the versions
# accumulated beside it reach this share of its rows: the upkeep's cost follows what changed,
# not the partition's size (10^5 segment records next to a stream of one-row heartbeats).
FULL_FOLD_SHARE = 0.25
TIER_RATIO = 2


def _to_fold(files: list[DataFile]) -> tuple[list[DataFile], bool]:
    """The files the upkeep folds, and whether that is all of them (a full fold).

    Below the full fold, folds are size-tiered: the smallest files, up to one that holds
    more than TIER_RATIO times what they add up to. Folding every small file into the last
    partial fold rewrote that fold each time (with many writers the upkeep took a large share
    of every process's CPU); tiered, a row is rewritten a logarithmic number of times."""
    base = max(files, key=lambda f: f.num_records)
    rest = sorted((f for f in files if f is not base), key=lambda f: f.num_records)
    if not rest or sum(f.num_records for f in rest) >= FULL_FOLD_SHARE * base.num_records:
        return files, True  # (one file alone is rewritten: without deletions past retention)
    taken: list[DataFile] = []
    total = 0
    for file in rest:
        if len(taken) >= 2 and file.num_records > TIER_RATIO * total:
            break
        taken.append(file)
        total += file.num_records
    return taken, False


def _latest_versions(tables: Sequence[pa.Table], *, cutoff_ms: int) -> pa.Table:
    """The latest version of each row in ``tables`` (one pass: the highest ``rev`` per key;
    equal revs are the same version), without deletions older than ``cutoff_ms``. What a
    fold writes; folding file by file into a PartitionFold cost several ms a file."""
    rows = pa.concat_tables(tables).combine_chunks() if tables else TABLE_SCHEMA_FILE.empty_table()
    if not rows.num_rows:
        return rows
    keys = key_column(rows).to_pylist()
    revs = rows["rev"].to_pylist()
    best: dict[str, int] = {}
    for i, (key, rev) in enumerate(zip(keys, revs, strict=True)):
        held = best.get(key)
        if held is None or revs[held] <= rev:
            best[key] = i
    latest = rows.take(pa.array(sorted(best.values()), pa.int64()))
    deleted = pc.fill_null(latest["deleted"], False)
    old = pc.and_(deleted, pc.less(pc.fill_null(latest["updated_ms"], 0), cutoff_ms))
    return latest.filter(pc.invert(old))


def _has_every_deletion(fold: PartitionFold) -> bool:
    """Whether ``fold`` holds every deletion still within retention (a cold read that left
    a full fold's deletions out lacks them until they age past it)."""
    skipped = fold.tombstones_skipped_ms
    return skipped is None or now_ms() - skipped > TOMBSTONE_RETENTION_MS


def _min_rev(table: pa.Table) -> int:
    return int(pc.min(table["rev"]).as_py()) if table.num_rows else -1


def _with_leases(table: pa.Table, leases: pa.Table, scope: Scope) -> tuple[pa.Table, Scope]:
    """``table`` with each held row's ``expires_ms`` extended to its group's lease (from
    ``leases``, the partition's lease rows), and ``scope`` with those leases: a renewal
    changes what the reader relied on."""
    if not table.num_rows:
        return table, scope
    groups = _held_groups(table)
    if not groups:
        return table, scope
    scope = scope | Scope.of(keys=(lease_key(g) for g in groups))
    mine = leases.filter(pc.is_in(leases["id"], value_set=pa.array(groups)))
    if not mine.num_rows:
        return table, scope
    until = dict(zip(mine["id"].to_pylist(), mine["expires_ms"].to_pylist(), strict=True))
    kinds = table["kind"].to_pylist()
    owners = table["group_id"].to_pylist()
    expires = table["expires_ms"].to_pylist()
    resolved = [
        max(e or 0, until[g]) if k in LEASED_KINDS and until.get(g) is not None else e
        for k, g, e in zip(kinds, owners, expires, strict=True)
    ]
    index = table.schema.get_field_index("expires_ms")
    return table.set_column(index, "expires_ms", pa.array(resolved, pa.int64())), scope


def _filtered(table: pa.Table, condition: pc.Expression) -> pa.Table:
    """``table``'s rows matching ``condition``, evaluated on this thread. ``Table.filter``
    runs an Acero plan on Arrow's thread pool; for the few rows a transaction reads, the hand
    offs cost more than the filter, and with several processes per core they cost a scheduler
    slice each."""
    if not table.num_rows:
        return table
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("filter", acero.FilterNodeOptions(condition)),
        ]
    )
    return plan.to_table(use_threads=False)


def _held_groups(table: pa.Table) -> list[str]:
    """The task groups holding rows of ``table`` (locks, compaction reservations)."""
    if not table.num_rows:
        return []
    held = pc.is_in(table["kind"], value_set=_LEASED_KIND_VALUES)
    if not pc.any(held).as_py():
        return []
    return sorted({g for g in pc.filter(table["group_id"], held).to_pylist() if g})


_LEASED_KIND_VALUES = pa.array(sorted(LEASED_KINDS))


def _dictionary(table: pa.Table, like: pa.Schema) -> pa.Table:
    """``table`` with the columns that ``like`` keeps dictionary-encoded encoded so."""
    columns = [
        table.column(f.name).cast(f.type) if f.name in _DICTIONARY_COLUMNS else table.column(f.name)
        for f in like
    ]
    return pa.Table.from_arrays(columns, names=like.names)


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with dictionary-encoded columns decoded (files keep the table's types)."""
    columns = [
        c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns
    ]
    return pa.Table.from_arrays(columns, names=table.column_names)


def _pylist(datasource: str, table: pa.Table) -> list[Row]:
    """``table``'s rows as dicts with the partition's ``datasource``; built column by column
    (``Table.to_pylist`` indexes a dict per cell: twice as slow for 10^5 lock rows)."""
    if not table.num_rows:
        return []
    if table.num_rows < 256:  # a call per column costs more than a few rows
        return [{"datasource": datasource, **row} for row in table.to_pylist()]
    names = ("datasource", *table.column_names)
    columns = [[datasource] * table.num_rows, *(c.to_pylist() for c in table.columns)]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _memo_pylist(datasource: str, table: pa.Table, token: int) -> list[Row]:
    """:func:`_pylist` of ``table``, rows of the fold ``token`` names, taking the dicts of
    row versions made before from the process's bounded memo (a row version is its (kind,
    id, rev); ``expires_ms`` too, which a lease changes where it is read). A publish into
    busy chunks reads the same 10^4 segment records on every attempt of every append, and
    making their dicts was the largest share of its decision (docs/decisions.md,
    "Measurements behind the code"). The dicts are shared by every state that read those
    versions: decisions copy a row to change it, never assign into one."""
    if not _MEMO_FROM_ROWS <= table.num_rows <= _MEMO_ROWS:
        # More rows than the memo holds (a cleanup of 10^5 segments) would fill it past its
        # bound and keep every one of them alive after the read.
        return _pylist(datasource, table)
    columns = (table[c].to_pylist() for c in ("kind", "id", "rev", "expires_ms"))
    keys = list(zip(itertools.repeat(token), *columns))
    memo = _ROW_MEMO
    rows: list[Row | None] = [memo.get(k) for k in keys]
    missing = [i for i, row in enumerate(rows) if row is None]
    if missing:
        made = _pylist(datasource, table.take(pa.array(missing, pa.int64())))
        if len(memo) + len(made) > _MEMO_ROWS:
            memo.clear()  # versions of rows long gone would otherwise pile up
            forget_row_dicts()  # and would be kept alive there
        for i, row in zip(missing, made, strict=True):
            rows[i] = memo[keys[i]] = row
    return rows  # type: ignore[return-value]  # every None was filled


def _versions(changes: Sequence[Change], batches: Sequence[ChangeBatch], *, rev: int) -> pa.Table:
    """The new row versions of ``changes`` and ``batches`` as a table of the file schema."""
    parts = []
    if changes:
        # Arrow picks the schema's columns from the row dicts (building a Python dict per row
        # per column was a visible share of a large publish).
        table = pa.Table.from_pylist([c.row for c in changes], schema=TABLE_SCHEMA_FILE)
        parts.append(_stamped(table, [c.op == "delete" for c in changes], rev))
    for batch in batches:
        table = _plain(batch.table.select(TABLE_SCHEMA_FILE.names)).cast(TABLE_SCHEMA_FILE)
        parts.append(_stamped(table, [batch.op == "delete"] * table.num_rows, rev))
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _stamped(table: pa.Table, deletes: list[bool], rev: int) -> pa.Table:
    """``table``'s rows as versions ``rev``, ``deletes`` marking the deletions."""
    deleted = pa.array(deletes, pa.bool_())
    updated = table["updated_ms"]
    if any(deletes):  # a tombstone's retention starts now
        updated = pc.if_else(deleted, pa.scalar(now_ms(), updated.type), updated)
    revs = pa.array(np.full(len(deletes), rev, dtype=np.int64), TABLE_SCHEMA_FILE.field("rev").type)
    for name, column in (("rev", revs), ("deleted", deleted), ("updated_ms", updated)):
        table = table.set_column(TABLE_SCHEMA_FILE.get_field_index(name), name, column)
    return table
