"""Smart segment loading (Druid's ``smartSegmentLoading``): queue share arithmetic, the
balancer's 80-of-100 stopping rule, convergence on a simulated cluster, the number of best
volumes a destination is chosen among, and the old bounds when smart loading is off."""

from __future__ import annotations

import numpy as np
import pytest

from segmentlake.core.coordinator_run import (
    _STOP_MISSES,
    _STOP_WINDOW,
    ServedSegments,
    _RandomOrder,
    _RunPlanner,
    _StopRule,
)
from segmentlake.core.retention_rules import LoadRule
from segmentlake.core.storage_tiers import (
    CoordinatorConfig,
    LoadReason,
    Volume,
    floor_log5,
    split_queue_shares,
)
from segmentlake.errors import SpecError
from tests.core.cluster_simulation import SimulatedCluster

DAY = 86_400_000
T0 = 1_600_000_000_000
ONE_HOT = (LoadRule.forever({"hot": 1}),)


def segments(n: int, *, per_day: int = 10, datasources: int = 2) -> ServedSegments:
    return ServedSegments.of(
        [
            (
                f"s{i}",
                f"ds{i % datasources}",
                T0 + i // per_day * DAY,
                T0 + (i // per_day + 1) * DAY,
                100,
            )
            for i in range(n)
        ]
    )


def volumes(n: int, *, start: int = 0) -> list[Volume]:
    return [Volume(f"hot{i}", "hot", f"/v/hot{i}", 10**9) for i in range(start, start + n)]


def crowded(config: CoordinatorConfig, *, n: int = 1000, added: int = 3) -> SimulatedCluster:
    """``n`` segments balanced over 2 volumes, then ``added`` empty volumes join."""
    sim = SimulatedCluster(
        volumes(2), segments(n, per_day=20, datasources=3), default_rules=ONE_HOT, config=config
    )
    sim.converge()
    for i in range(2, 2 + added):
        sim.add_volume(volumes(1, start=i)[0])
    return sim


# -- queue shares ------------------------------------------------------------------------------


def test_no_share_given_is_the_defaults() -> None:
    assert split_queue_shares(None, None, None) == (70, 10, 20)
    assert CoordinatorConfig().queue_shares == (70, 10, 20)


@pytest.mark.parametrize(
    ("given", "shares"),
    [
        ((60, None, None), (60, 13, 27)),  # 40 split 10:20
        ((None, None, 0), (88, 12, 0)),  # 100 split 70:10
        ((0, None, None), (0, 33, 67)),
        ((None, 40, None), (47, 40, 13)),  # 60 split 70:20
        ((100, None, None), (100, 0, 0)),
    ],
)
def test_one_share_given_the_others_split_the_rest_in_default_proportions(
    given: tuple[int | None, int | None, int | None], shares: tuple[int, int, int]
) -> None:
    assert split_queue_shares(*given) == shares
    assert sum(shares) == 100


def test_two_shares_given_the_third_complements() -> None:
    assert split_queue_shares(50, None, 45) == (50, 5, 45)
    assert split_queue_shares(None, 70, 0) == (30, 70, 0)
    assert split_queue_shares(20, 30, None) == (20, 30, 50)
    config = CoordinatorConfig.from_json({"loadingMinPercent": 80, "balancingMinPercent": 15})
    assert config.queue_shares == (80, 5, 15)
    assert config.queue_share(LoadReason.DECOMMISSION) == 500 * 5 // 100


def test_all_three_given_must_sum_to_100() -> None:
    assert split_queue_shares(60, 10, 30) == (60, 10, 30)
    with pytest.raises(SpecError, match=r"must sum to 100, got .* = 90; .*add the missing 10"):
        CoordinatorConfig(
            loading_min_percent=60, decommissioning_min_percent=10, balancing_min_percent=20
        )
    with pytest.raises(SpecError, match=r"more than 100: .* = 110"):
        CoordinatorConfig(loading_min_percent=90, balancing_min_percent=20)


def test_bad_shares_are_named_with_what_would_be_right() -> None:
    with pytest.raises(SpecError, match=r"loadingMinPercent .* 0\.\.100, got 101"):
        split_queue_shares(101, None, None)
    with pytest.raises(SpecError, match=r"balancingMinPercent .* 0\.\.100, got -1"):
        split_queue_shares(None, None, -1)
    with pytest.raises(SpecError, match="decommissioningMinPercent must be at most 70, got 71"):
        split_queue_shares(None, 71, None)
    # Derived above 70: the message names the shares given and what they need.
    with pytest.raises(SpecError, match=r"would be 80 .*at least 30 together"):
        split_queue_shares(10, None, 10)
    with pytest.raises(SpecError, match="loadingMinPercent"):
        CoordinatorConfig.from_json({"loadingMinPercent": "70"})


def test_a_stored_config_from_before_smart_loading_still_loads() -> None:
    old = {
        "maxSegmentsInNodeLoadingQueue": 100,
        "loadingMinPercent": 60,
        "decommissioningMinPercent": 10,
        "balancingMinPercent": 20,
        "maxSegmentsToMove": 5,
        "segmentLoadingMaxSecondsBeforeAlerting": 900.0,
        "balancerMinCostReduction": 0.01,
        "killUnusedAfterSeconds": None,
        "seed": 0,
    }
    config = CoordinatorConfig.from_stored_json(old)
    # The share nobody claimed went to whichever phase ran first: loading.
    assert config.queue_shares == (70, 10, 20)
    assert config.smart_segment_loading
    assert config.max_segments_to_move == 5
    assert CoordinatorConfig.from_stored_json(config.to_json()) == config
    assert CoordinatorConfig.from_json(config.to_json()) == config


def test_setting_one_share_re_splits_the_rest() -> None:
    stored = CoordinatorConfig(loading_min_percent=50, balancing_min_percent=30)
    # The other two split the 60 left 70:10, as if nothing else had been set.
    assert stored.updated({"balancingMinPercent": 40}).queue_shares == (52, 8, 40)
    assert stored.updated({"seed": 3}).queue_shares == (50, 20, 30)


# -- the stopping rule -------------------------------------------------------------------------


def test_stop_rule_fires_at_80_misses_of_the_last_100() -> None:
    rule = _StopRule()
    for _ in range(_STOP_MISSES - 1):
        rule.record(False)
    assert not rule.stopped
    rule.record(False)
    assert rule.stopped
    # Hits keep it going: 79 misses in every window of 100 never stop it.
    rule = _StopRule()
    pattern = [True] * (_STOP_WINDOW - _STOP_MISSES + 1) + [False] * (_STOP_MISSES - 1)
    for moved in pattern * 5:
        rule.record(moved)
        assert not rule.stopped
    rule.record(False)  # the window slides: the oldest hit leaves, a miss joins
    assert rule.stopped


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_the_random_order_draws_every_copy_once_in_any_batch_sizes(n: int) -> None:
    items = np.arange(n, dtype=np.int64) * 3 + 5
    order = _RandomOrder(np.random.default_rng(n), items)
    drawn = [order.take(size) for size in (1, 4, 16, 64, 256, 1024, 4096)]
    everything = np.concatenate(drawn)
    assert sorted(everything.tolist()) == items.tolist()
    assert [len(d) for d in drawn] == [
        max(0, min(size, n - sum((1, 4, 16, 64, 256, 1024, 4096)[:i])))
        for i, size in enumerate((1, 4, 16, 64, 256, 1024, 4096))
    ]
    assert order.take(10).tolist() == []


def test_the_random_order_is_uniform_and_seeded() -> None:
    # Each of 10 items comes first, and each comes last of the first half, about equally
    # often over 20,000 seeds (a biased draw, e.g. of the lower positions, would show).
    items = np.arange(10, dtype=np.int64)
    first, fifth = np.zeros(10), np.zeros(10)
    for seed in range(20_000):
        taken = _RandomOrder(np.random.default_rng(seed), items).take(5)
        first[taken[0]] += 1
        fifth[taken[4]] += 1
    assert 1700 < first.min() <= first.max() < 2300
    assert 1700 < fifth.min() <= fifth.max() < 2300
    again = [_RandomOrder(np.random.default_rng(7), items).take(10).tolist() for _ in range(2)]
    assert again[0] == again[1]


def test_two_sampled_copies_of_one_segment_both_see_every_volume_holding_it() -> None:
    # Two copies of each segment in one tier: a batch may sample both copies of a segment,
    # and neither may then move onto the volume holding the other.
    rules = (LoadRule.forever({"hot": 2}),)
    sim = SimulatedCluster(volumes(4), segments(40), default_rules=rules)
    sim.converge()
    snap, _, _ = sim.snapshot()
    run = _RunPlanner(snap, sim.config)
    seg = int(snap.copies.segment[0])
    held = sorted(snap.copies.volume[snap.copies.segment == seg].tolist())
    assert len(held) == 2
    vols = np.arange(4, dtype=np.int64)
    hold = run._holding(np.array([seg, seg + 1, seg], dtype=np.int64), vols)
    assert np.flatnonzero(hold[0]).tolist() == held
    assert np.flatnonzero(hold[2]).tolist() == held
    assert hold[1].sum() == 2


def test_a_balanced_cluster_stops_within_100_iterations() -> None:
    sim = SimulatedCluster(volumes(5), segments(2000, per_day=20), default_rules=ONE_HOT)
    sim.converge()
    stats = sim.run().plan.stats
    assert stats.balance_moves == 0
    assert stats.balance_iterations["hot"] <= _STOP_WINDOW


def test_an_imbalanced_cluster_keeps_moving_beyond_max_segments_to_move() -> None:
    sim = crowded(CoordinatorConfig(max_segments_to_move=100))
    stats = sim.run().plan.stats
    # The balancing share of the 5 volumes' queues (500 less the 350 kept for loading, 150
    # each) bounds the moves, not maxSegmentsToMove.
    assert 100 < stats.balance_moves <= 5 * 150
    assert stats.balance_iterations["hot"] > stats.balance_moves


def test_the_balancer_stops_when_it_runs_out_of_candidates() -> None:
    # 30 copies, all crowded on one of 3 volumes: fewer candidates than the rule's window.
    sim = crowded(CoordinatorConfig(), n=30, added=1)
    stats = sim.run().plan.stats
    assert stats.balance_moves > 0
    assert stats.balance_iterations["hot"] <= 30


# -- convergence -------------------------------------------------------------------------------


def test_repeated_runs_converge_and_every_run_cuts_the_cost() -> None:
    sim = crowded(CoordinatorConfig(seed=1), n=1200)
    costs = [sim.cost()]
    moves = []
    for _ in range(40):
        stats = sim.run().plan.stats
        moves.append(stats.balance_moves)
        costs.append(sim.cost())
        if stats.balance_moves == 0:
            break
    assert moves[-1] == 0, f"no convergence in 40 runs: {moves}"
    for before, after, moved in zip(costs, costs[1:], moves, strict=False):
        if moved:
            assert after.cost < before.cost
    assert costs[-1].cost == costs[-2].cost
    assert costs[0].imbalance == pytest.approx(1.5)  # 2 of 5 volumes hold everything
    assert costs[-1].imbalance < 0.05
    assert costs[-1].normalized < costs[0].normalized / 2
    # Converged: later runs move nothing.
    assert sim.run().plan.actions == 0


# -- numBestServersChoosingFunction ------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "vols", "best"),
    [(1, 1, 1), (1, 4, 1), (1, 5, 2), (2, 24, 3), (2, 25, 4), (1, 124, 3), (1, 125, 4), (3, 0, 3)],
)
def test_num_best_servers_default_is_replicas_plus_floor_log5_volumes(
    replicas: int, vols: int, best: int
) -> None:
    assert CoordinatorConfig().best_servers(replicas, vols) == best
    assert CoordinatorConfig(num_best_servers=7).best_servers(replicas, vols) == 7


