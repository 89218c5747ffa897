"""The rows a transaction reads come from the fold's memo of row versions: the same dict for
the same version in every state that reads it, a new one for a new version, a lease's
extension or another table at the path, and always the rows a read without the memo makes.
On real delta-rs tables in a temp directory; no Spark."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.metadata import records
from segmentlake.metadata import store as store_module
from segmentlake.metadata.records import (
    LEASE,
    LOCK,
    SEGMENT,
    metadata_row,
    segment_row,
    segments_from_rows,
)
from segmentlake.metadata.store import Change, MetadataStore, _pylist, now_ms

DS = "memo"
DAY = Interval.parse("2024-01-01/P1D")
MANY = 2_100  # a state too large to make every row a dict at once, where the memo is used


def segment_records(count: int, *, first: int = 0) -> list[dict[str, object]]:
    return [
        metadata_row(
            DS,
            SEGMENT,
            f"s{i}",
            now_ms(),
            start_ms=i * 1000,
            end_ms=i * 1000 + 1000,
            version="v1",
            partition_num=0,
            used=True,
            visibility="visible",
            load_key=f"k{i}",
            num_rows=i,
        )
        for i in range(first, first + count)
    ]


def built_segment_records(count: int, *, first: int = 0) -> list[dict[str, object]]:
    """Records of real segments (what segments are rebuilt from)."""
    return [
        segment_row(
            DataSegment(
                DS, DAY, "v1", NumberedShardSpec(i, 0), {"type": "delta", "segment": f"k{i}"}
            ),
            used=True,
            now_ms=now_ms(),
        )
        for i in range(first, first + count)
    ]


def insert(store: MetadataStore, rows: list[dict[str, object]]) -> None:
    state = store.read(DS)
    store.commit(state, [Change("upsert", r) for r in rows], commit_id="test", operation="test")


def test_unchanged_versions_are_the_same_dicts_and_changed_ones_new(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path / "wh"))
    insert(store, segment_records(MANY))
    first = {r["id"]: r for r in store.read(DS).of(SEGMENT)}
    changed = {**first["s7"], "visibility": "overshadowed", "updated_ms": now_ms()}
    insert(store, [changed])
    second = store.read(DS)
    rows = {r["id"]: r for r in second.of(SEGMENT)}
    assert rows["s8"] is first["s8"]  # the memo's dict for an unchanged version
    assert rows["s7"] is not first["s7"]
    assert rows["s7"]["visibility"] == "overshadowed"
    assert first["s7"]["visibility"] == "visible"  # what the first state read stays as read
    # Exactly the rows a read without the memo makes, in the same order.
    assert second.of(SEGMENT) == _pylist(DS, second.table_of(SEGMENT))


def test_a_lease_extension_is_a_row_of_its_own(tmp_path: Path) -> None:
    """A held row's ``expires_ms`` is extended to its group's lease where it is read, with no
    new version of the row: the memo tells the two apart."""
    store = MetadataStore(str(tmp_path / "wh"))
    at = now_ms()
    locks = [
        metadata_row(
            DS,
            LOCK,
            f"l{i}",
            at,
            start_ms=i * 1000,
            end_ms=i * 1000 + 1000,
            group_id="g",
            revoked=False,
            expires_ms=at + 60_000,
        )
        for i in range(MANY)
    ]
    insert(store, locks)
    before = {r["id"]: r["expires_ms"] for r in store.read(DS).of(LOCK)}
    assert set(before.values()) == {at + 60_000}
    insert(store, [metadata_row(DS, LEASE, "g", at, expires_ms=at + 600_000)])
    after = {r["id"]: r["expires_ms"] for r in store.read(DS).of(LOCK)}
    assert set(after.values()) == {at + 600_000}


def test_another_table_at_the_path_starts_a_memo_of_its_own(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    store = MetadataStore(warehouse)
    insert(store, segment_records(MANY))
    old = store.read(DS).of(SEGMENT)
    shutil.rmtree(warehouse)
    writer = MetadataStore(warehouse)  # the same ids and revs, other rows
    insert(writer, [{**r, "num_rows": 10_000 + int(str(r["num_rows"]))} for r in old])
    rows = store.read(DS).of(SEGMENT)
    assert sorted(int(str(r["num_rows"])) for r in rows) == list(range(10_000, 10_000 + MANY))


def test_the_memo_stays_bounded_and_stays_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_MEMO_ROWS", MANY + 60)
    monkeypatch.setattr(store_module, "_ROW_MEMO", {})
    monkeypatch.setattr(records, "_BY_ROW", {})
    store = MetadataStore(str(tmp_path / "wh"))
    insert(store, built_segment_records(MANY))
    segments_from_rows(store.read(DS).of(SEGMENT))  # knows those dicts again by identity
    assert len(records._BY_ROW) == len(store_module._ROW_MEMO) == MANY
    # New versions of every row: the memo is full, so it starts again.
    insert(store, [{**r, "num_rows": 7} for r in store.read(DS).of(SEGMENT)])
    state = store.read(DS)
    rows = state.of(SEGMENT)
    assert {r["num_rows"] for r in rows} == {7}
    assert rows == _pylist(DS, state.table_of(SEGMENT))
    assert len(store_module._ROW_MEMO) == MANY
    assert not records._BY_ROW  # and keeps no dict alive through the segments' memo


def test_more_rows_than_the_memo_holds_are_not_memoized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read larger than the bound (a cleanup of 10^5 segments) would fill the memo past it
    and keep every dict alive after the read."""
    monkeypatch.setattr(store_module, "_MEMO_ROWS", MANY - 1)
    monkeypatch.setattr(store_module, "_ROW_MEMO", {})
    store = MetadataStore(str(tmp_path / "wh"))
    insert(store, built_segment_records(MANY))
    state = store.read(DS)
    assert state.of(SEGMENT) == _pylist(DS, state.table_of(SEGMENT))
    assert not store_module._ROW_MEMO
