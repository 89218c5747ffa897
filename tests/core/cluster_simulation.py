"""A simulated cluster: the coordinator's pure planner against volumes in memory, to test and
benchmark it at scale without Spark (Druid's ``CoordinatorSimulationBaseTest``).

The simulation applies a plan the way the real coordinator does — new copies are queued as
``LOADING``, dropped copies become ``DROPPING``, cancelled loads vanish, drop-rule segments
stop being served — and completes loads when told: all at once by default, or a few per
volume per step to model slow loaders, so runs overlap with the previous runs' loads.

It ships with the tests, not the package: only the tests and the benchmarks (``bench/``, which
put the repository root on ``sys.path`` for it) run it.

>>> sim = SimulatedCluster(volumes, segments)                # doctest: +SKIP
>>> sim.converge()                                           # doctest: +SKIP
>>> sim.loaded_per_volume()                                  # doctest: +SKIP
{'v0': 200, 'v1': 200, ...}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from segmentlake.core.coordinator_run import (
    ClusterSnapshot,
    CoordinatorPlan,
    SegmentCopies,
    ServedSegments,
    plan_run,
)
from segmentlake.core.retention_rules import DEFAULT_RULES, Rule
from segmentlake.core.segment_cost import IntervalCostIndex, joint_cost_units, to_units
from segmentlake.core.storage_tiers import CoordinatorConfig, CopyState, Volume
from segmentlake.errors import SpecError

__all__ = ["ClusterCost", "SimulatedCluster", "StepReport"]

_LOADED, _LOADING, _DROPPING = (int(s) for s in CopyState)


@dataclass(frozen=True)
class StepReport:
    """One simulated run: its plan, and the most loads any volume had in flight after it
    queued its own (what the queue limit bounds)."""

    plan: CoordinatorPlan
    max_in_flight: int


@dataclass(frozen=True)
class ClusterCost:
    """How balanced the loaded copies are. ``cost``: Druid's cost of the placement — per
    volume, the joint cost of every pair of copies it holds (doubled within a datasource),
    summed, in 1/λ² units; ``normalized``: that over the sum of each copy's cost with
    itself (Druid's "normalized cost"; lower is better). ``imbalance``: over tiers, the
    largest ``max / mean - 1`` of bytes loaded per volume (0: even)."""

    cost: float
    normalized: float
    imbalance: float


class SimulatedCluster:
    """Volumes (by name), served segments and their copies, in memory."""

    def __init__(
        self,
        volumes: Sequence[Volume],
        segments: ServedSegments,
        *,
        rules: Mapping[str, Sequence[Rule]] | None = None,
        default_rules: Sequence[Rule] = DEFAULT_RULES,
        config: CoordinatorConfig | None = None,
        now_ms: int = 1_700_000_000_000,
        run_period_ms: int = 60_000,
    ) -> None:
        self.volumes: dict[str, Volume] = {}
        self._names: list[str] = []  # every volume ever added; copies index into it
        for volume in volumes:
            self.add_volume(volume)
        self.segments = segments
        self.served = np.ones(len(segments), dtype=bool)
        self.rules = {k: tuple(v) for k, v in (rules or {}).items()}
        self.default_rules = tuple(default_rules)
        self.config = config or CoordinatorConfig()
        self.now_ms, self.run_period_ms = now_ms, run_period_ms
        self.unavailable_since = np.full(len(segments), -1, dtype=np.int64)
        # Copies: segment row, volume (index into _names), state, reason, move_from (index).
        self.c_seg = np.zeros(0, dtype=np.int64)
        self.c_vol = np.zeros(0, dtype=np.int32)
        self.c_state = np.zeros(0, dtype=np.int8)
        self.c_reason = np.zeros(0, dtype=np.int8)
        self.c_from = np.zeros(0, dtype=np.int32)
        self.runs = 0

    # -- the cluster changing ------------------------------------------------------------

    def add_volume(self, volume: Volume) -> None:
        """A volume joins (or comes back, empty)."""
        if volume.name not in self._names:
            self._names.append(volume.name)
        self.volumes[volume.name] = volume

    def lose_volume(self, name: str) -> None:
        """A volume disappears with its copies (a dead historical)."""
        self._require(name)
        del self.volumes[name]
        gone = self.c_vol == self._names.index(name)
        self._keep(~gone)
        # Moves that were to leave it have nothing left to leave.
        self.c_from[self.c_from == self._names.index(name)] = -1

    def decommission(self, name: str, *, decommissioning: bool = True) -> None:
        self._require(name)
        self.volumes[name] = replace(self.volumes[name], decommissioning=decommissioning)

    def set_rules(self, datasource: str, rules: Sequence[Rule]) -> None:
        self.rules[datasource] = tuple(rules)

    def _require(self, name: str) -> None:
        if name not in self.volumes:
            raise SpecError(f"no live volume {name!r}; live: {sorted(self.volumes)}")

    # -- runs ----------------------------------------------------------------------------

    def snapshot(self) -> tuple[ClusterSnapshot, np.ndarray, np.ndarray]:
        """The planner's view, with the maps back from its rows: served segment rows and
        live volume indexes."""
        live_names = sorted(self.volumes)
        live_index = np.full(len(self._names), -1, dtype=np.int32)
        for i, name in enumerate(live_names):
            live_index[self._names.index(name)] = i
        rows = np.flatnonzero(self.served)
        seg_map = np.full(len(self.segments), -1, dtype=np.int64)
        seg_map[rows] = np.arange(len(rows))
        s = self.segments
        served = ServedSegments(
            ids=[s.ids[int(i)] for i in rows],
            datasource=s.datasource[rows],
            datasources=s.datasources,
            start_ms=s.start_ms[rows],
            end_ms=s.end_ms[rows],
            size_bytes=s.size_bytes[rows],
        )
        from_live = np.where(self.c_from >= 0, live_index[np.maximum(self.c_from, 0)], -1)
        copies = SegmentCopies(
            segment=seg_map[self.c_seg],
            volume=live_index[self.c_vol],
            state=self.c_state,
            reason=self.c_reason,
            move_from=from_live.astype(np.int32),
        )
        snap = ClusterSnapshot(
            volumes=tuple(self.volumes[n] for n in live_names),
            segments=served,
            copies=copies,
            rules=self.rules,
            default_rules=self.default_rules,
            now_ms=self.now_ms,
            unavailable_since_ms=self.unavailable_since[rows],
        )
        vol_back = np.array([self._names.index(n) for n in live_names], dtype=np.int32)
        return snap, rows, vol_back

    def run(self, *, complete: bool = True, loads_per_volume: int | None = None) -> StepReport:
        """One coordinator run and its actions; then, unless ``complete=False``, the loads
        finish (at most ``loads_per_volume`` per volume, oldest first) and drops happen."""
        snap, rows, vol_back = self.snapshot()
        plan = plan_run(snap, self.config)
        self._apply(plan, rows, vol_back)
        in_flight = np.bincount(self.c_vol[self.c_state == _LOADING], minlength=len(self._names))
        report = StepReport(plan, int(in_flight.max()) if len(in_flight) else 0)
        if complete:
            self.complete(loads_per_volume=loads_per_volume)
        self.now_ms += self.run_period_ms
        self.runs += 1
        return report

    def _apply(self, plan: CoordinatorPlan, rows: np.ndarray, vol_back: np.ndarray) -> None:
        unavailable = np.full(len(self.segments), -1, dtype=np.int64)
        unavailable[rows] = plan.unavailable_since_ms
        self.unavailable_since = unavailable
        self.c_state[plan.drop_copies] = _DROPPING
        keep = np.ones(len(self.c_seg), dtype=bool)
        keep[plan.cancel_copies] = False
        self._keep(keep)
        self.served[rows[plan.mark_unused]] = False
        n = len(plan.load_segment)
        if n:
            move_from = np.where(
                plan.load_move_from >= 0, vol_back[np.maximum(plan.load_move_from, 0)], -1
            )
            self.c_seg = np.concatenate([self.c_seg, rows[plan.load_segment]])
            self.c_vol = np.concatenate([self.c_vol, vol_back[plan.load_volume]])
            self.c_state = np.concatenate([self.c_state, np.full(n, _LOADING, dtype=np.int8)])
            self.c_reason = np.concatenate([self.c_reason, plan.load_reason])
            self.c_from = np.concatenate([self.c_from, move_from.astype(np.int32)])

    def complete(self, *, loads_per_volume: int | None = None) -> int:
        """Finish queued loads (all, or the oldest ``loads_per_volume`` per volume): a move's
        source copy then becomes ``DROPPING``; then every dropping copy goes. Returns how
        many loads finished."""
        loading = np.flatnonzero(self.c_state == _LOADING)
        if loads_per_volume is not None and len(loading):
            vols = self.c_vol[loading]
            order = np.argsort(vols, kind="stable")
            sorted_vols = vols[order]
            starts = np.searchsorted(sorted_vols, sorted_vols, side="left")
            rank = np.arange(len(order)) - starts
            loading = loading[order[rank < loads_per_volume]]
        self.c_state[loading] = _LOADED
        moves = loading[self.c_from[loading] >= 0]
        if len(moves):
            keys = self.c_seg[moves] * len(self._names) + self.c_from[moves]
            mine = self.c_seg * len(self._names) + self.c_vol
            leaving = np.isin(mine, keys) & (self.c_state == _LOADED)
            self.c_state[leaving] = _DROPPING
            self.c_from[moves] = -1
        self._keep(self.c_state != _DROPPING)
        return len(loading)

    def converge(self, *, max_runs: int = 100, loads_per_volume: int | None = None) -> int:
        """Run until a run plans nothing; returns the number of runs that acted."""
        for done in range(max_runs):
            report = self.run(loads_per_volume=loads_per_volume)
            if report.plan.actions == 0 and not np.any(self.c_state == _LOADING):
                return done
        raise SpecError(f"the cluster did not converge in {max_runs} runs")

    def _keep(self, mask: np.ndarray) -> None:
        self.c_seg, self.c_vol = self.c_seg[mask], self.c_vol[mask]
        self.c_state, self.c_reason, self.c_from = (
            self.c_state[mask],
            self.c_reason[mask],
            self.c_from[mask],
        )

    # -- looking at it -------------------------------------------------------------------

    def loaded_per_volume(self) -> dict[str, int]:
        """Loaded copies per live volume."""
        counts = np.bincount(self.c_vol[self.c_state == _LOADED], minlength=len(self._names))
        return {name: int(counts[self._names.index(name)]) for name in sorted(self.volumes)}

    def loaded_copies(self, *, tier: str | None = None) -> np.ndarray:
        """Loaded copies per segment row (in ``tier`` only if given)."""
        mask = self.c_state == _LOADED
        if tier is not None:
            in_tier = np.array(
                [
                    self.volumes.get(n, None) is not None and self.volumes[n].tier == tier
                    for n in self._names
                ]
            )
            mask &= in_tier[self.c_vol]
        return np.bincount(self.c_seg[mask], minlength=len(self.segments))

    def cost(self) -> ClusterCost:
        """The :class:`ClusterCost` of the loaded copies (exact, from interval indexes)."""
        seg = self.segments
        loaded = self.c_state == _LOADED
        c_seg, c_vol = self.c_seg[loaded], self.c_vol[loaded]
        origin = int(seg.start_ms.min()) if len(seg) else 0
        a, b = to_units(seg.start_ms, origin), to_units(seg.end_ms, origin)
        ds = seg.datasource
        total = 0.0
        for v in np.unique(c_vol):
            held = c_seg[c_vol == v]
            groups = [held, *(held[ds[held] == d] for d in np.unique(ds[held]))]
            for rows in groups:
                # Every ordered pair once each way, less each copy with itself: twice the pairs.
                both = IntervalCostIndex(a[rows], b[rows]).query(a[rows], b[rows]).sum()
                total += (both - joint_cost_units(a[rows], b[rows], a[rows], b[rows]).sum()) / 2
        self_cost = float(2.0 * joint_cost_units(a[c_seg], b[c_seg], a[c_seg], b[c_seg]).sum())
        used = np.bincount(
            c_vol, seg.size_bytes[c_seg].astype(np.float64), minlength=len(self._names)
        )
        imbalance = 0.0
        for tier in {v.tier for v in self.volumes.values()}:
            mine = [self._names.index(n) for n, v in self.volumes.items() if v.tier == tier]
            if len(mine) > 1 and used[mine].mean() > 0:
                imbalance = max(imbalance, float(used[mine].max() / used[mine].mean() - 1))
        return ClusterCost(total, total / self_cost if self_cost else 0.0, imbalance)

    def in_flight(self) -> dict[str, int]:
        counts = np.bincount(self.c_vol[self.c_state == _LOADING], minlength=len(self._names))
        return {name: int(counts[self._names.index(name)]) for name in sorted(self.volumes)}
