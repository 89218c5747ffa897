"""``segmentlake quickstart``: a sample datasource's life, end to end on the local warehouse.

It generates a deterministic stream of wiki edits, writes a first batch of DAY segments under
an exclusive time-chunk lock, appends late data through centralized allocation (segment
locks, first-generation ids in the existing chunks), overwrites one day with a new version,
and prints the visible timeline and the rows a reader sees per day. Rows live in one Delta
table per datasource, partitioned by segment (``__segment``); only the metadata decides what
is visible.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from segmentlake.cli.inspect import format_table
from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.shard_spec import NumberedShardSpec, ShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest

__all__ = ["run"]

logger = logging.getLogger(__name__)

DATASOURCE = "wikipedia"
START = datetime(2024, 1, 1, tzinfo=UTC)
_CHANNELS = ["#en.wikipedia", "#de.wikipedia", "#fr.wikipedia", "#ja.wikipedia", "#es.wikipedia"]
_COUNTRIES = ["US", "DE", "FR", "JP", "ES", "GB", "IN", "BR"]


def sample_edits(lake: Lake, day: datetime, rows: int, *, seed: int) -> DataFrame:
    """``rows`` deterministic wiki edits during ``day``."""
    day_ms = int(day.timestamp() * 1000)
    h = F.abs(F.hash(F.col("id"), F.lit(seed)))
    return lake.spark.range(rows).select(
        F.timestamp_millis(F.lit(day_ms) + (h % 86_400_000)).alias("__time"),
        F.element_at(F.array(*map(F.lit, _CHANNELS)), (h % 5 + 1).cast("int")).alias("channel"),
        F.concat(F.lit("Page_"), (h % 997).cast("string")).alias("page"),
        F.concat(F.lit("user"), (F.abs(F.hash("id", F.lit(seed + 1))) % 311).cast("string")).alias(
            "user"
        ),
        F.element_at(F.array(*map(F.lit, _COUNTRIES)), (h % 8 + 1).cast("int")).alias("country"),
        (h % 500).alias("added"),
        (F.abs(F.hash("id", F.lit(seed + 2))) % 50).alias("deleted"),
    )


def _edits_of_days(lake: Lake, days: list[datetime], rows: int, *, seed: int) -> DataFrame:
    """Sample edits of several days as one DataFrame (one Spark job writes them all)."""
    return reduce(DataFrame.unionByName, [sample_edits(lake, d, rows, seed=seed) for d in days])


def _write_segments(
    lake: Lake, rows: DataFrame, ids: dict[str, tuple[SegmentId, ShardSpec]]
) -> list[DataSegment]:
    """Write rows tagged with their segment id into the datasource table; describe the
    segments written (row counts from the data itself)."""
    path = f"{lake.warehouse}/{DATASOURCE}"
    rows.write.format("delta").mode("append").partitionBy("__segment").save(path)
    counts = {r["__segment"]: r["count"] for r in rows.groupBy("__segment").count().collect()}
    return [
        DataSegment(
            DATASOURCE,
            sid.interval,
            sid.version,
            spec,
            load_spec={"type": "delta", "path": path, "segment": key},
            dimensions=("channel", "page", "user", "country"),
            metrics=("added", "deleted"),
            num_rows=counts.get(key, 0),
        )
        for key, (sid, spec) in ids.items()
    ]


def _tag_by_day(df: DataFrame, day_ids: dict[datetime, str]) -> DataFrame:
    mapping = F.create_map(
        *[x for d, key in day_ids.items() for x in (F.lit(d.date()), F.lit(key))]
    )
    return df.withColumn("__segment", mapping[F.to_date("__time")])


def batch(lake: Lake, days: int, rows_per_day: int) -> None:
    interval = Interval(START, START + timedelta(days=days))
    group = f"quickstart-batch-{uuid.uuid4().hex[:8]}"
    lock = lake.lock(DATASOURCE, interval, group_id=group)
    ids = {}
    day_ids = {}
    for chunk in Granularity.DAY.iterate(interval):
        sid = SegmentId(DATASOURCE, chunk, lock.version, 0)
        ids[str(sid)] = (sid, NumberedShardSpec(0, 1))
        day_ids[chunk.start] = str(sid)
    rows = _edits_of_days(lake, list(day_ids), rows_per_day, seed=1)
    segments = _write_segments(lake, _tag_by_day(rows, day_ids), ids)
    lake.publish(DATASOURCE, segments, group_id=group)
    print(f"batch: {len(segments)} DAY segments, version {lock.version}")


def append_late(lake: Lake, late_days: list[datetime], rows: int) -> None:
    group = f"quickstart-append-{uuid.uuid4().hex[:8]}"
    requests = [
        AllocateRequest(Granularity.DAY.bucket(d), f"{group}-{d.date()}") for d in late_days
    ]
    allocated = lake.allocate(DATASOURCE, requests, group_id=group)
    ids = {
        str(p.segment_id): (
            p.segment_id,
            NumberedShardSpec(p.segment_id.partition_num, p.num_core_partitions),
        )
        for p in allocated
    }
    day_ids = {d: str(p.segment_id) for d, p in zip(late_days, allocated, strict=True)}
    data = _edits_of_days(lake, late_days, rows, seed=7)
    segments = _write_segments(lake, _tag_by_day(data, day_ids), ids)
    lake.publish(DATASOURCE, segments, group_id=group)
    print(
        f"append: {len(segments)} late segment(s) into existing chunks: "
        + ", ".join(
            f"{s.interval.start.date()} partition {s.shard_spec.partition_num}" for s in segments
        )
    )


def overwrite_day(lake: Lake, day: datetime, rows: int) -> None:
    interval = Granularity.DAY.bucket(day)
    group = f"quickstart-overwrite-{uuid.uuid4().hex[:8]}"
    lock = lake.lock(DATASOURCE, interval, group_id=group)
    sid = SegmentId(DATASOURCE, interval, lock.version, 0)
    data = _tag_by_day(sample_edits(lake, day, rows, seed=42), {day: str(sid)})
    segments = _write_segments(lake, data, {str(sid): (sid, NumberedShardSpec(0, 1))})
    lake.publish(DATASOURCE, segments, group_id=group)
    print(f"overwrite: {day.date()} replaced by version {lock.version} ({rows} rows)")


def visible_rows_per_day(lake: Lake) -> list[tuple[str, int]]:
    """Count the rows a reader sees per day: rows of visible segments only, one Delta scan."""
    visible = [str(s.id) for s in lake.timeline(DATASOURCE).visible_segments()]
    table = lake.spark.read.format("delta").load(f"{lake.warehouse}/{DATASOURCE}")
    counted = (
        table.where(F.col("__segment").isin(visible))
        .groupBy(F.to_date("__time").alias("day"))
        .count()
        .orderBy("day")
        .collect()
    )
    return [(str(r["day"]), r["count"]) for r in counted]


def run(lake: Lake, *, days: int, rows_per_day: int) -> int:
    """The quickstart story; returns the process exit code."""
    if lake.used_segments(DATASOURCE):
        print(f"{DATASOURCE} already exists in {lake.warehouse}: showing it as it is")
    else:
        batch(lake, days, rows_per_day)
        append_late(
            lake, [START + timedelta(days=1), START + timedelta(days=3)], rows_per_day // 10
        )
        overwrite_day(lake, START + timedelta(days=2), rows_per_day // 2)
    from segmentlake.cli.inspect import print_timeline

    print()
    print_timeline(lake, DATASOURCE, None)
    print()
    print(format_table(("day", "visible rows"), visible_rows_per_day(lake)))
    return 0
