"""Rare commits read only what they decide on: a compaction config, a datasource's rule chain
and a compaction's abandoned reservation do not decide again because an unrelated commit
landed between their read and their commit, and still do when a related one did. Metadata
only (delta-rs), no Spark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from segmentlake.compact.control import read_config, set_config
from segmentlake.compact.kill import _delete_records  # the records step alone, no Spark
from segmentlake.compact.reservation import Reservation
from segmentlake.core.compaction_jobs import (
    ChunkKey,
    CompactionJob,
    CompactionKind,
    RunningCompaction,
)
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.core.storage_tiers import CopyState, LoadReason
from segmentlake.metadata.cluster_records import (
    COPY,
    SegmentCopy,
    copies_partition,
    record_copy_changes,
    record_dropped,
    record_loaded,
)
from segmentlake.metadata.compaction_records import RUNNING, running_row
from segmentlake.metadata.records import SEGMENT, segment_row
from segmentlake.metadata.rule_records import rule_history, rules_of, set_rules
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, recording_commits, transact

DATASOURCE = "wiki"
DAY = Interval.parse("2024-01-01/2024-01-02")
OTHER_DAY = Interval.parse("2024-01-05/2024-01-06")


class _Interleaved(MetadataStore):
    """A store that runs ``meanwhile`` (another process's commit, made deterministic) right
    after its first transaction read: the commit then lands between that read and the
    transaction's own commit."""

    def __init__(self, warehouse: str, meanwhile: Callable[[], object]) -> None:
        super().__init__(warehouse)
        self._meanwhile: Callable[[], object] | None = meanwhile

    def read(self, *args: Any, **kwargs: Any) -> PartitionState:
        state = super().read(*args, **kwargs)
        meanwhile, self._meanwhile = self._meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return state


def _insert(store: MetadataStore, datasource: str, row: dict[str, Any], operation: str) -> None:
    def decide(state: PartitionState) -> Decision[None]:
        return Decision([Change("upsert", row)], None)

    transact(store, datasource, decide, operation=operation)


def _unrelated_row(interval: Interval) -> dict[str, Any]:
    """A running record of a compaction of ``interval``: a row with a time range."""
    job = CompactionJob(ChunkKey(interval, "v1"), CompactionKind.SYSTEM, ("s1", "s2"), 1)
    running = RunningCompaction(job, "elsewhere", now_ms(), now_ms() + 60_000)
    return running_row(DATASOURCE, running, task_id="t-elsewhere", now_ms=now_ms())


def test_a_compaction_config_does_not_decide_again_over_an_unrelated_commit(
    tmp_path: Path,
) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    store = _Interleaved(warehouse, lambda: _insert(other, DATASOURCE, _unrelated_row(DAY), "x"))
    with recording_commits() as log:
        set_config(store, DATASOURCE, {"maxRowsPerSegment": 1234})
    assert log.commits == {"x": 1, "compaction_config": 1}
    assert log.retries == {}  # before: its scope was the whole datasource
    assert read_config(MetadataStore(warehouse), DATASOURCE).max_rows_per_segment == 1234


def test_a_compaction_config_set_meanwhile_is_replaced_by_the_later_commit(
    tmp_path: Path,
) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    store = _Interleaved(warehouse, lambda: set_config(other, DATASOURCE, {"maxRowsPerSegment": 7}))
    with recording_commits() as log:
        set_config(store, DATASOURCE, {"maxRowsPerSegment": 1234})
    # The same row: the one that read first decides again, and commits last.
    assert log.retries == {"compaction_config": 1}
    assert read_config(MetadataStore(warehouse), DATASOURCE).max_rows_per_segment == 1234


def test_rules_of_another_datasource_committed_meanwhile_are_no_conflict(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    store = _Interleaved(warehouse, lambda: set_rules(other, "other", [{"type": "dropForever"}]))
    with recording_commits() as log:
        revision = set_rules(store, DATASOURCE, [{"type": "loadForever"}], author="a")
    assert log.commits == {"set_rules": 2}
    assert log.retries == {}  # before: every chain change conflicted with every other
    fresh = MetadataStore(warehouse)
    assert revision == 1
    assert [r.type for r in rules_of(fresh, DATASOURCE)] == ["loadForever"]
    assert [r.type for r in rules_of(fresh, "other")] == ["dropForever"]


def test_rules_of_the_same_datasource_committed_meanwhile_make_a_second_revision(
    tmp_path: Path,
) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    store = _Interleaved(
        warehouse, lambda: set_rules(other, DATASOURCE, [{"type": "dropForever"}], author="b")
    )
    with recording_commits() as log:
        revision = set_rules(store, DATASOURCE, [{"type": "loadForever"}], author="a")
    assert log.retries == {"set_rules": 1}
    assert revision == 2
    history = rule_history(MetadataStore(warehouse), DATASOURCE)
    assert [(h.revision, h.author) for h in history] == [(2, "a"), (1, "b")]  # newest first
    assert history[0].old is not None
    assert [r.type for r in history[0].old] == ["dropForever"]


def _reservation(interval: Interval) -> tuple[Reservation, dict[str, Any]]:
    job = CompactionJob(ChunkKey(interval, "v1"), CompactionKind.SYSTEM, ("a", "b"), 1)
    running = RunningCompaction(job, "compactor-1", now_ms(), now_ms() + 60_000)
    row = running_row(DATASOURCE, running, task_id="t-1", now_ms=now_ms())
    return Reservation(DATASOURCE, job, "compactor-1", "t-1", 60_000), row


def test_an_abandoned_reservation_goes_without_deciding_again_over_another_day(
    tmp_path: Path,
) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    reservation, row = _reservation(DAY)
    _insert(other, DATASOURCE, row, "reserve")
    store = _Interleaved(
        warehouse, lambda: _insert(other, DATASOURCE, _unrelated_row(OTHER_DAY), "x")
    )
    with recording_commits() as log:
        reservation.abandon(store)
    assert log.commits == {"x": 1, "compaction_abandon": 1}
    assert log.retries == {}
    left = MetadataStore(warehouse).rows(DATASOURCE, kinds=[RUNNING])
    assert [r["id"] for r in left] == [_unrelated_row(OTHER_DAY)["id"]]


def test_an_abandon_decides_again_over_a_commit_on_its_own_day(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    reservation, row = _reservation(DAY)
    _insert(other, DATASOURCE, row, "reserve")
    store = _Interleaved(warehouse, lambda: _insert(other, DATASOURCE, _unrelated_row(DAY), "x"))
    with recording_commits() as log:
        reservation.abandon(store)
    assert log.retries == {"compaction_abandon": 1}
    left = MetadataStore(warehouse).rows(DATASOURCE, kinds=[RUNNING])
    assert [r["id"] for r in left] == [_unrelated_row(DAY)["id"]]


# -- the coordinator's commits of segment copies ----------------------------------------------


def _copy(segment: str, volume: str, state: CopyState, move_from: str | None = None) -> SegmentCopy:
    return SegmentCopy(
        datasource=DATASOURCE,
        segment_id=segment,
        volume=volume,
        state=state,
        reason=LoadReason.BALANCE if move_from else LoadReason.LOAD,
        key=f"key-{segment}",
        start_ms=DAY.start_millis,
        end_ms=DAY.end_millis,
        size_bytes=100,
        move_from=move_from,
    )


def _states(warehouse: str) -> dict[str, str]:
    rows = MetadataStore(warehouse).rows(copies_partition(DATASOURCE), kinds=[COPY])
    return {r["id"]: r["sequence_name"] for r in rows}


def _planned(store: MetadataStore, *copies: SegmentCopy) -> None:
    record_copy_changes(store, DATASOURCE, [("insert", None, c) for c in copies])


def test_loaders_of_two_volumes_do_not_decide_again_for_each_other(tmp_path: Path) -> None:
    """Each volume's loader marks its own copies loaded; the other's commit landing between
    its read and its commit changes none of them (before: every copy commit of a datasource
    conflicted with every other)."""
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    a, b = _copy("s1", "vol-a", CopyState.LOADING), _copy("s1", "vol-b", CopyState.LOADING)
    _planned(other, a, b)
    store = _Interleaved(warehouse, lambda: record_loaded(other, DATASOURCE, [b], 7))
    with recording_commits() as log:
        assert record_loaded(store, DATASOURCE, [a], 3) == 1
    assert log.commits == {"segment_loaded": 2}
    assert log.retries == {}
    assert _states(warehouse) == {a.row_id: "LOADED", b.row_id: "LOADED"}


def test_a_run_and_a_drop_of_other_copies_do_not_conflict(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    gone = _copy("s1", "vol-a", CopyState.DROPPING)
    _planned(other, gone)
    new = _copy("s2", "vol-b", CopyState.LOADING)
    store = _Interleaved(warehouse, lambda: _planned(other, new))
    with recording_commits() as log:
        assert record_dropped(store, DATASOURCE, [gone.row_id]) == 1
    assert log.retries == {}
    assert _states(warehouse) == {new.row_id: "LOADING"}


def test_a_loader_decides_again_when_its_copy_was_cancelled_meanwhile(tmp_path: Path) -> None:
    """The control: the run forgetting the very copy being loaded is a conflict, and the
    loader, deciding again, marks nothing (its rows go with the next drop)."""
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    a = _copy("s1", "vol-a", CopyState.LOADING)
    _planned(other, a)
    cancel = [("delete", a, a)]
    store = _Interleaved(
        warehouse,
        lambda: record_copy_changes(other, DATASOURCE, cancel),
    )
    with recording_commits() as log:
        assert record_loaded(store, DATASOURCE, [a], 3) == 0
    assert log.retries == {"segment_loaded": 1}
    assert _states(warehouse) == {}


def test_a_move_marks_its_source_dropping_in_the_same_commit(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    store = MetadataStore(warehouse)
    source = _copy("s1", "vol-a", CopyState.LOADED)
    moved = _copy("s1", "vol-b", CopyState.LOADING, move_from="vol-a")
    _planned(store, source, moved)
    assert record_loaded(store, DATASOURCE, [moved], 5) == 1
    assert _states(warehouse) == {source.row_id: "DROPPING", moved.row_id: "LOADED"}


def test_a_move_planned_again_from_elsewhere_reads_wider_and_still_drops_its_source(
    tmp_path: Path,
) -> None:
    """The copy being loaded was forgotten and planned again as a move from another volume
    between the loader's read and its commit: the new source is outside what the loader
    read, so it reads the whole partition and marks that source dropping."""
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    first = _copy("s1", "vol-b", CopyState.LOADING)
    source = _copy("s1", "vol-c", CopyState.LOADED)
    _planned(other, first, source)
    again = _copy("s1", "vol-b", CopyState.LOADING, move_from="vol-c")

    def replan() -> None:
        record_copy_changes(other, DATASOURCE, [("delete", first, first)])
        _planned(other, again)

    store = _Interleaved(warehouse, replan)
    assert record_loaded(store, DATASOURCE, [first], 3) == 1
    assert _states(warehouse) == {again.row_id: "LOADED", source.row_id: "DROPPING"}


# -- kill: the records step ---------------------------------------------------------------------


def _records(store: MetadataStore, *rows: dict[str, Any]) -> None:
    def decide(state: PartitionState) -> Decision[None]:
        return Decision([Change("upsert", r) for r in rows], None)

    transact(store, DATASOURCE, decide, operation="seed")


def _seg(interval: Interval, version: str, key: str, rows: Interval | None = None) -> DataSegment:
    spans = {} if rows is None else {"interval": str(rows)}  # an upgraded copy's rows
    return DataSegment(
        DATASOURCE,
        interval,
        version,
        NumberedShardSpec(0, 0),
        load_spec={"type": "delta", "segment": key, **spans},
        num_rows=10,
        size=100,
    )


def _left(warehouse: str) -> list[str]:
    rows = MetadataStore(warehouse).rows(DATASOURCE, kinds=[SEGMENT])
    return sorted(str(r["id"]) for r in rows)


LONG_AGO = now_ms() - 86_400_000


def test_a_kill_does_not_decide_again_over_an_append_to_another_day(tmp_path: Path) -> None:
    """A kill reads the days of what it removes: an append on another day that lands
    between its read and its commit is no conflict (before: it read the whole datasource,
    and re-read every record of it for each append that won)."""
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    old = _seg(DAY, "v1", "k-old")
    _records(other, segment_row(old, used=False, now_ms=LONG_AGO))
    appended = _seg(OTHER_DAY, "v2", "k-new")
    store = _Interleaved(
        warehouse, lambda: _records(other, segment_row(appended, used=True, now_ms=now_ms()))
    )
    with recording_commits() as log:
        killed = _delete_records(store, DATASOURCE, 3_600_000, None, None)
    assert killed.killed == (old.id,)
    assert killed.keys == frozenset({"k-old"})
    assert log.retries == {}
    assert _left(warehouse) == [str(appended.id)]


def test_a_kill_decides_again_when_a_copy_of_its_rows_is_published_meanwhile(
    tmp_path: Path,
) -> None:
    """The control: an upgraded copy of the unused segment's rows published on its day
    between the kill's read and commit is a conflict, and deciding again the kill keeps
    the rows' key (a record still references it)."""
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    old = _seg(DAY, "v1", "k-old")
    _records(other, segment_row(old, used=False, now_ms=LONG_AGO))
    copy = _seg(DAY, "v3", "k-old")
    store = _Interleaved(
        warehouse, lambda: _records(other, segment_row(copy, used=True, now_ms=now_ms()))
    )
    with recording_commits() as log:
        killed = _delete_records(store, DATASOURCE, 3_600_000, None, None)
    assert log.retries == {"kill": 1}
    assert (killed.killed, killed.kept, killed.keys) == ((), (old.id,), frozenset())
    assert _left(warehouse) == sorted([str(old.id), str(copy.id)])


def test_a_kill_reads_the_whole_span_of_a_copy_whose_rows_reach_past_its_chunk(
    tmp_path: Path,
) -> None:
    """An unused upgraded copy in an hour whose rows span the day shares them with records
    anywhere in that day: the kill reads the day, and keeps the key another copy, in
    another hour of the day, still references (reading the hour alone, it would delete
    rows a record still points at)."""
    warehouse = str(tmp_path)
    other = MetadataStore(warehouse)
    other.create()
    hour = Interval.parse("2024-01-01T05:00/PT1H")
    copy = _seg(hour, "v2", "k-day", rows=DAY)
    original = _seg(Interval.parse("2024-01-01T10:00/PT1H"), "v2", "k-day", rows=DAY)
    _records(
        other,
        segment_row(copy, used=False, now_ms=LONG_AGO),
        segment_row(original, used=False, now_ms=now_ms()),  # unused, but too recently
    )
    killed = _delete_records(other, DATASOURCE, 3_600_000, None, None)
    assert killed.killed == (copy.id,)
    assert killed.keys == frozenset()  # the original still references k-day
    assert _left(warehouse) == [str(original.id)]
