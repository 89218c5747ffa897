"""A Delta table's log, read from Python through delta-rs: no JVM, no Spark job.

The datasource tables (and the volumes' tables) are written by Spark; segmentlake reads their
logs for what a write added (rows, bytes and files per ``__segment`` value, from the add
actions' stats), for their live files and versions, and for table properties. Everything
here is the Delta protocol as written on storage and delta-rs's public API, so it works the
same whatever Delta build wrote the table (open source, Databricks) and with no driver JVM
(Spark Connect).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.fs import DeltaStorageHandler

__all__ = [
    "AddedFile",
    "LiveFile",
    "Stamp",
    "TableLog",
    "epoch_millis",
    "load_through_gaps",
    "local_path",
]

logger = logging.getLogger(__name__)

# A log entry's modification time (ns) and size: what tells a follower its table is the same.
Stamp = tuple[int, int]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def local_path(uri: str) -> str | None:
    """The local file-system path of ``uri`` (a plain path, ``file:`` or ``dbfs:``), or None
    for an object-store URI."""
    if uri.startswith("file://"):
        return uri.removeprefix("file://")
    if uri.startswith("file:"):
        return uri.removeprefix("file:")
    if uri.startswith("dbfs:/"):
        return "/dbfs/" + uri.removeprefix("dbfs:/").lstrip("/")
    return None if _URI.match(uri) else uri


@dataclass(frozen=True, slots=True)
class AddedFile:
    """A file an ``add`` action of the log added: its path, partition values, size, stats."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    stats: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LiveFile:
    """A file of the table's current version."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    num_records: int | None
    modification_time_ms: int


class TableLog:
    """The log of the Delta table at ``uri``."""

    def __init__(self, uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = uri.rstrip("/")
        self.storage_options = dict(storage_options or {})
        local = local_path(self.uri)
        self.local = local is not None
        self._root = local if local is not None else self.uri
        self.fs: pafs.FileSystem = (
            pafs.LocalFileSystem()
            if local is not None
            else pafs.PyFileSystem(DeltaStorageHandler(self.uri, self.storage_options))
        )

    @property
    def delta_uri(self) -> str:
        """The URI delta-rs opens (a local path without a scheme)."""
        return self._root if self.local else self.uri

    def full(self, relative: str) -> str:
        """A path relative to the table root, as :attr:`fs` takes it."""
        return f"{self._root}/{relative}" if self.local else relative

    def table(self, version: int | None = None) -> DeltaTable:
        return load_through_gaps(
            lambda: DeltaTable(
                self.delta_uri, version=version, storage_options=self.storage_options or None
            )
        )

    def exists(self) -> bool:
        return DeltaTable.is_deltatable(self.delta_uri, self.storage_options or None)

    def version(self) -> int:
        """The latest version, -1 when there is no table, found without loading a snapshot
        (which costs what the table's files cost: 44 ms at 10^4 files locally, 0.4-1 s at
        10^5 on S3; writes ask twice per append). On a local file system, the newest entry
        the log's directory lists. On an object store, whose listings are paged and whose
        logs keep weeks of entries, the entries after the last checkpoint (never cleaned up,
        so all there) are probed for in rounds of concurrent requests, 8 then twice as many
        each round: for a table checkpointed every 10 versions, the checkpoint's hint and
        one or two rounds (0.25-0.5 s at 30 ms a request, where a snapshot load took
        0.57-1 s). A version a concurrent commit has just passed is as good as any reader's."""
        if self.local:
            try:
                names = os.listdir(f"{self._root}/_delta_log")
            except FileNotFoundError:
                return -1
            versions = [v for v in map(_log_version, names) if v is not None]
            return max(versions, default=-1)
        known = self.last_checkpoint()
        if known is None:
            if self.entry_stamp(0) is None:
                return self._loaded_version()  # no table, or a log without the hint
            known = 0
        width = _PROBES
        while True:
            stamps = _concurrently(self.entry_stamp, range(known + 1, known + 1 + width))
            found = [stamp is not None for stamp in stamps]
            if not all(found):
                return known + found.index(False)
            known += width
            width *= 2

    def _loaded_version(self) -> int:
        try:
            return int(self.table().version())
        except TableNotFoundError:
            return -1

    def commit_actions(self, version: int) -> list[dict[str, Any]]:
        """The actions of one commit (``[]`` when its log entry is gone)."""
        name = self.full(f"_delta_log/{version:020d}.json")
        try:
            with self.fs.open_input_stream(name) as stream:
                text = stream.read().decode("utf-8")
        except (FileNotFoundError, OSError):
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def entry(self, version: int) -> list[dict[str, Any]] | None:
        """The actions of log entry ``version``, or None when there is no such entry (yet).
        Entries appear whole (put-if-absent of a complete file), so one that is there can
        be read in full; any other storage error is raised."""
        data = self._entry_bytes(version)
        if data is None:
            return None
        return [orjson.loads(line) for line in data.splitlines() if line.strip()]

    def entry_transactions(self, version: int) -> dict[str, int] | None:
        """The application transactions (Delta's ``txn``: app id -> version) log entry
        ``version`` records, None when there is no such entry; only those lines are parsed
        (an entry that adds 10^5 files is tens of MB of JSON)."""
        data = self._entry_bytes(version)
        if data is None:
            return None
        found = {}
        for line in data.splitlines():
            if line.lstrip().startswith(b'{"txn"'):
                txn = orjson.loads(line)["txn"]
                found[str(txn["appId"])] = int(txn["version"])
        return found

    def _entry_bytes(self, version: int) -> bytes | None:
        name = self.full(f"_delta_log/{version:020d}.json")
        try:
            if self.local:  # every process reads every entry: the shortest way there
                with open(name, "rb") as file:
                    return file.read()
            with self.fs.open_input_stream(name) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            return None

    def entry_stamp(self, version: int) -> Stamp | None:
        """Log entry ``version``'s modification time (ns) and size, None when there is no such
        entry: a reader that followed the log to ``version`` tells by it that the table was
        not deleted and created again under it (an entry, once written, never changes)."""
        name = self.full(f"_delta_log/{version:020d}.json")
        if self.local:
            try:
                found = os.stat(name)
            except FileNotFoundError:
                return None
            return found.st_mtime_ns, found.st_size
        info = self.fs.get_file_info(name)
        if info.type == pafs.FileType.NotFound:
            return None
        return info.mtime_ns or 0, info.size or 0

    def follow(
        self,
        version: int,
        stamp: Stamp | None,
        apply: Callable[[int, list[dict[str, Any]]], bool],
        *,
        limit: int | None = None,
    ) -> tuple[int, Stamp | None] | None:
        """Hand each log entry after ``version`` (the one a follower read last, whose
        :meth:`entry_stamp` was ``stamp``) to ``apply(version, actions)`` in order; return
        the latest version and its stamp. None when following cannot be trusted and the
        follower must load the table whole: entry ``version`` is gone or changed (the table
        was deleted and created again, or a cleanup took it), the next entry is missing below
        the latest checkpoint (a cleanup deleted entries after ours), ``apply`` refused an
        entry (returned False), or more than ``limit`` entries were new."""
        if stamp is None:
            return None
        # On an object store each request is a round trip (tens of ms) and a stamp is two of
        # them: each is asked for while the entries are read, not before or after.
        check: Callable[[], Stamp | None] | None = self._stamp_meanwhile(version)
        reached = version
        while limit is None or reached - version < limit:
            actions = self.entry(reached + 1)
            if check is not None:
                if check() != stamp:
                    return None
                check = None
            if actions is None:
                latest = self._stamp_meanwhile(reached) if reached != version else None
                if (self.last_checkpoint() or -1) > reached:
                    return None
                return reached, stamp if latest is None else latest()
            if not apply(reached + 1, actions):
                return None
            reached += 1
        return None

    def _stamp_meanwhile(self, version: int) -> Callable[[], Stamp | None]:
        """:meth:`entry_stamp` of ``version``, asked for now and answered when called: on an
        object store in another thread, whose request is under way on return (a stamp's
        requests let go of the GIL; the reads this thread goes on with hold it, so a request
        started after them would wait for them)."""
        if not self.local:
            started = threading.Event()

            def stamp() -> Stamp | None:
                started.set()
                return self.entry_stamp(version)

            try:
                future = _probe_pool().submit(stamp)
            except RuntimeError:
                pass  # the interpreter is exiting (an upkeep thread it waits for asks)
            else:
                started.wait()
                return future.result
        found = self.entry_stamp(version)
        return lambda: found

    def put_entry_if_absent(self, version: int, text: str) -> bool:
        """Write log entry ``version`` unless it exists (local file systems only): a complete
        temporary file hard-linked to the entry's name, which fails when the name is taken,
        as delta-rs and Delta's put-if-absent LogStores do. False when it was taken."""
        if not self.local:
            raise ValueError(f"{self.uri} is not on a local file system")
        log_dir = f"{self._root}/_delta_log"
        temporary = f"{log_dir}/.{version:020d}.{uuid.uuid4().hex}.json.tmp"
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(text)
        try:
            os.link(temporary, f"{log_dir}/{version:020d}.json")
        except FileExistsError:
            return False
        finally:
            os.unlink(temporary)
        return True

    def clean_log(self, *, older_than_ms: int) -> int:
        """Delete the log entries (commit JSONs, checkpoints) below the latest checkpoint
        last modified before ``older_than_ms`` (epoch ms); the number deleted. The latest
        checkpoint and everything after it stay, so the table still loads; a handle that was
        behind a deleted entry reloads (:meth:`MetadataTable.refresh`)."""
        checkpoint = self.last_checkpoint()
        if checkpoint is None:
            return 0
        log_dir = self.full("_delta_log")
        deleted = 0
        for info in self.fs.get_file_info(pafs.FileSelector(log_dir)):
            version = _log_version(info.base_name)
            if version is None or version >= checkpoint or info.mtime is None:
                continue
            if info.mtime.timestamp() * 1000 >= older_than_ms:
                continue
            try:
                self.fs.delete_file(info.path)
                deleted += 1
            except (FileNotFoundError, OSError):
                pass  # another process cleaned it first
        return deleted

    def checkpoint(self, version: int, *, if_property: tuple[str, str] | None = None) -> bool:
        """Write a checkpoint of ``version`` with delta-rs, then delete the log entries behind
        it that are past the table's ``delta.logRetentionDuration`` (as Spark does after its
        checkpoints); with ``if_property`` (name, value), only when the table's property of
        that name has that value. Whether a checkpoint was written. Best effort: a failure is
        logged and leaves the next checkpoint to try again (delta-rs writes one whole or not
        at all)."""
        try:
            table = load_through_gaps(lambda: self.table(version))
            if if_property is not None:
                name, value = if_property
                if table.metadata().configuration.get(name) != value:
                    return False
            table.create_checkpoint()
            table.cleanup_metadata()
        except (DeltaError, OSError) as e:
            logger.warning("checkpoint of %s at version %d failed: %s", self.uri, version, e)
            return False
        return True

    def last_checkpoint(self) -> int | None:
        """The version of the latest checkpoint, None when there is none."""
        try:
            with self.fs.open_input_stream(self.full("_delta_log/_last_checkpoint")) as stream:
                return int(json.loads(stream.read().decode("utf-8"))["version"])
        except (FileNotFoundError, OSError, ValueError, KeyError):
            return None

    def last_checkpoint_age_s(self) -> float | None:
        """Seconds since the latest checkpoint was written, None when there is none."""
        info = self.fs.get_file_info(self.full("_delta_log/_last_checkpoint"))
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return max(0.0, time.time() - float(info.mtime.timestamp()))

    def added_files(self, start: int, end: int) -> list[AddedFile]:
        """The files added by versions ``start..end`` (inclusive)."""
        found = []
        for version in range(start, end + 1):
            for action in self.commit_actions(version):
                add = action.get("add")
                if add is None:
                    continue
                found.append(
                    AddedFile(
                        add["path"],
                        add.get("partitionValues") or {},
                        int(add.get("size") or 0),
                        json.loads(add.get("stats") or "{}"),
                    )
                )
        return found

    def live_files(self) -> list[LiveFile]:
        """The files of the latest version (empty when there is no table)."""
        try:
            actions = self.table().get_add_actions(flatten=True)
        except TableNotFoundError:
            return []
        names = actions.column_names
        partitions = [n for n in names if n.startswith("partition.")]
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        counts = (
            actions.column("num_records").to_pylist()
            if "num_records" in names
            else [None] * len(paths)
        )
        times = actions.column("modification_time").to_pylist()
        values = {n.removeprefix("partition."): actions.column(n).to_pylist() for n in partitions}
        return [
            LiveFile(
                path,
                {name: column[i] for name, column in values.items()},
                int(sizes[i] or 0),
                None if counts[i] is None else int(counts[i] or 0),
                epoch_millis(times[i]),
            )
            for i, path in enumerate(paths)
        ]

    def properties(self) -> dict[str, str]:
        """The table's properties (``delta.*`` and others)."""
        try:
            return dict(self.table().metadata().configuration)
        except TableNotFoundError:
            return {}


