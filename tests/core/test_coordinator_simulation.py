"""The coordinator's planner on a simulated cluster (no Spark): convergence, rebalancing,
decommissioning, lost volumes, stability and queue limits."""

from __future__ import annotations

import numpy as np
import pytest

from segmentlake.core.coordinator_run import ServedSegments
from segmentlake.core.retention_rules import BroadcastRule, DropRule, LoadRule
from segmentlake.core.storage_tiers import CoordinatorConfig, LoadReason, Volume
from segmentlake.errors import SpecError
from tests.core.cluster_simulation import SimulatedCluster

DAY = 86_400_000
T0 = 1_600_000_000_000


def segments(n: int, *, per_day: int = 10, datasources: int = 2) -> ServedSegments:
    return ServedSegments.of(
        [
            (
                f"s{i}",
                f"ds{i % datasources}",
                T0 + (i // per_day) * DAY,
                T0 + (i // per_day + 1) * DAY,
                100,
            )
            for i in range(n)
        ]
    )


def volumes(n: int, tier: str = "hot", *, start: int = 0, capacity: int = 10**9) -> list[Volume]:
    return [Volume(f"{tier}{i}", tier, f"/v/{tier}{i}", capacity) for i in range(start, start + n)]


def one_hot(**config: object) -> dict[str, object]:
    return {"default_rules": (LoadRule.forever({"hot": 1}),), "config": CoordinatorConfig(**config)}  # type: ignore[arg-type]


def test_1000_segments_on_5_empty_volumes_converge_to_200_each() -> None:
    sim = SimulatedCluster(volumes(5), segments(1000), **one_hot())  # type: ignore[arg-type]
    sim.converge()
    counts = sim.loaded_per_volume()
    assert sum(counts.values()) == 1000
    assert all(198 <= c <= 202 for c in counts.values()), counts
    assert (sim.loaded_copies() == 1).all()


def test_a_sixth_volume_takes_its_share_and_then_nothing_moves() -> None:
    sim = SimulatedCluster(volumes(5), segments(1000), **one_hot())  # type: ignore[arg-type]
    sim.converge()
    sim.add_volume(volumes(1, start=5)[0])
    sim.converge()
    counts = sim.loaded_per_volume()
    mean = 1000 / 6
    assert all(abs(c - mean) <= 0.02 * mean for c in counts.values()), counts
    # Converged: further runs plan nothing (no oscillation, apache/druid#3354).
    for _ in range(5):
        assert sim.run().plan.actions == 0
    assert sim.loaded_per_volume() == counts


def test_decommissioning_drains_while_replicas_never_drop_below_target() -> None:
    sim = SimulatedCluster(
        volumes(4),
        segments(400),
        default_rules=(LoadRule.forever({"hot": 2}),),
        config=CoordinatorConfig(max_segments_in_node_loading_queue=40),
    )
    sim.converge()
    assert (sim.loaded_copies() == 2).all()
    sim.decommission("hot0")
    runs = 0
    while sim.loaded_per_volume()["hot0"] > 0:
        # Loads finish slowly: runs overlap with earlier runs' moves.
        sim.run(loads_per_volume=15)
        runs += 1
        assert sim.loaded_copies().min() >= 2, "a segment fell below its replica target"
        assert runs < 50
    sim.converge()
    assert sim.loaded_per_volume()["hot0"] == 0
    assert (sim.loaded_copies() == 2).all()


def test_lost_volume_segments_are_re_replicated_first() -> None:
    sim = SimulatedCluster(
        volumes(4),
        segments(400),
        default_rules=(LoadRule.forever({"hot": 2}),),
        config=CoordinatorConfig(max_segments_in_node_loading_queue=1000),
    )
    sim.converge()
    lost = sim.loaded_per_volume()["hot1"]
    sim.lose_volume("hot1")
    short = np.flatnonzero(sim.loaded_copies() < 2)
    assert len(short) == lost
    sim.add_volume(volumes(1, start=9)[0])  # an empty volume joins at the same time
    report = sim.run(complete=False)
    plan = report.plan
    replicas = plan.load_segment[plan.load_reason == LoadReason.LOAD]
    # Every lost copy is queued in the first run, before any balancing move.
    assert sorted(sim.snapshot()[1][replicas].tolist()) == sorted(short.tolist())
    assert plan.stats.replicas == lost
    sim.complete()
    sim.converge()
    assert (sim.loaded_copies() == 2).all()


def test_load_queues_never_exceed_their_limits() -> None:
    config = CoordinatorConfig(max_segments_in_node_loading_queue=20)
    sim = SimulatedCluster(
        volumes(3),
        segments(600),
        default_rules=(LoadRule.forever({"hot": 1}),),
        config=config,
    )
    for _ in range(60):
        report = sim.run(loads_per_volume=7)
        assert report.max_in_flight <= 20
        loads = report.plan.load_reason == LoadReason.LOAD
        # First copies and replicas get at most their share plus what nobody else needs.
        assert np.bincount(report.plan.load_volume[loads], minlength=3).max() <= 20
    sim.converge(loads_per_volume=7)
    assert (sim.loaded_copies() == 1).all()


def test_unreplicated_segments_load_on_the_primary_tier_first() -> None:
    vols = [*volumes(2, "hot"), *volumes(2, "cold")]
    vols = [
        Volume(v.name, v.tier, v.path, v.capacity_bytes, priority=10 if v.tier == "hot" else 0)
        for v in vols
    ]
    sim = SimulatedCluster(
        vols, segments(50), default_rules=(LoadRule.forever({"hot": 1, "cold": 1}),)
    )
    plan = sim.run(complete=False).plan
    snap_vols = sim.snapshot()[0].volumes
    tiers = {snap_vols[int(v)].tier for v in plan.load_volume}
    assert plan.stats.loads == 50  # one first copy each, all on the hot tier
    assert plan.stats.replicas == 50
    assert tiers == {"hot", "cold"}
    firsts = plan.load_volume[:50]
    assert {snap_vols[int(v)].tier for v in firsts} == {"hot"}
    sim.complete()
    assert (sim.loaded_copies(tier="hot") == 1).all()
    assert (sim.loaded_copies(tier="cold") == 1).all()


def test_drop_rules_retire_and_over_replication_is_dropped() -> None:
    sim = SimulatedCluster(volumes(3), segments(100), default_rules=(LoadRule.forever({"hot": 2}),))
    sim.converge()
    # Keep the newest 5 days at one replica, retire the rest.
    sim.set_rules(
        "ds0",
        [
            LoadRule.by_interval(f"{_iso(T0 + 5 * DAY)}/{_iso(T0 + 10 * DAY)}", {"hot": 1}),
            DropRule.forever(),
        ],
    )
    report = sim.run()
    assert report.plan.stats.drop_rule == 25
    assert int(sim.served.sum()) == 75
    sim.converge()
    copies = sim.loaded_copies()
    ds0 = np.array([sim.segments.datasources[d] == "ds0" for d in sim.segments.datasource])
    kept = ds0 & sim.served
    assert (copies[kept] == 1).all()
    assert (copies[ds0 & ~sim.served] == 0).all()
    assert (copies[~ds0] == 2).all()


def test_broadcast_puts_a_copy_on_every_active_volume() -> None:
    sim = SimulatedCluster(
        [*volumes(3, "hot"), *volumes(2, "cold")],
        segments(20),
        rules={"ds1": (BroadcastRule.forever(),)},
        default_rules=(LoadRule.forever({"hot": 1}),),
    )
    first = sim.run().plan.stats
    assert first.under_broadcast == 10
    sim.converge()
    ds1 = np.array([sim.segments.datasources[d] == "ds1" for d in sim.segments.datasource])
    assert (sim.loaded_copies()[ds1] == 5).all()
    assert (sim.loaded_copies()[~ds1] == 1).all()


def test_capacity_is_respected_and_unplaceable_segments_are_counted() -> None:
    sim = SimulatedCluster(
        volumes(2, capacity=1000), segments(30), default_rules=(LoadRule.forever({"hot": 1}),)
    )
    report = sim.run()
    assert sum(sim.loaded_per_volume().values()) == 20  # 10 segments of 100 bytes each
    assert report.plan.stats.not_placed["load"] == 10
    assert report.plan.stats.unavailable == 30


def test_a_segment_unloaded_too_long_raises_an_alert() -> None:
    config = CoordinatorConfig(segment_loading_max_seconds_before_alerting=120)
    sim = SimulatedCluster(
        volumes(1, capacity=100),
        segments(2),
        default_rules=(LoadRule.forever({"hot": 1}),),
        config=config,
        run_period_ms=60_000,
    )
    alerts = [len(sim.run().plan.alerts) for _ in range(4)]
    assert alerts == [0, 0, 0, 1]  # the one that never fits, once 120 s have passed


def test_bad_config_names_the_problem() -> None:
    with pytest.raises(SpecError, match="add up to more than 100"):
        CoordinatorConfig(loading_min_percent=90, balancing_min_percent=20)
    with pytest.raises(SpecError, match="maxSegmentsInNodeLoadingQueue"):
        CoordinatorConfig.from_json({"maxSegmentsInNodeLoadingQueue": 0})
    with pytest.raises(SpecError, match="unknown coordinator config keys"):
        CoordinatorConfig.from_json({"maxSegmentsToMoove": 5})
    with pytest.raises(SpecError, match="capacity_bytes"):
        Volume("v", "hot", "/p", 0)
    assert CoordinatorConfig.from_json(CoordinatorConfig(seed=3).to_json()) == CoordinatorConfig(
        seed=3
    )


def _iso(millis: int) -> str:
    from segmentlake.core.interval import format_timestamp

    return format_timestamp(millis)
