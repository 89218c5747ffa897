"""Rows of the metadata table and their conversion to and from domain objects.

One Delta table holds every kind of metadata row (segment, lock, pending allocation, task)
so that a change touching several kinds — check locks, insert segments, release locks —
is one commit. Columns are shared and nullable; ``kind`` says which ones a row uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.collection import collection_paused
from segmentlake.core.interval import Interval
from segmentlake.core.load_spec import delta_load_spec
from segmentlake.core.locks import LockGranularity, LockType, TaskLock
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import (
    NON_ROOT_GENERATION_PARTITION_ID_MIN,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    ShardSpec,
    TombstoneShardSpec,
    shard_spec_from_json,
)
from segmentlake.core.timeline_records import SegmentRecords
from segmentlake.errors import SpecError
from segmentlake.metadata.scope import Scope

__all__ = [
    "COLUMNS",
    "LEASE",
    "LEASED_KINDS",
    "SEGMENT_COLUMNS",
    "TABLE_SCHEMA",
    "TIME_KINDS",
    "PendingSegment",
    "Row",
    "TableSource",
    "first_free_root_partition",
    "forget_row_dicts",
    "lease_key",
    "lease_row",
    "lock_from_row",
    "lock_row",
    "metadata_row",
    "pending_from_row",
    "pending_row",
    "rows_scope",
    "scope_of_rows",
    "scope_of_table",
    "segment_from_row",
    "segment_records",
    "segment_row",
    "segment_table",
    "segments_from_rows",
    "segments_from_table",
]

Row = dict[str, Any]

SEGMENT, LOCK, PENDING, TASK = "segment", "lock", "pending", "task"


LEASE = "lease"
# Rows a task group holds while its lease lasts; their liveness is the group's lease row.
LEASED_KINDS = frozenset({LOCK, "compaction_running"})
# Rows that belong to the time range of their interval (conflicts are per time range);
# every other kind is keyed by ``<kind>:<id>``.
TIME_KINDS = frozenset({SEGMENT, LOCK, PENDING, "compaction_selection", "compaction_running"})

_V2_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("datasource", pa.string()),
    ("kind", pa.string()),
    ("id", pa.string()),
    ("rev", pa.int64()),
    ("deleted", pa.bool_()),
    ("updated_ms", pa.int64()),
    ("start_ms", pa.int64()),
    ("end_ms", pa.int64()),
    ("version", pa.string()),
    ("partition_num", pa.int32()),
    ("used", pa.bool_()),
    ("visibility", pa.string()),
    ("shard_type", pa.string()),
    ("core_partitions", pa.int32()),
    ("root_start", pa.int32()),
    ("root_end", pa.int32()),
    ("minor_version", pa.int32()),
    ("aug_size", pa.int32()),
    ("load_key", pa.string()),
    ("num_rows", pa.int64()),
    ("size_bytes", pa.int64()),
    ("group_id", pa.string()),
    ("task_id", pa.string()),
    ("lock_type", pa.string()),
    ("lock_granularity", pa.string()),
    ("priority", pa.int32()),
    ("revoked", pa.bool_()),
    ("expires_ms", pa.int64()),
    ("sequence_name", pa.string()),
    ("previous_id", pa.string()),
    ("seq", pa.int64()),
    ("payload", pa.string()),
    ("shared", pa.string()),
)
TABLE_SCHEMA = pa.schema([pa.field(name, kind) for name, kind in _V2_COLUMNS])
COLUMNS: tuple[str, ...] = tuple(name for name, _ in _V2_COLUMNS)


def first_free_root_partition(rows: Iterable[Row]) -> int:
    """The first first-generation partition id of a chunk (its segment and pending rows) that
    no segment holds and no minor compaction's overwrite covers: a root partition an
    overwrite covers stays taken after its segment is marked unused, since a new segment
    there would be overshadowed by the overwrite as soon as it was published."""
    end = 0
    for row in rows:
        partition = int(row["partition_num"])
        if partition < NON_ROOT_GENERATION_PARTITION_ID_MIN:
            end = max(end, partition + 1)
        elif row.get("root_end") is not None:  # an overwrite segment (pending rows have none)
            end = max(end, int(row["root_end"]))
    return end


def lease_key(group_id: str) -> str:
    """The scope key of a task group's lease row."""
    return f"{LEASE}:{group_id}"


