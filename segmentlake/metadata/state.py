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

import threading
import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["KEY_SEPARATOR", "PartitionFold", "key_column"]

KEY_SEPARATOR = "\x1f"
# Concatenation leaves chunks behind; past this many the table is made contiguous again.
_MAX_CHUNKS = 32


def key_column(table: pa.Table) -> pa.Array:
    """``kind`` + separator + ``id`` per row: the identity of a metadata row."""
    return pc.binary_join_element_wise(table["kind"], table["id"], KEY_SEPARATOR).combine_chunks()


class PartitionFold:
    """The current version of every row of one partition (see the module)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._rows = schema.empty_table()
        self._keys = pa.array([], pa.string())
        self.max_rev = -1
        self.applied: set[str] = set()  # file paths folded in
        self.refreshed = time.monotonic()
        self.lock = threading.Lock()

    def stale(self, retention_ms: int) -> bool:
        """Whether this fold went unrefreshed for so long that deletions it never saw may have
        been folded away since (their tombstones are kept ``retention_ms``): rebuild it."""
        return (time.monotonic() - self.refreshed) * 1000 > retention_ms / 2

    def without_old_tombstones(self, cutoff_ms: int) -> pa.Table:
        """The rows with deletions older than ``cutoff_ms`` (by ``updated_ms``) left out:
        what the upkeep writes back. Newer deletions stay, for readers that lag."""
        deleted = pc.fill_null(self._rows["deleted"], False)
        old = pc.and_(deleted, pc.less(pc.fill_null(self._rows["updated_ms"], 0), cutoff_ms))
        return self._rows.filter(pc.invert(old))

    def forget_tombstones(self, cutoff_ms: int) -> None:
        """Drop deletions older than ``cutoff_ms`` from memory: no file older than them can
        come any more (a folded file is committed within the retention of what it folds)."""
        deleted = pc.fill_null(self._rows["deleted"], False)
        old = pc.and_(deleted, pc.less(pc.fill_null(self._rows["updated_ms"], 0), cutoff_ms))
        if pc.any(old).as_py():
            keep = pc.invert(old)
            self._set(self._rows.filter(keep), pc.filter(self._keys, keep))

    @property
    def rows(self) -> pa.Table:
        """Every current row, tombstones included."""
        return self._rows

    def live(self) -> pa.Table:
        """Every current row that is not deleted."""
        deleted = self._rows["deleted"]
        if deleted.null_count == len(deleted) or not pc.any(deleted).as_py():
            return self._rows
        return self._rows.filter(pc.invert(pc.fill_null(deleted, False)))

    def revs(self, keys: Iterable[str]) -> dict[str, int]:
        """The current rev of each of ``keys`` that has a version (deleted ones too)."""
        wanted = pa.array(sorted(set(keys)), pa.string())
        if not len(wanted) or not self._rows.num_rows:
            return {}
        mask = pc.is_in(self._keys, value_set=wanted)
        found = pc.filter(self._keys, mask).to_pylist()
        revs = pc.filter(self._rows["rev"], mask).to_pylist()
        return dict(zip(found, revs, strict=True))

    def present(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` whose current version is not a deletion."""
        wanted = pa.array(sorted(set(keys)), pa.string())
        if not len(wanted) or not self._rows.num_rows:
            return set()
        mask = pc.and_(
            pc.is_in(self._keys, value_set=wanted),
            pc.invert(pc.fill_null(self._rows["deleted"], False)),
        )
        return set(pc.filter(self._keys, mask).to_pylist())

    def apply(self, path: str, table: pa.Table) -> None:
        """Fold one file's row versions in (each key appears once in a file): per key, the
        higher rev wins. Files usually come newest last, but not always (two commits that
        read the same version land one after the other with the same rev; a folded file
        carries old versions), so each key is compared."""
        self.applied.add(path)
        if not table.num_rows:
            return
        keys = key_column(table)
        revs = table["rev"]
        if self._rows.num_rows:
            mask = pc.is_in(self._keys, value_set=keys)
            if pc.any(mask).as_py():
                known = dict(
                    zip(
                        pc.filter(self._keys, mask).to_pylist(),
                        pc.filter(self._rows["rev"], mask).to_pylist(),
                        strict=True,
                    )
                )
                newer = pa.array(
                    [
                        known.get(k, -1) < r
                        for k, r in zip(keys.to_pylist(), revs.to_pylist(), strict=True)
                    ]
                )
                table, keys = table.filter(newer), pc.filter(keys, newer)
                keep = pc.invert(pc.is_in(self._keys, value_set=keys))
                self._set(
                    pa.concat_tables([self._rows.filter(keep), table]),
                    pa.concat_arrays([pc.filter(self._keys, keep), keys]),
                )
            else:  # new keys only (allocations, new segments): nothing to drop
                self._set(
                    pa.concat_tables([self._rows, table]), pa.concat_arrays([self._keys, keys])
                )
        else:
            self._set(table, keys)
        self.max_rev = max(self.max_rev, pc.max(revs).as_py())

    def forget_missing(self, present: set[str]) -> None:
        """Keep the applied-file set to the files still in the table (rows stay: a file the
        upkeep removed lives on, folded, in the file it wrote)."""
        self.applied &= present

    def _set(self, rows: pa.Table, keys: pa.Array) -> None:
        if rows.num_columns and rows.column(0).num_chunks > _MAX_CHUNKS:
            rows = rows.combine_chunks()
        self._rows, self._keys = rows, keys
