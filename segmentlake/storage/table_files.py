"""The datasource's Delta table and its files: one table per datasource, one partition per
segment key.

Writes are blind Delta appends (partitioned by ``__segment``), which never conflict with each
other; only the very first writes racing to create the table, or a write adding columns while
another commits, can fail — before anything is committed — and are retried. What a write
added (rows and bytes per segment), and what the table holds per key, are read from the Delta
log: no extra Spark job, no directory listing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, DataFrameWriter

from segmentlake.core.names import SEGMENT_KEY_COLUMN
from segmentlake.metadata.conflicts import retrying_table_commit
from segmentlake.metadata.table_log import TableLog

__all__ = [
    "CHECKPOINT_EVERY",
    "SPARK_CHECKPOINT_INTERVAL",
    "KeyFiles",
    "WrittenSegment",
    "checkpoint_due",
    "checkpoint_if_due",
    "files_per_key",
    "new_table_properties",
    "pack_files",
    "write_rows",
    "written_segments",
]

logger = logging.getLogger(__name__)

# Delta failures that mean "not committed, try again": a concurrent table creation, protocol
# or schema change. A blind append conflicts with nothing else.
_RETRYABLE = (
    "ProtocolChangedException",
    "MetadataChangedException",
    "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
    "DELTA_PROTOCOL_CHANGED",
    "DELTA_METADATA_CHANGED",
)

# Delta Spark checkpoints a table in the job of every 10th commit, before the write returns:
# a Spark job that rebuilds the table's state, 3.5-8 s on two cores even for a table of a
# few dozen files, so every 10th append of a stream took 5-10x the others. A datasource table
# is created with Spark's interval set out of reach, and the writer whose commit passes a
# multiple of CHECKPOINT_EVERY checkpoints it through delta-rs instead (45 ms for a small
# table): the same cadence, so readers replay no more log than before. Spark's interval stays
# finite, a backstop should delta-rs ever fail to checkpoint a table.
CHECKPOINT_EVERY = 10
SPARK_CHECKPOINT_INTERVAL = "1000"
_INTERVAL = "delta.checkpointInterval"


@dataclass(frozen=True, slots=True)
class WrittenSegment:
    """What one write put under one ``__segment`` value."""

    key: str
    num_rows: int
    size: int
    files: int


@dataclass(frozen=True, slots=True)
class KeyFiles:
    """What the table's current version holds under one ``__segment`` key."""

    newest_ms: int  # the newest file's modification time
    rows: int  # from the files' statistics
    files: int


def write_rows(
    log: TableLog, rows: DataFrame, *, max_records_per_file: int | None = None
) -> tuple[int, int]:
    """Append ``rows`` (one Spark job) to the table of ``log``, creating it on first use;
    return the table versions (before, after) between which the write committed. With
    ``max_records_per_file`` no file holds more rows (each Spark task starts a new file of
    a segment key when its current one is full)."""
    path = log.uri

    def write() -> tuple[int, int]:
        before = log.version()
        writer = rows.write.format("delta").mode("append").option("mergeSchema", "true")
        writer = new_table_properties(writer, before)
        if max_records_per_file is not None:
            writer = writer.option("maxRecordsPerFile", str(max_records_per_file))
        writer.partitionBy(SEGMENT_KEY_COLUMN).save(path)
        return before, log.version()

    versions = retrying_table_commit(write, what=f"write to {path}", also=_RETRYABLE)
    checkpoint_if_due(log, *versions)
    return versions


def new_table_properties(writer: DataFrameWriter, before: int) -> DataFrameWriter:
    """``writer`` giving the table it creates (``before``, the table's version, is -1: there
    is none yet) segmentlake's checkpoint interval; Delta takes a write's ``delta.*`` options
    as a new table's properties and ignores them on an existing table. A table written this
    way is checkpointed by :func:`checkpoint_if_due` after each write."""
    return writer.option(_INTERVAL, SPARK_CHECKPOINT_INTERVAL) if before < 0 else writer


def checkpoint_due(before: int, after: int, last_checkpoint: int | None) -> int | None:
    """The multiple of :data:`CHECKPOINT_EVERY` that a write taking the table from version
    ``before`` to ``after`` passed (other writers' commits in between count: each multiple
    is passed by whoever commits it or the next write), when the latest checkpoint is older
    than it; None when no checkpoint is due."""
    passed = after - after % CHECKPOINT_EVERY
    if passed <= max(before, 0):
        return None
    if last_checkpoint is not None and last_checkpoint >= passed:
        return None
    return passed


def checkpoint_if_due(log: TableLog, before: int, after: int) -> None:
    """Checkpoint the table at ``after`` through delta-rs when the write passed a multiple of
    :data:`CHECKPOINT_EVERY` (:func:`checkpoint_due`) and the table leaves checkpoints to
    segmentlake (a table created before it did keeps Spark's own). Best effort: the write
    has committed, so a failure is logged and the next multiple tries again."""
    if checkpoint_due(before, after, None) is None:  # 9 writes in 10: no read of the log
        return
    if checkpoint_due(before, after, log.last_checkpoint()) is None:
        return
    log.checkpoint(after, if_property=(_INTERVAL, SPARK_CHECKPOINT_INTERVAL))


def written_segments(
    log: TableLog, versions: tuple[int, int], keys: Callable[[str], bool]
) -> dict[str, WrittenSegment]:
    """Rows, bytes and files per ``__segment`` value for which ``keys`` is true, added in
    ``versions`` (exclusive start, inclusive end), from the commits' ``add`` actions and
    their stats."""
    totals: dict[str, list[int]] = {}
    for added in log.added_files(versions[0] + 1, versions[1]):
        key = added.partition_values.get(SEGMENT_KEY_COLUMN)
        if key is None or not keys(key):
            continue
        if "numRecords" not in added.stats:
            raise RuntimeError(
                f"Delta wrote {added.path} without row statistics; segmentlake needs "
                "spark.databricks.delta.stats.collect on (the default)"
            )
        total = totals.setdefault(key, [0, 0, 0])
        total[0] += int(added.stats["numRecords"])
        total[1] += added.size
        total[2] += 1
    return {k: WrittenSegment(k, rows, size, files) for k, (rows, size, files) in totals.items()}


def pack_files(files: Sequence[tuple[str, int]], limit: int) -> list[list[str]]:
    """Group files given as (path, rows) into as few groups of at most ``limit`` rows as
    first-fit decreasing finds (a file above ``limit`` alone in its group): the segments an
    oversized one becomes."""
    bins: list[tuple[int, list[str]]] = []
    for path, rows in sorted(files, key=lambda f: (-f[1], f[0])):
        for i, (total, paths) in enumerate(bins):
            if total + rows <= limit:
                bins[i] = (total + rows, [*paths, path])
                break
        else:
            bins.append((rows, [path]))
    return [paths for _, paths in bins]


def files_per_key(log: TableLog) -> dict[str, KeyFiles]:
    """Per ``__segment`` key of the table's current version: its newest file's modification
    time, rows and files — from the log."""
    per_key: dict[str, list[int]] = {}
    for f in log.live_files():
        key = f.partition_values.get(SEGMENT_KEY_COLUMN)
        if key is None:
            continue
        entry = per_key.setdefault(key, [0, 0, 0])
        entry[0] = max(entry[0], f.modification_time_ms)
        entry[1] += f.num_records or 0
        entry[2] += 1
    return {k: KeyFiles(newest, rows, files) for k, (newest, rows, files) in per_key.items()}
