"""The visible table, Spark-free: separate processes publish at the same time, each publish
syncs the visible table, and afterwards it holds every published segment's files exactly
once, with nothing left for another sync to do; a table left behind says so and one sync
catches up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.visible_table import (
    VISIBLE_APP_ID,
    current_version,
    sync_visible_table,
    syncs_deferred,
    visible_table_path,
)
from tests.metadata.visible_sync_worker import hour
from tests.multiprocess_support import assert_overlapped, go, read_all_times, wait_ready

WORKERS = 3
PER_WORKER = 6
ROWS_PER_KEY = 10
DS = "raced"
START = datetime(2024, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def datasource_table(warehouse: str, keys: int) -> None:
    """The datasource table as the ingestion writes it: rows partitioned by ``__segment``, a
    file per key (written here by delta-rs: this test runs no Spark)."""
    times, segments, values = [], [], []
    for k in range(keys):
        for r in range(ROWS_PER_KEY):
            times.append(START + timedelta(hours=k, minutes=r))
            segments.append(f"k{k}")
            values.append(k * 100 + r)
    table = pa.table(
        {
            "__time": pa.array(times, pa.timestamp("us", tz="UTC")),
            "value": pa.array(values, pa.int64()),
            "__segment": pa.array(segments),
        }
    )
    write_deltalake(f"{warehouse}/{DS}", table, partition_by=["__segment"])


@pytest.mark.multiprocess
def test_racing_publishers_leave_every_segment_visible_once(warehouse: str, tmp_path: Path) -> None:
    keys = WORKERS * PER_WORKER
    datasource_table(warehouse, keys)
    Lake(None, warehouse).metadata.create()
    race = tmp_path / "race"
    race.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    procs = {
        f"w{w}": subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests/metadata/visible_sync_worker.py"),
                warehouse,
                str(race),
                f"w{w}",
                str(w * PER_WORKER),
                str(PER_WORKER),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for w in range(WORKERS)
    }
    wait_ready(race, procs)
    go(race)
    outputs = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        outputs[name] = out[-3000:]
        assert proc.returncode == 0, f"{name}: {out[-3000:]}"
    assert_overlapped(read_all_times(race, list(procs)), together=True)

    lake = Lake(None, warehouse)
    visible = DeltaTable(visible_table_path(lake.warehouse, DS))
    # Complete without help: a sync now finds nothing to add or remove. (It may not skip
    # outright: lock commits after the last publish move the version it checks.)
    final = sync_visible_table(lake.metadata, DS)
    assert (final.added, final.removed) == (0, 0), f"left behind: {final} {outputs}"
    version = visible.version()
    assert final.table_version == version
    assert visible.transaction_version(VISIBLE_APP_ID) is not None
    assert version >= 2, "publishes in a row should have made several visible commits"
    adds = pa.table(visible.get_add_actions(flatten=True))
    assert Counter(adds["partition.__segment"].to_pylist()) == Counter(
        f"k{k}" for k in range(keys)
    )  # every key once
    rows = 0
    for uri in adds["path"].to_pylist():
        assert uri.startswith("file://"), uri  # the datasource table's own file, by URI
        rows += pq.read_table(uri.removeprefix("file://").replace("%20", " ")).num_rows
    assert rows == keys * ROWS_PER_KEY


def publish(lake: Lake, i: int) -> DataSegment:
    lock = lake.actions.try_lock(DS, hour(i), group_id=f"g{i}").lock
    assert lock is not None
    segment = DataSegment(
        DS, hour(i), lock.version, NumberedShardSpec(0, 1),
        load_spec={"type": "delta", "path": f"{lake.warehouse}/{DS}", "segment": f"k{i}"},
    )  # fmt: skip
    lake.actions.publish(DS, [segment], group_id=f"g{i}")
    return segment


def visible_keys(lake: Lake) -> list[str]:
    table = DeltaTable(visible_table_path(lake.warehouse, DS))
    return sorted(pa.table(table.get_add_actions(flatten=True))["partition.__segment"].to_pylist())


def test_a_lagging_visible_table_is_told_and_caught_up(warehouse: str) -> None:
    datasource_table(warehouse, 2)
    lake = Lake(None, warehouse)
    first = publish(lake, 0)
    assert visible_keys(lake) == ["k0"]
    assert current_version(lake.metadata, DS) is not None
    with syncs_deferred():  # a process that died between its commit and the sync
        publish(lake, 1)
    assert visible_keys(lake) == ["k0"]
    assert current_version(lake.metadata, DS) is None  # behind, and it says so
    report = sync_visible_table(lake.metadata, DS)
    assert (report.added, report.removed, report.already_current) == (1, 0, False)
    assert visible_keys(lake) == ["k0", "k1"]
    assert current_version(lake.metadata, DS) == report.table_version
    lake.mark_unused([first.id])  # its own commit syncs
    assert visible_keys(lake) == ["k1"]
    again = sync_visible_table(lake.metadata, DS)
    assert again.already_current
    assert again.table_version == DeltaTable(visible_table_path(lake.warehouse, DS)).version()


def test_a_column_the_datasource_table_gains_reaches_the_visible_table(warehouse: str) -> None:
    """A write with ``mergeSchema`` (a new dimension) grows the datasource table's schema;
    the next sync gives the visible table the same schema in the entry that adds the files."""
    datasource_table(warehouse, 1)
    lake = Lake(None, warehouse)
    publish(lake, 0)
    grown = pa.table(
        {
            "__time": pa.array([START + timedelta(hours=1)], pa.timestamp("us", tz="UTC")),
            "value": pa.array([7], pa.int64()),
            "page": pa.array(["p"]),
            "__segment": pa.array(["k1"]),
        }
    )
    write_deltalake(
        f"{warehouse}/{DS}", grown, partition_by=["__segment"], mode="append", schema_mode="merge"
    )
    publish(lake, 1)
    table = DeltaTable(visible_table_path(warehouse, DS))
    assert "page" in [f.name for f in table.schema().fields]
    assert visible_keys(lake) == ["k0", "k1"]
    assert sync_visible_table(lake.metadata, DS).already_current


def test_a_local_sync_takes_its_own_entry_as_written(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync that commits on a local file system applies its own entry to what it follows
    instead of reading it back (a rebuild's entry is ~30 MB of JSON at 10^5 files), and the
    next sync looks only at what changed since: not again at the keys it just wrote."""
    from segmentlake.metadata.table_log import TableLog

    datasource_table(warehouse, 21)
    lake = Lake(None, warehouse)
    with syncs_deferred():
        for i in range(20):
            publish(lake, i)
    first = sync_visible_table(lake.metadata, DS)
    assert first.added == 20
    reads: list[tuple[str, int]] = []
    entry = TableLog.entry

    def read(log: TableLog, version: int) -> list[dict[str, Any]] | None:
        reads.append((log.uri, version))
        return entry(log, version)

    monkeypatch.setattr(TableLog, "entry", read)
    with syncs_deferred():
        publish(lake, 20)
    second = sync_visible_table(lake.metadata, DS)
    assert (second.added, second.keys_diffed, second.whole_diff) == (1, 1, False), second
    visible = TableLog(visible_table_path(warehouse, DS)).uri
    assert (visible, first.table_version) not in reads, reads
    from segmentlake.metadata import visible_table as module

    # What it follows of the visible table keeps no add actions (never added anywhere).
    assert module._followed[visible].tables[visible].keep_adds is False
    assert visible_keys(lake) == sorted(f"k{k}" for k in range(21))


