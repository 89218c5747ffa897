"""The grouped cost index (one index per tier, grouped by volume and datasource) against
the per-interval-set index it replaces, and the planner with it against the planner with the
old per-volume computation: the same costs (to rounding) and the same plans."""

from __future__ import annotations

import numpy as np
import pytest

from segmentlake.core import coordinator_run
from segmentlake.core.coordinator_run import (
    ServedSegments,
    _per_volume_costs,
    _RunPlanner,
    _TierIndex,
    plan_run,
)
from segmentlake.core.retention_rules import LoadRule
from segmentlake.core.segment_cost import GroupedCostIndex, IntervalCostIndex, to_units
from segmentlake.core.storage_tiers import CoordinatorConfig, Volume
from tests.core.cluster_simulation import SimulatedCluster

HOUR = 3_600_000
T0 = 1_600_000_000_000


@pytest.mark.parametrize("seed", range(6))
def test_grouped_index_matches_one_index_per_group(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_groups = int(rng.integers(0, 2000)), int(rng.integers(1, 25))
    starts = T0 + rng.integers(0, 40_000, n) * HOUR + rng.integers(0, 60, n) * 60_000
    ends = starts + rng.integers(1, 48, n) * HOUR // 2
    groups = rng.integers(0, n_groups, n)
    origin = T0 - int(rng.integers(0, 10**6)) * HOUR
    index = GroupedCostIndex(groups, n_groups, starts, ends, origin)
    q = 400
    qa = T0 + rng.integers(-500, 41_000, q) * HOUR
    qb = qa + rng.integers(1, 72, q) * HOUR // 3
    take = min(n, q // 4)  # queries equal to held intervals (touching and identical pairs)
    qa[:take], qb[:take] = starts[:take], ends[:take]
    qg = rng.integers(0, n_groups, q)
    got = index.query(qg, qa, qb)
    want = np.zeros(q)
    for g in range(n_groups):
        held, asked = groups == g, qg == g
        want[asked] = IntervalCostIndex(
            to_units(starts[held], origin), to_units(ends[held], origin)
        ).query(to_units(qa[asked], origin), to_units(qb[asked], origin))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-300)


def test_empty_grouped_index() -> None:
    index = GroupedCostIndex(np.zeros(0), 3, np.zeros(0), np.zeros(0), 0)
    assert len(index) == 0
    assert index.query([0, 2], [0, HOUR], [HOUR, 2 * HOUR]).tolist() == [0.0, 0.0]


def random_cluster(seed: int, n: int = 1500) -> SimulatedCluster:
    """Hourly and daily segments of 4 datasources on 2 tiers, placed by the planner's own
    first runs (not balanced yet)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        start = T0 + int(rng.integers(0, 3000)) * HOUR
        length = HOUR if rng.random() < 0.8 else 24 * HOUR
        rows.append((f"s{i}", f"ds{i % 4}", start, start + length, int(rng.integers(50, 150))))
    vols = [Volume(f"hot{i}", "hot", f"/v/hot{i}", 10**9) for i in range(5)]
    vols += [Volume(f"cold{i}", "cold", f"/v/cold{i}", 10**9) for i in range(7)]
    sim = SimulatedCluster(
        vols,
        ServedSegments.of(rows),
        default_rules=(LoadRule.forever({"hot": 1, "cold": 1}),),
        config=CoordinatorConfig(seed=seed),
    )
    sim.run()
    return sim


@pytest.mark.parametrize("seed", range(3))
def test_tier_costs_match_the_per_volume_indexes(seed: int) -> None:
    sim = random_cluster(seed)
    snap, _, _ = sim.snapshot()
    run = _RunPlanner(snap, sim.config)
    rng = np.random.default_rng(seed)
    for t in range(run.nt):
        vols = np.flatnonzero(run.vol_tier == t)
        segs = rng.choice(run.n, size=200, replace=False)
        new = _TierIndex(run, vols).costs(segs)
        old = _per_volume_costs(run, vols, segs)
        np.testing.assert_allclose(new, old, rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("seed", range(2))
def test_plans_match_the_per_volume_computation(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs from a random placement (many balancing moves, several batches per tier) plan the
    same actions with the grouped index as with per-volume indexes rebuilt for every batch."""
    sim = random_cluster(seed)
    for _ in range(3):
        snap, _, _ = sim.snapshot()
        new = plan_run(snap, sim.config)
        with monkeypatch.context() as m:
            # No grouped index: every batch prices from per-volume indexes, as before.
            m.setattr(coordinator_run.GroupedCostIndex, "MAX_LEN_UNITS", -1.0)
            old = plan_run(snap, sim.config)
        for name in ("load_segment", "load_volume", "load_reason", "load_move_from"):
            assert getattr(new, name).tolist() == getattr(old, name).tolist(), name
        assert new.drop_copies.tolist() == old.drop_copies.tolist()
        assert new.stats.balance_moves == old.stats.balance_moves
        sim.run()