def rows_scope(rows: Iterable[Row]) -> Scope:
    """What new versions of ``rows`` change: each row's interval's time range, or its key."""
    return Scope.of(*scope_of_rows(rows))


def scope_of_rows(rows: Iterable[Row]) -> tuple[list[tuple[int, int]], list[str]]:
    """The time ranges and keys of :func:`rows_scope`, to merge into one scope with others
    (merging one scope per row would re-merge the ranges at every row: quadratic)."""
    return _scope_parts(
        (row["kind"], row["id"], row.get("start_ms"), row.get("end_ms")) for row in rows
    )


def scope_of_table(table: pa.Table) -> tuple[list[tuple[int, int]], list[str]]:
    """:func:`scope_of_rows` of the rows of ``table``, column by column (the 10^4 lock rows
    a bulk publish releases)."""
    if not table.num_rows:
        return [], []
    timed = pc.and_(
        pc.is_in(table["kind"], value_set=_TIME_KIND_VALUES), pc.is_valid(table["start_ms"])
    )
    rows = table.filter(timed)
    ranges = list(zip(rows["start_ms"].to_pylist(), rows["end_ms"].to_pylist(), strict=True))
    pending = rows.filter(pc.equal(rows["kind"], PENDING))["id"].to_pylist()
    keys = [f"{PENDING}:{row_id}" for row_id in pending]
    if len(rows) < table.num_rows:
        other = table.filter(pc.invert(timed))
        kinds, ids = other["kind"].to_pylist(), other["id"].to_pylist()
        keys += [f"{kind}:{row_id}" for kind, row_id in zip(kinds, ids, strict=True)]
    return ranges, keys


_TIME_KIND_VALUES = pa.array(sorted(TIME_KINDS), pa.string())


def _scope_parts(
    rows: Iterable[tuple[str, str, int | None, int | None]],
) -> tuple[list[tuple[int, int]], list[str]]:
    ranges: list[tuple[int, int]] = []
    keys: list[str] = []
    for kind, row_id, start, end in rows:
        if kind in TIME_KINDS and start is not None:
            # A time row has both bounds or neither (the column pair is written together).
            ranges.append((int(start), int(end)))  # type: ignore[arg-type]
            if kind == PENDING:
                # An allocation key names one allocation wherever it lies: two allocations
                # of a key in different chunks must meet (and a reader can find its commit).
                keys.append(f"{PENDING}:{row_id}")
        else:
            keys.append(f"{kind}:{row_id}")
    return ranges, keys


def metadata_row(datasource: str, kind: str, row_id: str, now_ms: int, **values: Any) -> Row:
    """A row of ``kind`` with every column present (None where the kind does not use it)."""
    row: Row = dict.fromkeys(COLUMNS)
    row.update(datasource=datasource, kind=kind, id=row_id, updated_ms=now_ms, **values)
    return row


_PLAIN_SPECS = frozenset({"numbered", "numbered_overwrite", "tombstone"})


def segment_row(
    segment: DataSegment, *, used: bool, now_ms: int, visibility: str | None = None
) -> Row:
    """A segment record. The shard spec's fields, the sizes, the rows' key and the visibility
    are typed columns; what many segments share (dimensions, metrics, schema, compaction
    state, the table's path) is one JSON text per kind of segment in ``shared``, stored and
    held dictionary-encoded; ``payload`` keeps only what is this segment's own beyond the
    columns (a hashed or range shard spec, an upgraded copy's load spec), usually nothing."""
    row: Row = dict.fromkeys(COLUMNS)
    row.update(
        zip(_SEGMENT_FIELDS, _segment_values(segment, used, now_ms, visibility, {}), strict=True)
    )
    return row


def segment_table(
    segments: Sequence[DataSegment],
    *,
    used: bool,
    now_ms: int,
    visibility: Mapping[str, str] | None = None,
) -> pa.Table:
    """The records :func:`segment_row` makes, as a table of the file's columns (no
    ``datasource``, no ``rev``/``deleted`` yet) built column by column: a bulk publish of
    10^5 segments makes no dict per row, and one ``shared`` text per kind of segment."""
    states = visibility or {}
    texts: dict[tuple[Any, ...], str] = {}
    values = [
        _segment_values(seg, used, now_ms, states.get(str(seg.id)), texts) for seg in segments
    ]
    columns = dict(zip(_SEGMENT_FIELDS, zip(*values, strict=True), strict=True)) if values else {}
    arrays = [
        pa.array(columns.get(f.name, ()), f.type)
        if f.name in columns or not values
        else pa.nulls(len(values), f.type)
        for f in _TABLE_FILE_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=_TABLE_FILE_SCHEMA)


