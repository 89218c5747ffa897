"""Clip files: the rows of a segment the timeline serves only in part, for the visible table.

A segment is immutable and its files cannot be named in part, so when a newer version of
finer granularity covers some of a segment's chunk (an HOUR overwrite inside a DAY segment),
the visible table holds a copy of the rows still served: read from the segment's files,
filtered on ``__time``, written once as one Parquet file inside the visible table. Rare by
nature (the common overshadowing is whole chunks), bounded in memory (record batches
streamed), and named by what it holds, so a retry or another process reuses it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from segmentlake.core.names import SEGMENT_KEY_COLUMN, TIME_COLUMN
from segmentlake.metadata.table_log import TableLog, local_path

__all__ = ["Clip", "drop_unreferenced_clips", "write_clip"]

_UTC_MICROS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class Clip:
    """A clip file written (or found) in the visible table, as its add action."""

    add: dict[str, Any]
    rows: int


def write_clip(
    storage: TableLog,
    visible: TableLog,
    key: str,
    files: Sequence[str],
    ranges: Sequence[tuple[int, int]],
    *,
    name: str,
) -> Clip:
    """Write the rows of ``files`` (absolute URIs in ``storage``) whose ``__time`` lies in
    ``ranges`` (epoch ms, half-open) to the clip file ``name`` of ``key`` in ``visible``,
    unless it is there already; return its add action."""
    relative = f"{SEGMENT_KEY_COLUMN}={_safe(key)}/clip-{name}.parquet"
    target = visible.full(relative)
    info = visible.fs.get_file_info(target)
    if info.type == pafs.FileType.NotFound:
        rows, low, high = _write(storage, visible, target, files, ranges)
    else:
        rows, low, high = _summary(visible.fs, target)
        info = visible.fs.get_file_info(target)
    size = visible.fs.get_file_info(target).size or 0
    stats: dict[str, Any] = {"numRecords": rows, "nullCount": {TIME_COLUMN: 0}}
    if low is not None and high is not None:
        stats["minValues"] = {TIME_COLUMN: _iso(low)}
        stats["maxValues"] = {TIME_COLUMN: _iso(high)}
    add = {
        "path": quote(relative, safe="/="),
        "partitionValues": {SEGMENT_KEY_COLUMN: key},
        "size": int(size),
        "modificationTime": int((info.mtime.timestamp() if info.mtime else 0) * 1000),
        "dataChange": True,
        "stats": json.dumps(stats, separators=(",", ":")),
    }
    return Clip(add, rows)


def _write(
    storage: TableLog,
    visible: TableLog,
    target: str,
    files: Sequence[str],
    ranges: Sequence[tuple[int, int]],
) -> tuple[int, int | None, int | None]:
    """Stream the kept rows into a temporary file, then move it to ``target`` (readers never
    see half a clip). Returns rows and the min/max ``__time`` in micros."""
    source = pads.dataset(
        [_storage_path(storage, uri) for uri in files], filesystem=storage.fs, format="parquet"
    )
    temporary = f"{target}.{os.getpid()}.tmp"
    parent = target.rsplit("/", 1)[0]
    if visible.local:
        os.makedirs(parent, exist_ok=True)
    rows, low, high = 0, None, None
    writer: pq.ParquetWriter | None = None
    try:
        for batch in source.to_batches():
            kept = _kept(_utc_micros(batch), ranges)
            if writer is None:
                writer = pq.ParquetWriter(
                    temporary, kept.schema, filesystem=visible.fs, compression="snappy"
                )
            if kept.num_rows:
                writer.write_batch(kept)
                times = pc.cast(kept.column(TIME_COLUMN), pa.int64())
                lo, hi = pc.min(times).as_py(), pc.max(times).as_py()
                low = lo if low is None else min(low, lo)
                high = hi if high is None else max(high, hi)
                rows += kept.num_rows
        if writer is None:  # no file held a batch: an empty clip keeps the schema
            writer = pq.ParquetWriter(temporary, source.schema, filesystem=visible.fs)
    finally:
        if writer is not None:
            writer.close()
    visible.fs.move(temporary, target)
    return rows, low, high


def _kept(batch: pa.RecordBatch, ranges: Sequence[tuple[int, int]]) -> pa.RecordBatch:
    times = pc.cast(batch.column(TIME_COLUMN), pa.int64())
    mask = None
    for start, end in ranges:
        inside = pc.and_(pc.greater_equal(times, start * 1000), pc.less(times, end * 1000))
        mask = inside if mask is None else pc.or_(mask, inside)
    return batch.filter(mask) if mask is not None else batch.slice(0, 0)


def _utc_micros(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Timestamps as UTC microseconds: what Spark reads back as TIMESTAMP (files Spark wrote
    as INT96 come back as nanoseconds, which it would not)."""
    columns = [
        pc.cast(column, _UTC_MICROS) if pa.types.is_timestamp(column.type) else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _summary(fs: pafs.FileSystem, target: str) -> tuple[int, int | None, int | None]:
    """Rows and ``__time`` range of a clip another sync wrote."""
    with fs.open_input_file(target) as handle:
        table = pq.read_table(handle, columns=[TIME_COLUMN])
    if table.num_rows == 0:
        return 0, None, None
    times = pc.cast(table.column(TIME_COLUMN), pa.int64())
    return table.num_rows, pc.min(times).as_py(), pc.max(times).as_py()


def _storage_path(storage: TableLog, uri: str) -> str:
    """A datasource table file's absolute URI as a path of ``storage.fs``."""
    local = local_path(storage.uri)
    if local is not None and uri.startswith("file://"):
        return unquote(uri.removeprefix("file://"))
    relative = uri.removeprefix(storage.uri.rstrip("/") + "/")
    return storage.full(unquote(relative))


def _safe(value: str) -> str:
    """A key as a directory name needing no escaping (the key itself is in the log)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in value)


def _iso(micros: int) -> str:
    moment = datetime.fromtimestamp(micros / 1e6, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def drop_unreferenced_clips(visible: TableLog, *, older_than_ms: int) -> int:
    """Delete the clip files the visible table's current version no longer holds and that
    were written before ``older_than_ms`` (epoch ms: time travel and a sync about to commit
    a fresh clip keep theirs); the number deleted. Kill's step for the visible table: its
    other files belong to the datasource table, whose VACUUM removes them."""
    if visible.version() < 0:
        return 0
    actions = pa.table(visible.table().get_add_actions(flatten=True))
    held = {unquote(p) for p in actions["path"].to_pylist() if "://" not in p}
    deleted = 0
    root = visible.full("")
    selector = pafs.FileSelector(root.rstrip("/"), recursive=True, allow_not_found=True)
    for info in visible.fs.get_file_info(selector):
        name = info.path.removeprefix(root.rstrip("/") + "/")
        if not info.base_name.startswith("clip-") or name in held or name.startswith("_delta_log"):
            continue
        if info.mtime is None or info.mtime.timestamp() * 1000 >= older_than_ms:
            continue
        try:
            visible.fs.delete_file(info.path)
            deleted += 1
        except (FileNotFoundError, OSError):
            pass  # another kill removed it first
    return deleted
