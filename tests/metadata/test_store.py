"""The metadata store's own mechanics on a real Delta table: following the log across store
instances, copy-on-write with a bounded number of files, and advisory turns."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from segmentlake.lake import Lake
from segmentlake.metadata.records import LOCK
from segmentlake.metadata.turns import Turns

from .support import DAY, day_after, history

pytestmark = pytest.mark.spark


def test_a_second_store_follows_commits_of_the_first(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    other = Lake(spark, lake.warehouse)  # its own log follower and row cache
    assert other.locks(ds) == []
    assert lake.try_lock(ds, DAY, group_id="a").granted

    assert [lk.group_id for lk in other.locks(ds)] == ["a"]
    assert other.release_locks(ds, "a") == 1
    assert lake.locks(ds) == []


def test_commits_keep_the_partition_at_few_files_and_lose_no_row(lake: Lake, ds: str) -> None:
    for i in range(24):
        assert lake.try_lock(ds, day_after(i), group_id=f"g{i}").granted
    state = lake.metadata.read(ds)

    assert len(state.files) <= 16
    assert sorted(r["group_id"] for r in state.of(LOCK)) == sorted(f"g{i}" for i in range(24))
    # Spark reads the same rows from the Delta table the store wrote.
    rows = lake.metadata.table().where(f"datasource = '{ds}' AND kind = 'lock'").count()
    assert rows == 24
    assert {r["operation"] for r in history(lake)[-24:]} == {"UPDATE"}


def test_rows_selects_columns_and_filters(lake: Lake, ds: str) -> None:
    assert lake.try_lock(ds, DAY, group_id="a").granted
    assert lake.try_lock(ds, day_after(3), group_id="b").granted

    rows = lake.metadata.rows(ds, pc.field("group_id") == "b", columns=["group_id", "kind"])

    assert rows == [{"datasource": ds, "group_id": "b", "kind": LOCK}]


def test_turns_wait_for_a_live_claim_and_take_over_an_expired_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = str(tmp_path / "turns")
    first = Turns(spark, root, lease_s=1.0)
    second = Turns(spark, root, lease_s=1.0, poll_s=0.01)
    assert not second.contended("ds")
    second.lost("ds")
    assert second.contended("ds")

    first.acquire("ds")
    first.acquire("ds")  # already ours: returns at once
    assert second.wait("other") < 0.5  # another datasource is free
    started = time.monotonic()
    second.acquire("ds")  # first never releases: its claim expires after its lease
    waited = time.monotonic() - started
    assert 0.5 < waited < 10, waited

    first.release("ds")  # not first's any more: left alone
    assert first.wait("ds") >= 0.5  # second's claim holds first back until it expires
    second.release("ds")
    assert first.wait("ds") < 0.5
