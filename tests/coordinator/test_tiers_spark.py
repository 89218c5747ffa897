"""Storage tiers on real volumes (directories) and real Delta tables: the coordinator loads,
drops and retires; tiered reads return exactly the deep-storage rows; a lost volume's copies
are forgotten; rules, audit, views and CLI."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.cli.main import main
from segmentlake.coordinator.volume_tables import MARKER, volume_table_path
from segmentlake.core.storage_tiers import CopyState
from segmentlake.errors import SpecError
from segmentlake.lake import Lake
from segmentlake.metadata.table_log import TableLog
from segmentlake.storage.table_files import SPARK_CHECKPOINT_INTERVAL

SPEC: dict[str, Any] = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["channel"]},
    "metricsSpec": [{"type": "count", "name": "edits"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
}
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]


def rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in frame.collect())


def sources(frame: DataFrame) -> set[str]:
    return {r[0] for r in frame.select(F.input_file_name()).distinct().collect()}


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return Lake(spark, str(tmp_path_factory.mktemp("warehouse")), lease_seconds=600)


@pytest.fixture(scope="module")
def volumes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("volumes")


def _ingest(spark: SparkSession, lake: Lake, ds: str) -> None:
    data = [(f"{d}T{h:02d}:00:00Z", c, 0) for d in DAYS for h in range(0, 24, 3) for c in "ab"]
    frame = spark.createDataFrame(data, "ts STRING, channel STRING, added BIGINT")
    assert lake.append(frame, ds, SPEC).status == "SUCCESS"
    # A newer version of day 2: the old segment is overshadowed and must never be loaded.
    again = spark.createDataFrame(
        [("2024-01-02T05:00:00Z", "z", 0)], "ts STRING, channel STRING, added BIGINT"
    )
    assert lake.overwrite(again, ds, SPEC, interval="2024-01-02/P1D").status == "SUCCESS"


def test_load_drop_retire_and_tiered_reads(spark: SparkSession, lake: Lake, volumes: Path) -> None:
    ds = "tiered"
    _ingest(spark, lake, ds)
    deep = rows(lake.read(ds))
    for name, tier, priority in (("hot1", "hot", 10), ("hot2", "hot", 10), ("cold1", "cold", 0)):
        lake.add_volume(
            name, tier=tier, path=str(volumes / name), capacity_bytes=10**9, priority=priority
        )
    lake.set_rules(
        ds,
        [
            {
                "type": "loadByInterval",
                "interval": "2024-01-03/2024-01-05",
                "tieredReplicants": {"hot": 1, "cold": 1},
            },
            {"type": "loadForever", "tieredReplicants": {"cold": 1}},
        ],
        author="test",
        comment="recent days hot",
    )
    report = lake.coordinator(datasources=[ds]).run_once()
    assert report.failed_loads == 0
    assert report.stats.segments == 4  # the overshadowed day-2 segment is not served
    copies = lake.segment_copies(ds)
    assert {c.state for c in copies} == {CopyState.LOADED}
    tiers = {v.name: v.tier for v in lake.volumes()}
    hot = sorted(c.start_ms for c in copies if tiers[c.volume] == "hot")
    assert len(hot) == 2
    assert sum(tiers[c.volume] == "cold" for c in copies) == 4
    assert report.loaded == 6
    # Volume tables are made like datasource tables: delta-rs checkpoints them, not Spark.
    for volume in lake.volumes():
        table = TableLog(volume_table_path(volume, ds))
        assert table.properties()["delta.checkpointInterval"] == SPARK_CHECKPOINT_INTERVAL

    # Same rows whichever tier serves them; the hot days really come from a hot volume.
    hot_read = lake.read(ds, tier="hot")
    assert rows(hot_read) == deep
    files = sources(hot_read)
    assert any(str(volumes / "hot") in f for f in files)
    assert any("/tiered/" in f and "volumes" not in f for f in files)
    assert rows(lake.read(ds, "2024-01-03/P1D", tier="hot")) == rows(
        lake.read(ds, "2024-01-03/P1D")
    )
    spark.conf.set("segmentlake.read.tier", "cold")
    try:
        cold_read = lake.read(ds)
        assert rows(cold_read) == deep
        assert all("volumes" in f for f in sources(cold_read))
    finally:
        spark.conf.unset("segmentlake.read.tier")
    with pytest.raises(SpecError, match="no volume is in tier 'warm'"):
        lake.read(ds, tier="warm")

    # The rules move on: hot copies are dropped (rows deleted), reads are unchanged.
    lake.set_rules(
        ds,
        [
            {"type": "dropByInterval", "interval": "2024-01-01/2024-01-02"},
            {"type": "loadForever", "tieredReplicants": {"cold": 1}},
        ],
    )
    report = lake.coordinator(datasources=[ds]).run_once()
    assert report.marked_unused == 1  # day 1 retired by the drop rule
    assert report.dropped == 3  # two hot copies, and day 1's cold copy
    left = lake.segment_copies(ds)
    assert len(left) == 3
    assert all(tiers[c.volume] == "cold" for c in left)
    hot_rows = sum(
        spark.read.format("delta").load(str(volumes / name / ds)).count()
        for name in ("hot1", "hot2")
        if (volumes / name / ds).exists()
    )
    assert hot_rows == 0
    expected = [r for r in deep if not str(r[0]).startswith("2024-01-01")]
    assert rows(lake.read(ds, tier="hot")) == rows(lake.read(ds)) == expected

    # A volume that disappears is a dead one: its copies are forgotten.
    shutil.rmtree(volumes / "cold1")
    report = lake.coordinator(datasources=[ds]).run_once()
    assert report.dead_volumes == ["cold1"]
    assert report.forgotten_copies == 3
    assert report.stats.tier_without_volumes == {"cold": 3}
    assert lake.segment_copies(ds) == []
    assert rows(lake.read(ds, tier="cold")) == expected  # nothing loaded: deep storage


def test_rules_audit_views_and_cli(
    spark: SparkSession, lake: Lake, volumes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = "audited"
    first = lake.set_rules(
        ds, [{"type": "loadForever", "tieredReplicants": {"hot": 1}}], author="ann"
    )
    second = lake.set_rules(
        ds, '[{"type": "dropBeforeByPeriod", "period": "P1Y"}]', author="bob", comment="cut"
    )
    assert second == first + 1
    history = lake.rule_history(ds)
    assert [(h.revision, h.author) for h in history] == [(second, "bob"), (first, "ann")]
    assert history[0].old == history[1].new
    assert history[1].old is None
    assert lake.rules("_default")[0].type == "loadForever"
    with pytest.raises(SpecError):
        lake.set_rules(ds, [{"type": "loadSometimes"}])
    with pytest.raises(SpecError, match="reserved"):
        lake.set_rules("_copies", [])
    assert lake.rule_history(ds)[0].revision == second  # the refused sets wrote nothing

    names = lake.register_system_views()
    assert {
        "segmentlake_rules",
        "segmentlake_rule_history",
        "segmentlake_volumes",
        "segmentlake_segment_copies",
    } <= set(names)
    rules = spark.sql(f"SELECT type FROM segmentlake_rules WHERE datasource = '{ds}'").collect()
    assert [r.type for r in rules] == ["dropBeforeByPeriod"]
    audit = spark.sql(
        f"SELECT author FROM segmentlake_rule_history WHERE datasource = '{ds}' ORDER BY revision"
    ).collect()
    assert [r.author for r in audit] == ["ann", "bob"]
    volumes_view = {r.volume: r for r in spark.sql("SELECT * FROM segmentlake_volumes").collect()}
    assert volumes_view["hot1"].tier == "hot"

    warehouse = ["--warehouse", lake.warehouse]
    assert main([*warehouse, "rules", ds, "--history"]) == 0
    assert "by bob: cut" in capsys.readouterr().out
    assert (
        main(
            [
                *warehouse,
                "volume",
                "add",
                "cli1",
                "--tier",
                "warm",
                "--path",
                str(volumes / "cli1"),
                "--capacity",
                "2G",
            ]
        )
        == 0
    )
    assert lake.volumes()[0].name == "cli1"
    assert lake.volumes()[0].capacity_bytes == 2 * 2**30
    assert main([*warehouse, "volume", "decommission", "cli1"]) == 0
    assert main([*warehouse, "volume", "list"]) == 0
    assert "decommissioning" in capsys.readouterr().out
    assert main([*warehouse, "coordinator-config", "--set", '{"maxSegmentsToMove": 7}']) == 0
    assert lake.coordinator_config().max_segments_to_move == 7
    assert main([*warehouse, "coordinator", "--once", "--datasource", ds]) == 0
    assert "live volumes" in capsys.readouterr().out
    assert (
        main(
            [
                *warehouse,
                "volume",
                "add",
                "bad",
                "--tier",
                "warm",
                "--path",
                "/x",
                "--capacity",
                "lots",
            ]
        )
        == 2
    )
    assert main([*warehouse, "volume", "remove", "cli1"]) == 0
    assert MARKER == "_segmentlake_volume.json"