_TABLE_FILE_SCHEMA = pa.schema([f for f in TABLE_SCHEMA if f.name != "datasource"])


def _segment_values(
    segment: DataSegment,
    used: bool,
    now_ms: int,
    visibility: str | None,
    texts: dict[tuple[Any, ...], str],
) -> tuple[Any, ...]:
    """A segment record's values in the order of ``_SEGMENT_FIELDS``; ``texts`` caches the
    ``shared`` text per kind of segment (by identity of its parts: they outlive the call)."""
    spec = segment.shard_spec
    load = segment.load_spec
    key = load.get("segment")
    path = load.get("path")
    parts = (segment.dimensions, segment.metrics, segment.binary_version)
    kind = (path, *parts, id(segment.schema), id(segment.last_compaction_state))
    shared = texts.get(kind)
    if shared is None:
        shared = texts[kind] = _shared_text(segment, path)
    extras: dict[str, Any] = {}
    if spec.type_name not in _PLAIN_SPECS:
        extras["shardSpec"] = spec.to_json()
    if not _is_plain_load_spec(load, path, key):
        extras["loadSpec"] = dict(load)
    interval = segment.interval
    return (
        SEGMENT,
        str(segment.id),
        now_ms,
        used,
        visibility if used else None,
        segment.datasource,
        interval.start_millis,
        interval.end_millis,
        segment.version,
        spec.type_name,
        spec.partition_num,
        spec.num_core_partitions,
        spec.start_root_partition_id,
        spec.end_root_partition_id,
        spec.minor_version,
        spec.atomic_update_group_size,
        key if isinstance(key, str) else None,
        segment.num_rows,
        segment.size,
        shared,
        orjson.dumps(extras).decode() if extras else None,
    )


def _shared_text(segment: DataSegment, path: Any) -> str:
    """The JSON text of what segments of one kind share (see :func:`segment_row`)."""
    state = segment.last_compaction_state
    shared = {
        "loadPath": path,
        "dimensions": list(segment.dimensions),
        "metrics": list(segment.metrics),
        "schema": None if segment.schema is None else segment.schema.to_json(),
        "lastCompactionState": None if state is None else dict(state),
        "binaryVersion": segment.binary_version,
    }
    return orjson.dumps(shared, option=orjson.OPT_SORT_KEYS).decode()


def _is_plain_load_spec(load: Mapping[str, Any], path: Any, key: Any) -> bool:
    """Whether ``load`` is exactly what :func:`_load_spec` rebuilds from its path and key."""
    return load == delta_load_spec(path, key)


# The columns segments_from_rows reads.
SEGMENT_COLUMNS = (
    "datasource",
    "start_ms",
    "end_ms",
    "version",
    "shard_type",
    "partition_num",
    "core_partitions",
    "root_start",
    "root_end",
    "minor_version",
    "aug_size",
    "load_key",
    "num_rows",
    "size_bytes",
    "shared",
    "payload",
)
# What _segment_values gives, in its order: a record's own columns, then those it shares
# with segments_from_rows.
_SEGMENT_FIELDS = ("kind", "id", "updated_ms", "used", "visibility", *SEGMENT_COLUMNS)


def segment_from_row(row: Row) -> DataSegment:
    """Rebuild a segment from its record."""
    return segments_from_rows([row])[0]


