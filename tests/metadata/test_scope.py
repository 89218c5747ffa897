"""Scopes: what a commit wrote against what a transaction read (pure, no Spark)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.metadata.scope import EVERYTHING, NOTHING, Scope

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