def test_floor_log5_is_exact_at_powers_of_5() -> None:
    assert [floor_log5(5**k) for k in range(12)] == list(range(12))
    assert [floor_log5(5**k - 1) for k in range(1, 12)] == list(range(11))


def test_num_best_servers_is_a_seeded_choice() -> None:
    def first_copies(**config: object) -> list[int]:
        sim = SimulatedCluster(
            volumes(25),
            segments(300, per_day=1),
            default_rules=ONE_HOT,
            config=CoordinatorConfig(**config),  # type: ignore[arg-type]
        )
        return sim.run(complete=False).plan.load_volume.tolist()

    assert first_copies(seed=1) == first_copies(seed=1)
    assert first_copies(seed=1) != first_copies(seed=2)
    # One best server: the cheapest volume every time, whatever the seed.
    assert first_copies(seed=1, num_best_servers=1) == first_copies(seed=2, num_best_servers=1)
    with pytest.raises(SpecError, match="numBestServersChoosingFunction"):
        CoordinatorConfig.from_json({"numBestServersChoosingFunction": 0})


# -- smart loading off: the old bounds ---------------------------------------------------------


def test_without_smart_loading_max_segments_to_move_bounds_the_balancer() -> None:
    config = CoordinatorConfig(smart_segment_loading=False, max_segments_to_move=30)
    sim = crowded(config)
    for _ in range(3):
        assert sim.run().plan.stats.balance_moves == 30
    off = crowded(CoordinatorConfig(smart_segment_loading=False, max_segments_to_move=0))
    assert off.run().plan.stats.balance_moves == 0


