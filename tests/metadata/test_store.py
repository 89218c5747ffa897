"""The metadata store's own mechanics on a real Delta table written by delta-rs: following the
log across store instances, conflicts by scope (not by datasource), the upkeep that keeps the
table at few files, leases, and Spark reading the very rows the store reads."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from segmentlake.errors import SpecError, WarehouseNotFound
from segmentlake.lake import Lake
from segmentlake.metadata import store as store_module
from segmentlake.metadata.records import LEASE, LOCK, metadata_row
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import (
    UPKEEP_FILES,
    Change,
    ChangeBatch,
    Conflict,
    MetadataStore,
    now_ms,
)
from segmentlake.metadata.views import current_rows_sql

from .support import DAY, NEXT_DAY, day_after, history

pytestmark = pytest.mark.spark


def lock(ds: str, name: str, start: int, end: int) -> dict[str, object]:
    return metadata_row(
        ds, LOCK, name, now_ms(), start_ms=start, end_ms=end, group_id=name, revoked=False,
        expires_ms=now_ms() + 60_000,
    )  # fmt: skip


def test_a_second_store_follows_commits_of_the_first(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    assert lake.actions.try_lock(ds, DAY, group_id="a").granted
    other = Lake(spark, lake.warehouse)  # its own log follower and row cache
    assert [lk.group_id for lk in other.locks(ds)] == ["a"]
    assert other.actions.release_locks(ds, "a") == 1
    assert lake.locks(ds) == []


def test_commits_on_other_chunks_rebase_and_on_the_same_chunk_conflict(lake: Lake, ds: str) -> None:
    lake.metadata.create()
    first, second = MetadataStore(lake.warehouse), MetadataStore(lake.warehouse)
    day, next_day = DAY.key, NEXT_DAY.key
    a = first.read(ds, scope=Scope.of([day]))
    b = second.read(ds, scope=Scope.of([next_day]))
    c = second.read(ds, scope=Scope.of([day]))
    assert a.version == b.version == c.version
    landed = first.commit(a, [Change("upsert", lock(ds, "a", *day))], commit_id="a", operation="t")
    # Another chunk: the winner wrote nothing b read, so b lands on top of it, undecided again.
    change = Change("upsert", lock(ds, "b", *next_day))
    rebased = second.commit(b, [change], commit_id="b", operation="t")
    assert rebased == landed + 1
    # The same chunk: the winner changed what c read.
    with pytest.raises(Conflict, match="changed what it read"):
        second.commit(c, [Change("upsert", lock(ds, "c", *day))], commit_id="c", operation="t")
    assert sorted(r["id"] for r in first.rows(ds, pc.field("kind") == LOCK)) == ["a", "b"]
    assert [r["commit_id"] for r in history(lake)[-2:]] == ["a", "b"]


@pytest.mark.parametrize("small_rows", [0, 64], ids=["as-arrow", "small-as-rows"])
def test_a_change_batch_commits_like_one_change_per_row(
    lake: Lake, ds: str, small_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk publish releases 10^4 locks as one Arrow batch: later changes of a row in the
    same commit win over it, an insert of a present row and a delete of an absent one drop
    out, and the rows land as if changed one by one (small batches are made rows first)."""
    monkeypatch.setattr(store_module, "_SMALL_BATCH_ROWS", small_rows)
    store = lake.metadata
    store.create()
    day = DAY.key
    rows = [lock(ds, name, *day) for name in ("a", "b", "c")]
    store.commit(store.read(ds), [Change("upsert", r) for r in rows], commit_id="1", operation="t")
    state = store.read(ds)
    locks = state.table_of(LOCK)
    assert sorted(locks["id"].to_pylist()) == ["a", "b", "c"]
    kept = {**lock(ds, "b", *day), "group_id": "kept"}
    files_before = {f.path for f in store.table.files()}
    version = store.commit(
        state,
        [ChangeBatch("delete", locks), Change("upsert", kept)],
        commit_id="2",
        operation="t",
    )
    assert version is not None
    (added,) = [f.path for f in store.table.files() if f.path not in files_before]
    written = store.table.read_file(added).select(["id", "deleted", "group_id"]).to_pylist()
    assert sorted(written, key=lambda r: r["id"]) == [  # each row once
        {"id": "a", "deleted": True, "group_id": "a"},
        {"id": "b", "deleted": False, "group_id": "kept"},
        {"id": "c", "deleted": True, "group_id": "c"},
    ]
    assert [(r["id"], r["group_id"]) for r in store.rows(ds, kinds=[LOCK])] == [("b", "kept")]
    again = store.read(ds)
    # Inserting a present row or deleting absent ones changes nothing: no commit.
    gone = locks.filter(pc.invert(pc.is_in(locks["id"], value_set=pa.array(["b"]))))
    batches = [ChangeBatch("insert", again.table_of(LOCK)), ChangeBatch("delete", gone)]
    assert store.commit(again, batches, commit_id="3", operation="t") is None
    # A row change before the batch loses to it.
    lost = Change("upsert", {**kept, "group_id": "lost"})
    store.commit(
        again,
        [lost, ChangeBatch("delete", again.table_of(LOCK))],
        commit_id="4",
        operation="t",
    )
    assert store.rows(ds, kinds=[LOCK]) == []
    assert MetadataStore(lake.warehouse).rows(ds, kinds=[LOCK]) == []
    twice = pa.concat_tables([locks, locks])
    with pytest.raises(SpecError, match="names a row twice"):
        store.commit(store.read(ds), [ChangeBatch("upsert", twice)], commit_id="5", operation="t")
    with pytest.raises(SpecError, match="insert, upsert or delete"):
        ChangeBatch("merge", locks)


