"""Appends into chunks a compaction made coarser (HOUR appends, DAY chunks) on real Spark and
Delta: one segment per chunk joined, not one per bucket; a layout that changed between the
write and the publish makes the append write again by bucket, losing and doubling nothing;
an append into a chunk newer, finer chunks overshadow is copied into them."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import SparkSession

from segmentlake.core.interval import Interval
from segmentlake.core.joined_chunks import JoinedChunks
from segmentlake.ingest.parse import CHUNK
from segmentlake.ingest.rollup import joined_chunk_sql
from segmentlake.lake import Lake
from tests.compact.conftest import events, spec, totals

pytestmark = [pytest.mark.spark]

DAY_1 = "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"
DAY_2 = "2024-01-02T00:00:00.000Z/2024-01-03T00:00:00.000Z"


def hourly(n: int, salt: int) -> list[tuple]:
    """``n`` rows a day over 2024-01-01 and 2024-01-02, one an hour in turn."""
    return [
        (f"2024-01-0{1 + d}T{h % 24:02d}:{(h * 7) % 60:02d}:00Z", f"#{h % 3}", f"u{h}", h + salt)
        for d in range(2)
        for h in range(n)
    ]


def compacted_to_days(spark: SparkSession, lake: Lake, ds: str) -> None:
    lake.append(events(spark, hourly(48, 0)), ds, spec(segment="hour"))
    report = lake.compact(ds, mode="major", segment_granularity="DAY")
    assert report.status == "SUCCESS", report.summary()


def days_before_an_append(spark: SparkSession, lake: Lake, ds: str) -> tuple[set[str], int]:
    """Compacted DAY chunks: their visible segment ids, and the edits they hold."""
    compacted_to_days(spark, lake, ds)
    before = {str(s.id) for s in lake.timeline(ds).visible_segments()}
    return before, totals(lake.read(ds))["edits"]


def new_segments(lake: Lake, ds: str, before: set[str]) -> list:
    return [s for s in lake.timeline(ds).visible_segments() if str(s.id) not in before]


def test_an_hour_append_into_day_chunks_adds_one_segment_a_day(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    before, edits = days_before_an_append(spark, lake, ds)

    report = lake.append(events(spark, hourly(30, 1)), ds, spec(segment="hour"))

    assert report.status == "SUCCESS", report.summary()
    added = new_segments(lake, ds, before)
    assert sorted(str(s.interval) for s in added) == [DAY_1, DAY_2]
    assert report.segments == 2
    assert sum(s.num_rows for s in added) == report.rows.rows_out == 60
    assert totals(lake.read(ds))["edits"] == edits + 60


def test_a_process_that_never_read_the_datasource_joins_its_day_chunks_too(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    # A batch job is a new driver: its first append has read nothing of the datasource.
    before, edits = days_before_an_append(spark, lake, ds)
    new_process = Lake(spark, lake.warehouse, lease_seconds=600)

    report = new_process.append(events(spark, hourly(30, 1)), ds, spec(segment="hour"))

    assert report.status == "SUCCESS", report.summary()
    added = new_segments(lake, ds, before)
    assert sorted(str(s.interval) for s in added) == [DAY_1, DAY_2]
    assert report.segments == 2
    assert totals(lake.read(ds))["edits"] == edits + 60


def test_an_oversized_joined_chunk_is_split_and_every_row_counted_once(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    before, edits = days_before_an_append(spark, lake, ds)
    small = spec(segment="hour", rollup=False) | {
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 10}
    }

    report = lake.append(events(spark, hourly(40, 2)), ds, small)

    added = new_segments(lake, ds, before)
    assert {str(s.interval) for s in added} == {DAY_1, DAY_2}
    assert all(s.num_rows <= 10 for s in added)
    assert sum(s.num_rows for s in added) == 80 == report.rows.rows_out
    assert totals(lake.read(ds))["edits"] == edits + 80


def stale_day_layout(spark: SparkSession, lake: Lake, ds: str) -> tuple[Lake, Lake]:
    """An appender that last read DAY chunks, and another writer (its own metadata reads)
    that has compacted the days back to hours since."""
    compacted_to_days(spark, lake, ds)
    appender = Lake(spark, lake.warehouse, lease_seconds=600)
    appender.append(events(spark, hourly(2, 3)), ds, spec(segment="hour"))
    other = Lake(spark, lake.warehouse, lease_seconds=600)
    back = other.compact(ds, mode="major", segment_granularity="HOUR")
    assert back.status == "SUCCESS", back.summary()
    return appender, other


def test_a_joined_chunk_gone_since_it_was_read_makes_the_append_write_again_by_bucket(
    spark: SparkSession, lake: Lake, ds: str, caplog: pytest.LogCaptureFixture
) -> None:
    appender, other = stale_day_layout(spark, lake, ds)
    assert len(other.mark_overshadowed_unused(ds)) > 0  # the DAY chunks are gone
    hours = {str(s.id) for s in other.timeline(ds).visible_segments()}
    edits = totals(other.read(ds))["edits"]

    with caplog.at_level(logging.INFO, logger="segmentlake.ingest.task"):
        report = appender.append(events(spark, hourly(5, 4)), ds, spec(segment="hour"))

    assert "writing again by bucket" in caplog.text
    assert report.status == "SUCCESS", report.summary()
    added = new_segments(other, ds, hours)
    assert len(added) == 10  # one per hour written, each in the HOUR chunk that holds it
    assert all(s.interval.duration_millis == 3_600_000 for s in added)
    assert sum(s.num_rows for s in added) == 10 == report.rows.rows_out
    assert totals(other.read(ds))["edits"] == edits + 10  # the first write's rows unread


def test_a_joined_chunk_overshadowed_since_it_was_read_is_copied_into_the_newer_chunks(
    spark: SparkSession, lake: Lake, ds: str, caplog: pytest.LogCaptureFixture
) -> None:
    appender, other = stale_day_layout(spark, lake, ds)
    edits = totals(other.read(ds))["edits"]

    with caplog.at_level(logging.INFO, logger="segmentlake.ingest.task"):
        report = appender.append(events(spark, hourly(5, 4)), ds, spec(segment="hour"))

    assert "writing again by bucket" not in caplog.text
    assert (report.status, report.segments) == ("SUCCESS", 2), report.summary()
    assert report.upgraded == 48  # each DAY segment into the 24 newer HOUR chunks
    assert totals(other.read(ds))["edits"] == edits + 10
    assert totals(appender.read(ds))["edits"] == edits + 10


def test_rows_take_the_start_of_the_joined_chunk_that_holds_their_bucket(
    spark: SparkSession,
) -> None:
    day = 86_400_000
    jan, feb = 1_704_067_200_000, 1_704_067_200_000 + 31 * day
    joined = [Interval.of_millis(jan, feb), Interval.of_millis(feb + 3 * day, feb + 4 * day)]
    buckets = [jan, jan + 17 * day + 5 * 3_600_000, feb, feb + 3 * day + 3_600_000, feb + 5 * day]
    frame = spark.createDataFrame([(b,) for b in buckets], f"{CHUNK} BIGINT")
    got = [r[0] for r in frame.selectExpr(joined_chunk_sql(JoinedChunks.of(joined))).collect()]
    assert got == [jan, jan, feb, feb + 3 * day, feb + 5 * day]
    assert joined_chunk_sql(JoinedChunks.empty()) == f"`{CHUNK}`"


def test_runs_of_adjacent_joined_chunks_and_single_ones_hold_their_buckets(
    spark: SparkSession,
) -> None:
    # Runs of adjacent DAY chunks become range tests (the longest _MOST_RUNS of them), the
    # rest one IN list; every hour bucket takes the start of the day holding it, if joined.
    day, hour = 86_400_000, 3_600_000
    base = 1_704_067_200_000
    days = [*range(10), 12, *(d for r in range(20) for d in (20 + 3 * r, 21 + 3 * r)), 90]
    joined = [Interval.of_millis(base + d * day, base + (d + 1) * day) for d in days]
    buckets = [base + h * hour for h in range(0, 95 * 24, 5)]
    frame = spark.createDataFrame([(b,) for b in buckets], f"{CHUNK} BIGINT")
    sql = joined_chunk_sql(JoinedChunks.of(joined))
    got = [r[0] for r in frame.selectExpr(sql).collect()]
    held = {base + d * day for d in days}
    assert got == [b - (b - base) % day if b - (b - base) % day in held else b for b in buckets]
    assert sql.count(" AND ") == 16  # _MOST_RUNS range tests
    assert " IN (" in sql
