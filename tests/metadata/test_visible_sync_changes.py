"""A sync that diffs only the keys that can have changed since this process's last sync must
leave the visible table exactly as a whole diff would: random sequences of publishes (HOURs
and DAYs over each other, so chunks win in part and clips are written), segments marked
unused and used again, files added to a served key, and syncs by another thread (sharing what
this process follows) or another process (following on its own) in between, each checked
against the whole diff computed from scratch. Spark-free (delta-rs writes the
datasource table)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from segmentlake.core.interval import Interval
from segmentlake.core.names import datasource_table_path
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata import visible_table
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.records import SEGMENT
from segmentlake.metadata.segment_files import SegmentFiles
from segmentlake.metadata.store import Change, PartitionState
from segmentlake.metadata.table_log import TableLog
from segmentlake.metadata.transaction import Decision, transact
from segmentlake.metadata.visible_table import (
    SyncReport,
    _Followed,
    _served,
    _visible_records,
    _wanted_files,
    current_version,
    sync_visible_table,
    syncs_deferred,
    visible_table_path,
)

DS = "changes"
START = datetime(2024, 1, 1, tzinfo=UTC)
HOURS = 48
# CI runs these seeds; SEGMENTLAKE_SYNC_SEEDS=N runs N more (bench-like, by hand).
SEEDS = [11, 23, 47, *range(1000, 1000 + int(os.environ.get("SEGMENTLAKE_SYNC_SEEDS", 0)))]
STEPS = 40


class World:
    """A warehouse, its datasource table written by delta-rs, and what was published."""

    def __init__(self, warehouse: str, rng: random.Random) -> None:
        self.lake = Lake(None, warehouse)
        self.table = datasource_table_path(warehouse, DS)
        self.rng = rng
        self.keys = 0
        self.segments: list[DataSegment] = []
        self.unused: set[str] = set()

    def write(self, key: str, interval: Interval, rows: int = 4) -> None:
        span = interval.end_millis - interval.start_millis
        times = [
            datetime.fromtimestamp((interval.start_millis + span * r // rows) / 1000, tz=UTC)
            for r in range(rows)
        ]
        write_deltalake(
            self.table,
            pa.table(
                {
                    "__time": pa.array(times, pa.timestamp("us", tz="UTC")),
                    "value": pa.array([self.rng.randrange(100) for _ in times], pa.int64()),
                    "__segment": pa.array([key] * rows),
                }
            ),
            partition_by=["__segment"],
            mode="append",
        )

    def publish(self, interval: Interval | None = None) -> str:
        if interval is not None:
            pass
        elif self.rng.random() < 0.3:
            day = self.rng.randrange(HOURS // 24)
            interval = Interval(START + timedelta(days=day), START + timedelta(days=day + 1))
        else:
            hour = self.rng.randrange(HOURS)
            interval = Interval(START + timedelta(hours=hour), START + timedelta(hours=hour + 1))
        key = f"k{self.keys}"
        self.keys += 1
        group = f"g{key}"
        lock = self.lake.actions.try_lock(DS, interval, group_id=group).lock
        assert lock is not None
        self.write(key, interval, rows=24 if interval.duration_millis > 3_600_000 else 4)
        segment = DataSegment(
            DS, interval, lock.version, NumberedShardSpec(0, 1),
            load_spec={"type": "delta", "path": self.table, "segment": key},
        )  # fmt: skip
        self.lake.actions.publish(DS, [segment], group_id=group)
        self.segments.append(segment)
        return f"publish {interval}"

    def append(self) -> str:
        """Append one segment to the chunk covering a random hour (a DAY's, an HOUR's, or a
        new HOUR chunk), as a streaming job does: its chunk does not change, only its key."""
        hour = self.rng.randrange(HOURS)
        wanted = Interval(START + timedelta(hours=hour), START + timedelta(hours=hour + 1))
        key = f"k{self.keys}"
        self.keys += 1
        group = f"g{key}"
        request = AllocateRequest(wanted, f"seq-{key}")
        (pending,) = self.lake.actions.allocate(DS, [request], group_id=group)
        sid = pending.segment_id
        self.write(key, sid.interval, rows=24 if sid.interval.duration_millis > 3_600_000 else 4)
        segment = DataSegment(
            DS, sid.interval, sid.version,
            NumberedShardSpec(sid.partition_num, pending.num_core_partitions),
            load_spec={"type": "delta", "path": self.table, "segment": key},
        )  # fmt: skip
        self.lake.actions.publish(DS, [segment], group_id=group)
        self.segments.append(segment)
        return f"append {segment.id}"

    def mark_unused(self) -> str:
        return self._mark(used=False)

    def mark_used(self) -> str:
        return self._mark(used=True)

    def _mark(self, *, used: bool) -> str:
        """Mark a random segment that is not so already (or publish when there is none)."""
        candidates = [s for s in self.segments if (str(s.id) in self.unused) == used]
        if not candidates:
            return self.publish()
        segment = self.rng.choice(candidates)
        (self.lake.mark_used if used else self.lake.mark_unused)([segment.id])
        (self.unused.discard if used else self.unused.add)(str(segment.id))
        return f"{'used' if used else 'unused'} {segment.id}"

    def another_file(self) -> str:
        if not self.segments:  # no datasource yet
            return self.publish()
        visible = self.lake.timeline(DS).visible_segments()
        if not visible:
            return self.publish()
        # Published segments' files do not change, and nothing syncs on a file alone: the
        # next metadata commit of the datasource (a publish here) brings it in.
        segment = self.rng.choice(visible)
        self.write(segment.load_spec["segment"], segment.interval, rows=2)
        return f"a file of {segment.load_spec['segment']}, then " + self.publish()

    def foreign_delete(self) -> str:
        """A write to the visible table that is no sync (a user's ``DELETE`` on it): the
        next sync puts the key's files back, with no metadata commit to point at it."""
        table = DeltaTable(visible_table_path(self.lake.warehouse, DS))
        keys = table.get_add_actions(flatten=True).column("partition.__segment").to_pylist()
        if not keys:
            return self.publish()
        key = self.rng.choice(sorted(set(keys)))
        table.delete(f"__segment = '{key}'")
        return f"a DELETE of {key} on the visible table"


def whole_diff_paths(lake: Lake) -> set[str]:
    """The files a whole diff says the visible table must hold, computed from scratch."""
    storage = TableLog(datasource_table_path(lake.warehouse, DS))
    visible = TableLog(visible_table_path(lake.warehouse, DS))
    served = _served(_visible_records(lake.metadata, DS))
    return set(_wanted_files(served, visible, SegmentFiles(storage), _Followed()).paths)


def visible_paths(lake: Lake) -> set[str]:
    table = DeltaTable(visible_table_path(lake.warehouse, DS))
    return set(table.get_add_actions(flatten=True).column("path").to_pylist())


def sync_in_another_thread(lake: Lake) -> None:
    thread = threading.Thread(target=sync_visible_table, args=(lake.metadata, DS))
    thread.start()
    thread.join()


def sync_as_another_process(lake: Lake) -> SyncReport:
    """A sync that follows the tables on its own, as another process does: this process's
    followers see the visible table move under them."""
    uri = TableLog(visible_table_path(lake.warehouse, DS)).uri
    ours = visible_table._followed.pop(uri, None)
    try:
        return sync_visible_table(lake.metadata, DS)
    finally:
        if ours is not None:
            visible_table._followed[uri] = ours


@pytest.mark.parametrize("seed", SEEDS)
def test_a_sync_of_the_changed_keys_equals_the_whole_diff(warehouse: str, seed: int) -> None:
    rng = random.Random(seed)
    world = World(warehouse, rng)
    world.write("k-none", Interval(START, START + timedelta(hours=1)))  # the table exists
    world.lake.metadata.create()
    reports: list[SyncReport] = []
    first_syncs: list[SyncReport] = []  # by processes that followed nothing before
    done: list[str] = []
    for step in range(STEPS):
        action = rng.choices(
            [world.publish, world.append, world.mark_unused, world.mark_used, world.another_file],
            weights=[5, 3, 2, 2, 2],
        )[0]
        with syncs_deferred():
            done.append(action())
        if step and rng.random() < 0.1:
            done.append(world.foreign_delete())
        other = rng.random()
        if other < 0.15:
            # The visible table moves under this process.
            first_syncs.append(sync_as_another_process(world.lake))
            done.append("a sync by another process")
        elif other < 0.25:
            sync_in_another_thread(world.lake)
            done.append("a sync in another thread")
        elif other < 0.35:
            visible_table._forget_followed()  # this process starts again
            done.append("a new process")
        new_process = not visible_table._followed
        report = sync_visible_table(world.lake.metadata, DS)
        if new_process:
            first_syncs.append(report)
        reports.append(report)
        assert visible_paths(world.lake) == whole_diff_paths(world.lake), (
            f"seed {seed}, step {step}: {report}\n" + "\n".join(done)
        )
    changed_only = [r for r in reports if not r.whole_diff and not r.already_current]
    assert len(changed_only) >= STEPS // 2, reports  # the changed keys' way was taken
    # A process's first sync takes up from the last sync's entry (unless a DELETE's is last).
    assert any(not r.whole_diff and not r.already_current for r in first_syncs), first_syncs
    assert any(r.clipped for r in reports), "no chunk was served in part: clips untested"
    served = len(_served(_visible_records(world.lake.metadata, DS)))
    assert min(r.keys_diffed for r in changed_only) < served


class _Hourly(random.Random):
    """Every publish an HOUR segment (a DAY's overshadows most of what came before)."""

    def random(self) -> float:
        return 0.5

    def getrandbits(self, k: int) -> int:  # still random hours (randrange draws bits)
        return super().getrandbits(k)


def _published(warehouse: str, count: int, rng: random.Random | None = None) -> World:
    world = World(warehouse, rng or random.Random(5))
    world.write("k-none", Interval(START, START + timedelta(hours=1)))
    world.lake.metadata.create()
    with syncs_deferred():
        for _ in range(count):
            world.publish()
    sync_visible_table(world.lake.metadata, DS)
    return world


def test_a_new_thread_follows_what_the_process_synced(warehouse: str) -> None:
    world = _published(warehouse, 12)
    followed = visible_table._followed[TableLog(visible_table_path(warehouse, DS)).uri]
    loads = {uri: files.loads for uri, files in followed.tables.items()}
    with syncs_deferred():
        world.lake.mark_unused([world.lake.timeline(DS).visible_segments()[0].id])
    reports: list[SyncReport] = []
    thread = threading.Thread(
        target=lambda: reports.append(sync_visible_table(world.lake.metadata, DS))
    )
    thread.start()
    thread.join()
    (report,) = reports
    assert report.removed > 0, report
    assert not report.whole_diff, report
    assert report.keys_diffed < 12, report  # the changed keys, not every served one
    assert {uri: files.loads for uri, files in followed.tables.items()} == loads  # followed


def test_an_append_to_a_chunk_of_many_segments_diffs_its_own_key_alone(warehouse: str) -> None:
    world = World(warehouse, random.Random(3))
    world.write("k-none", Interval(START, START + timedelta(hours=1)))
    world.lake.metadata.create()
    day = Interval(START, START + timedelta(days=1))
    with syncs_deferred():
        world.publish(day)
        for _ in range(30):  # into the first day's chunk, or HOUR chunks of the second day
            world.append()
    sync_visible_table(world.lake.metadata, DS)
    for _ in range(4):
        with syncs_deferred():
            done = world.append()
        report = sync_visible_table(world.lake.metadata, DS)
        # Its chunk was there or is new: no other key's rows change (the time it wrote
        # holds ~16 keys, all diffed before).
        assert (report.added, report.removed, report.keys_diffed) == (1, 0, 1), (done, report)
        assert not report.whole_diff, report
    assert visible_paths(world.lake) == whole_diff_paths(world.lake)
    # A newer version of the day overshadows every key in it: all of them are diffed.
    with syncs_deferred():
        world.publish(day)
    report = sync_visible_table(world.lake.metadata, DS)
    assert report.removed >= 16, report
    assert report.keys_diffed == report.removed + 1, report
    assert visible_paths(world.lake) == whole_diff_paths(world.lake)


def test_a_process_that_follows_nothing_reads_one_log_entry_to_tell_a_current_table(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _published(warehouse, 6)
    visible = TableLog(visible_table_path(warehouse, DS))
    storage = TableLog(datasource_table_path(warehouse, DS))
    latest = visible.version()
    visible_table._forget_followed()  # what a new process knows
    report = sync_visible_table(world.lake.metadata, DS)
    assert (report.already_current, report.table_version) == (True, latest), report
    assert current_version(world.lake.metadata, DS) == latest
    # A commit of the datasource that writes no segment record (a lock) leaves it current.
    lock = world.lake.actions.try_lock(
        DS, Interval(START, START + timedelta(hours=1)), group_id="x"
    )
    assert lock.granted
    assert world.lake.metadata.version() > report.metadata_version
    report = sync_visible_table(world.lake.metadata, DS)
    assert (report.already_current, report.table_version) == (True, latest), report
    followed = visible_table._followed[visible.uri]
    assert followed.tables == {}  # neither table loaded

    # Behind: both tables are needed, and loaded at the same time, in threads of their own.
    loaders: list[str] = []

    class Recorded(SegmentFiles):
        def __init__(self, log: TableLog, *, keep_adds: bool = True, version: int | None = None):
            loaders.append(threading.current_thread().name)
            super().__init__(log, keep_adds=keep_adds, version=version)

    monkeypatch.setattr(visible_table, "SegmentFiles", Recorded)
    with syncs_deferred():
        world.lake.mark_unused([world.lake.timeline(DS).visible_segments()[0].id])
    visible_table._forget_followed()
    report = sync_visible_table(world.lake.metadata, DS)
    assert report.removed > 0, report
    # Loaded at the versions the last sync's entry names, and followed from there: only the
    # keys that can have changed since are diffed, as in the process that wrote the entry.
    assert not report.whole_diff, report
    assert report.keys_diffed < 6, report
    assert len(loaders) == 2
    assert all(n.startswith("segmentlake-load") for n in loaders), loaders
    followed = visible_table._followed[visible.uri]
    assert {uri: f.loads for uri, f in followed.tables.items()} == {
        visible.uri: 1,
        storage.uri: 1,
    }
    assert visible_paths(world.lake) == whole_diff_paths(world.lake)


@pytest.mark.parametrize("new_process", [False, True])
def test_a_write_after_the_last_sync_is_put_right_with_no_metadata_commit(
    warehouse: str, new_process: bool
) -> None:
    """A user's DELETE on the visible table, and then no metadata commit: the table is not
    current, for a process following it and for a new one alike; the next sync (a read's)
    puts the files back."""
    world = _published(warehouse, 6)
    wanted = whole_diff_paths(world.lake)
    world.foreign_delete()
    assert visible_paths(world.lake) < wanted
    if new_process:
        visible_table._forget_followed()
    assert current_version(world.lake.metadata, DS) is None
    report = sync_visible_table(world.lake.metadata, DS)
    assert report.added > 0, report
    assert visible_paths(world.lake) == wanted
    assert current_version(world.lake.metadata, DS) == report.table_version


def test_threads_syncing_one_datasource_at_once_leave_the_whole_diff(warehouse: str) -> None:
    world = _published(warehouse, 8)
    start = threading.Barrier(4)
    moved = threading.Event()
    ran: list[tuple[int, float, float]] = []
    failed: list[BaseException] = []

    def sync_until_moved(worker: int) -> None:
        start.wait()
        while not moved.is_set():
            began = time.monotonic()
            try:
                sync_visible_table(world.lake.metadata, DS)
            except BaseException as e:
                failed.append(e)
            ran.append((worker, began, time.monotonic()))

    threads = [threading.Thread(target=sync_until_moved, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    start.wait()
    for _ in range(6):  # the metadata moves while they sync
        with syncs_deferred():
            world.rng.choice([world.publish, world.mark_unused, world.mark_used])()
    moved.set()
    for thread in threads:
        thread.join()
    assert not failed, failed
    raced = [(a, b) for a in ran for b in ran if a[0] < b[0] and a[1] < b[2] and b[1] < a[2]]
    assert raced, ran  # calls of different threads were in flight at once
    sync_visible_table(world.lake.metadata, DS)
    assert visible_paths(world.lake) == whole_diff_paths(world.lake)


def test_a_sync_stuck_in_another_thread_holds_up_the_others_for_a_bounded_time(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _published(warehouse, 6)
    monkeypatch.setattr(visible_table, "_WAIT_S", 0.3)
    stuck = visible_table._followed[TableLog(visible_table_path(warehouse, DS)).uri].lock
    with syncs_deferred():
        world.lake.mark_unused([world.lake.timeline(DS).visible_segments()[0].id])
    with stuck:  # as a sync hung on its store would hold it
        began = time.monotonic()
        report = sync_visible_table(world.lake.metadata, DS)
        waited = time.monotonic() - began
    assert report.removed > 0, report
    # Followers of its own, as another process's: loaded at the versions the latest entry
    # names, so it too diffs only the keys that can have changed.
    assert not report.whole_diff, report
    assert 0.3 <= waited < 10, waited
    assert visible_paths(world.lake) == whole_diff_paths(world.lake)


def test_the_visible_table_is_checkpointed_after_its_sync_lets_the_others_go(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(visible_table, "_CHECKPOINT_EVERY", 2)
    world = _published(warehouse, 2)
    lock = visible_table._followed[TableLog(visible_table_path(warehouse, DS)).uri].lock
    upkeep = visible_table._upkeep
    held: list[bool] = []

    def watched(visible: TableLog, version: int, *, written: int, files: int) -> None:
        held.append(lock.locked())
        upkeep(visible, version, written=written, files=files)

    monkeypatch.setattr(visible_table, "_upkeep", watched)
    for _ in range(4):
        with syncs_deferred():
            world.publish()
        sync_visible_table(world.lake.metadata, DS)
    log = Path(visible_table_path(warehouse, DS)) / "_delta_log"
    version = DeltaTable(visible_table_path(warehouse, DS)).version()
    written = sorted(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))
    assert written, "no checkpoint"
    assert all(v % 2 == 0 for v in written), written
    assert written[-1] >= version - 1, (written, version)
    assert held == [False] * 4, held  # every committing sync, none holding the others up


def test_a_large_entry_is_checkpointed_at_once_and_a_small_one_waits(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new reader parses every entry after the last checkpoint as JSON: a rebuild's (every
    file of the table) is checkpointed right away, a sync of one key waits for the interval."""
    monkeypatch.setattr(visible_table, "_LARGE_ENTRY", 8)
    # The first sync adds every served file (about 20 hours) in one entry.
    world = _published(warehouse, 30, _Hourly(5))
    log = Path(visible_table_path(warehouse, DS)) / "_delta_log"

    def checkpoints() -> list[int]:
        return sorted(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))

    rebuilt = DeltaTable(visible_table_path(warehouse, DS)).version()
    assert rebuilt % visible_table._CHECKPOINT_EVERY, "the test needs a version off the interval"
    assert checkpoints() == [rebuilt]
    assert len(visible_paths(world.lake)) >= 8
    with syncs_deferred():
        world.lake.mark_unused([world.lake.timeline(DS).visible_segments()[0].id])
    report = sync_visible_table(world.lake.metadata, DS)
    assert 0 < report.added + report.removed < 8, report
    assert checkpoints() == [rebuilt]
    visible_table._forget_followed()
    assert visible_paths(world.lake) == whole_diff_paths(world.lake)


def test_an_entry_that_changes_nothing_at_the_tip_is_followed_by_a_sync_entry(
    warehouse: str,
) -> None:
    """A write that is no sync and changes no file (a VACUUM's log entry): the next sync
    commits an entry of its own, so a new process finds the table current again from the
    latest entry alone."""
    world = _published(warehouse, 4)
    visible = TableLog(visible_table_path(warehouse, DS))
    tip = visible.version()
    vacuum = '{"commitInfo":{"timestamp":0,"operation":"VACUUM START"}}\n'
    assert visible.put_entry_if_absent(tip + 1, vacuum)
    visible_table._forget_followed()
    assert current_version(world.lake.metadata, DS) is None
    report = sync_visible_table(world.lake.metadata, DS)
    assert (report.added, report.removed, report.table_version) == (0, 0, tip + 2), report
    visible_table._forget_followed()
    report = sync_visible_table(world.lake.metadata, DS)
    assert (report.already_current, report.table_version) == (True, tip + 2), report
    assert visible_table._followed[visible.uri].tables == {}


def test_a_new_process_takes_up_from_the_last_sync_entry_only_when_it_can_tell(
    warehouse: str,
) -> None:
    """A process's first sync after a change diffs only the keys that can have changed since
    the sync that wrote the latest entry, which records the versions it synced (metadata,
    datasource table, and the metadata table's id); after a commit that deleted a segment
    record (a kill), or behind an entry that does not record them, it diffs everything."""
    world = _published(warehouse, 6)
    store = world.lake.metadata
    visible = TableLog(visible_table_path(warehouse, DS))
    storage = TableLog(datasource_table_path(warehouse, DS))
    txns = visible.entry_transactions(visible.version())
    assert txns is not None
    assert txns[visible_table.SOURCE_APP_ID] == storage.version()
    assert (
        txns[visible_table.METADATA_APP_PREFIX + str(store.table.table_id)]
        == txns[visible_table.VISIBLE_APP_ID]
    )

    def first_sync_after(*changes: Callable[[], object]) -> SyncReport:
        """The first sync of a new process after ``changes``; the table it leaves is exact."""
        with syncs_deferred():
            for change in changes:
                change()
        visible_table._forget_followed()
        report = sync_visible_table(store, DS)
        assert visible_paths(world.lake) == whole_diff_paths(world.lake)
        return report

    report = first_sync_after(
        lambda: world.lake.mark_unused([world.segments[0].id]),
        world.another_file,  # a file of a served key, and a publish
    )
    assert not report.whole_diff, report
    assert report.keys_diffed < 6, report

    # A kill's commit: the unused segment's record deleted (its files stay; Spark-free).
    def delete_unused(state: PartitionState) -> Decision[int]:
        rows = [r for r in state.of(SEGMENT) if not r["used"]]
        return Decision([Change("delete", r) for r in rows], len(rows))

    def kill() -> None:
        assert transact(store, DS, delete_unused, operation="kill") == 1

    report = first_sync_after(kill, world.publish)
    assert report.whole_diff, report

    # An entry written before syncs recorded their versions: everything, as before.
    tip = visible.version()
    entry = Path(visible_table_path(warehouse, DS)) / "_delta_log" / f"{tip:020d}.json"
    lines = entry.read_text().splitlines(keepends=True)
    entry.write_text("".join(line for line in lines if visible_table.SOURCE_APP_ID not in line))
    report = first_sync_after(world.publish)
    assert report.whole_diff, report
