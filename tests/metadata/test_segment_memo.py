"""Segments rebuilt from their records through the process's memo: the same segment for the
same record, a different one as soon as any column it is built from differs. Pure."""

from __future__ import annotations

import pytest

import segmentlake.metadata.records as records
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import HashBasedNumberedShardSpec, NumberedShardSpec
from segmentlake.metadata.records import segment_row, segments_from_rows

DAY = Interval.parse("2024-01-01/P1D")


def seg(**changes: object) -> DataSegment:
    fields: dict[str, object] = {
        "datasource": "wiki",
        "interval": DAY,
        "version": "v1",
        "shard_spec": NumberedShardSpec(0, 1),
        "load_spec": {"type": "delta", "segment": "k0"},
        "dimensions": ("page",),
        "metrics": ("count",),
        "num_rows": 10,
        "size": 100,
    }
    fields.update(changes)
    return DataSegment(**fields)  # type: ignore[arg-type]


VARIANTS = {
    "version": seg(version="v2"),
    "partition": seg(shard_spec=NumberedShardSpec(1, 2)),
    "core partitions": seg(shard_spec=NumberedShardSpec(0, 2)),
    "hashed spec": seg(shard_spec=HashBasedNumberedShardSpec(0, 1, 0, 1, ("page",))),
    "rows key": seg(load_spec={"type": "delta", "segment": "k1"}),
    "dimensions (shared text)": seg(dimensions=("page", "user")),
    "rows": seg(num_rows=11),
    "size": seg(size=101),
    "interval": seg(interval=Interval.parse("2024-01-02/P1D")),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_record_differing_in_any_built_column_is_another_segment(name: str) -> None:
    base, other = seg(), VARIANTS[name]
    row = segment_row(base, used=True, now_ms=1)
    changed = segment_row(other, used=True, now_ms=1)
    first, again, second = segments_from_rows([row, dict(row), changed])
    assert again is first  # the memo's copy for the same columns
    # Segments are equal by id (Druid's); what they say is their JSON.
    assert first.to_json() == base.to_json()
    assert second.to_json() == other.to_json()
    assert second.to_json() != first.to_json()


def test_state_columns_do_not_matter_and_the_memo_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(records, "_MEMO_SEGMENTS", 4)
    segments = [seg(load_spec={"type": "delta", "segment": f"k{i}"}) for i in range(10)]
    rows = [segment_row(s, used=True, now_ms=1, visibility="visible") for s in segments]
    later = [{**r, "used": False, "visibility": None, "updated_ms": 2} for r in rows]
    described = [s.to_json() for s in segments]
    assert [s.to_json() for s in segments_from_rows(rows)] == described
    assert [s.to_json() for s in segments_from_rows(later)] == described
    assert len(records._BUILT) <= 4


def test_the_same_record_dict_again_is_its_segment_with_no_key_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transaction's rows are the fold memo's dicts: the very dict seen before gives its
    segment by identity, and a dict of other columns never takes another's."""
    monkeypatch.setattr(records, "_MEMO_SEGMENTS", 8)
    segments = [seg(load_spec={"type": "delta", "segment": f"k{i}"}) for i in range(20)]
    rows = [segment_row(s, used=True, now_ms=1) for s in segments]
    segments_from_rows(rows)
    again = segments_from_rows(rows)
    assert [s.to_json() for s in again] == [s.to_json() for s in segments]
    assert len(records._BY_ROW) <= 8
    few = rows[:3]
    pairs = zip(segments_from_rows(few), segments_from_rows(few), strict=True)
    assert all(a is b for a, b in pairs)
    for i in range(50):  # dicts made and dropped: their ids are reused for other records
        other = seg(load_spec={"type": "delta", "segment": f"x{i}"})
        (built,) = segments_from_rows([segment_row(other, used=True, now_ms=1)])
        assert built.to_json() == other.to_json()