def segments_from_rows(rows: Iterable[Row]) -> list[DataSegment]:
    """Segments from their records (row dicts with :data:`SEGMENT_COLUMNS`).

    A segment is a function of exactly those columns, so each is built once per process
    while it stays in a bounded memo: every append's publish reads the used segments of the
    chunks it appends to again, thousands in a stream's busy chunks, and rebuilding them
    each time was the largest part of its decision."""
    builder = _SegmentBuilder()
    memo, texts, by_row = _BUILT, _SHARED_TEXTS, _BY_ROW
    with collection_paused():  # 10^5 new objects and no garbage
        out = []
        for row in rows:
            # The very dict seen before (a transaction's rows come from the metadata store's
            # memo of row dicts): no key to build. The entry holds the dict, so its id is not
            # reused.
            seen = by_row.get(id(row))
            if seen is not None and seen[0] is row:
                out.append(seen[1])
                continue
            text = row.get("shared")
            key = (*map(row.get, _MEMO_COLUMNS), texts.setdefault(text, text))
            seg = memo.get(key)
            if seg is None:
                seg = builder.segment(row)
                if len(memo) >= _MEMO_SEGMENTS:
                    memo.clear()  # a bound, not an eviction policy: refilled within a call
                    texts.clear()
                memo[key] = seg
            if len(by_row) >= _MEMO_SEGMENTS:
                by_row.clear()
            by_row[id(row)] = (row, seg)
            out.append(seg)
        return out


# Every column a segment is built from but ``shared`` (a datasource's schema as text, a
# few distinct values): that one is keyed by its canonical copy, so the memo holds each
# text once, not once per record.
_MEMO_COLUMNS = tuple(c for c in SEGMENT_COLUMNS if c != "shared")
_MEMO_SEGMENTS = 32_768  # a stream's busy chunks hold ~10^4; memory: docs/decisions.md
_BUILT: dict[tuple[Any, ...], DataSegment] = {}
_SHARED_TEXTS: dict[str | None, str | None] = {}
_BY_ROW: dict[int, tuple[Row, DataSegment]] = {}


def forget_row_dicts() -> None:
    """Let go of the record dicts :func:`segments_from_rows` keeps to know them again (the
    metadata store's memo of row dicts calls it when it lets go of its own)."""
    _BY_ROW.clear()


def segments_from_table(datasource: str, table: pa.Table) -> list[DataSegment]:
    """Segments from their records as Arrow (:data:`SEGMENT_COLUMNS`): what loading a
    timeline of 10^6 segments does, so it goes column by column with no Python dict per row,
    and each distinct interval, shard spec and shared descriptor is built once."""
    return _segments_of_table(datasource, table, _SegmentBuilder())


def segment_records(datasource: str, table: pa.Table) -> SegmentRecords:
    """The records of ``table`` (:data:`SEGMENT_COLUMNS`) as the columns a lazily loaded
    timeline indexes (:meth:`VersionedIntervalTimeline.from_records`); each segment is built
    from its row only when the timeline touches its chunk."""
    versions = pc.unique(table.column("version")).to_pylist()
    codes = pc.index_in(table.column("version"), value_set=pa.array(versions, pa.string()))
    return SegmentRecords(
        datasource=datasource,
        start=_int64s(table.column("start_ms")),
        end=_int64s(table.column("end_ms")),
        version=_int64s(codes),
        versions=tuple(versions),
        partition=_int64s(table.column("partition_num")),
        source=TableSource(datasource, table),
    )


def _int64s(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int64]:
    return np.asarray(column.to_numpy(), dtype=np.int64)


class TableSource:
    """Builds the segments of some rows of an Arrow table of records, on demand; what is
    shared between rows (intervals, shard specs, shared descriptors) is built once across
    calls."""

    __slots__ = ("_builder", "_datasource", "_table")

    def __init__(self, datasource: str, table: pa.Table) -> None:
        self._datasource = datasource
        self._table = table
        self._builder = _SegmentBuilder()

    def segments(self, rows: npt.NDArray[np.int64]) -> list[DataSegment]:
        """The segments of records ``rows``, in that order."""
        if len(rows) == self._table.num_rows and bool((rows == np.arange(len(rows))).all()):
            taken = self._table  # all of them, in order: no copy
        else:
            taken = self._table.take(pa.array(rows, pa.int64()))
        return _segments_of_table(self._datasource, taken, self._builder)


