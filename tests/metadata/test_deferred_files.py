"""A store reads other processes' commits only when a read needs what they wrote.

Each commit records its write scope; a reader of one time chunk defers the files of commits
on other chunks, and reads them (or the upkeep's fold that replaced them) once a read, a
presence check or a held row's lease needs them. These tests run two or three stores on one
table (each its own log follower and row cache, as separate processes have) and check that
nothing deferred is ever missed.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from segmentlake.core.interval import Interval
from segmentlake.errors import SpecError
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.records import LEASE, LOCK, lease_key, metadata_row
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, now_ms

from .support import DAY, NEXT_DAY, day_after

DS = "deferred"


def lock(name: str, interval: Interval, *, group: str | None = None) -> dict[str, object]:
    return metadata_row(
        DS, LOCK, name, now_ms(), start_ms=interval.start_millis, end_ms=interval.end_millis,
        group_id=group or name, revoked=False, expires_ms=now_ms() + 60_000,
    )  # fmt: skip


def upsert(store: MetadataStore, row: dict[str, object], *, scope: Scope) -> None:
    state = store.read(DS, scope=scope)
    store.commit(state, [Change("upsert", row)], commit_id=str(row["id"]), operation="t")


class CountingReads:
    """Counts the data files a store reads."""

    def __init__(self, store: MetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original = store.table.read_file

        def counted(path: str, **kwargs: object) -> object:
            self.paths.append(path)
            return original(path, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store.table, "read_file", counted)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[MetadataStore, MetadataStore]:
    writer = MetadataStore(str(tmp_path / "wh"))
    writer.create()
    reader = MetadataStore(str(tmp_path / "wh"))
    upsert(writer, lock("seed", day_after(100)), scope=Scope.of([day_after(100).key]))
    reader.read(DS, scope=Scope.of([NEXT_DAY.key]))  # the reader has read the partition once
    return writer, reader


def test_commits_on_another_chunk_are_not_read_until_a_read_needs_them(
    stores: tuple[MetadataStore, MetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader = stores
    reads = CountingReads(reader, monkeypatch)
    for i in range(3):
        upsert(writer, lock(f"a{i}", DAY), scope=Scope.of([DAY.key]))

    other_chunk = reader.read(DS, scope=Scope.of([NEXT_DAY.key]))

    assert other_chunk.table.num_rows == 0
    assert reads.paths == []  # three commits on DAY, none read
    same_chunk = reader.read(DS, scope=Scope.of([DAY.key]))
    assert sorted(same_chunk.table["id"].to_pylist()) == ["a0", "a1", "a2"]
    assert len(reads.paths) == 3
    # A read of everything (inspection) sees what the writer sees.
    assert sorted(r["id"] for r in reader.rows(DS)) == sorted(r["id"] for r in writer.rows(DS))


def fold_after_locks(
    writer: MetadataStore, reader: MetadataStore, prefix: str, count: int, *, read: Interval
) -> None:
    """``count`` locks on DAY by ``writer``, a read of ``read`` by ``reader``, then the
    writer folds the partition's files."""
    for i in range(count):
        upsert(writer, lock(f"{prefix}{i}", DAY), scope=Scope.of([DAY.key]))
    reader.read(DS, scope=Scope.of([read.key]))
    writer.settle()
    assert writer.upkeep(DS, min_files=2) is not None


