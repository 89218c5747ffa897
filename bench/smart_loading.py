"""Smart segment loading on a simulated cluster (pure Python, no Spark): convergence of the
balancer, and the time of one planner run.

Run from the repository root:

    .venv/bin/python bench/smart_loading.py converge --segments 100000
    .venv/bin/python bench/smart_loading.py time --segments 1000000 --state balanced

The cluster is ``bench/coordinator.py``'s: hourly segments of 10 datasources, 100 volumes in
3 tiers (hot 20, warm 30, cold 50) and its rule chain, every segment placed at random on the
volumes its rules ask for (a valid, unbalanced cluster).

* ``converge``: run the coordinator again and again (each run's loads and drops complete
  before the next) until a run makes no balancing move; printed per run: moves, seconds,
  and the cluster's cost (:meth:`SimulatedCluster.cost`: Druid's cost of the placement,
  normalized, and the worst tier's ``max / mean - 1`` of bytes per volume).
* ``time``: one ``plan_run`` (best of ``--repeat``) over the random placement
  (``--state random``) or over a balanced one (``--state balanced``: copies dealt out
  round-robin in time order over their tier's volumes, where the balancer finds little to
  improve — it weighs ~100 candidates per tier — as after convergence).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator import TIERS, cluster, place_at_random

from segmentlake.core.coordinator_run import plan_run
from tests.core.cluster_simulation import SimulatedCluster


def spread_round_robin(sim: SimulatedCluster) -> None:
    """Re-place every copy: per tier, copies in (hour, datasource) order dealt out to the
    tier's volumes in turn, each hour's deal rotated by a step prime to the volume count, so
    neighbours in time and datasource sit on different volumes (what the cost wants)."""
    names = sorted(sim.volumes)
    _, _, vol_back = sim.snapshot()
    tier_of = np.array([sim.volumes[n].tier for n in names])
    seg = sim.segments
    for tier, count, _ in TIERS:
        choices = np.sort(vol_back[tier_of == tier])
        mine = np.flatnonzero(np.isin(sim.c_vol, choices))
        s = sim.c_seg[mine]
        order = np.lexsort((s, seg.datasource[s], seg.start_ms[s]))
        mine, s = mine[order], s[order]
        hour = (seg.start_ms[s] - seg.start_ms.min()) // 3_600_000
        step = next(k for k in (7, 11, 13, 17) if count % k)
        pos = np.arange(len(mine)) + hour * step
        sim.c_vol[mine] = choices[pos % len(choices)]


def converge(args: argparse.Namespace) -> dict[str, object]:
    sim = cluster(args.segments, args.seed)
    place_at_random(sim, args.seed)
    start = sim.cost()
    print(json.dumps({"run": 0, **_cost(start)}), flush=True)
    runs = []
    for run in range(1, args.max_runs + 1):
        started = time.perf_counter()
        report = sim.run()
        seconds = time.perf_counter() - started
        stats = report.plan.stats
        row = {
            "run": run,
            "moves": stats.balance_moves,
            "weighed": sum(stats.balance_iterations.values()),
            "seconds": round(seconds, 2),
            **_cost(sim.cost()),
        }
        runs.append(row)
        print(json.dumps(row), flush=True)
        if stats.balance_moves == 0:
            break
    return {
        "segments": args.segments,
        "volumes": len(sim.volumes),
        "runs_to_converge": len(runs) - 1 if runs and runs[-1]["moves"] == 0 else None,
        "moves_per_run": [r["moves"] for r in runs],
        "start": _cost(start),
        "final": {k: runs[-1][k] for k in ("cost", "normalized", "imbalance")} if runs else None,
    }


def time_one_run(args: argparse.Namespace) -> dict[str, object]:
    sim = cluster(args.segments, args.seed)
    place_at_random(sim, args.seed)
    if args.state == "balanced":
        spread_round_robin(sim)
    snap, _, _ = sim.snapshot()
    best, best_cpu, plan = float("inf"), float("inf"), None
    for _ in range(args.repeat):
        started, cpu = time.perf_counter(), time.process_time()
        plan = plan_run(snap, sim.config)
        best = min(best, time.perf_counter() - started)
        # CPU seconds too: on a shared machine the wall clock also counts other processes.
        best_cpu = min(best_cpu, time.process_time() - cpu)
    assert plan is not None
    return {
        "segments": args.segments,
        "volumes": len(snap.volumes),
        "copies": len(snap.copies),
        "state": args.state,
        "seconds_best": round(best, 2),
        "cpu_seconds_best": round(best_cpu, 2),
        "load_average": round(os.getloadavg()[0], 1),
        "moves": plan.stats.balance_moves,
        "weighed": plan.stats.balance_iterations,
        "phases": {k: round(v, 3) for k, v in plan.stats.seconds.items()},
    }


def _cost(cost: object) -> dict[str, float]:
    return {
        "cost": round(cost.cost, 1),  # type: ignore[attr-defined]
        "normalized": round(cost.normalized, 5),  # type: ignore[attr-defined]
        "imbalance": round(cost.imbalance, 4),  # type: ignore[attr-defined]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("converge", help="run until a run makes no balancing move")
    conv.add_argument("--segments", type=int, default=100_000)
    conv.add_argument("--max-runs", type=int, default=200)
    one = sub.add_parser("time", help="the time of one plan_run")
    one.add_argument("--segments", type=int, default=1_000_000)
    one.add_argument("--state", choices=("random", "balanced"), default="balanced")
    one.add_argument("--repeat", type=int, default=3)
    for p in (conv, one):
        p.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    result = converge(args) if args.command == "converge" else time_one_run(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
