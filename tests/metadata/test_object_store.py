"""The metadata on an S3-compatible object store (moto's server on localhost): drivers in
separate processes allocating ids in one chunk at the same moment get every id exactly once,
gap-free. Commits there are S3 conditional PUTs (If-None-Match), not links."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from segmentlake.core.interval import Interval
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from tests.multiprocess_support import Op, assert_overlapped

from .support import day_after

pytestmark = [pytest.mark.multiprocess]

BUCKET = "segmentlake-test"
DAY = Interval.parse("2024-01-01/P1D")
PER_WRITER = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """A moto S3 server in its own process, with one bucket; the storage options to reach it."""
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        deadline = time.monotonic() + 30
        while True:
            try:
                client = boto3.client(
                    "s3", endpoint_url=endpoint, aws_access_key_id="test",
                    aws_secret_access_key="test", region_name="us-east-1",
                )  # fmt: skip
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
    finally:
        server.kill()
        server.wait()


def _allocate(args: tuple[str, dict[str, str], int, float]) -> dict[str, object]:
    warehouse, options, worker, start_at = args
    lake = Lake(None, warehouse, storage_options=options)
    lake.metadata.rows("s3ds")  # warm: the first read of the partition
    while time.time() < start_at:
        time.sleep(0.005)
    ids, times = [], []
    for n in range(PER_WRITER):
        started = time.time()
        (pending,) = lake.actions.allocate(
            "s3ds", [AllocateRequest(DAY, f"w{worker}-{n}")], group_id=f"w{worker}-{n}"
        )
        times.append((started, time.time()))
        ids.append(pending.segment_id.partition_num)
    return {"worker": worker, "ids": ids, "times": times}


def test_processes_allocating_in_one_chunk_on_s3_get_every_id_once(s3: dict[str, str]) -> None:
    warehouse = f"s3://{BUCKET}/warehouse"
    Lake.create(None, warehouse, storage_options=s3)
    start_at = time.time() + 6  # every process is up and warm by then
    with mp.get_context("spawn").Pool(3) as pool:
        results = pool.map(_allocate, [(warehouse, s3, w, start_at) for w in range(3)])
    ids = Counter(i for r in results for i in r["ids"])  # type: ignore[attr-defined]
    assert sorted(ids) == list(range(3 * PER_WRITER))  # gap-free
    assert set(ids.values()) == {1}  # no id twice
    assert_overlapped(
        {
            str(r["worker"]): [
                Op(str(r["worker"]), "allocate", start, end)
                for start, end in r["times"]  # type: ignore[attr-defined]
            ]
            for r in results
        }
    )
    lake = Lake.open(None, warehouse, storage_options=s3)
    # Expired ones count too: on a loaded machine the first leases (60 s) can run out
    # before this line, and each allocation still took its lock.
    assert len(lake.locks("s3ds", include_expired=True)) == 3 * PER_WRITER
    assert os.environ.get("AWS_ENDPOINT_URL") is None  # nothing leaked into the environment


def test_announcements_and_fold_claims_land_on_s3(s3: dict[str, str]) -> None:
    """Commits of no rows (a loser's announcement, a fold's claim) go through delta-rs's
    conditional PUT on object stores: they land, and the fold after the claim too."""
    from segmentlake.metadata.scope import Scope
    from segmentlake.metadata.store import MetadataStore

    warehouse = f"s3://{BUCKET}/claims"
    lake = Lake.create(None, warehouse, storage_options=s3)
    for i in range(3):
        assert lake.actions.try_lock("claims", day_after(i), group_id=f"g{i}").granted
    store = MetadataStore(warehouse, storage_options=s3)
    before = store.version()

    store.announce_waiting("claims", Scope.of([day_after(0).key]), "t:1")
    report = store._claimed_upkeep("claims")

    ops = [(r or {}).get("op") for _, r in store.table.records(before, store.table.refresh())]
    assert ops[:2] == ["waiting", "upkeep_claim"]
    assert report is None or ops[2] == "upkeep"
    assert len(Lake.open(None, warehouse, storage_options=s3).locks("claims")) == 3


def test_the_visible_table_follows_publishes_on_s3(s3: dict[str, str]) -> None:
    """On an object store the visible table is created and committed through delta-rs
    (conditional PUTs): a publish brings it along, a segment marked unused leaves it, and its
    add actions name the datasource table's files by their s3:// URIs."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from segmentlake.core.segment import DataSegment
    from segmentlake.core.shard_spec import NumberedShardSpec
    from segmentlake.metadata.visible_table import VISIBLE_APP_ID, visible_table_path

    warehouse = f"s3://{BUCKET}/visible"
    rows = pa.table(
        {"value": pa.array([1, 2, 3], pa.int64()), "__segment": pa.array(["k0", "k0", "k1"])}
    )
    write_deltalake(f"{warehouse}/vis", rows, partition_by=["__segment"], storage_options=s3)
    lake = Lake.create(None, warehouse, storage_options=s3)
    segments = []
    for i in range(2):
        lock = lake.actions.try_lock("vis", day_after(i), group_id=f"g{i}").lock
        assert lock is not None
        segment = DataSegment(
            "vis", day_after(i), lock.version, NumberedShardSpec(0, 1),
            load_spec={"type": "delta", "path": f"{warehouse}/vis", "segment": f"k{i}"},
        )  # fmt: skip
        lake.actions.publish("vis", [segment], group_id=f"g{i}")
        segments.append(segment)

    def visible() -> tuple[list[str], DeltaTable]:
        table = DeltaTable(visible_table_path(warehouse, "vis"), storage_options=s3)
        adds = pa.table(table.get_add_actions(flatten=True))
        assert all(p.startswith(f"{warehouse}/vis/") for p in adds["path"].to_pylist())
        return sorted(adds["partition.__segment"].to_pylist()), table

    keys, table = visible()
    assert keys == ["k0", "k1"]
    assert table.transaction_version(VISIBLE_APP_ID) is not None
    lake.mark_unused([segments[0].id])
    keys, table = visible()
    assert keys == ["k1"]

    # A process that follows nothing tells the table is current from its latest entry,
    # found by probes, without loading it.
    from segmentlake.metadata import visible_table as module
    from segmentlake.metadata.table_log import TableLog

    module._forget_followed()
    assert module.current_version(lake.metadata, "vis") == table.version()
    uri = TableLog(visible_table_path(warehouse, "vis"), storage_options=s3).uri
    assert module._followed[uri].tables == {}

    # A write that is no sync and changes no file: the next sync ends the log with its own.
    foreign = table.version() + 1
    table.create_write_transaction([], "append", table.schema(), partition_by=["__segment"])
    assert DeltaTable(visible_table_path(warehouse, "vis"), storage_options=s3).version() == foreign
    module._forget_followed()
    assert module.current_version(lake.metadata, "vis") is None
    assert module.sync_visible_table(lake.metadata, "vis").table_version == foreign + 1
    module._forget_followed()
    assert module.current_version(lake.metadata, "vis") == foreign + 1


