"""Benchmark of the coordinator's planner on a simulated cluster (pure Python, no Spark).

Run from the repository root:

    .venv/bin/python bench/coordinator.py            # 10^6 segments, 100 volumes, 3 tiers
    .venv/bin/python bench/coordinator.py --no-smart-loading   # maxSegmentsToMove bounds moves

The cluster: ``--segments`` hourly segments of 10 datasources over ~3 years (sizes 50-500 MB),
100 volumes in 3 tiers (hot 20, warm 30, cold 50), and a rule chain per datasource: the last
30 days 2 copies hot + 1 warm, the last year 1 warm + 1 cold, older 1 cold. Reported:

* **cold start**: the first run over an empty cluster (every segment unreplicated): seconds,
  loads queued (bounded by the load queues);
* **steady run**: every segment placed at random as its rules ask (a valid, unbalanced
  cluster): seconds per run and balancing moves per run, over ``--runs`` runs whose loads
  complete in between;
* **lost volume**: a hot volume disappears: runs and seconds until every segment is back at
  its replica count;
* **naive baseline**: the balancer's candidates priced against every volume of their tier one
  pair at a time with Druid's formula (on a sample, extrapolated per candidate) against the
  vectorized index doing the same in the same run: the ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from segmentlake.core.coordinator_run import ServedSegments
from segmentlake.core.retention_rules import LoadRule
from segmentlake.core.segment_cost import IntervalCostIndex, naive_cost, to_units
from segmentlake.core.storage_tiers import CoordinatorConfig, CopyState, LoadReason, Volume
from tests.core.cluster_simulation import SimulatedCluster

HOUR = 3_600_000
TIERS = (("hot", 20, 2), ("warm", 30, 1), ("cold", 50, 0))


def build_segments(n: int, seed: int) -> ServedSegments:
    rng = np.random.default_rng(seed)
    datasources = 10
    hours = n // (datasources * 4) + 1  # 4 segments per hour per datasource
    now = 1_700_000_000_000 // HOUR * HOUR
    idx = np.arange(n)
    hour = (idx // (datasources * 4)) % hours
    start = now - (hours - hour) * HOUR
    return ServedSegments(
        ids=[f"s{i}" for i in range(n)],
        datasource=(idx % datasources).astype(np.int32),
        datasources=tuple(f"ds{d}" for d in range(datasources)),
        start_ms=start.astype(np.int64),
        end_ms=(start + HOUR).astype(np.int64),
        size_bytes=rng.integers(50, 500, n).astype(np.int64) * 2**20,
    )


def build_volumes() -> list[Volume]:
    return [
        Volume(f"{tier}{i}", tier, f"/volumes/{tier}{i}", 2**50, priority=priority)
        for tier, count, priority in TIERS
        for i in range(count)
    ]


RULES = (
    LoadRule.by_period("P30D", {"hot": 2, "warm": 1}),
    LoadRule.by_period("P1Y", {"warm": 1, "cold": 1}),
    LoadRule.forever({"cold": 1}),
)


def cluster(n: int, seed: int, *, smart: bool = True) -> SimulatedCluster:
    segments = build_segments(n, seed)
    now = int(segments.end_ms.max())
    return SimulatedCluster(
        build_volumes(),
        segments,
        default_rules=RULES,
        config=CoordinatorConfig(seed=seed, smart_segment_loading=smart),
        now_ms=now,
    )


def place_at_random(sim: SimulatedCluster, seed: int) -> None:
    """Every segment loaded where its rule asks, on random volumes (valid, unbalanced)."""
    rng = np.random.default_rng(seed)
    _, _, vol_back = sim.snapshot()
    names = sorted(sim.volumes)
    by_tier = {t: [i for i, n in enumerate(names) if sim.volumes[n].tier == t] for t, _, _ in TIERS}
    end = sim.segments.end_ms
    now = sim.now_ms
    seg_rows, vol_rows = [], []
    recent = end > now - 30 * 24 * HOUR
    year = ~recent & (end > now - 365 * 24 * HOUR)
    old = ~recent & ~year
    for mask, need in (
        (recent, {"hot": 2, "warm": 1}),
        (year, {"warm": 1, "cold": 1}),
        (old, {"cold": 1}),
    ):
        rows = np.flatnonzero(mask)
        for tier, count in need.items():
            choices = np.array(by_tier[tier])
            # A random volume per segment; its replicas go to the next volumes of the tier.
            base = rng.integers(0, len(choices), len(rows))
            for k in range(count):
                seg_rows.append(rows)
                vol_rows.append(choices[(base + k) % len(choices)])
    seg = np.concatenate(seg_rows)
    vol = vol_back[np.concatenate(vol_rows)]
    sim.c_seg = seg.astype(np.int64)
    sim.c_vol = vol.astype(np.int32)
    sim.c_state = np.full(len(seg), int(CopyState.LOADED), dtype=np.int8)
    sim.c_reason = np.full(len(seg), int(LoadReason.LOAD), dtype=np.int8)
    sim.c_from = np.full(len(seg), -1, dtype=np.int32)


def naive_ratio(sim: SimulatedCluster, candidates: int, sample: int, seed: int) -> dict[str, float]:
    """Price ``candidates`` segments on every hot volume: naive pairs (a sample) vs index."""
    rng = np.random.default_rng(seed)
    snap, _, _ = sim.snapshot()
    seg = snap.segments
    hot = [i for i, v in enumerate(snap.volumes) if v.tier == "hot"]
    copies = snap.copies
    held = {v: copies.segment[copies.volume == v] for v in hot}
    picks = rng.choice(len(seg), candidates, replace=False)
    origin = int(seg.start_ms.min())
    a, b = to_units(seg.start_ms[picks], origin), to_units(seg.end_ms[picks], origin)
    started = time.perf_counter()
    for v in hot:
        rows = held[v]
        IntervalCostIndex(
            to_units(seg.start_ms[rows], origin), to_units(seg.end_ms[rows], origin)
        ).query(a, b)
        for d in range(len(seg.datasources)):
            same = rows[seg.datasource[rows] == d]
            mine = seg.datasource[picks] == d
            IntervalCostIndex(
                to_units(seg.start_ms[same], origin), to_units(seg.end_ms[same], origin)
            ).query(a[mine], b[mine])
    fast = (time.perf_counter() - started) / candidates
    started = time.perf_counter()
    for p in picks[:sample]:
        x = (int(seg.start_ms[p]), int(seg.end_ms[p]), seg.datasources[seg.datasource[p]])
        for v in hot:
            rows = held[v]
            naive_cost(
                x,
                zip(
                    seg.start_ms[rows].tolist(),
                    seg.end_ms[rows].tolist(),
                    [seg.datasources[d] for d in seg.datasource[rows]],
                    strict=True,
                ),
            )
    naive = (time.perf_counter() - started) / sample
    pairs = sum(len(r) for r in held.values())
    return {
        "candidate_pairs": pairs,
        "naive_s_per_candidate": round(naive, 4),
        "indexed_s_per_candidate": round(fast, 7),
        "ratio": round(naive / fast, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-smart-loading",
        dest="smart",
        action="store_false",
        help="smartSegmentLoading false: maxSegmentsToMove (100) bounds the moves per tier",
    )
    args = parser.parse_args()
    results: dict[str, object] = {"segments": args.segments, "volumes": 100, "tiers": 3}

    sim = cluster(args.segments, args.seed, smart=args.smart)
    started = time.perf_counter()
    first = sim.run(complete=False)
    results["cold_start"] = {
        "seconds": round(time.perf_counter() - started, 2),
        "loads_queued": first.plan.stats.loads,
        "unreplicated": first.plan.stats.unreplicated,
        "phases": {k: round(v, 3) for k, v in first.plan.stats.seconds.items()},
    }
    print(json.dumps(results["cold_start"]), flush=True)

    sim = cluster(args.segments, args.seed, smart=args.smart)
    place_at_random(sim, args.seed)
    steady = []
    for _ in range(args.runs):
        started = time.perf_counter()
        report = sim.run()
        steady.append(
            {
                "seconds": round(time.perf_counter() - started, 2),
                "moves": report.plan.stats.balance_moves,
                "loads": report.plan.stats.loads + report.plan.stats.replicas,
                "drops": report.plan.stats.drops,
                "phases": {k: round(v, 3) for k, v in report.plan.stats.seconds.items()},
            }
        )
        print(json.dumps(steady[-1]), flush=True)
    results["steady_runs"] = steady

    results["naive_baseline"] = naive_ratio(sim, candidates=2_000, sample=3, seed=args.seed)
    print(json.dumps(results["naive_baseline"]), flush=True)

    lost = sorted(n for n in sim.volumes if sim.volumes[n].tier == "hot")[0]
    copies_lost = sim.loaded_per_volume()[lost]
    sim.lose_volume(lost)
    runs, seconds = 0, 0.0
    while True:
        started = time.perf_counter()
        report = sim.run()
        seconds += time.perf_counter() - started
        runs += 1
        if report.plan.stats.replicas == 0 and report.plan.stats.loads == 0:
            break
    results["lost_volume"] = {
        "copies_lost": copies_lost,
        "runs_to_recover": runs - 1,
        "seconds": round(seconds, 2),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
