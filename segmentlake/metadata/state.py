"""The current rows of one metadata partition, folded from row versions.

The metadata table is written like a log: a commit never rewrites a file, it adds one file
holding the new version of each row it changes (a delete is a version with ``deleted``
set). Every version carries ``rev``, the log version its commit read plus one; a key's later
versions always have higher revs (a commit that changes a key has read it, so any commit
changing it in between would have conflicted), so a row's current version is simply the one
with the highest ``rev``. The upkeep duty folds a partition's files into one now and then.

:class:`PartitionFold` keeps one partition's current rows as an Arrow table, one row per key,
and folds new files in as they appear. A deletion is a tombstone version; the upkeep keeps
tombstones for a retention period before dropping them, because a reader that held the row
and never saw the tombstone's own file (folded away meanwhile) learns of the deletion only
from the tombstone in the folded file. A fold that went unrefreshed longer than half that
period is rebuilt from the files instead.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.metadata.scope import Scope

__all__ = ["KEY_SEPARATOR", "PartitionFold", "key_column"]

KEY_SEPARATOR = "\x1f"
# Concatenation leaves chunks behind; past this many the table is made contiguous again.
# Every Arrow call pays per chunk and column: a kind of a few thousand rows (locks, leases,
# allocations) is kept in one chunk, which costs less to rebuild than to scan in pieces.
_MAX_CHUNKS = 32
_SMALL_KIND_ROWS = 20_000
_FOLD_TOKENS = itertools.count()


def key_column(table: pa.Table) -> pa.Array:
    """``kind`` + separator + ``id`` per row: the identity of a metadata row."""
    return pc.binary_join_element_wise(table["kind"], table["id"], KEY_SEPARATOR).combine_chunks()


class _KindFold:
    """The current version of every row of one kind of one partition."""

    def __init__(self, schema: pa.Schema) -> None:
        self._rows = schema.empty_table()
        # Each row's key, derived from the rows on first use (None until then): a process
        # that only reads, e.g. a CLI loading 10^6 segment records, never needs them.
        self._key_column: pa.ChunkedArray | None = pa.chunked_array([], pa.string())
        # The keys as a Python set, built on first use: most files bring only new keys
        # (allocations, new segments), which a set tells in O(new) instead of O(rows).
        self._keyset: set[str] | None = None
        self._live: pa.Table | None = None
        self._spans: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._unused: np.ndarray | None = None

    @property
    def rows(self) -> pa.Table:
        return self._rows

    @property
    def _keys(self) -> pa.ChunkedArray:
        if self._key_column is None:
            self._key_column = pa.chunked_array([key_column(self._rows)], pa.string())
        return self._key_column

    def live(self) -> pa.Table:
        if self._live is None:
            deleted = self._rows["deleted"]
            if deleted.null_count == len(deleted) or not pc.any(deleted).as_py():
                self._live = self._rows
            else:
                self._live = self._rows.filter(pc.invert(pc.fill_null(deleted, False)))
        return self._live

    def within(
        self,
        ranges: Sequence[tuple[int, int]],
        ids: frozenset[str],
        *,
        timed: bool,
        unused_only: bool = False,
    ) -> pa.Table:
        """The live rows of this kind in a scope: rows with a time range overlapping one of
        ``ranges`` (when the kind is ``timed``), and rows without one whose id is in ``ids``;
        with ``unused_only``, only those whose ``used`` flag is false. A numpy pass over
        cached columns: a transaction reading one chunk must not pay an Arrow expression
        over 10^5 segment records."""
        live = self.live()
        if not live.num_rows or (not ranges and not ids):
            return live.schema.empty_table()
        if unused_only:
            if self._unused is None:  # a null flag (locks, pending rows) is not unused
                unused = pc.fill_null(pc.equal(live["used"], False), False)
                self._unused = unused.to_numpy(zero_copy_only=False)
            if not self._unused.any():  # the usual case: nothing to take
                return live.schema.empty_table()
        starts, ends, has_span = self._span_index(live)
        if timed:
            mask = np.zeros(live.num_rows, dtype=bool)
            for start, end in ranges:
                mask |= (starts < end) & (ends > start)
            mask &= has_span
            loose = ~has_span
        else:
            mask = np.zeros(live.num_rows, dtype=bool)
            loose = np.ones(live.num_rows, dtype=bool)
        if ids and loose.any():
            named = pc.is_in(live["id"], value_set=pa.array(sorted(ids), pa.string()))
            mask |= loose & pc.fill_null(named, False).to_numpy(zero_copy_only=False)
        if unused_only:
            assert self._unused is not None
            mask &= self._unused
        picked = np.flatnonzero(mask)
        return _take(live, picked) if len(picked) else live.schema.empty_table()

    def _span_index(self, live: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._spans is None:
            start, end = live["start_ms"], live["end_ms"]
            has_span = pc.is_valid(start).to_numpy(zero_copy_only=False)
            self._spans = (
                pc.fill_null(start, 0).to_numpy(),
                pc.fill_null(end, 0).to_numpy(),
                has_span,
            )
        return self._spans

    def _none_known(self, wanted: list[str]) -> bool:
        return self._keyset is not None and self._keyset.isdisjoint(wanted)

    def revs(self, wanted: list[str]) -> dict[str, int]:
        if not self._rows.num_rows or self._none_known(wanted):
            return {}
        mask = pc.is_in(self._keys, value_set=pa.array(wanted, pa.string()))
        found = pc.filter(self._keys, mask).to_pylist()
        return dict(zip(found, pc.filter(self._rows["rev"], mask).to_pylist(), strict=True))

    def present(self, wanted: list[str]) -> set[str]:
        if not self._rows.num_rows or self._none_known(wanted):
            return set()
        mask = pc.and_(
            pc.is_in(self._keys, value_set=pa.array(wanted, pa.string())),
            pc.invert(pc.fill_null(self._rows["deleted"], False)),
        )
        return set(pc.filter(self._keys, mask).to_pylist())

    def apply(self, table: pa.Table) -> None:
        """Fold versions in (each key once in ``table``): per key, the higher rev wins."""
        if not self._rows.num_rows:
            self._set(table, None)
            self._keyset = None
            return
        keys = key_column(table)
        incoming = keys.to_pylist()
        if self._keyset is None:
            self._keyset = set(self._keys.to_pylist())
        if self._keyset.isdisjoint(incoming):  # new keys only (allocations, new segments)
            rows = pa.concat_tables([self._rows, table])
            self._set(rows, pa.chunked_array([*self._keys.chunks, keys]))
            self._keyset.update(incoming)
            return
        mask = pc.is_in(self._keys, value_set=keys)
        known = dict(
            zip(
                pc.filter(self._keys, mask).to_pylist(),
                pc.filter(self._rows["rev"], mask).to_pylist(),
                strict=True,
            )
        )
        revs = table["rev"].to_pylist()
        newer = [known.get(k, -1) < r for k, r in zip(incoming, revs, strict=True)]
        if not all(newer):  # (usually all are: a commit's own rows are the newest)
            mask = pa.array(newer, pa.bool_())
            table, keys = table.filter(mask), pc.filter(keys, mask)
        keep = pc.invert(pc.is_in(self._keys, value_set=keys))
        kept = pc.filter(self._keys, keep)
        self._set(
            pa.concat_tables([self._rows.filter(keep), table]),
            pa.chunked_array([*kept.chunks, keys], pa.string()),
        )
        self._keyset.update(keys.to_pylist())

    def drop_tombstones(self, cutoff_ms: int) -> pa.Table:
        """The rows without deletions older than ``cutoff_ms`` (by ``updated_ms``)."""
        return self._rows.filter(pc.invert(_old_tombstones(self._rows, cutoff_ms)))

    def forget_tombstones(self, cutoff_ms: int) -> None:
        old = _old_tombstones(self._rows, cutoff_ms)
        if len(old) and pc.any(old).as_py():
            keep = pc.invert(old)
            self._set(self._rows.filter(keep), pc.filter(self._keys, keep))
            self._keyset = None

    def _set(self, rows: pa.Table, keys: pa.ChunkedArray | None) -> None:
        self._live = None
        self._spans = None
        self._unused = None
        chunks = rows.column(0).num_chunks if rows.num_columns else 0
        if chunks > _MAX_CHUNKS or (chunks > 1 and rows.num_rows <= _SMALL_KIND_ROWS):
            rows = rows.combine_chunks()
        if keys is not None and keys.num_chunks > _MAX_CHUNKS:
            keys = pa.chunked_array([keys.combine_chunks()], pa.string())
        self._rows, self._key_column = rows, keys


def _take(table: pa.Table, indices: np.ndarray) -> pa.Table:
    """``table``'s rows at the sorted ``indices``, taken chunk by chunk: Arrow's take on a
    column of many chunks concatenates them first, which costs the whole table (10^5 segment
    records) for a handful of rows."""
    batches = table.to_batches()
    if len(batches) <= 1:
        return table.take(indices)
    bounds = np.cumsum([0] + [b.num_rows for b in batches])
    parts = []
    for i, batch in enumerate(batches):
        lo, hi = np.searchsorted(indices, [bounds[i], bounds[i + 1]])
        if hi > lo:
            parts.append(batch.take(pa.array(indices[lo:hi] - bounds[i])))
    return pa.Table.from_batches(parts, schema=table.schema)


def _old_tombstones(rows: pa.Table, cutoff_ms: int) -> pa.Array:
    deleted = pc.fill_null(rows["deleted"], False)
    return pc.and_(deleted, pc.less(pc.fill_null(rows["updated_ms"], 0), cutoff_ms))


class PartitionFold:
    """The current version of every row of one partition (see the module), kept per kind:
    most transactions change and read a few locks, leases or allocations, which must not cost
    an operation over the 10^5 segment records next to them."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._kinds: dict[str, _KindFold] = {}
        self.max_rev = -1
        self.applied: set[str] = set()  # file paths folded in
        # Files not read yet, with the scope their commit wrote (see MetadataStore._current).
        self.deferred: dict[str, Scope] = {}
        self.deferred_since: float | None = None
        # Where the deferred files wrote, indexed (entries of files since applied are
        # skipped, and dropped now and then): a read finds which of a few hundred deferred
        # files of other chunks it needs with numpy, not a Scope test each.
        self._index = _DeferredIndex()
        self.refreshed = time.monotonic()
        self._views: dict[tuple[str, ...] | None, pa.Table] = {}
        # When a cold read left a full fold's deletions out (None: it never did); until they
        # are past retention, this fold lacks deletions a lagging reader may need.
        self.tombstones_skipped_ms: int | None = None
        # Names this fold's rows in the process's memo of row dicts (see
        # metadata.store._memo_pylist): a rebuilt fold (another table at the path, say)
        # gets a new one, so it never takes the dicts of rows it does not hold.
        self.memo_token = next(_FOLD_TOKENS)

    @property
    def empty(self) -> bool:
        """Nothing read yet: a cold start (deletions in a full fold delete nothing here)."""
        return not self.applied and self.max_rev < 0

    def stale(self, retention_ms: int) -> bool:
        """Whether this fold went unrefreshed for so long that deletions it never saw may have
        been folded away since (their tombstones are kept ``retention_ms``): rebuild it."""
        return (time.monotonic() - self.refreshed) * 1000 > retention_ms / 2

    def live(self) -> pa.Table:
        """Every current row that is not deleted (kept until the next change)."""
        return self._view(None)

    def of_kinds(self, kinds: tuple[str, ...]) -> pa.Table:
        """The live rows of ``kinds`` (kept until the next change)."""
        return self._view(kinds)

    def _view(self, kinds: tuple[str, ...] | None) -> pa.Table:
        found = self._views.get(kinds)
        if found is None:
            names = sorted(self._kinds) if kinds is None else [k for k in kinds if k in self._kinds]
            tables = [self._kinds[k].live() for k in names]
            found = pa.concat_tables(tables) if tables else self.schema.empty_table()
            self._views[kinds] = found
        return found

    def within(
        self,
        ranges: Sequence[tuple[int, int]],
        keys: Iterable[str],
        timed_kinds: frozenset[str],
        *,
        kinds: Sequence[str] | None = None,
        unused_only: bool = False,
    ) -> pa.Table:
        """The live rows (of ``kinds``, when given) in a scope: rows of ``timed_kinds`` with a
        time range overlapping ``ranges``, and other rows whose ``<kind>:<id>`` is among
        ``keys``; with ``unused_only``, only the rows whose ``used`` flag is false."""
        ids: dict[str, set[str]] = {}
        for key in keys:
            kind, _, row_id = key.partition(":")
            ids.setdefault(kind, set()).add(row_id)
        tables = [
            fold.within(
                ranges,
                frozenset(ids.get(kind, ())),
                timed=kind in timed_kinds,
                unused_only=unused_only,
            )
            for kind, fold in sorted(self._kinds.items())
            if kinds is None or kind in kinds
        ]
        tables = [t for t in tables if t.num_rows]
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def revs(self, keys: Iterable[str]) -> dict[str, int]:
        """The current rev of each of ``keys`` that has a version (deleted ones too)."""
        out: dict[str, int] = {}
        for kind, wanted in _by_kind(keys).items():
            if kind in self._kinds:
                out.update(self._kinds[kind].revs(wanted))
        return out

    def present(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` whose current version is not a deletion."""
        return self.present_of_kinds(_by_kind(keys))

    def present_of_kinds(self, keys: Mapping[str, list[str]]) -> set[str]:
        """:meth:`present` of keys already grouped by kind (distinct ones)."""
        out: set[str] = set()
        for kind, wanted in keys.items():
            if kind in self._kinds and wanted:
                out |= self._kinds[kind].present(wanted)
        return out

    def reset(self) -> None:
        """Forget every row and file: the partition is to be read again from its files."""
        self._kinds = {}
        self.max_rev = -1
        self.applied = set()
        self.deferred = {}
        self.deferred_since = None
        self._index = _DeferredIndex()
        self._views = {}
        self.tombstones_skipped_ms = None

    def defer(self, path: str, wrote: Scope) -> None:
        """Note a file to fold in once a read needs what it wrote."""
        if not self.deferred:
            self.deferred_since = time.monotonic()
        self.deferred[path] = wrote
        self._index.add(path, wrote)

    def due(self, scope: Scope) -> list[str]:
        """The deferred files whose commit wrote within ``scope``, in the order deferred."""
        if self._index.size > 2 * len(self.deferred) + 64:
            self._index = _DeferredIndex()
            for path, wrote in self.deferred.items():
                self._index.add(path, wrote)
        if not self.deferred or not scope:
            return []
        deferred = self.deferred
        maybe = list(deferred) if scope.everything else self._index.candidates(scope)
        return [p for p in maybe if p in deferred and deferred[p].overlaps(scope)]

    def apply(self, path: str, table: pa.Table) -> None:
        """Fold one file's row versions in (each key appears once in a file): per key, the
        higher rev wins. Files usually come newest last, but not always (two commits that
        read the same version land one after the other with the same rev; a folded file
        carries old versions), so each key is compared."""
        self.applied.add(path)
        if self.deferred.pop(path, None) is not None and not self.deferred:
            self.deferred_since = None
        if not table.num_rows:
            return
        for kind, part in _parts_by_kind(table):
            fold = self._kinds.get(kind)
            if fold is None:
                fold = self._kinds[kind] = _KindFold(self.schema)
            fold.apply(part)
        self.max_rev = max(self.max_rev, pc.max(table["rev"]).as_py())
        self._views = {}

    def without_old_tombstones(self, cutoff_ms: int) -> pa.Table:
        """The rows with deletions older than ``cutoff_ms`` (by ``updated_ms``) left out:
        what the upkeep writes back. Newer deletions stay, for readers that lag."""
        tables = [self._kinds[k].drop_tombstones(cutoff_ms) for k in sorted(self._kinds)]
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def forget_tombstones(self, cutoff_ms: int) -> None:
        """Drop deletions older than ``cutoff_ms`` from memory: no file older than them can
        come any more (a folded file is committed within the retention of what it folds)."""
        for fold in self._kinds.values():
            fold.forget_tombstones(cutoff_ms)
        self._views = {}

    def forget_missing(self, present: set[str]) -> None:
        """Keep the applied-file set to the files still in the table (rows stay: a file the
        upkeep removed lives on, folded, in the file it wrote, which is deferred or adopted
        only after what it folded was read)."""
        self.applied &= present
        for path in [p for p in self.deferred if p not in present]:
            del self.deferred[path]
        if not self.deferred:
            self.deferred_since = None


class _DeferredIndex:
    """Deferred files by the time ranges and keys their commits wrote (append-only)."""

    def __init__(self) -> None:
        self._order: dict[str, int] = {}
        self._range_paths: list[str] = []
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._by_key: dict[str, list[str]] = {}
        self._everything: list[str] = []

    @property
    def size(self) -> int:
        return len(self._order)

    def add(self, path: str, wrote: Scope) -> None:
        self._order.setdefault(path, len(self._order))
        if wrote.everything:
            self._everything.append(path)
        for start, end in wrote.ranges:
            self._range_paths.append(path)
            self._starts.append(start)
            self._ends.append(end)
            self._arrays = None
        for key in wrote.keys:
            self._by_key.setdefault(key, []).append(path)

    def candidates(self, scope: Scope) -> list[str]:
        found = set(self._everything)
        if scope.ranges and self._range_paths:
            if self._arrays is None:
                self._arrays = (
                    np.array(self._starts, dtype=np.int64),
                    np.array(self._ends, dtype=np.int64),
                )
            starts, ends = self._arrays
            hit = np.zeros(len(starts), dtype=bool)
            for start, end in scope.ranges:
                hit |= (starts < end) & (ends > start)
            found.update(self._range_paths[i] for i in np.flatnonzero(hit))
        for key in scope.keys:
            found.update(self._by_key.get(key, ()))
        return sorted(found, key=self._order.__getitem__)


def _parts_by_kind(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """``table``'s rows of each kind. A folded file holds its kinds one after another: each
    is then a slice (no copy of 10^6 segment records); rows of mixed kinds are filtered."""
    kinds = table["kind"]
    if table.num_rows == 1:
        return [(kinds[0].as_py(), table)]
    changes = pc.not_equal(kinds.slice(1), kinds.slice(0, len(kinds) - 1))
    starts = [0, *(np.flatnonzero(changes.to_numpy(zero_copy_only=False)) + 1)]
    names = [kinds[i].as_py() for i in starts]
    if len(set(names)) == len(names):
        ends = [*starts[1:], table.num_rows]
        return [
            (name, table.slice(lo, hi - lo))
            for name, lo, hi in zip(names, starts, ends, strict=True)
        ]
    return [(kind, table.filter(pc.equal(kinds, kind))) for kind in pc.unique(kinds).to_pylist()]


def _by_kind(keys: Iterable[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for key in set(keys):
        grouped.setdefault(key.split(KEY_SEPARATOR, 1)[0], []).append(key)
    return grouped
