"""Druid's joint cost: the naive case-split oracle against numeric integration, and the
vectorized formula and the interval index against the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.segment_cost import (
    UNIT_COST_TO_HOURS2,
    IntervalCostIndex,
    joint_cost_to,
    joint_cost_units,
    naive_cost,
    naive_joint_cost,
    pairwise_cost_units,
    to_units,
)

HOUR = 3_600_000
LAMBDA = math.log(2) / 24


def integrate(x0: float, x1: float, y0: float, y1: float, steps: int = 400) -> float:
    """Midpoint double integral of e^(-λ|x-y|) over hours."""
    xs = x0 + (np.arange(steps) + 0.5) * (x1 - x0) / steps
    ys = y0 + (np.arange(steps) + 0.5) * (y1 - y0) / steps
    grid = np.exp(-LAMBDA * np.abs(xs[:, None] - ys[None, :]))
    return float(grid.sum() * (x1 - x0) * (y1 - y0) / steps**2)


@pytest.mark.parametrize(
    "hours",
    [(0, 24, 0, 24), (0, 24, 12, 36), (0, 1, 100, 101), (0, 48, 10, 20), (5, 6, 0, 24)],
)
def test_oracle_matches_numeric_integration(hours: tuple[int, int, int, int]) -> None:
    x0, x1, y0, y1 = hours
    cost = naive_joint_cost(x0 * HOUR, x1 * HOUR, y0 * HOUR, y1 * HOUR, same_datasource=False)
    assert cost == pytest.approx(integrate(x0, x1, y0, y1), rel=1e-4)
    assert naive_joint_cost(
        y0 * HOUR, y1 * HOUR, x0 * HOUR, x1 * HOUR, same_datasource=True
    ) == pytest.approx(2 * cost, rel=1e-12)
    assert naive_joint_cost(0, 0, y0 * HOUR, y1 * HOUR, same_datasource=False) == 0


LENGTHS = [60_000, HOUR, 24 * HOUR, 30 * 24 * HOUR, 365 * 24 * HOUR]
interval = st.tuples(st.integers(-20 * 365 * 24, 20 * 365 * 24), st.sampled_from(LENGTHS))


def _close(fast: float, oracle: float, scale: float) -> bool:
    # Both sides subtract absolute times: a one-minute interval decades from the origin keeps
    # ~1e-9 of its length's precision (the planner measures from the oldest segment).
    return abs(fast - oracle) <= 1e-7 * abs(oracle) + 1e-12 * scale


@settings(max_examples=300, deadline=None)
@given(interval, interval, st.integers(-3, 3))
def test_vectorized_joint_cost_equals_the_oracle(
    x: tuple[int, int], y: tuple[int, int], shift: int
) -> None:
    xs, xe = x[0] * HOUR, x[0] * HOUR + x[1]
    ys = xs + shift * x[1] // 2 if abs(shift) < 3 else y[0] * HOUR  # overlapping and far pairs
    ye = ys + y[1]
    oracle = naive_joint_cost(xs, xe, ys, ye, same_datasource=False)
    fast = float(
        joint_cost_units(to_units(xs, 0), to_units(xe, 0), to_units(ys, 0), to_units(ye, 0))
    )
    scale = (x[1] / HOUR) * (y[1] / HOUR)
    assert _close(fast * UNIT_COST_TO_HOURS2, oracle, scale)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(interval, min_size=0, max_size=60),
    st.lists(interval, min_size=1, max_size=20),
    st.booleans(),
)
def test_index_equals_pairwise_sums(
    held: list[tuple[int, int]], queries: list[tuple[int, int]], duplicate: bool
) -> None:
    if duplicate and held:
        queries = [*queries, *held[:3]]  # identical intervals
    c = to_units([h * HOUR for h, _ in held], 0)
    d = to_units([h * HOUR + n for h, n in held], 0)
    a = to_units([q * HOUR for q, _ in queries], 0)
    b = to_units([q * HOUR + n for q, n in queries], 0)
    fast = IntervalCostIndex(c, d).query(a, b)
    slow = pairwise_cost_units(a, b, c, d)
    # Copies two blocks (256/λ, ~370 days) away are left out: below e^-256 of a neighbour.
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-15)


def test_index_against_the_naive_oracle_over_three_years() -> None:
    rng = np.random.default_rng(7)
    starts = rng.integers(0, 3 * 365 * 24, 400) * HOUR
    ends = starts + rng.choice([HOUR, 24 * HOUR], 400)
    queries = rng.integers(0, 3 * 365 * 24, 30) * HOUR
    index = IntervalCostIndex(to_units(starts, 0), to_units(ends, 0))
    fast = index.query(to_units(queries, 0), to_units(queries + HOUR, 0)) * UNIT_COST_TO_HOURS2
    others = [(int(s), int(e), "x") for s, e in zip(starts, ends, strict=True)]
    for q, value in zip(queries, fast, strict=True):
        assert value == pytest.approx(naive_cost((int(q), int(q) + HOUR, "y"), others), rel=1e-9)


def test_empty_index_and_empty_queries() -> None:
    empty = IntervalCostIndex(np.zeros(0), np.zeros(0))
    assert len(empty) == 0
    assert empty.query(np.array([0.0]), np.array([1.0])).tolist() == [0.0]
    assert IntervalCostIndex([0.0], [1.0]).query(np.zeros(0), np.zeros(0)).shape == (0,)


def test_joint_cost_to_one_interval_equals_the_broadcast_form() -> None:
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 40, 2000)
    b = a + rng.choice([0.01, 0.7, 5.0, 30.0], 2000)
    for c, d in ((20.0, 20.7), (-5.0, 0.0), (45.0, 46.0), (10.0, 35.0), (a[7], b[7])):
        assert np.array_equal(joint_cost_to(a, b, c, d), joint_cost_units(a, b, c, d))
    assert len(joint_cost_to(a[:0], b[:0], 1.0, 2.0)) == 0