def test_long_datasource_names_keep_their_own_partitions(tmp_path: Path) -> None:
    """Names as long as the name rule allows, and names sharing their first 200 characters,
    each get a partition directory of their own within a file name's 255 bytes (a name of
    245 or more characters used to fail its first commit: "File name too long")."""
    lake = Lake.create(None, str(tmp_path / "warehouse"))
    names = ["a" * 255, "a" * 254 + "b", "a" * 200, "a" * 201]
    for i, name in enumerate(names):
        lake.actions.lock(name, "2024-01-01/2024-01-02", group_id=f"g{i}")
    assert [[lock.group_id for lock in lake.locks(name)] for name in names] == [
        ["g0"],
        ["g1"],
        ["g2"],
        ["g3"],
    ]
    directories = {p.name for p in tmp_path.rglob("datasource=a*") if p.is_dir()}
    assert len(directories) == len(names)
    assert max(len(d.encode()) for d in directories) <= 255


def test_other_datasources_never_conflict(lake: Lake, ds: str) -> None:
    lake.metadata.create()
    store = MetadataStore(lake.warehouse)
    mine = store.read(ds)  # the whole datasource: a commit anywhere in it would conflict
    lake.actions.try_lock(f"{ds}_other", DAY, group_id="x")
    change = Change("upsert", lock(ds, "m", *DAY.key))
    assert store.commit(mine, [change], commit_id="m", operation="t")


def test_upkeep_keeps_few_files_and_loses_no_row(spark: SparkSession, lake: Lake, ds: str) -> None:
    count = UPKEEP_FILES * 3
    for i in range(count):
        assert lake.actions.try_lock(ds, day_after(i), group_id=f"g{i}").granted
    lake.metadata.settle()  # the background upkeep the commits started
    lake.metadata.upkeep(ds, min_files=2)  # what it does when due
    lake.metadata.table.refresh()
    files = [f for f in lake.metadata.table.files() if f.datasource == ds]
    assert len(files) <= 2  # the last full fold, and the recent versions folded beside it
    groups = sorted(r["group_id"] for r in lake.metadata.rows(ds, pc.field("kind") == LOCK))
    assert groups == sorted(f"g{i}" for i in range(count))
    # A fresh process folds the same rows from the fewer files.
    fresh = MetadataStore(lake.warehouse)
    assert len(fresh.rows(ds, pc.field("kind") == LOCK)) == count
    # Spark reads the same current rows from the Delta table delta-rs wrote.
    current = spark.sql(f"SELECT * FROM {current_rows_sql(lake.metadata.path)}")
    assert current.where(f"datasource = '{ds}' AND kind = '{LOCK}'").count() == count


