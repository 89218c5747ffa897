"""Rows of the metadata table and their conversion to and from domain objects.

One Delta table holds every kind of metadata row (segment, lock, pending allocation, task)
so that a change touching several kinds — check locks, insert segments, release locks —
is one commit. Columns are shared and nullable; ``kind`` says which ones a row uses.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from segmentlake.core.interval import Interval
from segmentlake.core.locks import LockGranularity, LockType, TaskLock
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import ShardSpec, shard_spec_from_json

__all__ = [
    "COLUMNS",
    "FILE_SCHEMA",
    "SCHEMA_DDL",
    "SEGMENT_COLUMNS",
    "PendingSegment",
    "Row",
    "lock_from_row",
    "lock_row",
    "metadata_row",
    "pending_from_row",
    "pending_row",
    "segment_from_row",
    "segment_row",
    "segments_from_rows",
]

Row = dict[str, Any]

SEGMENT, LOCK, PENDING, TASK = "segment", "lock", "pending", "task"

SCHEMA_DDL = (
    "datasource STRING NOT NULL, kind STRING NOT NULL, id STRING NOT NULL, "
    "start_ms BIGINT, end_ms BIGINT, version STRING, partition_num INT, used BOOLEAN, "
    "group_id STRING, task_id STRING, lock_type STRING, lock_granularity STRING, "
    "priority INT, revoked BOOLEAN, expires_ms BIGINT, sequence_name STRING, "
    "previous_id STRING, seq BIGINT, num_rows BIGINT, size_bytes BIGINT, "
    "payload STRING, updated_ms BIGINT"
)
COLUMNS: tuple[str, ...] = tuple(part.split()[0] for part in SCHEMA_DDL.split(", "))
_ARROW_TYPES = {
    "STRING": pa.string(),
    "BIGINT": pa.int64(),
    "INT": pa.int32(),
    "BOOLEAN": pa.bool_(),
}
# A data file's columns: every column but the partition column ``datasource``, which Delta
# keeps in the log (as Spark writes partitioned tables).
FILE_SCHEMA = pa.schema(
    [
        pa.field(name, _ARROW_TYPES[sql_type])
        for name, sql_type, *_ in (part.split() for part in SCHEMA_DDL.split(", "))
        if name != "datasource"
    ]
)


def metadata_row(datasource: str, kind: str, row_id: str, now_ms: int, **values: Any) -> Row:
    """A row of ``kind`` with every column present (None where the kind does not use it)."""
    row: Row = dict.fromkeys(COLUMNS)
    row.update(datasource=datasource, kind=kind, id=row_id, updated_ms=now_ms, **values)
    return row


def segment_row(segment: DataSegment, *, used: bool, now_ms: int) -> Row:
    """A segment record; the descriptor JSON keeps everything Druid's ``payload`` keeps."""
    spec = segment.shard_spec
    return metadata_row(
        segment.datasource,
        SEGMENT,
        str(segment.id),
        now_ms,
        start_ms=segment.interval.start_millis,
        end_ms=segment.interval.end_millis,
        version=segment.version,
        partition_num=spec.partition_num,
        used=used,
        num_rows=segment.num_rows,
        size_bytes=segment.size,
        payload=json.dumps(segment.to_json(), separators=(",", ":")),
    )


# The columns segment_from_row reads.
SEGMENT_COLUMNS = ("datasource", "start_ms", "end_ms", "version", "payload")


def segment_from_row(row: Row) -> DataSegment:
    """Rebuild a segment from its row (interval and version from columns, the rest from the
    descriptor)."""
    return segments_from_rows([row])[0]


def segments_from_rows(rows: Iterable[Row]) -> list[DataSegment]:
    """:func:`segment_from_row` for many rows; segments of one chunk share their interval
    and most share a shard spec, so each distinct one is built once."""
    intervals: dict[tuple[int, int], Interval] = {}
    specs: dict[str, ShardSpec] = {}
    schemas: dict[str, SegmentSchema | None] = {"None": None}
    out = []
    # 10^5 new objects, none of them garbage: the cyclic collector would only rescan them
    # (measured: half of the time for 10^5 segments).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for row in rows:
            data = orjson.loads(row["payload"])
            span = (row["start_ms"], row["end_ms"])
            interval = intervals.get(span) or intervals.setdefault(span, Interval.of_millis(*span))
            spec_key = repr(data["shardSpec"])  # the payload's key order is ours, hence stable
            spec = specs.get(spec_key) or specs.setdefault(
                spec_key, shard_spec_from_json(data["shardSpec"])
            )
            schema_key = repr(data.get("schema"))
            if schema_key not in schemas:
                schemas[schema_key] = SegmentSchema.from_json(data["schema"])
            out.append(_segment(row, data, interval, spec, schemas[schema_key]))
    finally:
        if collecting:
            gc.enable()
    return out


def _segment(
    row: Row,
    data: dict[str, Any],
    interval: Interval,
    spec: ShardSpec,
    schema: SegmentSchema | None,
) -> DataSegment:
    return DataSegment(
        datasource=row["datasource"],
        interval=interval,
        version=row["version"],
        shard_spec=spec,
        load_spec=data.get("loadSpec") or {},
        dimensions=tuple(d for d in (data.get("dimensions") or "").split(",") if d),
        metrics=tuple(m for m in (data.get("metrics") or "").split(",") if m),
        size=int(data.get("size", 0)),
        num_rows=int(data.get("numRows", 0)),
        last_compaction_state=data.get("lastCompactionState"),
        binary_version=int(data.get("binaryVersion", 9)),
        schema=schema,
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
    return TaskLock(
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
