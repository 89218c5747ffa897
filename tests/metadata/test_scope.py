"""Scopes: what a commit wrote against what a transaction read (pure, no Spark)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.metadata.scope import EVERYTHING, NOTHING, Scope
from segmentlake.metadata.store import ScopeTooNarrow
from segmentlake.metadata.visibility import visibility_changes

DAY = 86_400_000


def test_time_ranges_overlap_only_when_they_share_an_instant() -> None:
    day1, day2 = Scope.of([(0, DAY)]), Scope.of([(DAY, 2 * DAY)])
    assert not day1.overlaps(day2)  # half-open: adjacent days share nothing
    assert day1.overlaps(Scope.of([(DAY - 1, DAY + 1)]))
    month = Scope.of([(0, 30 * DAY)])
    assert month.overlaps(day2)
    assert day2.overlaps(month)


def test_keys_and_everything() -> None:
    lease = Scope.of(keys=["lease:a"])
    assert lease.overlaps(Scope.of([(0, 1)], keys=["lease:a"]))
    assert not lease.overlaps(Scope.of(keys=["lease:b"]))
    assert not lease.overlaps(Scope.of([(0, DAY)]))
    assert EVERYTHING.overlaps(lease)
    assert not EVERYTHING.overlaps(NOTHING)
    assert (lease | EVERYTHING) is EVERYTHING


def test_json_round_trip_and_unknown_writers() -> None:
    scope = Scope.of([(5, 10), (0, 5), (20, 30)], keys=["task:x"])
    assert scope.ranges == ((0, 10), (20, 30))  # merged and sorted
    assert Scope.from_json(scope.to_json()) == scope
    assert Scope.from_json(None) is EVERYTHING  # a commit that recorded nothing
    assert Scope.from_json(EVERYTHING.to_json()) is EVERYTHING


ranges = st.lists(
    st.tuples(st.integers(0, 100), st.integers(1, 20)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=6,
)


@settings(max_examples=500, deadline=None)
@given(ranges, ranges)
def test_overlap_is_exactly_a_shared_instant(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    instants_a = {t for s, e in a for t in range(s, e)}
    instants_b = {t for s, e in b for t in range(s, e)}
    assert Scope.of(a).overlaps(Scope.of(b)) == bool(instants_a & instants_b)
    assert Scope.of(a).overlaps(Scope.of(b)) == Scope.of(b).overlaps(Scope.of(a))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-50, 3000), st.integers(-3, 40)), min_size=500, max_size=900))
def test_many_ranges_merge_as_few_do(spans: list[tuple[int, int]]) -> None:
    """From _MANY ranges on (a bulk publish's scope) merging runs in numpy: the same ranges
    as merging them in small groups, empty ones dropped and adjacent ones joined."""
    ranges = [(start, start + length) for start, length in spans]
    merged = Scope.of(ranges).ranges
    few = Scope.of(ranges[:200]) | Scope.of(ranges[200:400]) | Scope.of(ranges[400:])
    assert merged == few.ranges
    assert all(a[1] < b[0] for a, b in itertools.pairwise(merged))
    instants = {t for s, e in ranges for t in range(s, e)}
    assert {t for s, e in merged for t in range(s, e)} == instants


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 10)), max_size=8),
    st.integers(-5, 70),
    st.integers(-3, 12),
)
def test_overlaps_range_is_overlaps_of_a_one_range_scope(
    spans: list[tuple[int, int]], start: int, length: int
) -> None:
    scope = Scope.of((s, s + n) for s, n in spans)
    assert scope.overlaps_range(start, start + length) == scope.overlaps(
        Scope.of([(start, start + length)])
    )
    assert EVERYTHING.overlaps_range(start, start + length) == (length > 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 10)), max_size=8),
    st.integers(-5, 70),
    st.integers(-3, 12),
)
def test_covers_range_is_every_instant_in_some_range(
    spans: list[tuple[int, int]], start: int, length: int
) -> None:
    scope = Scope.of((s, s + n) for s, n in spans)
    instants = range(start, start + length)
    inside = all(any(s <= t < s + n for s, n in spans) for t in instants)
    assert scope.covers_range(start, start + length) == inside
    assert EVERYTHING.covers_range(start, start + length)


def test_a_visibility_change_reaching_beyond_the_ranges_read_asks_to_read_more() -> None:
    read = Scope.of([(0, DAY), (2 * DAY, 3 * DAY)])

    def added(start: int, end: int) -> list[DataSegment]:
        interval = Interval.of_millis(start, end)
        return [DataSegment("ds", interval, "v1", NumberedShardSpec(0, 1))]

    def change(start: int, end: int) -> dict[str, str]:
        segments = added(start, end)
        states, _ = visibility_changes(
            [], added=segments, changed=[segments[0].interval], scope=read, now_ms=0
        )
        return states

    assert list(change(2 * DAY, 3 * DAY).values()) == ["visible"]  # within one range read
    with pytest.raises(ScopeTooNarrow, match="beyond the ranges read"):
        change(DAY // 2, 2 * DAY + 1)  # across the gap between the two ranges
    with pytest.raises(ScopeTooNarrow):
        change(2 * DAY, 3 * DAY + 1)  # past the last one