def test_a_heartbeat_is_one_row_for_any_number_of_locks(lake: Lake, ds: str) -> None:
    requests = [lake.actions.lock_request(ds, day_after(i), group_id="many") for i in range(50)]
    assert lake.lockbox.try_lock_all(requests).granted
    before = history(lake)[-1]["version"]
    expiry = min(lk.expires_millis for lk in lake.locks(ds))
    time.sleep(0.05)
    assert len(lake.actions.heartbeat(ds, "many")) == 50
    new = [r for r in history(lake) if r["version"] > before]
    assert [r["operation"] for r in new] == ["heartbeat"]
    (version,) = [r["version"] for r in new]
    actions = lake.metadata.table.log.commit_actions(version)
    added = [a["add"] for a in actions if "add" in a]
    assert [a["stats"] for a in added] == ['{"numRecords": 1}']  # the lease row alone
    assert min(lk.expires_millis for lk in lake.locks(ds)) > expiry
    leases = lake.metadata.rows(ds, pc.field("kind") == LEASE)
    assert [r["id"] for r in leases] == ["many"]


def test_rows_selects_columns_and_filters(lake: Lake, ds: str) -> None:
    assert lake.actions.try_lock(ds, DAY, group_id="a").granted
    assert lake.actions.try_lock(ds, day_after(3), group_id="b").granted

    rows = lake.metadata.rows(
        ds, (pc.field("kind") == LOCK) & (pc.field("group_id") == "b"), columns=["group_id", "kind"]
    )

    assert rows == [{"datasource": ds, "group_id": "b", "kind": LOCK}]


def test_the_table_stays_on_protocol_1_2_without_features_delta_rs_misreads(lake: Lake) -> None:
    lake.metadata.create()
    table = lake.metadata.table.table()
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    configuration = table.metadata().configuration
    assert configuration.get("delta.enableDeletionVectors") == "false"
    assert "delta.columnMapping.mode" not in configuration


def test_a_lagging_reader_sees_a_deletion_whose_file_was_folded_away(lake: Lake, ds: str) -> None:
    lake.metadata.create()
    reader, writer = MetadataStore(lake.warehouse), MetadataStore(lake.warehouse)
    row = lock(ds, "doomed", *DAY.key)
    writer.commit(writer.read(ds), [Change("upsert", row)], commit_id="in", operation="t")
    assert [r["id"] for r in reader.rows(ds)] == ["doomed"]  # the reader holds the row
    writer.commit(writer.read(ds), [Change("delete", row)], commit_id="out", operation="t")
    writer.upkeep(ds, min_files=1)  # the delete's own file is folded into one, then gone
    writer.table.refresh()
    (folded,) = [f for f in writer.table.files() if f.datasource == ds]
    kept = writer.table.read_file(folded.path).to_pylist()
    # The tombstone stays in the folded file (for its retention): without it the reader,
    # which never saw the delete's own file, would keep serving the row.
    assert [(r["id"], r["deleted"]) for r in kept] == [("doomed", True)]
    assert reader.rows(ds) == []
    assert MetadataStore(lake.warehouse).rows(ds) == []


