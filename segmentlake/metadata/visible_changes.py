"""Which segment keys a visible-table sync must look at again since this process's last sync
of the datasource, so the sync diffs those keys instead of every visible segment.

A key's files in the visible table depend on three things: the visible records naming it and
the records whose chunks overlap theirs (which time each chunk wins), its files in the
datasource table, and what the visible table holds for it. Each has a record of what changed
since the last sync:

- the metadata commits in between record their write scope (``writes``): every segment record
  they changed lies in its time ranges, and which chunk wins an instant depends only on the
  records covering that instant, so keys whose records lie outside those ranges are served as
  they were;
- both tables are followed entry by entry (:meth:`SegmentFiles.touched_since`), so the paths
  each entry added or removed, with their keys, are known.

Anything that breaks the chain — a commit without a record or recording everything, another
warehouse behind the same path, a table loaded whole since, more commits than are scanned —
answers None, and the sync diffs everything (docs/decisions.md, "Visible table").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.metadata.scope import NOTHING, Scope
from segmentlake.metadata.segment_files import Mark, SegmentFiles
from segmentlake.metadata.store import MetadataStore

__all__ = ["ROW_VERSION", "Synced", "around", "changed_keys", "changes_timeline"]

# Metadata commits read to learn what changed; further behind, the whole diff is as cheap.
RECORDS_SCANNED = 2_000
# Changed time ranges a sync looks up one by one; more (a bulk publish) diff everything.
_MAX_RANGES = 256


@dataclass(frozen=True, slots=True)
class Synced:
    """What a sync left: the visible table at ``table`` (a follower's mark) held exactly the
    files that the metadata at ``metadata_version`` (of table ``metadata_id``) serves from
    the datasource table at ``source``; ``records`` are the visible segment records it read
    (``load_key``, ``start_ms`` and ``end_ms`` at least; with the :data:`ROW_VERSION` columns
    a sync tells which of them changed, not only where)."""

    metadata_id: str | None
    metadata_version: int
    table: Mark
    source: Mark
    records: pa.Table
    # Read afterwards (a new process's memo from the visible table's latest entry): every
    # segment record at the time, any visibility; a record deleted since would be missing.
    records_later: bool = False


def changed_keys(
    store: MetadataStore,
    datasource: str,
    synced: Synced | None,
    *,
    metadata_version: int,
    table: SegmentFiles,
    source: SegmentFiles,
    records: pa.Table,
) -> set[str] | None:
    """The segment keys whose files in the visible table can differ from what ``synced``
    left, given the metadata at ``metadata_version`` (whose visible segment records are
    ``records``), the visible ``table`` and the datasource table ``source`` as followed now;
    None when that cannot be told and everything must be diffed."""
    if synced is None or synced.metadata_id != store.table.table_id:
        return None
    behind = metadata_version - synced.metadata_version
    if not 0 <= behind <= RECORDS_SCANNED:
        return None
    time = _written(
        store, datasource, synced.metadata_version, metadata_version,
        no_deletes=synced.records_later,
    )  # fmt: skip
    if time is None:
        return None
    in_source = source.touched_since(synced.source)
    in_table = table.touched_since(synced.table)
    if in_source is None or in_table is None or None in in_table.values():
        return None
    keys = {k for k in in_source.values() if k is not None}
    keys.update(k for k in in_table.values() if k is not None)
    if not time:
        return keys
    if synced.records_later or not _has_row_versions(synced.records):
        # Not the visible records of the time: every key in the time written may differ.
        keys.update(_keys_overlapping(synced.records, time))
        keys.update(_keys_overlapping(records, time))
    else:
        keys.update(
            _keys_changed_within(synced.records, records, time, since=synced.metadata_version)
        )
    return keys


def around(records: pa.Table, keys: Iterable[str]) -> pa.Table:
    """The records that serving ``keys`` exactly needs: those naming them, and every record
    overlapping one of their chunks (which decide what each chunk wins)."""
    named = pc.fill_null(pc.is_in(records["load_key"], value_set=pa.array(list(keys))), False)
    chosen = records.filter(named)
    if not chosen.num_rows:
        return chosen
    spans = Scope.of(zip(chosen["start_ms"].to_pylist(), chosen["end_ms"].to_pylist(), strict=True))
    return records.filter(pa.array(_overlapping(records, spans.ranges)))


def changes_timeline(record: Mapping[str, Any], datasource: str) -> bool:
    """Whether the metadata commit of ``record`` (which names its datasource) can have
    changed the visible timeline of ``datasource``: not when it is another datasource's,
    changes no row, or wrote no segment record (a lock, an allocation, a compaction's
    bookkeeping; records written before commits said so count as changing it)."""
    return (
        record["ds"] == datasource
        and not record.get("neutral")
        and record.get("segments", True) is not False
    )


def _written(
    store: MetadataStore, datasource: str, after: int, upto: int, *, no_deletes: bool = False
) -> tuple[tuple[int, int], ...] | None:
    """The time ranges the commits of ``datasource`` in ``(after, upto]`` wrote; None when a
    commit's record is missing, names no datasource or wrote everything, or, with
    ``no_deletes``, deleted a segment record or does not say (written before commits said)."""
    scope = NOTHING
    for _, record in store.table.records(after, upto):
        if record is None or record.get("ds") is None:
            return None
        if not changes_timeline(record, datasource):
            continue
        if no_deletes and record.get("segments_deleted", 1) != 0:
            return None
        scope = scope | Scope.from_json(record.get("writes"))
        if scope.everything or len(scope.ranges) > _MAX_RANGES:
            return None
    return scope.ranges


# A record's id and the metadata version that wrote it (each commit stamps the rows it writes
# with its own version): a record whose row was not written again is the record it was.
ROW_VERSION = ("id", "rev")


def _has_row_versions(records: pa.Table) -> bool:
    return all(name in records.column_names for name in ROW_VERSION)


def _keys_changed_within(
    before: pa.Table, after: pa.Table, ranges: tuple[tuple[int, int], ...], *, since: int
) -> set[str]:
    """The keys whose served rows can differ between the visible records ``before`` (read at
    metadata version ``since`` or later) and ``after``, where every record that differs lies
    within ``ranges``: the keys of records that came or went (a row not written since
    ``since`` is the record it was, and serves the same rows unless the chunks around it
    changed), and of every record overlapping a chunk that came or went (which time a chunk
    wins depends only on the chunks overlapping it). An append into a chunk of thousands of
    segments names one key, not the thousands (docs/decisions.md, "The visible table")."""
    old = before.filter(pa.array(_overlapping(before, ranges)))
    new = after.filter(pa.array(_overlapping(after, ranges)))
    unchanged = pc.fill_null(pc.less_equal(new["rev"], since), False)
    came = new.filter(pc.invert(unchanged))
    kept = new["id"].filter(unchanged)
    went = old.filter(pc.invert(pc.fill_null(pc.is_in(old["id"], value_set=kept), False)))
    keys = {k for t in (went, came) for k in t["load_key"].to_pylist() if k is not None}
    moved = _chunks(old) ^ _chunks(new)
    if moved:
        spans = Scope.of((start, end) for start, end, _ in moved)
        keys.update(_keys_overlapping(new, spans.ranges))
    return keys


def _chunks(records: pa.Table) -> set[tuple[int, int, str]]:
    """The distinct chunks (interval and version) of ``records``."""
    chunks = (
        records.select(["start_ms", "end_ms", "version"])
        .group_by(["start_ms", "end_ms", "version"])
        .aggregate([])
    )
    return set(
        zip(
            chunks["start_ms"].to_pylist(),
            chunks["end_ms"].to_pylist(),
            chunks["version"].to_pylist(),
            strict=True,
        )
    )


def _keys_overlapping(records: pa.Table, ranges: tuple[tuple[int, int], ...]) -> set[str]:
    """The load keys of the records whose interval overlaps one of ``ranges``."""
    mask = _overlapping(records, ranges)
    if not mask.any():
        return set()
    picked = records["load_key"].filter(pa.array(mask))
    return {k for k in picked.to_pylist() if k is not None}


def _overlapping(records: pa.Table, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Which records' ``[start_ms, end_ms)`` overlap one of the sorted disjoint ``ranges``:
    the first range ending after a record's start must begin before its end."""
    if not ranges or not records.num_rows:
        return np.zeros(records.num_rows, dtype=bool)
    starts = pc.fill_null(records["start_ms"], 0).to_numpy()
    ends = pc.fill_null(records["end_ms"], 0).to_numpy()
    range_starts = np.array([s for s, _ in ranges], dtype=np.int64)
    range_ends = np.array([e for _, e in ranges], dtype=np.int64)
    first = np.searchsorted(range_ends, starts, side="right")
    inside = first < len(ranges)
    mask = np.zeros(records.num_rows, dtype=bool)
    mask[inside] = range_starts[first[inside]] < ends[inside]
    overlapping: np.ndarray = mask & (starts < ends)
    return overlapping
