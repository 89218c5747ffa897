"""The datasource handle end to end (``lake.table(name)``): open is not create; append, read,
overwrite, compact, ``inspect`` DataFrames and ``maintenance`` give exactly what the ``Lake``
methods give; and ``segmentlake.read`` reads the same rows while creating nothing."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

import segmentlake
from segmentlake import Datasource, Interval
from segmentlake.errors import DatasourceNotFound, SpecError, WarehouseNotFound
from segmentlake.lake import Lake

pytestmark = [pytest.mark.spark]

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["channel"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}
SCHEMA = "ts STRING, channel STRING, added BIGINT"
DAY1 = "2024-01-01/P1D"
DAY2 = "2024-01-02/P1D"


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


def rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in frame.collect())


def edits(spark: SparkSession, *data: tuple[str, str, int]) -> DataFrame:
    return spark.createDataFrame(list(data), SCHEMA)


def test_the_handle_does_what_the_lake_methods_do(spark: SparkSession, warehouse: str) -> None:
    lake = Lake(spark, warehouse)
    # Open is not create: no warehouse, then no datasource, and nothing written either way.
    with pytest.raises(WarehouseNotFound):
        lake.table("wiki")
    wiki = lake.table("wiki", create=True)
    assert isinstance(wiki, Datasource)
    assert not wiki.exists()
    assert os.listdir(warehouse) == []
    with pytest.raises(SpecError):
        lake.table("bad/name", create=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = wiki.append(
            edits(
                spark,
                ("2024-01-01T01:00:00Z", "#en", 1),
                ("2024-01-01T02:00:00Z", "#fr", 2),
                ("2024-01-02T01:00:00Z", "#en", 4),
            ),
            SPEC,
        )
        second = wiki.append(edits(spark, ("2024-01-02T03:00:00Z", "#de", 8)), SPEC)
        assert first.status == second.status == "SUCCESS"
        assert wiki.exists()
        assert lake.table("wiki") == wiki
        with pytest.raises(DatasourceNotFound):
            lake.table("other")

        # read: the same rows as Lake.read, with the same options.
        assert rows(wiki.read()) == rows(lake.read("wiki"))
        assert len(rows(wiki.read())) == 4
        assert rows(wiki.read(interval=DAY2, columns=["channel"], filter="added > 4")) == rows(
            lake.read("wiki", DAY2, ["channel"], "added > 4")
        )
        assert sorted(r[1] for r in rows(wiki.read(interval=DAY2, columns=["channel"]))) == [
            "#de",
            "#en",
        ]
        assert [s.id for s in wiki.used_segments()] == [s.id for s in lake.used_segments("wiki")]
        assert len(wiki.used_segments(interval=DAY2)) == 2
        view = wiki.register_view("wiki_handle_view")
        assert spark.sql(f"SELECT count(*) FROM {view}").first()[0] == 4

        # overwrite replaces day 1; the old day-1 segment stays used until cleanup.
        replaced = wiki.overwrite(
            edits(spark, ("2024-01-01T05:00:00Z", "#it", 16)), SPEC, interval=DAY1
        )
        assert replaced.status == "SUCCESS"
        day1 = wiki.read(interval=DAY1, columns=["channel", "added"])
        assert [r[1:] for r in rows(day1)] == [("#it", 16)]
        used = {str(s.id) for s in lake.used_segments("wiki")}
        assert len(used) == 4

        # inspect.segments: the used segments, the same as Lake's; visibility as the timeline.
        segments = wiki.inspect.segments()
        assert {r.segment_id for r in segments.select("segment_id").collect()} == used
        visible = {
            str(s.id)
            for holder in wiki.timeline().lookup(Interval.parse("2024-01-01/P2D"))
            for s in holder.segments
        }
        assert {r.segment_id for r in segments.where("is_visible").collect()} == visible
        assert len(visible) == 3
        assert wiki.inspect.segments(interval=DAY1).count() == 2

        # maintenance: the overshadowed day-1 segment goes unused, reads do not change.
        before = rows(wiki.read())
        gone = wiki.maintenance.mark_overshadowed_unused()
        assert len(gone) == 1
        assert {str(s) for s in gone} == used - visible
        assert rows(wiki.read()) == before
        assert wiki.inspect.segments().count() == 3
        unused = wiki.inspect.segments(include_unused=True).where("NOT used")
        assert [r.segment_id for r in unused.collect()] == [str(gone[0])]

        # mark_unused / mark_used of visible segments change what reads see, as Lake's do.
        day2 = wiki.used_segments(interval=DAY2)
        assert wiki.maintenance.mark_unused(day2[:1]) == 1
        assert rows(wiki.read()) == rows(lake.read("wiki"))
        assert len(rows(wiki.read())) == len(before) - day2[0].num_rows
        assert wiki.maintenance.mark_used([str(day2[0].id)]) == 1
        assert rows(wiki.read()) == before
        other = lake.table("other", create=True)
        assert other.inspect.segments(include_unused=True).count() == 0
        assert other.inspect.tasks().count() == 0
        with pytest.raises(SpecError, match="another datasource"):
            other.maintenance.mark_unused(day2[:1])

        # compact: day 2's two small segments become one; the rows stay.
        report = wiki.compact(interval=DAY2, mode="minor")
        assert report.status == "SUCCESS"
        assert rows(wiki.read()) == before
        served = [s for h in wiki.timeline().lookup(Interval.parse(DAY2)) for s in h.segments]
        assert len(served) == 1
        with pytest.raises(SpecError, match="minor"):
            wiki.compact(mode="sideways")  # type: ignore[arg-type]

        # inspect.tasks / locks / history agree with the Lake and the log.
        assert sorted(r.task_id for r in wiki.inspect.tasks().collect()) == sorted(
            t.task_id for t in lake.tasks("wiki")
        )
        assert wiki.inspect.locks().count() == 0
        held = lake.actions.try_lock("wiki", "2024-01-05/P1D", group_id="holder").lock
        assert held is not None
        assert [r.lock_id for r in wiki.inspect.locks().collect()] == [
            lk.lock_id for lk in lake.locks("wiki")
        ]
        assert lake.actions.release_locks("wiki", "holder") == 1
        assert wiki.inspect.locks().count() == 0
        assert wiki.inspect.pending_segments().count() == 0
        assert wiki.inspect.compaction().columns[:3] == ["datasource", "entry", "id"]
        history = wiki.inspect.history().collect()
        operations = [r.operation for r in history]
        assert "publish" in operations
        assert "mark_overshadowed_unused" in operations
        assert operations.index("unlock") < operations.index("lock")  # newest first
        assert [r.version for r in history] == sorted((r.version for r in history), reverse=True)
        assert wiki.inspect.history(limit=2).count() == 2
        assert other.inspect.history().count() == 0

        # kill: the unused day-1 segment's record goes for good.
        killed = wiki.maintenance.kill(older_than=0, vacuum=False)
        assert [str(s) for s in killed.killed] == [str(gone[0])]
        assert wiki.inspect.segments(include_unused=True).where("NOT used").count() == 0
        assert rows(wiki.read()) == before
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert [str(w.message) for w in moved if "segmentlake" in w.filename] == []


def test_module_read_creates_nothing(spark: SparkSession, tmp_path: Path) -> None:
    missing = tmp_path / "no-warehouse"
    with pytest.raises(WarehouseNotFound, match="no-warehouse"):
        segmentlake.read(spark, str(missing), "wiki")
    assert not missing.exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WarehouseNotFound):
        segmentlake.read(spark, str(empty), "wiki", interval=DAY1)
    assert os.listdir(empty) == []

    warehouse = tmp_path / "warehouse"
    lake = Lake(spark, str(warehouse))
    lake.append(
        edits(spark, ("2024-01-01T01:00:00Z", "#en", 1), ("2024-01-02T01:00:00Z", "#fr", 2)),
        "wiki",
        SPEC,
    )
    before = snapshot(warehouse)
    with pytest.raises(DatasourceNotFound, match="nope"):
        segmentlake.read(spark, str(warehouse), "nope")
    frame = segmentlake.read(
        spark, str(warehouse), "wiki", interval=DAY2, columns=["channel"], filter="added > 0"
    )
    assert rows(frame) == rows(lake.read("wiki", DAY2, ["channel"], "added > 0"))
    assert len(rows(frame)) == 1
    assert rows(segmentlake.read(spark, str(warehouse), "wiki")) == rows(lake.read("wiki"))
    assert snapshot(warehouse) == before, "a read must write nothing"
    assert not (warehouse / "nope").exists()