def test_a_cold_reader_skips_a_full_folds_deletions_and_folds_from_files_meanwhile(
    lake: Lake, ds: str
) -> None:
    lake.metadata.create()
    writer, lagging = MetadataStore(lake.warehouse), MetadataStore(lake.warehouse)
    kept, doomed = lock(ds, "kept", *DAY.key), lock(ds, "doomed", *NEXT_DAY.key)
    writer.commit(writer.read(ds), [Change("upsert", kept), Change("upsert", doomed)],
                  commit_id="in", operation="t")  # fmt: skip
    assert {r["id"] for r in lagging.rows(ds)} == {"kept", "doomed"}
    writer.commit(writer.read(ds), [Change("delete", doomed)], commit_id="out", operation="t")
    writer.upkeep(ds, min_files=1)  # a full fold: the deletion goes after the live rows
    writer.table.refresh()
    (folded,) = [f for f in writer.table.files() if f.datasource == ds]
    assert [(r["id"], r["deleted"]) for r in writer.table.read_file(folded.path).to_pylist()] == [
        ("kept", False), ("doomed", True)
    ]  # fmt: skip
    live = writer.table.read_live_rows(folded.path)
    assert live.skipped_deletions
    assert [r["id"] for r in live.rows.to_pylist()] == ["kept"]

    cold = MetadataStore(lake.warehouse)
    assert [r["id"] for r in cold.rows(ds)] == ["kept"]  # the deletion left unread
    assert [r["id"] for r in lagging.rows(ds)] == ["kept"]  # a lagging reader needs it
    # The cold store's fold lacks the deletion: its own full fold reads the files instead
    # of writing what it holds, so the deletion survives for readers lagging still.
    cold.commit(cold.read(ds), [Change("upsert", lock(ds, "new", *DAY.key))],
                commit_id="new", operation="t")  # fmt: skip
    cold.upkeep(ds, min_files=1)
    cold.table.refresh()
    (refolded,) = [f for f in cold.table.files() if f.datasource == ds]
    assert sorted(
        (r["id"], r["deleted"]) for r in cold.table.read_file(refolded.path).to_pylist()
    ) == [("doomed", True), ("kept", False), ("new", False)]


def test_upkeep_leaves_a_large_fold_alone_until_the_changes_beside_it_add_up(
    lake: Lake, ds: str
) -> None:
    lake.metadata.create()
    store = MetadataStore(lake.warehouse)
    base_rows = [lock(ds, f"base{i}", *day_after(i).key) for i in range(400)]
    store.commit(
        store.read(ds), [Change("upsert", r) for r in base_rows], commit_id="b", operation="t"
    )
    store.upkeep(ds, min_files=1)
    store.table.refresh()
    (base,) = [f.path for f in store.table.files() if f.datasource == ds]
    doomed = base_rows[0]
    store.commit(store.read(ds), [Change("delete", doomed)], commit_id="d", operation="t")
    for i in range(20):  # 21 small files: 21 rows beside 400 (< 25%)
        row = lock(ds, f"small{i}", *day_after(1000 + i).key)
        store.commit(store.read(ds), [Change("upsert", row)], commit_id=f"s{i}", operation="t")
    store.settle()
    store.upkeep(ds, min_files=2)
    store.table.refresh()
    paths = [f.path for f in store.table.files() if f.datasource == ds]
    # The large fold, and the small files folded by size tier (a background fold of the
    # first 16 may stand beside the fold of the rest).
    assert 2 <= len(paths) <= 3
    assert base in paths  # the large fold was not rewritten
    # The deletion of a row that lives in the large file survives the partial fold.
    fresh = MetadataStore(lake.warehouse)
    ids = sorted(r["id"] for r in fresh.rows(ds, kinds=[LOCK]))
    assert ids == sorted([r["id"] for r in base_rows[1:]] + [f"small{i}" for i in range(20)])
    # Once the versions beside it reach a quarter of it, everything is folded into one file.
    more = [lock(ds, f"more{i}", *day_after(2000 + i).key) for i in range(100)]
    store.commit(store.read(ds), [Change("upsert", r) for r in more], commit_id="m", operation="t")
    store.settle()
    store.upkeep(ds, min_files=2)
    store.table.refresh()
    assert len([f for f in store.table.files() if f.datasource == ds]) == 1
    assert len(MetadataStore(lake.warehouse).rows(ds, kinds=[LOCK])) == 399 + 20 + 100