def test_an_upkeep_fold_of_deferred_files_is_owed_then_read_when_needed(
    stores: tuple[MetadataStore, MetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader = stores
    fold_after_locks(writer, reader, "b", 4, read=NEXT_DAY)  # the reader defers the four
    reads = CountingReads(reader, monkeypatch)

    reader.read(DS, scope=Scope.of([NEXT_DAY.key]))

    assert reads.paths == []  # the fold is owed for DAY only
    rows = reader.read(DS, scope=Scope.of([DAY.key])).rows
    assert sorted(r["id"] for r in rows) == [f"b{i}" for i in range(4)]
    assert len(reads.paths) == 1  # the fold, not the four files it replaced
    assert sorted(r["id"] for r in reader.rows(DS)) == sorted(r["id"] for r in writer.rows(DS))


def test_an_upkeep_fold_of_files_all_read_is_adopted_without_reading(
    stores: tuple[MetadataStore, MetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader = stores
    fold_after_locks(writer, reader, "c", 3, read=DAY)  # the reader reads the three
    reads = CountingReads(reader, monkeypatch)

    rows = reader.read(DS, scope=Scope.of([DAY.key])).rows

    assert sorted(r["id"] for r in rows) == ["c0", "c1", "c2"]
    assert reads.paths == []


def test_a_deletion_on_a_deferred_chunk_is_seen(
    stores: tuple[MetadataStore, MetadataStore],
) -> None:
    writer, reader = stores
    row = lock("doomed", DAY)
    upsert(writer, row, scope=Scope.of([DAY.key]))
    assert [r["id"] for r in reader.read(DS, scope=Scope.of([DAY.key])).rows] == ["doomed"]
    state = writer.read(DS, scope=Scope.of([DAY.key]))
    writer.commit(state, [Change("delete", row)], commit_id="out", operation="t")
    reader.read(DS, scope=Scope.of([NEXT_DAY.key]))  # defers the deletion
    writer.settle()
    writer.upkeep(DS, min_files=1)  # the deletion's own file is folded away

    assert reader.read(DS, scope=Scope.of([DAY.key])).table.num_rows == 0


def test_a_held_rows_lease_renewed_by_a_lease_only_commit_is_read(
    stores: tuple[MetadataStore, MetadataStore],
) -> None:
    writer, reader = stores
    upsert(writer, lock("held", DAY, group="g"), scope=Scope.of([DAY.key]))
    lease = metadata_row(DS, LEASE, "g", now_ms(), expires_ms=now_ms() + 1_000)
    upsert(writer, lease, scope=Scope.of(keys=[lease_key("g")]))
    before = reader.read(DS, scope=Scope.of([DAY.key]))
    (held,) = before.of(LOCK)
    renewed = {**lease, "expires_ms": now_ms() + 3_600_000}
    # The heartbeat writes the lease row alone: its scope is the lease's key, not DAY.
    upsert(writer, renewed, scope=Scope.of(keys=[lease_key("g")]))

    after = reader.read(DS, scope=Scope.of([DAY.key]))

    (lock_after,) = after.of(LOCK)
    assert lock_after["expires_ms"] == renewed["expires_ms"] > held["expires_ms"]
    assert lease_key("g") in after.scope.keys


def test_an_allocation_key_taken_on_another_chunk_is_found(tmp_path: Path) -> None:
    first = Lake(None, str(tmp_path / "wh"))
    second = Lake(None, str(tmp_path / "wh"))  # its own store: as another process
    first.actions.allocate(DS, [AllocateRequest(day_after(50), "warm")], group_id="w")
    second.actions.allocate(DS, [AllocateRequest(day_after(60), "warm2")], group_id="w2")
    first.actions.allocate(DS, [AllocateRequest(DAY, "seq")], group_id="g1")

    # The same (sequence, previous id) in another interval: as in Druid, refused.
    with pytest.raises(SpecError, match="already allocated"):
        second.actions.allocate(DS, [AllocateRequest(NEXT_DAY, "seq")], group_id="g2")
    # And in its own interval it is the same id, not a second one.
    (again,) = second.actions.allocate(DS, [AllocateRequest(DAY, "seq")], group_id="g1")
    pending = second.metadata.rows(DS, pc.field("id") == "seq|")
    assert [r["payload"] for r in pending] == [str(again.segment_id)]


def test_folds_are_size_tiered_below_the_full_fold() -> None:
    from segmentlake.metadata.metadata_table import DataFile
    from segmentlake.metadata.store import _to_fold

    def files(*counts: int) -> list[DataFile]:
        return [DataFile(f"f{i}", DS, 100 * n, n) for i, n in enumerate(counts)]

    # One-commit files beside an earlier partial fold and the base: only the small ones.
    taken, full = _to_fold(files(10_000, 1_800, 3, 3, 3, 3))
    assert ([f.num_records for f in taken], full) == ([3, 3, 3, 3], False)
    # Once the small ones add up to half the next, it joins them.
    taken, full = _to_fold(files(10_000, 20, 3, 3, 3, 3))
    assert ([f.num_records for f in taken], full) == ([3, 3, 3, 3, 20], False)
    # Everything beside the base reaching a quarter of it: one full fold.
    taken, full = _to_fold(files(400, 60, 30, 10))
    assert (len(taken), full) == (4, True)


def test_due_files_are_those_whose_writes_meet_the_read() -> None:
    """The deferred-file index answers as a Scope test of every deferred file would."""
    import random

    from segmentlake.metadata.records import TABLE_SCHEMA
    from segmentlake.metadata.scope import EVERYTHING
    from segmentlake.metadata.state import PartitionFold

    rng = random.Random(7)

    def scope() -> Scope:
        if rng.random() < 0.05:
            return EVERYTHING
        ranges = [(s, s + rng.randint(1, 30)) for s in rng.sample(range(0, 500), rng.randint(0, 3))]
        keys = [f"k{rng.randint(0, 20)}" for _ in range(rng.randint(0, 2))]
        return Scope.of(ranges, keys)

    fold = PartitionFold(TABLE_SCHEMA)
    for n in range(400):
        fold.defer(f"f{n}", scope())
        if rng.random() < 0.4:  # some are applied meanwhile (and the index compacts)
            fold.deferred.pop(f"f{rng.randint(0, n)}", None)
        read = scope()
        expected = [p for p, wrote in fold.deferred.items() if wrote.overlaps(read)]
        assert fold.due(read) == expected