def test_without_smart_loading_replication_throttle_limit_bounds_replicas() -> None:
    def replicas(config: CoordinatorConfig) -> tuple[int, int]:
        sim = SimulatedCluster(volumes(4), segments(200), default_rules=ONE_HOT, config=config)
        sim.converge()
        sim.set_rules("ds0", [LoadRule.forever({"hot": 3})])
        stats = sim.run().plan.stats
        return stats.replicas, stats.throttled_replicas

    # 100 segments of ds0 need 2 more copies each.
    assert replicas(CoordinatorConfig(replication_throttle_limit=50)) == (200, 0)
    assert replicas(
        CoordinatorConfig(smart_segment_loading=False, replication_throttle_limit=50)
    ) == (50, 150)


def test_smart_loading_is_a_json_flag() -> None:
    config = CoordinatorConfig.from_json({"smartSegmentLoading": False, "maxSegmentsToMove": 7})
    assert not config.smart_segment_loading
    assert config.max_segments_to_move == 7
    assert CoordinatorConfig().to_json()["smartSegmentLoading"] is True
    with pytest.raises(SpecError, match="smartSegmentLoading must be true or false"):
        CoordinatorConfig.from_json({"smartSegmentLoading": "false"})


def test_the_cleanup_delay_is_druids_and_checked() -> None:
    config = CoordinatorConfig()
    assert config.mark_segment_as_unused_delay_millis == 900_000  # Druid's 15 minutes
    assert config.to_json()["markSegmentAsUnusedDelayMillis"] == 900_000
    assert (
        CoordinatorConfig.from_json({"markSegmentAsUnusedDelayMillis": 0}).to_json()[
            "markSegmentAsUnusedDelayMillis"
        ]
        == 0
    )
    with pytest.raises(SpecError, match="markSegmentAsUnusedDelayMillis"):
        CoordinatorConfig.from_json({"markSegmentAsUnusedDelayMillis": -1})