def test_old_log_entries_are_cleaned_and_a_lagging_reader_reloads(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path / "wh"))
    store.create()
    ds = "cleaned"
    lagging = MetadataStore(str(tmp_path / "wh"))
    store.commit(store.read(ds), [Change("upsert", lock(ds, "first", *DAY.key))],
                 commit_id="c0", operation="t")  # fmt: skip
    assert [r["id"] for r in lagging.rows(ds)] == ["first"]  # its handle is at version 1
    for i in range(30):
        row = lock(ds, f"l{i}", *day_after(i + 1).key)
        store.commit(store.read(ds), [Change("upsert", row)], commit_id=f"c{i + 1}", operation="t")
    store.settle()
    store.checkpoint()
    log = store.table.log
    before = sorted(p.name for p in (tmp_path / "wh").rglob("_delta_log/*.json"))
    deleted = log.clean_log(older_than_ms=now_ms() + 1)
    after = sorted(p.name for p in (tmp_path / "wh").rglob("_delta_log/*.json"))
    assert deleted >= 25
    assert len(after) < len(before)
    assert after[-1] == before[-1]  # nothing at or after the checkpoint goes
    # A reader whose handle was behind the deleted entries reloads and sees every row.
    assert len(lagging.rows(ds)) == 31
    assert len(MetadataStore(str(tmp_path / "wh")).rows(ds)) == 31
    # And it can still commit.
    state = lagging.read(ds)
    assert lagging.commit(state, [Change("upsert", lock(ds, "late", *day_after(99).key))],
                          commit_id="late", operation="t")  # fmt: skip
    # A young entry is kept whatever its version.
    assert log.clean_log(older_than_ms=0) == 0


def test_a_warehouse_deleted_and_created_again_under_a_following_store_is_loaded_again(
    tmp_path: Path,
) -> None:
    """A long-lived store (a notebook's) that followed the metadata table to version 6 sees
    the warehouse deleted and created again with fewer versions. It must read the new table,
    not keep its old rows, and its next commit must land right after the new table's latest
    version: written at its old version + 1, it would leave a gap no Delta reader can read."""
    import shutil

    from segmentlake.metadata.table_log import TableLog

    path = str(tmp_path / "wh")
    ds = "again"
    old = MetadataStore(path)
    old.create()
    for i in range(6):
        row = lock(ds, f"old{i}", *day_after(i).key)
        old.commit(old.read(ds), [Change("upsert", row)], commit_id=f"o{i}", operation="t")
    assert len(old.rows(ds)) == 6
    shutil.rmtree(path)
    new = MetadataStore(path)
    new.create()
    for i in range(2):
        row = lock(ds, f"new{i}", *day_after(i).key)
        new.commit(new.read(ds), [Change("upsert", row)], commit_id=f"n{i}", operation="t")

    assert sorted(r["id"] for r in old.rows(ds)) == ["new0", "new1"]
    late = lock(ds, "late", *day_after(9).key)
    old.commit(old.read(ds), [Change("upsert", late)], commit_id="late", operation="t")
    assert TableLog(new.path).table().version() == 3  # contiguous: 0 (create), 1, 2, 3
    assert sorted(r["id"] for r in MetadataStore(path).rows(ds)) == ["late", "new0", "new1"]

    shutil.rmtree(path)  # and gone for good: said so, not answered from memory
    with pytest.raises(WarehouseNotFound, match="deleted under this process"):
        old.rows(ds)


def _folded_store(tmp_path: Path, ds: str) -> tuple[MetadataStore, Path]:
    """A store whose partition ``ds`` holds five commits' files folded into one, its removed
    files retained for 1 s (a test cannot wait the 10 minutes); and the partition's
    directory."""
    store = MetadataStore(str(tmp_path / "wh"))
    store.create()
    store.table.log.table().alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 1 seconds"}
    )
    for i in range(5):
        row = lock(ds, f"l{i}", *day_after(i).key)
        store.commit(store.read(ds), [Change("upsert", row)], commit_id=f"c{i}", operation="t")
    store.settle()
    store.upkeep(ds, min_files=2)
    store.settle()
    return store, tmp_path / "wh" / "_segmentlake" / "metadata_v2" / f"datasource={ds}"