def _segments_of_table(
    datasource: str, table: pa.Table, builder: _SegmentBuilder
) -> list[DataSegment]:
    """The segments of every row of ``table``, in row order, sharing ``builder``'s parts."""

    def column(name: str) -> list[Any]:
        values: list[Any] = table.column(name).to_pylist()
        return values

    # One zip over whole columns: no per-cell indexing, no dict per row.
    spec_keys = zip(
        *map(column, ("shard_type", "partition_num", "core_partitions", "root_start")),
        *map(column, ("root_end", "minor_version", "aug_size")),
        strict=True,
    )
    records = zip(
        *map(column, ("start_ms", "end_ms", "version", "load_key", "num_rows", "size_bytes")),
        column("payload"),
        _dictionary_values(table.column("shared")),
        spec_keys,
        strict=True,
    )
    make = DataSegment.trusted
    intervals, specs = builder.intervals, builder.specs
    out: list[DataSegment] = []
    with collection_paused():  # 10^6 new objects and no garbage
        for start, end, version, key, rows, size, payload, shared_text, spec_key in records:
            interval = intervals.get((start, end))
            if interval is None:
                interval = intervals[(start, end)] = Interval.of_millis(start, end)
            extras = orjson.loads(payload) if payload else _NO_EXTRAS
            if "shardSpec" in extras:
                spec = builder.json_spec(extras["shardSpec"])
            else:
                spec = specs.get(spec_key) or builder.plain_spec(spec_key)
            shared = builder.shared_part(shared_text)
            out.append(
                make(
                    datasource=datasource,
                    interval=interval,
                    version=version,
                    shard_spec=spec,
                    load_spec=extras.get("loadSpec") or delta_load_spec(shared["path"], key),
                    dimensions=shared["dimensions"],
                    metrics=shared["metrics"],
                    size=size or 0,
                    num_rows=rows or 0,
                    last_compaction_state=shared["state"],
                    binary_version=shared["binary_version"],
                    schema=shared["schema"],
                )
            )
    return out


_NO_EXTRAS: dict[str, Any] = {}


def _dictionary_values(column: pa.ChunkedArray) -> list[str | None]:
    """The values of a (maybe dictionary-encoded) string column, each distinct text one
    Python object: a column repeated 10^6 times costs a list of references, not 10^6 strings."""
    out: list[str | None] = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            values = chunk.dictionary.to_pylist()
            out.extend(None if i is None else values[i] for i in chunk.indices.to_pylist())
        else:
            out.extend(chunk.to_pylist())
    return out


class _SegmentBuilder:
    """Builds segments from records, each distinct interval, shard spec and shared part
    once (a chunk's segments share their interval; most share a spec)."""

    def __init__(self) -> None:
        self.intervals: dict[tuple[int, int], Interval] = {}
        self.specs: dict[tuple[Any, ...], ShardSpec] = {}
        self.shared: dict[str | None, dict[str, Any]] = {}

    def segment(self, row: Row, datasource: str | None = None) -> DataSegment:
        span = (row["start_ms"], row["end_ms"])
        interval = self.intervals.get(span)
        if interval is None:
            interval = self.intervals[span] = Interval.of_millis(*span)
        extras = orjson.loads(row["payload"]) if row.get("payload") else _NO_EXTRAS
        if "shardSpec" in extras:
            spec = self.json_spec(extras["shardSpec"])
        else:
            key = (
                row["shard_type"],
                row["partition_num"],
                row["core_partitions"],
                row["root_start"],
                row["root_end"],
                row["minor_version"],
                row["aug_size"],
            )
            spec = self.specs.get(key) or self.plain_spec(key)
        shared = self.shared_part(row.get("shared"))
        load = extras.get("loadSpec") or delta_load_spec(shared["path"], row.get("load_key"))
        return DataSegment.trusted(
            datasource=datasource or row["datasource"],
            interval=interval,
            version=row["version"],
            shard_spec=spec,
            load_spec=load,
            dimensions=shared["dimensions"],
            metrics=shared["metrics"],
            size=int(row.get("size_bytes") or 0),
            num_rows=int(row.get("num_rows") or 0),
            last_compaction_state=shared["state"],
            binary_version=shared["binary_version"],
            schema=shared["schema"],
        )

    def shared_part(self, text: str | None) -> dict[str, Any]:
        found = self.shared.get(text)
        if found is None:
            data = orjson.loads(text) if text else {}
            schema = data.get("schema")
            found = self.shared[text] = {
                "path": data.get("loadPath"),
                "dimensions": tuple(data.get("dimensions") or ()),
                "metrics": tuple(data.get("metrics") or ()),
                "schema": None if schema is None else SegmentSchema.from_json(schema),
                "state": data.get("lastCompactionState"),
                "binary_version": int(data.get("binaryVersion", 9)),
            }
        return found

    def plain_spec(self, key: tuple[Any, ...]) -> ShardSpec:
        spec = self.specs[key] = _plain_spec(*key)
        return spec

    def json_spec(self, obj: dict[str, Any]) -> ShardSpec:
        key = ("json", orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))
        spec = self.specs.get(key)
        if spec is None:
            spec = self.specs[key] = shard_spec_from_json(obj)
        return spec