def test_on_s3_a_grown_datasource_schema_reaches_the_visible_table_and_syncs_load_nothing(
    s3: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs commits a schema only with an overwrite: a column the datasource table gained
    (written with ``mergeSchema``) is added to the visible table as a commit of its own before
    the sync's. The commits are made on the followed table's handle brought forward, so a
    process that follows both tables loads neither again, whatever their size."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from segmentlake.core.segment import DataSegment
    from segmentlake.core.shard_spec import NumberedShardSpec
    from segmentlake.metadata.table_log import TableLog
    from segmentlake.metadata.visible_table import VISIBLE_APP_ID, visible_table_path

    warehouse = f"s3://{BUCKET}/grown"
    data = f"{warehouse}/grown"
    lake = Lake.create(None, warehouse, storage_options=s3)

    def publish(i: int, columns: dict[str, pa.Array]) -> None:
        rows = pa.table({**columns, "__segment": pa.array([f"k{i}"])})
        write_deltalake(
            data, rows, partition_by=["__segment"], mode="append", schema_mode="merge",
            storage_options=s3,
        )  # fmt: skip
        lock = lake.actions.try_lock("grown", day_after(i), group_id=f"g{i}").lock
        assert lock is not None
        segment = DataSegment(
            "grown", day_after(i), lock.version, NumberedShardSpec(0, 1),
            load_spec={"type": "delta", "path": data, "segment": f"k{i}"},
        )  # fmt: skip
        lake.actions.publish("grown", [segment], group_id=f"g{i}")

    publish(0, {"value": pa.array([1], pa.int64())})
    loads: list[tuple[str, int | None]] = []
    load = TableLog.table

    def counted(log: TableLog, version: int | None = None) -> DeltaTable:
        loads.append((log.uri, version))
        return load(log, version)

    monkeypatch.setattr(TableLog, "table", counted)
    publish(1, {"value": pa.array([2], pa.int64()), "page": pa.array(["p"])})
    publish(2, {"value": pa.array([3], pa.int64()), "page": pa.array(["q"])})

    table = DeltaTable(visible_table_path(warehouse, "grown"), storage_options=s3)
    assert [f.name for f in table.schema().fields] == ["value", "__segment", "page"]
    keys = pa.table(table.get_add_actions(flatten=True))["partition.__segment"].to_pylist()
    assert sorted(keys) == ["k0", "k1", "k2"]
    operations = [h["operation"] for h in table.history()]
    assert operations.count("ADD COLUMN") == 1, operations
    assert table.transaction_version(VISIBLE_APP_ID) == lake.metadata.version()
    assert [uri for uri, _ in loads if "visible" in uri or uri.endswith("/grown")] == []


def test_processes_racing_publishes_on_s3_leave_every_segment_visible_once(
    s3: dict[str, str], tmp_path: Path
) -> None:
    """Three processes publish at the same time on S3, each publish syncing the visible table
    through delta-rs on its follower's handle; the datasource table gained a column before
    the race, so the first syncs race to add it too. Afterwards the visible table holds every
    key once, with the column, and a sync finds nothing left to do."""
    import json

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from segmentlake.metadata.visible_table import sync_visible_table, visible_table_path
    from tests.metadata.visible_sync_worker import DS, START
    from tests.multiprocess_support import go, read_all_times, wait_ready

    workers, each = 3, 4
    warehouse = f"s3://{BUCKET}/raced"
    lake = Lake.create(None, warehouse, storage_options=s3)
    for half, columns in enumerate(({}, {"page": pa.array(["p"] * (workers * each // 2))})):
        keys = range(half * workers * each // 2, (half + 1) * workers * each // 2)
        rows = pa.table(
            {
                "__time": pa.array([START] * len(keys), pa.timestamp("us", tz="UTC")),
                "value": pa.array(list(keys), pa.int64()),
                **columns,
                "__segment": pa.array([f"k{k}" for k in keys]),
            }
        )
        write_deltalake(
            f"{warehouse}/{DS}", rows, partition_by=["__segment"], mode="append",
            schema_mode="merge", storage_options=s3,
        )  # fmt: skip
        if half == 0:
            sync_visible_table(lake.metadata, DS)  # the visible table, before the column
    race = tmp_path / "race"
    race.mkdir()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONFAULTHANDLER": "1"}
    worker = str(root / "tests/metadata/visible_sync_worker.py")

    def start(w: int) -> subprocess.Popen[str]:
        share = [f"w{w}", str(w * each), str(each), json.dumps(s3)]
        return subprocess.Popen(
            [sys.executable, worker, warehouse, str(race), *share],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    procs = {f"w{w}": start(w) for w in range(workers)}
    wait_ready(race, procs)
    go(race)
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: {out[-3000:]}"
    assert_overlapped(read_all_times(race, list(procs)), together=True)

    final = sync_visible_table(Lake(None, warehouse, storage_options=s3).metadata, DS)
    assert (final.added, final.removed) == (0, 0), final
    visible = DeltaTable(visible_table_path(warehouse, DS), storage_options=s3)
    assert "page" in [f.name for f in visible.schema().fields]
    operations = [h["operation"] for h in visible.history()]
    assert operations.count("ADD COLUMN") == 1, operations  # the losers saw it and went on
    keys_seen = pa.table(visible.get_add_actions(flatten=True))["partition.__segment"].to_pylist()
    assert Counter(keys_seen) == Counter(f"k{k}" for k in range(workers * each))


def test_the_latest_version_on_s3_is_found_by_probes_from_the_last_checkpoint(
    s3: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TableLog.version`` on an object store loads no snapshot: it probes for the entries
    after the last checkpoint in concurrent rounds (8, then 16: 20 entries after the
    checkpoint here need both), and falls back to a load only for a log that has lost both
    its first entry and the checkpoint's hint."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from segmentlake.metadata.table_log import TableLog

    uri = f"s3://{BUCKET}/probed"
    log = TableLog(uri, storage_options=s3)
    assert log.version() == -1
    write_deltalake(uri, pa.table({"value": pa.array([1], pa.int64())}), storage_options=s3)
    table = DeltaTable(uri, storage_options=s3)
    found = [(log.version(), 0)]
    for version in range(1, 27):
        table.create_write_transaction([], "append", table.schema())  # an empty commit
        table.update_incremental()
        if version == 6:
            table.create_checkpoint()
        if version in (3, 6, 7, 14, 15, 26):  # round edges: 7-14 in the first, 15-30
            found.append((log.version(), version))
    assert all(latest == version for latest, version in found), found
    assert log.last_checkpoint() == 6

    loads: list[int | None] = []
    load = TableLog.table
    monkeypatch.setattr(
        TableLog, "table", lambda self, version=None: loads.append(version) or load(self, version)
    )
    assert log.version() == 26
    assert loads == []
    for name in ("_last_checkpoint", f"{0:020d}.json"):
        log.fs.delete_file(log.full(f"_delta_log/{name}"))
    assert log.version() == 26
    assert loads == [None]


def test_following_a_log_on_s3_hands_over_each_new_entry_or_says_to_load_whole(
    s3: dict[str, str],
) -> None:
    """``TableLog.follow`` on an object store asks for the entries' stamps in another thread
    while it reads them: it must hand over each new entry in order, up to a ``limit``, and
    say to load whole for a changed entry (its stamp answered after the next entry was
    read), a refused one, a cleanup behind a checkpoint and a table created again."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from segmentlake.metadata.table_log import TableLog

    uri = f"s3://{BUCKET}/followed"
    log = TableLog(uri, storage_options=s3)

    def append(value: int) -> None:
        write_deltalake(uri, pa.table({"x": [value]}), mode="append", storage_options=s3)

    seen: list[int] = []

    def take(version: int, actions: list[dict]) -> bool:
        seen.append(version)
        return any("add" in a for a in actions)

    for i in range(3):
        append(i)
    stamp = log.entry_stamp(0)
    assert log.follow(0, stamp, take) == (2, log.entry_stamp(2))
    assert seen == [1, 2]
    assert log.follow(2, log.entry_stamp(2), take) == (2, log.entry_stamp(2))  # nothing new
    assert seen == [1, 2]
    for i in range(3, 9):
        append(i)
    seen.clear()
    assert log.follow(2, log.entry_stamp(2), take) == (8, log.entry_stamp(8))
    assert seen == list(range(3, 9))
    assert log.follow(2, log.entry_stamp(2), take, limit=5) is None  # 6 new: too many
    assert log.follow(5, log.entry_stamp(5), take, limit=4) == (8, log.entry_stamp(8))
    seen.clear()
    assert log.follow(2, (1, 1), take) is None  # not the entry it read: another table
    assert seen == []  # nothing handed over before the stamp was checked
    DeltaTable(uri, storage_options=s3).alter.set_table_properties({"delta.appendOnly": "false"})
    seen.clear()
    assert log.follow(8, log.entry_stamp(8), take) is None  # refused: no add in entry 9
    assert seen == [9]
    for i in range(3):
        append(100 + i)  # 10-12
    DeltaTable(uri, storage_options=s3).create_checkpoint()
    stamp = log.entry_stamp(9)
    log.fs.delete_file(log.full(f"_delta_log/{10:020d}.json"))  # a cleanup behind it
    assert log.follow(9, stamp, take) is None
    names = [f"{v:020d}.json" for v in range(13) if v != 10]  # 10 is gone already
    for name in (*names, "_last_checkpoint", f"{12:020d}.checkpoint.parquet"):
        log.fs.delete_file(log.full(f"_delta_log/{name}"))
    append(99)  # created again: only version 0
    assert log.follow(9, stamp, take) is None
    assert log.follow(0, None, take) is None  # a stamp never taken proves nothing


def test_follows_and_probes_on_s3_work_while_the_interpreter_exits(
    s3: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At exit the interpreter's thread pools take no new work, while it waits for the
    metadata upkeep threads, which may follow the log: following and finding the version
    then ask in the calling thread instead of failing (a shut-down pool refuses the same
    way)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from segmentlake.metadata import table_log
    from segmentlake.metadata.table_log import TableLog

    uri = f"s3://{BUCKET}/exiting"
    for i in range(3):
        write_deltalake(uri, pa.table({"x": [i]}), mode="append", storage_options=s3)
    log = TableLog(uri, storage_options=s3)
    stamp = log.entry_stamp(0)
    refusing = table_log.ThreadPoolExecutor(1)
    refusing.shutdown()
    monkeypatch.setattr(table_log, "_probe_pool", lambda: refusing)
    assert log.follow(0, stamp, lambda _version, _actions: True) == (2, log.entry_stamp(2))
    assert log.version() == 2