def test_folded_away_files_are_vacuumed_once_past_retention(tmp_path: Path) -> None:
    ds = "vacuumed"
    store, data_dir = _folded_store(tmp_path, ds)
    on_disk = len(list(data_dir.glob("*.parquet")))
    assert on_disk >= 6  # five commits' files and the fold
    time.sleep(1.5)  # past retention: the tombstones have expired, the files must still go
    store.checkpoint(cleanup=True)
    assert len(list(data_dir.glob("*.parquet"))) == 1  # only the fold is left
    assert len(MetadataStore(str(tmp_path / "wh")).rows(ds, kinds=[LOCK])) == 5


def test_vacuum_after_a_cleanup_that_deleted_log_entries(tmp_path: Path) -> None:
    """The cleanup deletes the log entries below the new checkpoint; the vacuum after it must
    read the table as it is now, not the snapshot taken before the checkpoint, whose entries
    are gone (delta-rs then fails with "File not found", and no file was ever vacuumed)."""
    import os

    ds = "cleaned"
    store, data_dir = _folded_store(tmp_path, ds)
    old = time.time() - 3600  # every entry so far is past the log's retention
    entries = list((Path(store.path) / "_delta_log").glob("*.json"))
    for entry in entries:
        os.utime(entry, (old, old))
    time.sleep(1.5)  # and the folded-away files past theirs
    store.checkpoint(cleanup=True)
    assert len(list(data_dir.glob("*.parquet"))) == 1  # only the fold is left
    assert sum(1 for e in entries if e.exists()) < len(entries)  # the cleanup did delete
    assert len(MetadataStore(str(tmp_path / "wh")).rows(ds, kinds=[LOCK])) == 5


def test_a_log_listing_caught_between_two_new_entries_is_loaded_again(tmp_path: Path) -> None:
    """A listing taken while another process links entries can see version v + 1 without v;
    delta-rs refuses such a log, and the load is tried again once the gap closed."""
    import os
    import threading

    from deltalake.exceptions import DeltaError

    from segmentlake.metadata.table_log import TableLog

    store = MetadataStore(str(tmp_path / "wh"))
    store.create()
    for i in range(3):
        row = lock("gap", f"g{i}", *day_after(i).key)
        store.commit(store.read("gap"), [Change("upsert", row)], commit_id=f"c{i}", operation="t")
    log_dir = Path(store.path) / "_delta_log"
    entry, aside = log_dir / f"{2:020d}.json", tmp_path / "aside.json"
    os.rename(entry, aside)  # versions 1 and 3 are there, 2 is "not linked yet"
    with pytest.raises(DeltaError, match="contiguous"):
        TableLog(store.path).table()  # a gap that stays is an error

    threading.Timer(0.02, os.rename, (aside, entry)).start()

    assert TableLog(store.path).table().version() == 3


def test_checkpoints_come_no_sooner_than_their_interval(
    lake: Lake, ds: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint carries an action per file within vacuum retention: on a busy table one
    every few versions would write megabytes a second, so they are also spaced in time."""
    from segmentlake.metadata import store as store_module

    monkeypatch.setattr(store_module, "CHECKPOINT_EVERY", 1)
    lake.metadata.create()
    store = MetadataStore(lake.warehouse)

    def commit_some(count: int) -> None:
        for i in range(count):
            row = lock(ds, f"l{i}", *day_after(i).key)
            store.commit(store.read(ds), [Change("upsert", row)], commit_id=f"c{i}", operation="t")
            store.settle()

    def checkpoints() -> int:
        return len(list(Path(lake.metadata.path).glob("_delta_log/*.checkpoint.parquet")))

    lake.metadata.settle()
    store.checkpoint()  # the last checkpoint: the interval starts now
    written = checkpoints()
    commit_some(5)
    assert checkpoints() == written  # each commit's version is due, but within 10 s
    monkeypatch.setattr(store_module, "CHECKPOINT_MIN_INTERVAL_S", 0.0)
    commit_some(2)
    assert checkpoints() == written + 2
