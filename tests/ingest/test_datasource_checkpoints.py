"""A datasource table is checkpointed by delta-rs every CHECKPOINT_EVERY versions, not by
Spark's commit (which ran a Spark job inside every 10th write), and Spark and delta-rs read
the table from those checkpoints alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from segmentlake.core.names import SEGMENT_KEY_COLUMN
from segmentlake.lake import Lake
from segmentlake.metadata.table_log import TableLog
from segmentlake.storage.deletion import delete_keys
from segmentlake.storage.table_files import (
    CHECKPOINT_EVERY,
    SPARK_CHECKPOINT_INTERVAL,
    checkpoint_due,
    write_rows,
)
from tests.ingest.conftest import edits, spec


@pytest.mark.parametrize(
    ("before", "after", "last", "due"),
    [
        (-1, 0, None, None),  # the table was created
        (8, 9, None, None),
        (9, 10, None, 10),  # this write committed the multiple
        (9, 10, 10, None),  # ... and someone checkpointed it already
        (10, 11, None, None),  # whoever committed 10 checkpoints it
        (5, 25, 10, 20),  # other writers committed in between: the latest multiple passed
        (5, 25, 20, None),
        (19, 31, 25, 30),
    ],
)
def test_a_write_checkpoints_the_multiple_it_passed_unless_one_exists(
    before: int, after: int, last: int | None, due: int | None
) -> None:
    assert CHECKPOINT_EVERY == 10
    assert checkpoint_due(before, after, last) == due


@pytest.mark.spark
def test_the_table_is_checkpointed_by_delta_rs_and_read_from_the_checkpoint(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    assert lake.append(edits(spark, [("2024-01-01T01:00:00Z", "#en", "u", 1)]), ds, spec())
    log = TableLog(f"{lake.warehouse}/{ds}")
    assert log.properties()["delta.checkpointInterval"] == SPARK_CHECKPOINT_INTERVAL
    first = log.version()
    for i in range(CHECKPOINT_EVERY + 1 - first):  # a stream's small writes, one key each
        rows = spark.createDataFrame([(i, f"extra.{i}")], f"n long, {SEGMENT_KEY_COLUMN} string")
        write_rows(log, rows)
    assert log.version() == CHECKPOINT_EVERY + 1
    assert log.last_checkpoint() == CHECKPOINT_EVERY
    live = len(log.live_files())
    # Readers need the checkpoint alone: the entries before it go, as log cleanup would.
    for version in range(CHECKPOINT_EVERY):
        Path(log.full(f"_delta_log/{version:020d}.json")).unlink()
    assert len(TableLog(log.uri).live_files()) == live
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    table = spark.read.format("delta").load(log.uri)
    assert (
        table.where(f"{SEGMENT_KEY_COLUMN} LIKE 'extra.%'").count() == CHECKPOINT_EVERY + 1 - first
    )
    assert len(table.inputFiles()) == live
    assert lake.read(ds).count() == 1


@pytest.mark.spark
def test_a_split_and_a_delete_that_commit_the_multiple_checkpoint_it(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """Not only writes: the commit that moves an oversized segment's files to new keys, and
    a kill's DELETE, each checkpoint the table when they commit a multiple."""
    tight = {
        **spec(rollup=False),
        "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 250}},
    }
    assert lake.append(edits(spark, [("2024-01-02T01:00:00Z", "#en", "u", 1)]), ds, tight)
    log = TableLog(f"{lake.warehouse}/{ds}")

    def write_until(version: int) -> None:
        while log.version() < version:
            key = f"extra.{log.version()}"
            write_rows(
                log, spark.createDataFrame([(1, key)], f"n long, {SEGMENT_KEY_COLUMN} string")
            )
        assert log.version() == version

    write_until(CHECKPOINT_EVERY - 2)
    rows = [(f"2024-01-01T{i % 24:02d}:00:{i % 60:02d}Z", "#en", f"u{i}", i) for i in range(900)]
    report = lake.append(edits(spark, rows).repartition(3), ds, tight)
    assert "split" in report.phases  # the write committed 9, the split 10
    assert log.version() == CHECKPOINT_EVERY
    assert log.last_checkpoint() == CHECKPOINT_EVERY

    write_until(2 * CHECKPOINT_EVERY - 1)
    delete_keys(spark, log, [f"extra.{CHECKPOINT_EVERY}"])
    assert log.version() == 2 * CHECKPOINT_EVERY
    assert log.last_checkpoint() == 2 * CHECKPOINT_EVERY
    assert lake.read(ds).count() == 901