def visible_files(lake: Lake) -> dict[str, str]:
    """The visible table's files as a fresh delta-rs load sees them: path -> key."""
    actions = DeltaTable(visible_table_path(lake.warehouse, DS)).get_add_actions(flatten=True)
    return dict(
        zip(
            actions.column("path").to_pylist(),
            actions.column("partition.__segment").to_pylist(),
            strict=True,
        )
    )


def test_a_visible_table_deleted_under_a_following_process_is_rebuilt_whole(
    warehouse: str,
) -> None:
    # This thread follows both tables' logs from sync to sync; each sync's result must be
    # what a whole load would give, also when the visible table is deleted under it and
    # when the datasource table gains files between syncs.
    datasource_table(warehouse, 4)
    lake = Lake(None, warehouse)
    segments = [publish(lake, i) for i in range(3)]
    assert sorted(visible_files(lake).values()) == ["k0", "k1", "k2"]
    shutil.rmtree(visible_table_path(lake.warehouse, DS))
    rebuilt = sync_visible_table(lake.metadata, DS)
    assert (rebuilt.added, rebuilt.removed) == (3, 0)
    assert sorted(visible_files(lake).values()) == ["k0", "k1", "k2"]
    lake.mark_unused([segments[1].id])
    publish(lake, 3)
    assert sorted(visible_files(lake).values()) == ["k0", "k2", "k3"]
    # A second file of a served key, added to the datasource table after its publish.
    write_deltalake(
        f"{warehouse}/{DS}",
        pa.table(
            {
                "__time": pa.array([START], pa.timestamp("us", tz="UTC")),
                "value": pa.array([-1], pa.int64()),
                "__segment": pa.array(["k0"]),
            }
        ),
        partition_by=["__segment"],
        mode="append",
    )
    lake.mark_unused([segments[2].id])
    assert sorted(visible_files(lake).values()) == ["k0", "k0", "k3"]


@pytest.mark.parametrize(
    ("chunks", "disjoint"),
    [
        ([(0, 1, "v1")], True),
        ([(0, 1, "v1"), (1, 2, "v1"), (5, 6, "v2"), (0, 1, "v1")], True),  # repeats are one
        ([(0, 1, "v1"), (0, 1, "v2")], False),  # two versions of one interval
        ([(0, 24, "v2"), (3, 4, "v1")], False),  # a DAY over one of its HOURs
        ([(0, 2, "v1"), (1, 3, "v1")], False),  # overlapping by an instant
    ],
)
def test_chunks_are_told_disjoint_only_when_none_overlaps(
    chunks: list[tuple[int, int, str]], disjoint: bool
) -> None:
    """The sync's shortcut (each chunk serves all of its interval) holds only when no two
    distinct chunks overlap; otherwise the versions are weighed."""
    from segmentlake.metadata.visible_table import _disjoint_chunks

    starts, ends, versions = zip(*chunks, strict=True)
    records = pa.table(
        {
            "start_ms": pa.array(starts, pa.int64()),
            "end_ms": pa.array(ends, pa.int64()),
            "version": versions,
        }
    )
    assert _disjoint_chunks(records) is disjoint
