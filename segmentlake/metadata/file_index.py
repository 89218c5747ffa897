"""The live files of a table partitioned by ``__segment``, by path and by segment key: what
:class:`~segmentlake.metadata.segment_files.SegmentFiles` keeps between the log entries it
follows.

A whole load gives every file at once, as Arrow columns. Turning them into a dict by path and
a dict by key costs ~3.5 s per 10^6 files (most of a load's time, and held under the GIL),
while a process's first sync after a change looks up a handful of keys. So the index keeps
the loaded columns, sorted by key, and the changes of the entries followed since beside them;
the dicts are built only when something needs every file (a whole diff) or looks up many keys.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from types import MappingProxyType

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["File", "FileIndex"]

File = tuple[int, str | None]  # a live file's size and ``__segment`` value
# Lookups in the loaded columns (~20 us each at 10^6 files) before the dicts are built (a whole
# diff's or a large followed entry's 10^6 lookups cost more there than the dicts do).
_LOOKUPS = 10_000
_NONE: Mapping[str, str] = MappingProxyType({})


class FileIndex:
    """The live files of one table: each file's path (as its add action names it) with its
    size and ``__segment`` value, and each key's files with their URIs (a relative path
    appended to ``root``). Built from a load's ``paths``, ``sizes`` and ``keys``, then
    changed by :meth:`add` and :meth:`drop` as entries are followed. Not for sharing between
    threads.

    >>> index = FileIndex("file:///wh/wiki/", pa.array(["k=a/0.parquet"]), pa.array([9]),
    ...                   pa.array(["a"]))
    >>> dict(index.paths_of("a"))
    {'k=a/0.parquet': 'file:///wh/wiki/k=a/0.parquet'}
    """

    def __init__(self, root: str, paths: pa.Array, sizes: pa.Array, keys: pa.Array) -> None:
        self.root = root
        order = pc.array_sort_indices(keys, null_placement="at_end")
        # The loaded files in key order (nulls last: a table with no ``__segment`` values).
        self._paths: pa.Array = paths.take(order)
        self._sizes: pa.Array = sizes.take(order)
        self._keys: pa.Array = keys.take(order)
        self._keyed = len(keys) - keys.null_count
        self._rows: dict[str, int] | None = None  # path -> row, for a lookup with no key
        # What the entries followed since the load changed: loaded files no longer live, and
        # live files not among the loaded ones (a loaded path added again is in both).
        self._gone: set[str] = set()
        self._added: dict[str, File] = {}
        self._added_by_key: dict[str | None, dict[str, str]] = {}
        self._lookups = 0
        # Every live file, once built (then the loaded columns and the changes are dropped).
        self._files: dict[str, File] | None = None
        self._by_key: dict[str | None, dict[str, str]] | None = None

    def __len__(self) -> int:
        if self._files is not None:
            return len(self._files)
        return len(self._paths) - len(self._gone) + len(self._added)

    def find(self, path: str, *, key: str | None, keyed: bool = True) -> File | None:
        """The live file at ``path``, None when there is none. ``key`` is its ``__segment``
        value as the action naming it says (``keyed``: a remove action may leave it out);
        the loaded files are searched under that key only."""
        if self._files is not None:
            return self._files.get(path)
        found = self._added.get(path)
        if found is not None or path in self._gone:
            return found
        if not self._counted():  # many lookups (a large entry followed): the dicts are built
            return self.find(path, key=key, keyed=keyed)
        if keyed:
            for row in self._loaded_rows(key):
                if self._path(row) == path:
                    return self._file(row)
            return None
        at = self._row_index().get(path)
        return None if at is None else self._file(at)

    def add(self, path: str, size: int, key: str | None) -> None:
        """A file now live at ``path`` (none was: :meth:`drop` the old one first)."""
        uri = self.uri(path)
        if self._files is not None and self._by_key is not None:
            self._files[path] = (size, key)
            self._by_key.setdefault(key, {})[path] = uri
            return
        self._added[path] = (size, key)
        self._added_by_key.setdefault(key, {})[path] = uri

    def drop(self, path: str, key: str | None) -> None:
        """The live file at ``path``, of ``key`` (as :meth:`find` gave it), is no more."""
        if self._files is not None and self._by_key is not None:
            self._files.pop(path, None)
            self._by_key.get(key, {}).pop(path, None)
        elif self._added.pop(path, None) is not None:
            self._added_by_key.get(key, {}).pop(path, None)
        else:
            self._gone.add(path)

    def paths_of(self, key: str | None) -> Mapping[str, str]:
        """The live files of ``key``: path -> URI (read only)."""
        if self._by_key is None and self._counted():
            return {p: self.uri(p) for p in self._loaded_paths(key)} | (
                self._added_by_key.get(key) or {}
            )
        assert self._by_key is not None
        return self._by_key.get(key) or _NONE

    def files_of(self, key: str | None) -> dict[str, File]:
        """The live files of ``key``: path -> its size and key."""
        if self._files is None and self._counted():
            out = {p: self._file(r) for r, p in self._loaded_paths_and_rows(key)}
            return out | {p: self._added[p] for p in self._added_by_key.get(key) or {}}
        assert self._files is not None
        return {p: self._files[p] for p in self.paths_of(key)}

    def as_dict(self) -> dict[str, File]:
        """Every live file: path -> its size and key (built on the first call, then kept
        current; not to be changed by the caller)."""
        if self._files is None:
            self._build()
        assert self._files is not None
        return self._files

    def uri(self, path: str) -> str:
        """The URI of a file its add action names by ``path``: relative to the table's root,
        or already a URI (the visible table names the datasource table's files so; a
        relative path has its colons percent-encoded)."""
        return path if ":" in path else self.root + path

    # -- the loaded columns --------------------------------------------------------------------

    def _counted(self) -> bool:
        """Whether a lookup is still to be done in the loaded columns (else the dicts are
        built for it)."""
        self._lookups += 1
        if self._lookups <= _LOOKUPS:
            return True
        self._build()
        return False

    def _loaded_rows(self, key: str | None) -> range:
        if key is None:
            return range(self._keyed, len(self._keys))
        keyed = self._keys.slice(0, self._keyed)
        low = bisect.bisect_left(keyed, key, key=_text)
        return range(low, bisect.bisect_right(keyed, key, lo=low, key=_text))

    def _loaded_paths_and_rows(self, key: str | None) -> list[tuple[int, str]]:
        rows = [(r, self._path(r)) for r in self._loaded_rows(key)]
        return [(r, p) for r, p in rows if p not in self._gone]

    def _loaded_paths(self, key: str | None) -> list[str]:
        return [p for _, p in self._loaded_paths_and_rows(key)]

    def _path(self, row: int) -> str:
        return str(self._paths[row].as_py())

    def _file(self, row: int) -> File:
        return (int(self._sizes[row].as_py()), self._keys[row].as_py())

    def _row_index(self) -> dict[str, int]:
        if self._rows is None:
            self._rows = {p: i for i, p in enumerate(self._paths.to_pylist())}
        return self._rows

    def _build(self) -> None:
        """The dicts of every live file, from the loaded columns and the changes since."""
        files: dict[str, File] = {}
        by_key: dict[str | None, dict[str, str]] = {}
        gone, uri = self._gone, self.uri
        for path, size, key in zip(
            self._paths.to_pylist(), self._sizes.to_pylist(), self._keys.to_pylist(), strict=True
        ):
            if path in gone:
                continue
            files[path] = (size, key)
            mine = by_key.get(key)
            if mine is None:
                by_key[key] = {path: uri(path)}
            else:
                mine[path] = uri(path)
        for path, (size, key) in self._added.items():
            files[path] = (size, key)
            by_key.setdefault(key, {})[path] = uri(path)
        self._files, self._by_key = files, by_key
        # Kept current in the dicts from now on.
        self._paths = self._keys = pa.array([], pa.string())
        self._sizes, self._keyed = pa.array([], pa.int64()), 0
        self._rows, self._gone, self._added, self._added_by_key = None, set(), {}, {}


def _text(value: pa.Scalar) -> str:
    return str(value.as_py())