def _plain_spec(
    kind: str, partition: int, core: int, root_start: int, root_end: int, minor: int, aug: int
) -> ShardSpec:
    if kind == "numbered":
        return NumberedShardSpec(partition, core)
    if kind == "numbered_overwrite":
        return NumberedOverwriteShardSpec(partition, root_start, root_end, minor, aug)
    if kind == "tombstone":
        return TombstoneShardSpec()
    raise SpecError(f"segment record with shard type {kind!r} but no shard spec payload")


def lease_row(datasource: str, group_id: str, *, expires_ms: int, now_ms: int) -> Row:
    """The lease of a task group: every row the group holds lives until ``expires_ms``."""
    return metadata_row(
        datasource, LEASE, group_id, now_ms, group_id=group_id, expires_ms=expires_ms
    )


def lock_row(lock: TaskLock, *, now_ms: int) -> Row:
    return metadata_row(
        lock.datasource,
        LOCK,
        lock.lock_id,
        now_ms,
        start_ms=lock.interval.start_millis,
        end_ms=lock.interval.end_millis,
        version=lock.version,
        partition_num=lock.partition_num,
        group_id=lock.group_id,
        task_id=lock.task_id,
        lock_type=lock.lock_type.value,
        lock_granularity=lock.granularity.value,
        priority=lock.priority,
        revoked=lock.revoked,
        expires_ms=lock.expires_millis,
        seq=lock.acquired_millis,
    )


def lock_from_row(row: Row) -> TaskLock:
    """The lock of a lock record (checked when it was granted, so not checked again)."""
    return TaskLock.trusted(
        lock_id=row["id"],
        group_id=row["group_id"],
        task_id=row["task_id"],
        datasource=row["datasource"],
        interval=Interval.of_millis(row["start_ms"], row["end_ms"]),
        lock_type=LockType(row["lock_type"]),
        granularity=LockGranularity(row["lock_granularity"]),
        priority=int(row["priority"]),
        version=row["version"],
        expires_millis=int(row["expires_ms"]),
        partition_num=row["partition_num"],
        revoked=bool(row["revoked"]),
        acquired_millis=int(row["seq"] or 0),
    )


@dataclass(frozen=True, slots=True)
class PendingSegment:
    """An allocated, not yet published segment id (Druid's pendingSegments table).

    ``sequence_name`` + ``previous_id`` make allocation idempotent: the same request returns
    the same id.
    """

    segment_id: SegmentId
    sequence_name: str
    previous_id: str
    group_id: str
    num_core_partitions: int

    @property
    def request_key(self) -> str:
        return f"{self.sequence_name}|{self.previous_id}"


def pending_row(pending: PendingSegment, *, now_ms: int) -> Row:
    sid = pending.segment_id
    return metadata_row(
        sid.datasource,
        PENDING,
        pending.request_key,
        now_ms,
        start_ms=sid.interval.start_millis,
        end_ms=sid.interval.end_millis,
        version=sid.version,
        partition_num=sid.partition_num,
        group_id=pending.group_id,
        sequence_name=pending.sequence_name,
        previous_id=pending.previous_id,
        seq=pending.num_core_partitions,
        payload=str(sid),
    )


def pending_from_row(row: Row) -> PendingSegment:
    sid = SegmentId(
        row["datasource"],
        Interval.of_millis(row["start_ms"], row["end_ms"]),
        row["version"],
        int(row["partition_num"]),
    )
    return PendingSegment(
        segment_id=sid,
        sequence_name=row["sequence_name"],
        previous_id=row["previous_id"],
        group_id=row["group_id"],
        num_core_partitions=int(row["seq"] or 0),
    )
