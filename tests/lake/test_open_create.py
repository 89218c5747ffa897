"""Opening is not creating: a path without a warehouse is a WarehouseNotFound for every read
(and for Lake.open at once), an unknown datasource a DatasourceNotFound, and read-only
operations (Python and CLI) never write a byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from segmentlake.cli.main import main
from segmentlake.errors import DatasourceNotFound, SpecError, WarehouseNotFound
from segmentlake.lake import Lake

pytestmark = [pytest.mark.spark]

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "count", "name": "edits"}],
    "granularitySpec": {"segmentGranularity": "day"},
}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with size and mtime: any write changes it."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            info = os.lstat(os.path.join(directory, name))
            found[os.path.relpath(os.path.join(directory, name), root)] = (
                info.st_size,
                info.st_mtime_ns,
            )
    return found


def cli(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)


def test_a_typo_is_not_a_new_warehouse(spark: SparkSession, tmp_path: Path) -> None:
    typo = tmp_path / "wharehouse"
    with pytest.raises(WarehouseNotFound, match="wharehouse"):
        Lake.open(spark, str(typo))
    with pytest.raises(WarehouseNotFound, match="wharehouse"):
        Lake(spark, str(typo), create=False)
    lake = Lake(spark, str(typo))  # DESIGN §3: opening writes nothing...
    assert not lake.exists()
    for read in (
        lambda: lake.read("wiki"),
        lambda: lake.used_segments("wiki"),
        lambda: lake.timeline("wiki"),
        lambda: lake.tasks("wiki"),
        lambda: lake.datasources(),
        lambda: lake.volumes(),
        lambda: lake.rules("wiki"),
        lambda: lake.register_system_views(),
    ):
        with pytest.raises(WarehouseNotFound, match=str(typo)):
            read()
    for command in ("segments", "timeline", "locks", "tasks", "compaction-status", "rules"):
        assert cli("--warehouse", str(typo), command, "wiki") == 2
    assert cli("--warehouse", str(typo), "volume", "list") == 2
    assert not typo.exists(), "nothing may be written for a read"


def test_create_is_explicit_and_unknown_datasources_are_not_spec_errors(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "warehouse"
    lake = Lake.create(spark, str(path))
    assert lake.exists()
    assert (path / "_segmentlake" / "metadata_v2" / "_delta_log").is_dir()
    opened = Lake.open(spark, str(path))
    assert opened.datasources() == []
    with pytest.raises(DatasourceNotFound, match="'nope'") as info:
        opened.read("nope")
    assert not isinstance(info.value, SpecError)
    for read in (
        lambda: opened.used_segments("nope"),
        lambda: opened.timeline("nope"),
        lambda: opened.tasks("nope"),
        lambda: opened.compaction_status("nope"),
        lambda: opened.kill("nope", older_than=0),
        lambda: opened.compact("nope"),
        lambda: opened.mark_overshadowed_unused("nope"),
    ):
        with pytest.raises(DatasourceNotFound):
            read()
    assert cli("--warehouse", str(path), "segments", "nope") == 2


def test_the_first_write_creates_the_warehouse(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "new"
    lake = Lake(spark, str(path))
    rows = spark.createDataFrame([("2024-01-01T00:00:00Z", "a")], "ts STRING, user STRING")
    assert lake.append(rows, "wiki", SPEC).status == "SUCCESS"
    assert Lake.open(spark, str(path)).datasources() == ["wiki"]
    with pytest.raises(SpecError, match="is a Delta table"):
        Lake(spark, str(path / "wiki"))


def test_read_only_operations_never_write(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "warehouse"
    lake = Lake(spark, str(path))
    rows = spark.createDataFrame(
        [("2024-01-01T00:00:00Z", "a"), ("2024-01-02T00:00:00Z", "b")], "ts STRING, user STRING"
    )
    lake.append(rows, "wiki", SPEC)
    before = snapshot(path)
    fresh = Lake.open(spark, str(path))  # a cold reader too: no cache, no creation
    for reader in (lake, fresh):
        assert len(reader.used_segments("wiki")) == 2
        assert len(reader.timeline("wiki").visible_segments()) == 2
        assert reader.read("wiki").count() == 2
        reader.register_view("wiki", "wiki_view")
        assert spark.sql("SELECT count(*) AS n FROM wiki_view").first().n == 2
        reader.locks("wiki")
        reader.tasks("wiki")
        reader.compaction_status("wiki")
        reader.compaction_config("wiki")
        reader.rules("wiki")
        reader.volumes()
        reader.coordinator_config()
        reader.register_system_views()
        assert spark.sql("SELECT count(*) AS n FROM segmentlake_segments").first().n == 2
    for command in (
        ["segments", "wiki"],
        ["timeline", "wiki"],
        ["locks", "wiki"],
        ["tasks", "wiki"],
        ["compaction-status", "wiki"],
        ["compaction-config", "wiki"],
        ["rules", "wiki"],
        ["volume", "list"],
        ["coordinator-config"],
    ):
        assert cli("--warehouse", str(path), *command) == 0, command
    assert snapshot(path) == before