_PROBES = 8  # log entries an object store is asked for at once
_probes: ThreadPoolExecutor | None = None
_probes_lock = threading.Lock()


def _probe_pool() -> ThreadPoolExecutor:
    """The threads that probe for log entries (delta-rs's file-info requests let go of the
    GIL; its file opens do not); idle ones cost nothing, and the interpreter's exit waits for
    busy ones."""
    global _probes
    with _probes_lock:
        if _probes is None:
            _probes = ThreadPoolExecutor(_PROBES, thread_name_prefix="segmentlake-probe")
        return _probes


def _concurrently(probe: Callable[[int], Stamp | None], versions: range) -> list[Stamp | None]:
    """``probe`` of each version, in the probe threads; one after the other in this thread
    once the interpreter is exiting (it starts no threads then, and the metadata upkeep it
    waits for may still ask)."""
    try:
        stamps = _probe_pool().map(probe, versions)  # submits every probe, or refuses
    except RuntimeError:
        return [probe(version) for version in versions]
    return list(stamps)


def _forget_probes() -> None:
    """A forked child has none of its parent's threads: it starts a pool of its own."""
    global _probes, _probes_lock
    _probes, _probes_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_probes)

T = TypeVar("T")
# A directory is not listed atomically: a listing taken while other processes link new log
# entries can hold version v + 1 without v, and delta-rs's kernel then refuses the log as
# having a gap (at high commit rates often enough to fail checkpoints: docs/decisions.md,
# "Measurements behind the code"). The gap is gone by the next listing.
_LISTING_GAP = "Expected contiguous commit files"
_GAP_RETRIES = 12  # pauses of up to 0.02 s x attempt: 1.5 s in all at most


def load_through_gaps(load: Callable[[], T]) -> T:
    """``load()`` (a delta-rs snapshot load), again after a short pause when it failed on a
    log listing caught between two new entries."""
    for attempt in range(_GAP_RETRIES):
        try:
            return load()
        except DeltaError as e:
            if _LISTING_GAP not in str(e) or attempt == _GAP_RETRIES - 1:
                raise
            time.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
    raise AssertionError("unreachable")


def epoch_millis(value: Any) -> int:
    """A modification time as epoch ms (delta-rs gives a timestamp or a number)."""
    if value is None:
        return 0
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    return int(value)


def _log_version(name: str) -> int | None:
    """The version of a log entry's file name (``<20 digits>.json`` or a checkpoint part)."""
    head = name.split(".", 1)[0]
    if len(head) != 20 or not head.isdigit():
        return None
    if name.endswith(".json") or ".checkpoint" in name:
        return int(head)
    return None
