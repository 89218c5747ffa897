"""A warehouse written by segmentlake 0.1 (tests/data/warehouse_v0_1) is refused with the
command that migrates it; after ``segmentlake migrate`` it reads exactly as before, keeps its
tasks, rules and compaction config, and takes new writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from segmentlake.cli.main import main
from segmentlake.errors import MetadataVersionError
from segmentlake.lake import Lake
from segmentlake.metadata.records import SEGMENT

pytestmark = pytest.mark.spark

OLD = Path(__file__).parents[1] / "data" / "warehouse_v0_1"
SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "count", "name": "edits"}],
    "granularitySpec": {"segmentGranularity": "day", "rollup": True},
}
# What 0.1 served: its overwrite of 2024-01-03 replaced user d by f.
ROWS = [
    ("2024-01-01 01:00:00", "a", 1),
    ("2024-01-01 02:00:00", "b", 1),
    ("2024-01-02 01:00:00", "c", 1),
    ("2024-01-02 05:00:00", "e", 1),
    ("2024-01-03 05:00:00", "f", 1),
]


def rows(lake: Lake) -> list[tuple[str, str, int]]:
    return sorted((str(r["__time"]), r["user"], r["edits"]) for r in lake.read("wiki").collect())


def test_an_old_warehouse_migrates_with_one_command(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    shutil.copytree(OLD, warehouse)

    with pytest.raises(MetadataVersionError, match="segmentlake migrate --warehouse"):
        Lake(spark, str(warehouse))
    assert main(["--warehouse", str(warehouse), "migrate"]) == 0

    lake = Lake.open(spark, str(warehouse))
    assert rows(lake) == ROWS
    assert [t.status for t in lake.tasks("wiki")] == ["SUCCESS"] * 3
    assert [r.to_json()["type"] for r in lake.rules("wiki")] == ["loadForever"]
    assert lake.compaction_config("wiki").planner.config()["ratio"] == 2
    assert lake.locks("wiki") == []  # the old task's lease ran out long ago
    assert [lk.group_id for lk in lake.locks("wiki", include_expired=True)] == [
        "held-by-an-old-task"
    ]
    # Each used segment got its visibility: the overwritten 2024-01-03 generation is not served.
    records = lake.metadata.rows("wiki", (pc.field("kind") == SEGMENT) & pc.field("used"))
    states = sorted((r["start_ms"], r["visibility"]) for r in records)
    assert [s for _, s in states].count("overshadowed") == 1
    assert len(states) == 5

    more = spark.createDataFrame([("2024-01-02T09:00:00Z", "g")], "ts STRING, user STRING")
    assert lake.append(more, "wiki", SPEC).status == "SUCCESS"
    assert rows(lake) == sorted([*ROWS, ("2024-01-02 09:00:00", "g", 1)])
    assert main(["--warehouse", str(warehouse), "migrate"]) == 0  # nothing left to do
