"""The cleanup duty and kill on real Spark and Delta: overshadowed segments are marked unused
without changing reads; kill deletes exactly the unused segments' records and rows (never a key
a used segment still serves, never a recent unpublished write), and VACUUM removes the files."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.cli.main import duration_seconds, main
from segmentlake.core.load_spec import data_key
from segmentlake.core.names import datasource_table_path
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.errors import SpecError
from segmentlake.lake import Lake
from segmentlake.metadata.cleanup import mark_overshadowed_unused
from segmentlake.metadata.records import SEGMENT, segment_row
from segmentlake.metadata.store import Change, now_ms
from segmentlake.metadata.transaction import Decision, transact
from segmentlake.storage.deletion import interval_hours
from tests.ingest.conftest import edits, spec

DS = "wiki"
DAY1 = [
    ("2024-01-01T01:00:00Z", "#en", "alice", 10),
    ("2024-01-01T02:30:00Z", "#de", "bob", 7),
]
DAY2 = [("2024-01-02T10:00:00Z", "#en", "carol", 1)]
NEW_DAY1 = [("2024-01-01T12:00:00Z", "#ja", "frank", 9)]


@pytest.fixture
def lake(spark: SparkSession, warehouse: str) -> Lake:
    return Lake(spark, warehouse, lease_seconds=600)


def visible(lake: Lake) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in lake.read(DS).collect())


def rows_under(spark: SparkSession, lake: Lake, keys: list[str]) -> int:
    table = spark.read.format("delta").load(datasource_table_path(lake.warehouse, DS))
    return table.where(F.col("__segment").isin(keys)).count()


def record_ids(lake: Lake) -> set[str]:
    return {r["id"] for r in lake.metadata.rows(DS, pc.field("kind") == SEGMENT)}


def parquet_files(lake: Lake, key: str) -> list[Path]:
    return list(
        Path(datasource_table_path(lake.warehouse, DS), f"__segment={key}").glob("*.parquet")
    )


def key_of(segment: DataSegment) -> str:
    key = data_key(segment)
    assert key is not None
    return key


def overwritten_day(spark: SparkSession, lake: Lake) -> list[DataSegment]:
    """Two days appended, then day 1 overwritten: returns the appended day-1 segment(s), now
    fully overshadowed."""
    lake.append(edits(spark, DAY1 + DAY2), DS, spec())
    old = [s for s in lake.used_segments(DS) if s.interval.start_millis == 1704067200000]
    lake.overwrite(edits(spark, NEW_DAY1), DS, spec(), interval="2024-01-01/P1D")
    return old


@pytest.mark.spark
def test_cleanup_then_kill_removes_exactly_the_unused_data(spark: SparkSession, lake: Lake) -> None:
    old = overwritten_day(spark, lake)
    assert len(old) == 1
    old_key = key_of(old[0])
    used_keys = [key_of(s) for s in lake.used_segments(DS) if s not in old]
    used_rows = rows_under(spark, lake, used_keys)
    before = visible(lake)
    assert [r[2] for r in before] == ["frank", "carol"]

    # cleanup: one pass marks exactly the overshadowed segment; reads do not change
    assert lake.mark_overshadowed_unused(DS) == [old[0].id]
    assert old[0] not in lake.used_segments(DS)
    assert visible(lake) == before
    assert lake.mark_overshadowed_unused(DS) == []

    # kill: nothing has been unused for an hour yet
    assert lake.kill(DS, vacuum=False).killed == ()
    assert rows_under(spark, lake, [old_key]) == 2

    table = datasource_table_path(lake.warehouse, DS)
    spark.sql(
        f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    assert parquet_files(lake, old_key)
    report = lake.kill(DS, older_than=0, vacuum_retention_hours=0)
    assert report.killed == (old[0].id,)
    assert report.kept == ()
    assert report.keys_deleted == (old_key,)
    assert report.orphan_keys_deleted == ()
    assert report.rows_deleted == 2
    assert report.files_vacuumed is not None
    assert report.files_vacuumed >= 1
    assert set(report.phases) == {"records", "list", "delete", "vacuum"}
    assert json.loads(json.dumps(report.to_json()))["killed"] == [str(old[0].id)]
    assert "1 segment(s) killed" in report.summary()

    assert rows_under(spark, lake, [old_key]) == 0
    assert str(old[0].id) not in record_ids(lake)
    assert lake.mark_used([old[0].id]) == 0  # nothing left to bring back
    assert rows_under(spark, lake, used_keys) == used_rows
    assert visible(lake) == before
    assert parquet_files(lake, old_key) == []  # VACUUM removed the files from disk
    assert all(parquet_files(lake, k) for k in used_keys)


@pytest.mark.spark
def test_the_coordinator_marks_what_has_been_overshadowed_for_its_delay(
    spark: SparkSession, lake: Lake
) -> None:
    """Druid's cleanup duty in every coordinator run, counted per segment from the commit
    that overshadowed it: within the delay, marking the newer data unused still falls back
    to the older; after it, the older is unused and reads are unchanged."""
    old = overwritten_day(spark, lake)
    before = visible(lake)
    assert mark_overshadowed_unused(lake.metadata, DS, overshadowed_for_ms=3_600_000) == []
    report = lake.coordinator().run_once(execute=False)  # the default delay: 15 minutes
    assert report.overshadowed_unused == 0
    assert set(old) <= set(lake.used_segments(DS))
    time.sleep(0.05)
    lake.set_coordinator_config({"markSegmentAsUnusedDelayMillis": 10})
    report = lake.coordinator().run_once(execute=False)
    assert report.overshadowed_unused == 1
    assert "overshadowed marked unused 1" in report.summary()
    assert not set(old) & set(lake.used_segments(DS))
    assert visible(lake) == before
    assert lake.coordinator().run_once(execute=False).overshadowed_unused == 0


@pytest.mark.spark
def test_rows_shared_with_a_used_segment_are_kept(spark: SparkSession, lake: Lake) -> None:
    lake.append(edits(spark, DAY1), DS, spec())
    [appended] = lake.used_segments(DS)
    key = key_of(appended)
    # A compaction's upgrade: the same rows re-published under a newer version.
    upgraded = replace(
        appended, version="2999-01-01T00:00:00.000Z", shard_spec=NumberedShardSpec(0, 1)
    )
    # Written as publish writes it: the copy visible, the original overshadowed by it.
    row = segment_row(upgraded, used=True, now_ms=now_ms(), visibility="visible")
    hidden = segment_row(appended, used=True, now_ms=now_ms(), visibility="overshadowed")
    transact(
        lake.metadata,
        DS,
        lambda _: Decision([Change("insert", row), Change("upsert", hidden)], None),
        operation="test_upgrade",
    )
    before = visible(lake)
    assert len(before) == 2
    assert lake.mark_overshadowed_unused(DS) == [appended.id]

    # Delta's retention check refuses 0 hours on a default table: said before anything goes.
    with pytest.raises(SpecError, match="168"):
        lake.kill(DS, older_than=0, vacuum_retention_hours=0)
    assert str(appended.id) in record_ids(lake)

    report = lake.kill(DS, older_than=timedelta(0), vacuum=False)
    assert (report.killed, report.kept, report.keys_deleted) == ((), (appended.id,), ())
    assert rows_under(spark, lake, [key]) == 2
    assert visible(lake) == before

    lake.mark_unused([upgraded.id])
    report = lake.kill(DS, older_than=0, vacuum=False)
    assert set(report.killed) == {appended.id, upgraded.id}
    assert (report.files_vacuumed, "vacuum" in report.phases) == (None, False)
    assert "vacuum: not run" in report.summary()
    assert report.keys_deleted == (key,)
    assert rows_under(spark, lake, [key]) == 0
    assert record_ids(lake) == set()


@pytest.mark.spark
def test_orphan_rows_are_deleted_only_once_old(spark: SparkSession, lake: Lake) -> None:
    lake.append(edits(spark, DAY1), DS, spec())
    [segment] = lake.used_segments(DS)
    before = visible(lake)
    path = datasource_table_path(lake.warehouse, DS)
    orphan = "1704067200000.deadbeefdeadbeef"  # a failed task's write: rows, no record
    (
        spark.read.format("delta")
        .load(path)
        .withColumn("__segment", F.lit(orphan))
        .write.format("delta")
        .mode("append")
        .partitionBy("__segment")
        .save(path)
    )
    assert rows_under(spark, lake, [orphan]) == 2

    # Recent: maybe a task that has not published yet.
    assert lake.kill(DS, older_than=3600, vacuum=False).orphan_keys_deleted == ()
    # An interval-limited kill touches only segments of that interval.
    limited = lake.kill(DS, interval="2024-01-01/P1D", older_than=0, vacuum=False)
    assert limited.orphan_keys_deleted == ()
    assert rows_under(spark, lake, [orphan]) == 2

    report = lake.kill(DS, older_than=0)
    assert (report.killed, report.orphan_keys_deleted, report.rows_deleted) == ((), (orphan,), 2)
    assert rows_under(spark, lake, [orphan]) == 0
    assert rows_under(spark, lake, [key_of(segment)]) == 2
    assert visible(lake) == before
    # The table's default retention (7 days) keeps the deleted files for time travel.
    assert report.files_vacuumed == 0
    assert parquet_files(lake, orphan)


@pytest.mark.spark
def test_bad_kill_arguments_raise_spec_errors(lake: Lake) -> None:
    with pytest.raises(SpecError, match="non-negative"):
        lake.kill(DS, older_than=-1)
    with pytest.raises(SpecError, match="timedelta"):
        lake.kill(DS, older_than=timedelta(seconds=-5))
    with pytest.raises(SpecError, match="older_than"):
        lake.kill(DS, older_than="1h")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="vacuum_retention_hours"):
        lake.kill(DS, older_than=0, vacuum_retention_hours=-1)


def test_durations_and_retention_intervals_parse() -> None:
    assert duration_seconds("PT1H") == 3600
    assert duration_seconds("P7D") == 7 * 86400
    assert duration_seconds("90") == 90
    assert duration_seconds("PT0S") == 0
    for bad in ("soon", "P1M", "-5", "nan"):
        with pytest.raises(SpecError, match="PT1H"):
            duration_seconds(bad)
    assert interval_hours("interval 1 week") == 168
    assert interval_hours("interval 0 hours") == 0
    assert interval_hours("INTERVAL 2 days 12 hours") == 60
    assert interval_hours("1 fortnight") is None


@pytest.mark.spark
def test_cli_cleanup_and_kill(
    spark: SparkSession, lake: Lake, capsys: pytest.CaptureFixture[str]
) -> None:
    old = overwritten_day(spark, lake)
    before = visible(lake)
    base = ["--warehouse", lake.warehouse]

    assert main([*base, "cleanup", DS]) == 0
    assert "marked 1 overshadowed segment(s) unused" in capsys.readouterr().out
    assert main([*base, "kill", DS, "--older-than", "soon"]) == 2
    assert "PT1H" in capsys.readouterr().err
    assert main([*base, "kill", DS, "--older-than", "PT0S", "--no-vacuum"]) == 0
    out = capsys.readouterr().out
    assert "kill wiki: 1 segment(s) killed" in out
    assert "vacuum: not run" in out

    assert rows_under(spark, lake, [key_of(old[0])]) == 0
    assert visible(lake) == before
