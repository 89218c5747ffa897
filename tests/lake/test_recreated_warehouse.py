"""A long-lived ``Lake`` (a notebook's) whose warehouse is deleted and created again under it
by another process or session reads and writes the new warehouse, not what it remembers of
the old one: its metadata follower, its datasource and visible tables' followers and Spark's
cached Delta logs all start over."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.lake import Lake
from tests.ingest.conftest import edits, spec

pytestmark = [pytest.mark.spark]

OLD = [(f"2024-01-0{d}T0{h}:00:00Z", "#en", f"old{d}{h}", 1) for d in (1, 2, 3) for h in (1, 2)]
NEW = [("2024-01-01T05:00:00Z", "#de", "new", 7)]
LATE = [("2024-01-02T06:00:00Z", "#fr", "late", 3)]


def users(lake: Lake, ds: str) -> list[str]:
    return sorted(r[0] for r in lake.read(ds).select("user").collect())


def test_a_lake_whose_warehouse_was_deleted_and_created_again_uses_the_new_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "wh")
    ds = "again"
    old = Lake(spark, warehouse)
    for day in (1, 2, 3):  # several commits: the old metadata's version is well past the new
        rows = [r for r in OLD if r[0].startswith(f"2024-01-0{day}")]
        assert old.append(edits(spark, rows), ds, spec()).status == "SUCCESS"
    assert len(users(old, ds)) == 6
    view = old.register_view(ds, "again_view")
    assert spark.table(view).count() == 6

    shutil.rmtree(warehouse)
    new = Lake(spark, warehouse)
    assert new.append(edits(spark, NEW), ds, spec()).status == "SUCCESS"

    assert users(old, ds) == ["new"]
    assert len(old.timeline(ds).visible_segments()) == 1
    assert old.append(edits(spark, LATE), ds, spec()).status == "SUCCESS"
    assert users(old, ds) == ["late", "new"]
    assert users(Lake(spark, warehouse), ds) == ["late", "new"]
    # The view registered before (a path over the visible table) reads the new warehouse.
    assert sorted(r[0] for r in spark.table(view).select(F.col("user")).collect()) == [
        "late",
        "new",
    ]
