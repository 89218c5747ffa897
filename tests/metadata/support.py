"""Small builders shared by the metadata tests."""

from __future__ import annotations

import time

from segmentlake.core.interval import Interval, format_timestamp
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec, ShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.records import PendingSegment

DAY = Interval.parse("2024-01-01/P1D")
NEXT_DAY = Interval.parse("2024-01-02/P1D")
NOON = Interval.parse("2024-01-01T12:00/PT1H")


def day_after(days: int) -> Interval:
    """The day ``days`` days after DAY."""
    step = DAY.end_millis - DAY.start_millis
    return Interval.of_millis(DAY.start_millis + days * step, DAY.end_millis + days * step)


def segment(
    datasource: str,
    interval: Interval,
    version: str,
    partition: int = 0,
    core: int = 0,
    *,
    shard_spec: ShardSpec | None = None,
) -> DataSegment:
    return DataSegment(
        datasource,
        interval,
        version,
        shard_spec or NumberedShardSpec(partition, core),
        load_spec={"type": "delta", "segment": f"{interval}_{version}_{partition}"},
        num_rows=10,
        size=100,
    )


def pending_segment(pending: PendingSegment) -> DataSegment:
    """The segment an ingestion task would publish for an allocated id."""
    sid = pending.segment_id
    return segment(
        sid.datasource, sid.interval, sid.version, sid.partition_num, pending.num_core_partitions
    )


def history(lake: Lake) -> list[dict[str, object]]:
    """The metadata table's commits, oldest first: version, operation, commit id."""
    table = lake.metadata.table
    if not lake.metadata.exists():
        return []
    latest = table.refresh()
    return [
        {
            "version": version,
            "operation": (record or {}).get("op"),
            "commit_id": (record or {}).get("id"),
        }
        for version, record in table.records(0, latest)
    ]


def latest_version(lake: Lake) -> int:
    return lake.metadata.table.refresh() if lake.metadata.exists() else -1


def now_version() -> str:
    return format_timestamp(int(time.time() * 1000))


def sleep_until(millis: int) -> None:
    """Sleep until the wall clock passes ``millis`` (epoch ms)."""
    delay = millis / 1000 - time.time()
    if delay > 0:
        time.sleep(delay + 0.05)
