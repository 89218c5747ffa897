"""One run of the coordinator's load/balance planning (Druid's ``RunRules``,
``BalanceSegments`` and ``StrategicSegmentAssigner``, after apache/druid#7458), pure and
vectorized so one run plans 10^6 segments over 10^2 volumes in seconds.

A run reads a :class:`ClusterSnapshot` — the segments to serve (used and not overshadowed),
the live volumes, every copy with its state, the rules — and returns a
:class:`CoordinatorPlan` of actions, in Druid's order:

1. classify each segment per tier as unreplicated, under-, fully or over-replicated (and
   broadcast segments missing a copy as under-broadcast) from its first matching rule;
2. give every segment with no copy anywhere one copy in its primary tier (the rule's tier of
   the highest volume priority), newest segments first;
3. move copies off decommissioning volumes to other volumes of their tier;
4. add replicas where a tier has fewer than its rule asks for, segments that lost copies
   first;
5. cancel and drop copies beyond what the rules ask for, and copies of segments no longer
   served; never a live copy while that would leave a tier below its target;
6. balance: move copies whose cost on another volume of their tier is lower by at least
   ``balancer_min_cost_reduction`` (so converged runs move nothing). With smart segment
   loading (the default) a tier's balancer goes on while moves pay and stops once 80 of its
   last 100 candidates found no better volume; without it, ``max_segments_to_move`` bounds
   the moves (and ``replication_throttle_limit`` the replicas of step 4).

A volume's placement cost for a segment is Druid's ``CostBalancerStrategy`` — the sum of the
joint cost with every copy the volume holds or is loading, doubled within a datasource —
normalized by the volume's usage after the load (``DiskNormalizedCostBalancerStrategy``), so
a fuller volume costs more and disk use evens out (apache/druid#16335). Costs come from one
:class:`~segmentlake.core.segment_cost.GroupedCostIndex` per tier over its copies grouped by
volume and datasource (built once per phase; the balancer's later batches add its earlier
moves pair by pair) and, within a phase, a candidate matrix updated incrementally around
each decision: the naive per-pair cost is kept only as the test oracle.

Loads in flight (``LOADING`` copies, maybe of earlier runs) count as placed: a run never waits
for the previous run's loads and moves, and never plans them twice.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from segmentlake.core.retention_rules import LoadRule, Rule, match_rules
from segmentlake.core.segment_cost import (
    GroupedCostIndex,
    IntervalCostIndex,
    joint_cost_to,
    joint_cost_units,
    to_units,
)
from segmentlake.core.storage_tiers import CoordinatorConfig, CopyState, LoadReason, Volume
from segmentlake.errors import SpecError

__all__ = [
    "ClusterSnapshot",
    "CoordinatorPlan",
    "RunStats",
    "SegmentCopies",
    "ServedSegments",
    "TierStats",
    "plan_run",
]

I64 = NDArray[np.int64]
I32 = NDArray[np.int32]
Int8Array = NDArray[np.int8]
F64 = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

# Joint costs further apart than this many 1/λ units (~43 days) are below e^-30 of an adjacent
# pair's: the incremental updates leave them out.
_WINDOW_UNITS = 30.0
# ...and within a phase, at most this many candidates on each side of a decision are updated
# (the next phase and the next run start again from exact costs).
_NEAREST = 512
_LOADED, _LOADING, _DROPPING = (int(s) for s in CopyState)
# Copies of a tier the balancer weighs per run (Druid samples too): a tier with fewer has them
# all weighed, so a run that moves nothing there means the tier is balanced. With smart
# loading this is the batch size: one more batch is priced while the balancer goes on.
_BALANCE_SAMPLE = 5_000
# Smart loading's stopping rule: the balancer stops once this many of its last
# _STOP_WINDOW candidates found no better volume — moves have stopped paying.
_STOP_WINDOW = 100
_STOP_MISSES = 80
# Smart loading prices candidates in batches growing from this size by _BATCH_GROWTH up to
# _BALANCE_SAMPLE: a balanced tier stops after ~80 candidates, and pricing 5,000 for it
# would cost most of the run (10^6 segments).
_FIRST_BATCH = 128
_BATCH_GROWTH = 4


@dataclass(frozen=True)
class ServedSegments:
    """The segments the cluster should serve (used, not overshadowed), as columns; segment
    ``i`` is row ``i``. ``datasource`` holds indexes into ``datasources``."""

    ids: Sequence[str]
    datasource: I32
    datasources: tuple[str, ...]
    start_ms: I64
    end_ms: I64
    size_bytes: I64

    def __post_init__(self) -> None:
        n = len(self.ids)
        for name in ("datasource", "start_ms", "end_ms", "size_bytes"):
            if len(getattr(self, name)) != n:
                raise SpecError(
                    f"ServedSegments.{name} has {len(getattr(self, name))} rows, ids {n}"
                )
        if n and bool(np.any(self.end_ms <= self.start_ms)):
            raise SpecError("every served segment needs end_ms > start_ms")

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(
        cls,
        rows: Sequence[tuple[str, str, int, int, int]],
    ) -> ServedSegments:
        """From ``(id, datasource, start_ms, end_ms, size_bytes)`` tuples."""
        names = tuple(sorted({r[1] for r in rows}))
        code = {name: i for i, name in enumerate(names)}
        return cls(
            ids=[r[0] for r in rows],
            datasource=np.array([code[r[1]] for r in rows], dtype=np.int32),
            datasources=names,
            start_ms=np.array([r[2] for r in rows], dtype=np.int64),
            end_ms=np.array([r[3] for r in rows], dtype=np.int64),
            size_bytes=np.array([r[4] for r in rows], dtype=np.int64),
        )


@dataclass(frozen=True)
class SegmentCopies:
    """Every copy the volumes hold or are loading or dropping: ``segment`` (row of the served
    segments, -1 for a segment no longer served), ``volume`` (index of the snapshot's
    volumes), ``state`` (:class:`CopyState`), ``reason`` (:class:`LoadReason` of a load) and
    ``move_from`` (for a move, the volume the copy leaves once loaded; -1 otherwise)."""

    segment: I64
    volume: I32
    state: Int8Array
    reason: Int8Array
    move_from: I32

    def __len__(self) -> int:
        return len(self.segment)

    @classmethod
    def empty(cls) -> SegmentCopies:
        return cls.of([])

    @classmethod
    def of(cls, rows: Sequence[tuple[int, int, int, int, int]]) -> SegmentCopies:
        """From ``(segment, volume, state, reason, move_from)`` tuples."""
        cols = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
        return cls(
            segment=np.array(cols[0], dtype=np.int64),
            volume=np.array(cols[1], dtype=np.int32),
            state=np.array(cols[2], dtype=np.int8),
            reason=np.array(cols[3], dtype=np.int8),
            move_from=np.array(cols[4], dtype=np.int32),
        )


@dataclass(frozen=True)
class ClusterSnapshot:
    """What one run decides on. ``volumes`` are the live volumes only: a volume that
    disappeared is left out with its copies, which makes its segments under-replicated (a
    dead historical). ``unavailable_since_ms[i]`` is when segment ``i`` was first seen with
    no loaded copy (-1: unknown or loaded), carried from run to run for alerts."""

    volumes: tuple[Volume, ...]
    segments: ServedSegments
    copies: SegmentCopies
    rules: Mapping[str, Sequence[Rule]]
    default_rules: Sequence[Rule]
    now_ms: int
    unavailable_since_ms: I64 | None = None


@dataclass
class TierStats:
    """Segments of a tier by replication: rules ask for more copies than the tier holds and
    loads (``under_replicated``), as many, or fewer (``over_replicated``)."""

    under_replicated: int = 0
    fully_replicated: int = 0
    over_replicated: int = 0
    required_copies: int = 0
    projected_copies: int = 0


@dataclass
class RunStats:
    """What a run found and decided, for logs, reports and the benchmark."""

    segments: int = 0
    unreplicated: int = 0
    under_broadcast: int = 0
    unavailable: int = 0
    no_matching_rule: int = 0
    drop_rule: int = 0
    tiers: dict[str, TierStats] = field(default_factory=dict)
    tier_without_volumes: dict[str, int] = field(default_factory=dict)
    loads: int = 0
    replicas: int = 0
    decommission_moves: int = 0
    balance_moves: int = 0
    # Per tier: candidates the balancer weighed (each found a better volume or not).
    balance_iterations: dict[str, int] = field(default_factory=dict)
    throttled_replicas: int = 0
    drops: int = 0
    cancels: int = 0
    not_placed: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CoordinatorPlan:
    """A run's actions. New copies: ``load_segment[k]`` onto volume ``load_volume[k]`` for
    ``load_reason[k]``, leaving ``load_move_from[k]`` once loaded (-1: not a move). Copies to
    drop (``LOADED`` → ``DROPPING``) and loads to cancel, as indexes of the snapshot's copies.
    Segments a drop rule retires (to mark unused). Alerts: segments unloaded too long."""

    load_segment: I64
    load_volume: I32
    load_reason: Int8Array
    load_move_from: I32
    drop_copies: I64
    cancel_copies: I64
    mark_unused: I64
    unavailable_since_ms: I64
    alerts: I64
    stats: RunStats

    @property
    def actions(self) -> int:
        return len(self.load_segment) + len(self.drop_copies) + len(self.cancel_copies)


def plan_run(snapshot: ClusterSnapshot, config: CoordinatorConfig | None = None) -> CoordinatorPlan:
    """Plan one coordinator run over ``snapshot`` (see the module).

    >>> plan = plan_run(snapshot, CoordinatorConfig(seed=7))  # doctest: +SKIP
    >>> plan.stats.loads, plan.stats.balance_moves  # doctest: +SKIP
    """
    return _RunPlanner(snapshot, config or CoordinatorConfig()).plan()


class _RunPlanner:
    """The mutable state of one run: projected copy counts, queues and usage, as arrays."""

    def __init__(self, snapshot: ClusterSnapshot, config: CoordinatorConfig) -> None:
        self.snap, self.config, self.stats = snapshot, config, RunStats()
        # One seeded generator per run: the balancer's sample and the choice among the best
        # volumes repeat for a given seed and snapshot.
        self.rng = np.random.default_rng([config.seed, snapshot.now_ms & 0x7FFFFFFF])
        seg, vols, copies = snapshot.segments, snapshot.volumes, snapshot.copies
        self.n, self.nv = len(seg), len(vols)
        self._check(copies)
        self.tiers = _tier_names(snapshot)
        self.tier_of = {t: i for i, t in enumerate(self.tiers)}
        self.nt = len(self.tiers)
        self.vol_tier = np.array([self.tier_of[v.tier] for v in vols], dtype=np.int32)
        self.active = np.array([not v.decommissioning for v in vols], dtype=bool)
        self.capacity = np.array([v.capacity_bytes for v in vols], dtype=np.float64)
        origin = int(seg.start_ms.min()) if self.n else 0
        self.origin_ms = origin
        self.a = to_units(seg.start_ms, origin)
        self.b = to_units(seg.end_ms, origin)
        self.size = seg.size_bytes.astype(np.float64)
        self.ds = seg.datasource
        # Copy-level state (mutated as the run decides).
        self.c_seg, self.c_vol, self.c_state = copies.segment, copies.volume, copies.state
        self.moving_away = self._moving_away()
        served = self.c_seg >= 0
        self.c_projected = served & (
            ((self.c_state == _LOADED) & ~self.moving_away) | (self.c_state == _LOADING)
        )
        self.c_dropped = np.zeros(len(copies), dtype=bool)  # dropped or cancelled this run
        # New copies of this run: (segment, volume, reason, move_from).
        self.new: list[tuple[int, int, int, int]] = []
        # Per volume: bytes used (projected), loads in flight per reason.
        # Bytes per volume as projected: a copy some move replaces no longer counts (its
        # volume is about to lose it), else the next run would move more off that volume.
        sized = self.size[np.maximum(self.c_seg, 0)] if self.n else np.zeros(len(copies))
        keep = self.c_projected
        self.used = np.bincount(self.c_vol[keep], sized[keep], minlength=self.nv).astype(np.float64)
        loading = self.c_state == _LOADING
        self.queued = np.zeros((self.nv, 3), dtype=np.int64)
        np.add.at(self.queued, (self.c_vol[loading], copies.reason[loading]), 1)

    def _check(self, copies: SegmentCopies) -> None:
        if len(copies) and (
            int(copies.volume.min()) < 0
            or int(copies.volume.max()) >= self.nv
            or int(copies.segment.max()) >= self.n
        ):
            raise SpecError("copies name volumes or segments outside the snapshot")

    def _moving_away(self) -> BoolArray:
        """LOADED copies some in-flight move will replace (they leave once it loads)."""
        c = self.snap.copies
        moves = (c.state == _LOADING) & (c.move_from >= 0)
        keys = c.segment[moves] * max(self.nv, 1) + c.move_from[moves]
        mine = c.segment * max(self.nv, 1) + c.volume
        return np.asarray((c.state == _LOADED) & np.isin(mine, keys), dtype=bool)

    # -- the run -------------------------------------------------------------------------

    def plan(self) -> CoordinatorPlan:
        timer = _Timer(self.stats.seconds)
        with timer("rules"):
            self._apply_rules()
        with timer("classify"):
            self._count()
            self._classify()
        with timer("load"):
            self._load_unreplicated()
        with timer("decommission"):
            self._move_off_decommissioning()
        with timer("replicate"):
            self._replicate()
        with timer("drop"):
            drops, cancels = self._drop()
        with timer("balance"):
            self._balance()
        with timer("alerts"):
            unavailable_since, alerts = self._alerts()
        new = np.array(self.new, dtype=np.int64).reshape(-1, 4)
        return CoordinatorPlan(
            load_segment=new[:, 0].copy(),
            load_volume=new[:, 1].astype(np.int32),
            load_reason=new[:, 2].astype(np.int8),
            load_move_from=new[:, 3].astype(np.int32),
            drop_copies=drops,
            cancel_copies=cancels,
            mark_unused=np.flatnonzero(self.drop_rule).astype(np.int64),
            unavailable_since_ms=unavailable_since,
            alerts=alerts,
            stats=self.stats,
        )

    def _apply_rules(self) -> None:
        """``required[i, t]``: copies segment ``i`` needs in tier ``t`` (first matching rule of
        its datasource's chain, then of the default chain); broadcast segments need one copy
        per active volume; drop-rule segments are retired."""
        snap, seg = self.snap, self.snap.segments
        self.required = np.zeros((self.n, self.nt), dtype=np.int32)
        self.broadcast = np.zeros(self.n, dtype=bool)
        self.drop_rule = np.zeros(self.n, dtype=bool)
        active_per_tier = np.bincount(self.vol_tier[self.active], minlength=self.nt)
        for code, name in enumerate(seg.datasources):
            rows = np.flatnonzero(self.ds == code)
            chain = [*snap.rules.get(name, ()), *snap.default_rules]
            matched = match_rules(chain, seg.start_ms[rows], seg.end_ms[rows], snap.now_ms)
            self.stats.no_matching_rule += int(np.count_nonzero(matched < 0))
            for r in np.unique(matched[matched >= 0]):
                rule, sel = chain[int(r)], rows[matched == r]
                if isinstance(rule, LoadRule):
                    for tier, count in rule.replicants.items():
                        self.required[sel, self.tier_of[tier]] = count
                elif rule.kind == "broadcast":
                    self.broadcast[sel] = True
                    self.required[sel, :] = active_per_tier
                else:
                    self.drop_rule[sel] = True
        self.stats.drop_rule = int(np.count_nonzero(self.drop_rule))
        # A tier no live volume serves cannot hold anything (Druid alerts on it).
        empty = np.flatnonzero(active_per_tier == 0)
        for t in empty:
            wanted = int(np.count_nonzero(self.required[:, t]))
            if wanted:
                self.stats.tier_without_volumes[self.tiers[t]] = wanted

    def _count(self) -> None:
        """Projected (held or loading, not leaving) and live (loaded) copies per segment and
        tier."""
        served = self.c_seg >= 0
        tiers = self.vol_tier[self.c_vol]
        cell = self.c_seg * self.nt + tiers
        size = self.n * self.nt
        self.projected = (
            np.bincount(cell[self.c_projected], minlength=size)
            .reshape(self.n, self.nt)
            .astype(np.int32)
        )
        live = served & (self.c_state == _LOADED)
        self.live = (
            np.bincount(cell[live], minlength=size).reshape(self.n, self.nt).astype(np.int32)
        )

    def _classify(self) -> None:
        req, proj = self.required, self.projected
        self.stats.segments = self.n
        wanted = _row_sums(req) > 0
        self.stats.unreplicated = int(np.count_nonzero(wanted & (_row_sums(proj) == 0)))
        self.stats.under_broadcast = int(np.count_nonzero(self.broadcast & _row_any(proj < req)))
        for t, name in enumerate(self.tiers):
            r, p = req[:, t], proj[:, t]
            self.stats.tiers[name] = TierStats(
                under_replicated=int(np.count_nonzero(p < r)),
                fully_replicated=int(np.count_nonzero((p == r) & (r > 0))),
                over_replicated=int(np.count_nonzero(p > r)),
                required_copies=int(r.sum()),
                projected_copies=int(p.sum()),
            )

    # -- placing copies ------------------------------------------------------------------

    def _queue_limits(self, reason: LoadReason) -> I64:
        """Per volume, how many loads may be in flight once ``reason``'s loads are queued:
        the queue limit less the unused shares of the other reasons that have work."""
        cfg = self.config
        limit = np.full(self.nv, cfg.max_segments_in_node_loading_queue, dtype=np.int64)
        demand = {
            LoadReason.LOAD: True,
            LoadReason.DECOMMISSION: bool(np.any(~self.active)),
            LoadReason.BALANCE: cfg.smart_segment_loading or cfg.max_segments_to_move > 0,
        }
        for other in LoadReason:
            if other != reason and demand[other]:
                limit -= np.maximum(0, cfg.queue_share(other) - self.queued[:, other])
        return limit

    def _place(
        self,
        tier: int,
        segments: I64,
        copies_needed: I64,
        reason: LoadReason,
        move_from: I32 | None = None,
    ) -> int:
        """Greedily give ``segments`` (in priority order) ``copies_needed`` new copies each on
        volumes of ``tier``, each on one of the best (by normalized cost)
        ``numBestServersChoosingFunction`` volumes with room in their queue, at random;
        returns how many were placed."""
        vols = np.flatnonzero(self.vol_tier == tier)
        if not len(segments) or not len(vols):
            return 0
        limit = self._queue_limits(reason)[vols]
        active = self.active[vols]
        room = int(np.maximum(0, limit - self.queued[vols].sum(axis=1))[active].sum())
        # What cannot fit in the queues this run waits for the next: no costs for it.
        fits = int(np.searchsorted(np.cumsum(copies_needed), room, side="right"))
        if fits < len(segments):
            self._count_not_placed(reason, int(copies_needed[fits:].sum()))
            segments, copies_needed = segments[:fits], copies_needed[:fits]
            if move_from is not None:
                move_from = move_from[:fits]
        if not len(segments):
            return 0
        matrix = _CandidateCosts(self, vols, segments)
        hold = self._holding(segments, vols)
        n_active = int(np.count_nonzero(active))
        placed = 0
        for row in range(len(segments)):
            s = int(segments[row])
            need = int(copies_needed[row])
            for _ in range(need):
                n_best = self.config.best_servers(need, n_active)
                col = self._choose(matrix, row, s, vols, hold[row], active, limit, n_best)
                if col < 0:
                    self._count_not_placed(reason)
                    break
                v = int(vols[col])
                source = -1 if move_from is None else int(move_from[row])
                self._add_copy(matrix, row, s, col, v, reason, source)
                hold[row, col] = True
                placed += 1
        return placed

    def _choose(
        self,
        matrix: _CandidateCosts,
        row: int,
        s: int,
        vols: I64,
        hold: BoolArray,
        active: BoolArray,
        limit: I64,
        n_best: int,
    ) -> int:
        used = self.used[vols] + self.size[s]
        fullness = used / self.capacity[vols]
        # A volume whose queue is full is passed over: the copy takes the next best with room.
        eligible = active & ~hold & (used <= self.capacity[vols])
        eligible &= self.queued[vols].sum(axis=1) < limit
        if not eligible.any():
            return -1
        return self._pick_best(
            np.where(eligible, matrix.cost[row] * fullness, np.inf), fullness, n_best
        )

    def _pick_best(self, cost: F64, fullness: F64, n_best: int) -> int:
        """One of the ``n_best`` cheapest finite ``cost`` columns, at random (seeded): the
        copies of a run spread over near-equal volumes instead of piling on the cheapest
        (Druid's ``numBestServersChoosingFunction``); -1 if none is finite."""
        finite = int(np.count_nonzero(np.isfinite(cost)))
        if not finite:
            return -1
        # Ties (far-apart segments cost ~0 everywhere) go to the emptier volume.
        order = np.lexsort((np.arange(len(cost)), fullness, cost))
        k = min(n_best, finite)
        return int(order[int(self.rng.integers(k)) if k > 1 else 0])

    def _add_copy(
        self,
        matrix: _CandidateCosts,
        row: int,
        s: int,
        col: int,
        v: int,
        reason: LoadReason,
        source: int,
    ) -> None:
        self.new.append((s, v, int(reason), source))
        self.queued[v, reason] += 1
        self.used[v] += self.size[s]
        matrix.add(s, col, +1.0)
        if source >= 0:
            self.used[source] -= self.size[s]
            source_col = matrix.column_of(source)
            if source_col >= 0:
                matrix.add(s, source_col, -1.0)
        else:
            self.projected[s, self.vol_tier[v]] += 1

    def _count_not_placed(self, reason: LoadReason, copies: int = 1) -> None:
        key = reason.name.lower()
        self.stats.not_placed[key] = self.stats.not_placed.get(key, 0) + copies

    def _holding(self, segments: I64, vols: I64) -> BoolArray:
        """``hold[row, col]``: volume ``vols[col]`` has (or gets this run) a copy of
        ``segments[row]`` in any state — it cannot take another."""
        c_seg, c_vol = self.c_seg, self.c_vol
        if self.new:
            new = np.array(self.new, dtype=np.int64)
            c_seg = np.concatenate([c_seg, new[:, 0]])
            c_vol = np.concatenate([c_vol, new[:, 1]])
        # Per distinct segment (two sampled copies of one segment share their row), found by
        # one boolean gather over the copies; a copy of no served segment (-1) reads the
        # extra last entry, which stays False.
        distinct, row = np.unique(segments, return_inverse=True)
        asked = np.zeros(self.n + 1, dtype=bool)
        asked[distinct] = True
        mine = np.flatnonzero(asked[c_seg])
        col_of = np.full(self.nv, -1, dtype=np.int64)
        col_of[vols] = np.arange(len(vols))
        rows = np.searchsorted(distinct, c_seg[mine])
        cols = col_of[c_vol[mine]]
        hit = cols >= 0
        hold = np.zeros((len(distinct), len(vols)), dtype=bool)
        hold[rows[hit], cols[hit]] = True
        return hold[row]

    def _projected_copies(self) -> tuple[I64, I32]:
        """Every copy a volume holds or loads and keeps after this run's decisions so far."""
        keep = self.c_projected & ~self.c_dropped
        segs, vols = [self.c_seg[keep]], [self.c_vol[keep].astype(np.int64)]
        if self.new:
            new = np.array(self.new, dtype=np.int64)
            segs.append(new[:, 0])
            vols.append(new[:, 1])
            # A move's source leaves the projection.
            moved = new[new[:, 3] >= 0]
            if len(moved):
                seg_all, vol_all = np.concatenate(segs), np.concatenate(vols)
                gone = np.isin(seg_all * self.nv + vol_all, moved[:, 0] * self.nv + moved[:, 3])
                return seg_all[~gone], vol_all[~gone].astype(np.int32)
        return np.concatenate(segs), np.concatenate(vols).astype(np.int32)

    # -- the phases ----------------------------------------------------------------------

    def _tier_priority(self) -> I64:
        prio = np.full(self.nt, np.iinfo(np.int64).min, dtype=np.int64)
        for v, volume in enumerate(self.snap.volumes):
            if self.active[v]:
                t = self.vol_tier[v]
                prio[t] = max(prio[t], volume.priority)
        return prio

    def _load_unreplicated(self) -> None:
        """One copy, in the primary tier, of every segment with none anywhere."""
        active_tiers = np.bincount(self.vol_tier[self.active], minlength=self.nt) > 0
        loadable = (self.required > 0) & active_tiers[None, :]
        missing = np.flatnonzero(_row_any(loadable) & (_row_sums(self.projected) == 0))
        if not len(missing):
            return
        # Primary tier: highest volume priority, then most replicas asked, then name order.
        prio = self._tier_priority()
        rank = np.argsort(np.argsort(-prio, kind="stable"), kind="stable")
        score = np.where(
            loadable[missing],
            (self.nt - rank)[None, :] * 1_000_000 + self.required[missing],
            -1,
        )
        primary = np.argmax(score, axis=1)
        for t in range(self.nt):
            segs = _newest_first(missing[primary == t], self.snap.segments.end_ms)
            placed = self._place(t, segs, np.ones(len(segs), dtype=np.int64), LoadReason.LOAD)
            self.stats.loads += placed

    def _move_off_decommissioning(self) -> None:
        """Move each loaded copy on a decommissioning volume to another volume of its tier,
        unless its tier has too many copies anyway (then the drop phase takes it)."""
        if self.active.all():
            return
        on_decom = (
            (self.c_state == _LOADED)
            & ~self.active[self.c_vol]
            & ~self.moving_away
            & (self.c_seg >= 0)
        )
        idx = np.flatnonzero(on_decom)
        if not len(idx):
            return
        segs, tiers = self.c_seg[idx], self.vol_tier[self.c_vol[idx]]
        keep = self.projected[segs, tiers] <= self.required[segs, tiers]
        idx = idx[keep]
        for t in range(self.nt):
            mine = idx[self.vol_tier[self.c_vol[idx]] == t]
            if not len(mine):
                continue
            order = np.argsort(-self.snap.segments.end_ms[self.c_seg[mine]], kind="stable")
            mine = mine[order]
            placed = self._place_moves(t, mine, LoadReason.DECOMMISSION)
            self.stats.decommission_moves += placed

    def _place_moves(self, tier: int, copy_idx: I64, reason: LoadReason) -> int:
        before = len(self.new)
        segs = self.c_seg[copy_idx]
        # A segment with two copies leaving: place them one after the other.
        _, first = np.unique(segs, return_index=True)
        rounds = [copy_idx[np.sort(first)]]
        rest = np.setdiff1d(np.arange(len(copy_idx)), first)
        if len(rest):
            rounds.append(copy_idx[rest])
        for batch in rounds:
            placed_from = len(self.new)
            self._place(
                tier,
                self.c_seg[batch],
                np.ones(len(batch), dtype=np.int64),
                reason,
                move_from=self.c_vol[batch],
            )
            for s, _v, _r, source in self.new[placed_from:]:
                hit = np.flatnonzero(
                    (self.c_seg == s) & (self.c_vol == source) & (self.c_state == _LOADED)
                )
                self.moving_away[hit] = True
                self.c_projected[hit] = False
        return len(self.new) - before

    def _replicate(self) -> None:
        """Bring every tier up to its rule's replica count: segments with the fewest live
        copies (those a lost volume left short) first, newest first among equals."""
        deficit = self.required - self.projected
        # A segment with no copy at all waits for its first copy (primary tier) next run.
        deficit[_row_sums(self.projected) == 0] = 0
        for t in range(self.nt):
            if not np.any(self.vol_tier[self.active] == t):
                continue
            segs = np.flatnonzero(deficit[:, t] > 0)
            if not len(segs):
                continue
            live = self.live[segs].sum(axis=1)
            order = np.lexsort((-self.snap.segments.end_ms[segs], live))
            segs = segs[order]
            needed = deficit[segs, t].astype(np.int64)
            if not self.config.smart_segment_loading:
                # replicationThrottleLimit: replicas queued per tier per run (old behaviour).
                allowed = int(
                    np.searchsorted(
                        np.cumsum(needed), self.config.replication_throttle_limit, side="right"
                    )
                )
                self.stats.throttled_replicas += int(needed[allowed:].sum())
                segs, needed = segs[:allowed], needed[:allowed]
            placed = self._place(t, segs, needed, LoadReason.LOAD)
            self.stats.replicas += placed

    def _drop(self) -> tuple[I64, I64]:
        """Cancel and drop copies beyond the rules: copies of segments no longer served (or
        retired by a drop rule), then, per over-replicated tier, loads not yet done before
        live copies — those on decommissioning volumes first, then the fullest volumes. A
        live copy goes only while its tier keeps its target, and a tier the rule no longer
        names only once every named tier is whole."""
        state, seg = self.c_state, self.c_seg
        gone = (seg < 0) | self.drop_rule[np.maximum(seg, 0)]
        cancel = gone & (state == _LOADING)
        drop = gone & (state == _LOADED)
        served = (seg >= 0) & ~gone
        tiers = self.vol_tier[self.c_vol]
        req = self.required[np.maximum(seg, 0), tiers]
        proj = self.projected[np.maximum(seg, 0), tiers]
        whole = ~_row_any(self.live < self.required)[np.maximum(seg, 0)]
        over = served & (proj > req) & ((req > 0) | whole)
        # Loads (not moves) first, then leaving-able live copies, in preference order.
        loads = over & (state == _LOADING) & (self.snap.copies.move_from < 0)
        lives = over & (state == _LOADED) & ~self.moving_away
        cand = np.flatnonzero(loads | lives)
        if len(cand):
            fullness = self.used[self.c_vol[cand]] / self.capacity[self.c_vol[cand]]
            pref = np.lexsort(
                (
                    -fullness,
                    self.active[self.c_vol[cand]],
                    state[cand] == _LOADED,
                    tiers[cand],
                    seg[cand],
                )
            )
            cand = cand[pref]
            cell = seg[cand] * self.nt + tiers[cand]
            starts = np.r_[0, np.flatnonzero(np.diff(cell)) + 1]
            group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(cand)]))
            rank = np.arange(len(cand)) - starts[group]
            excess = (proj - req)[cand]
            is_load = state[cand] == _LOADING
            n_loads = np.bincount(group, is_load, minlength=len(starts)).astype(np.int64)
            live_spare = (self.live[seg[cand], tiers[cand]] - req[cand]).clip(min=0)
            # Within a group: the first `excess` candidates, live ones limited to the spare.
            take = rank < excess
            live_rank = rank - n_loads[group]
            take &= is_load | (live_rank < live_spare)
            cancel[cand[take & is_load]] = True
            drop[cand[take & ~is_load]] = True
        idx = np.flatnonzero(cancel | drop)
        self.c_dropped[idx] = True
        counted = idx[self.c_projected[idx]]  # projected copies only (served, not leaving)
        np.subtract.at(self.projected, (seg[counted], tiers[counted]), 1)
        np.subtract.at(self.used, self.c_vol[counted], self.size[seg[counted]])
        self.c_projected &= ~self.c_dropped
        loading = np.flatnonzero(cancel)
        np.subtract.at(self.queued, (self.c_vol[loading], self.snap.copies.reason[loading]), 1)
        self.stats.drops = int(np.count_nonzero(drop))
        self.stats.cancels = int(np.count_nonzero(cancel))
        return np.flatnonzero(drop).astype(np.int64), loading.astype(np.int64)

    def _balance(self) -> None:
        """Per tier, move sampled copies to a volume where their normalized cost is lower by
        at least ``balancer_min_cost_reduction``: with smart loading until the stopping rule
        (:class:`_StopRule`) or the copies run out, else up to ``max_segments_to_move``."""
        cfg = self.config
        smart = cfg.smart_segment_loading
        if not smart and cfg.max_segments_to_move <= 0:
            return
        movable = (
            (self.c_state == _LOADED)
            & ~self.moving_away
            & ~self.c_dropped
            & (self.c_seg >= 0)
            & self.active[self.c_vol]
        )
        if self.n:
            movable &= ~self.broadcast[np.maximum(self.c_seg, 0)]
        # The projected copies once for every tier: a tier's moves stay within the tier, so
        # the copies of the tiers balanced later are as they were.
        projected: tuple[I64, I32] | None = None
        movable_idx = np.flatnonzero(movable)
        movable_tier = self.vol_tier[self.c_vol[movable_idx]]
        for t in range(self.nt):
            vols = np.flatnonzero((self.vol_tier == t) & self.active)
            if len(vols) < 2:
                continue
            idx = movable_idx[movable_tier == t]
            if not len(idx):
                continue
            if smart:
                if projected is None:
                    projected = self._projected_copies()
                moves, weighed = self._balance_smart(t, idx, projected)
            else:
                size = min(len(idx), max(_BALANCE_SAMPLE, 10 * cfg.max_segments_to_move))
                sample = self.rng.choice(idx, size=size, replace=False)
                moves, weighed = self._balance_tier(t, sample, None, cfg.max_segments_to_move)
            self.stats.balance_moves += moves
            self.stats.balance_iterations[self.tiers[t]] = weighed

    def _balance_smart(
        self, tier: int, copy_idx: I64, projected: tuple[I64, I32]
    ) -> tuple[int, int]:
        """Weigh the tier's copies in a random order, one batch of costs at a time, until
        the stopping rule fires or every copy was weighed."""
        # Seeded without the run's time: a run that moved nothing leaves the copies as they
        # were, so the next run weighs the same candidates and moves nothing either (a
        # converged cluster stays still instead of finding a stray move now and then).
        order = _RandomOrder(np.random.default_rng([self.config.seed, tier]), copy_idx)
        stop = _StopRule()
        # One index over the tier's copies for every batch: a later batch's costs add the
        # moves of the earlier ones (exact joint costs) instead of re-indexing the tier.
        base = _TierIndex(self, np.flatnonzero(self.vol_tier == tier), projected)
        moves = weighed = 0
        size = _FIRST_BATCH
        while order.remaining and not stop.stopped:
            # A batch's costs are exact from the copies as this run left them so far.
            batch = order.take(size)
            size = min(size * _BATCH_GROWTH, _BALANCE_SAMPLE)
            batch = batch[~self.moving_away[batch]]
            m, w = self._balance_tier(tier, batch, stop, None, base)
            moves, weighed = moves + m, weighed + w
        return moves, weighed

    def _balance_tier(
        self,
        tier: int,
        copy_idx: I64,
        stop: _StopRule | None,
        max_moves: int | None,
        base: _TierIndex | None = None,
    ) -> tuple[int, int]:
        """Weigh ``copy_idx`` in order and move those a volume of the tier takes at a lower
        cost; stop at ``max_moves`` moves or when ``stop`` says so. Returns (moves, copies
        weighed)."""
        if not len(copy_idx):
            return 0, 0
        vols = np.flatnonzero(self.vol_tier == tier)
        segs = self.c_seg[copy_idx]
        matrix = _CandidateCosts(self, vols, segs, base)
        hold = self._holding(segs, vols)
        limit = self._queue_limits(LoadReason.BALANCE)[vols]
        active = self.active[vols]
        n_best = self.config.best_servers(1, int(np.count_nonzero(active)))
        keep = 1.0 - self.config.balancer_min_cost_reduction
        moves = weighed = 0
        for row, c in enumerate(copy_idx):
            if max_moves is not None and moves >= max_moves:
                break
            if stop is not None and stop.stopped:
                break
            weighed += 1
            s, cur = int(self.c_seg[c]), int(self.c_vol[c])
            cur_col = matrix.column_of(cur)
            self_cost = 2.0 * float(joint_cost_units(self.a[s], self.b[s], self.a[s], self.b[s]))
            current = (matrix.cost[row, cur_col] - self_cost) * (
                self.used[cur] / self.capacity[cur]
            )
            used = self.used[vols] + self.size[s]
            eligible = active & ~hold[row] & (used <= self.capacity[vols])
            eligible &= self.queued[vols].sum(axis=1) < limit
            cost = np.where(eligible, matrix.cost[row] * (used / self.capacity[vols]), np.inf)
            # Only volumes that beat the current one by the margin are destinations.
            cost = np.where(cost < current * keep, cost, np.inf)
            col = self._pick_best(cost, used / self.capacity[vols], n_best)
            if stop is not None:
                stop.record(col >= 0)
            if col < 0:
                continue
            self._add_copy(matrix, row, s, col, int(vols[col]), LoadReason.BALANCE, cur)
            if base is not None:
                base.moved(s, int(vols[col]), cur)
            self.moving_away[c] = True
            self.c_projected[c] = False
            hold[segs == s, col] = True  # every sampled copy of it: one copy per volume
            moves += 1
        return moves, weighed

    def _alerts(self) -> tuple[I64, I64]:
        """Segments with no loaded copy: since when (carried over), and those past the
        alerting limit."""
        now = self.snap.now_ms
        wanted = _row_sums(self.required) > 0
        unavailable = wanted & (_row_sums(self.live) == 0)
        self.stats.unavailable = int(np.count_nonzero(unavailable))
        before = self.snap.unavailable_since_ms
        since = np.full(self.n, -1, dtype=np.int64)
        if before is not None and len(before) == self.n:
            since = np.where(before >= 0, before, since)
        since = np.where(unavailable, np.where(since >= 0, since, now), -1)
        limit_ms = self.config.segment_loading_max_seconds_before_alerting * 1000
        alerts = np.flatnonzero(unavailable & (now - since > limit_ms)).astype(np.int64)
        return since, alerts


class _StopRule:
    """Smart loading's balancer stop: once at least ``_STOP_MISSES`` of the last
    ``_STOP_WINDOW`` candidates found no better volume, further candidates are unlikely to
    pay for their cost computation (and the tier is as balanced as moves can make it)."""

    def __init__(self) -> None:
        self.window: deque[bool] = deque(maxlen=_STOP_WINDOW)
        self.misses = 0
        self.stopped = False

    def record(self, moved: bool) -> None:
        if len(self.window) == _STOP_WINDOW and not self.window[0]:
            self.misses -= 1
        self.window.append(moved)
        self.misses += not moved
        self.stopped = self.misses >= _STOP_MISSES


class _RandomOrder:
    """``items`` in a uniformly random order, drawn a batch at a time: a balanced tier stops
    after a few hundred of its 10^6 copies, so the whole permutation is never made. Each
    next item is uniform over those not yet drawn (draws with replacement, repeats
    discarded); once half are drawn, the rest are permuted at once."""

    def __init__(self, rng: np.random.Generator, items: I64) -> None:
        self.rng, self.items = rng, items
        self.drawn = np.zeros(len(items), dtype=bool)
        self.count = 0
        self.rest: I64 | None = None  # the undrawn positions, permuted, once half are drawn

    @property
    def remaining(self) -> int:
        return len(self.items) - self.count

    def take(self, size: int) -> I64:
        """The next ``size`` items (fewer at the end)."""
        n = len(self.items)
        size = min(size, n - self.count)
        if self.rest is None and 2 * (self.count + size) > n:
            self.rest = self.rng.permutation(np.flatnonzero(~self.drawn))
        if self.rest is not None:
            lo = self.count - (n - len(self.rest))
            picked = self.rest[lo : lo + size]
        else:
            picked = self._draw(size)
        self.count += size
        return self.items[picked]

    def _draw(self, size: int) -> I64:
        found: list[I64] = []
        need = size
        while need:
            draw = self.rng.integers(0, len(self.items), size=2 * need + 8)
            _, first = np.unique(draw, return_index=True)
            draw = draw[np.sort(first)]  # repeats within the draw: the first one counts
            draw = draw[~self.drawn[draw]][:need]
            self.drawn[draw] = True
            found.append(draw)
            need -= len(draw)
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


class _CandidateCosts:
    """Costs of placing each candidate segment on each volume of a tier (before
    normalization): built from per-volume indexes over the projected copies, then kept up to
    date as the phase adds and removes copies, touching only the candidates near in time."""

    def __init__(
        self, run: _RunPlanner, vols: I64, segments: I64, base: _TierIndex | None = None
    ) -> None:
        self.run, self.vols = run, vols
        self.col = {int(v): i for i, v in enumerate(vols)}
        self.seg = segments
        a, b, ds = run.a[segments], run.b[segments], run.ds[segments]
        if base is None:
            base = _TierIndex(run, vols)
        self.cost = base.costs(segments)
        # Start-sorted candidates for the window updates.
        self.order = np.argsort(a, kind="stable")
        self.sorted_a = a[self.order]
        self.max_len = float((b - a).max()) if len(a) else 0.0
        self.a, self.b, self.ds = a, b, ds

    def column_of(self, volume: int) -> int:
        return self.col.get(volume, -1)

    def add(self, segment: int, col: int, sign: float) -> None:
        """A copy of ``segment`` joins (+1) or leaves (-1) column ``col``'s volume."""
        run = self.run
        ya, yb = run.a[segment], run.b[segment]
        lo, hi = np.searchsorted(
            self.sorted_a, [ya - _WINDOW_UNITS - self.max_len, yb + _WINDOW_UNITS]
        )
        # A dense phase (a cold start queues 10^4 loads of the newest hours) would touch every
        # candidate on every decision: only the nearest in time are updated within the phase.
        centre = int(np.searchsorted(self.sorted_a, ya))
        lo, hi = max(int(lo), centre - _NEAREST), min(int(hi), centre + _NEAREST)
        rows = self.order[lo:hi]
        if not len(rows):
            return
        joint = joint_cost_to(self.a[rows], self.b[rows], float(ya), float(yb))
        joint *= 1.0 + (self.ds[rows] == run.ds[segment])
        self.cost[rows, col] += sign * joint


def _per_volume_costs(run: _RunPlanner, vols: I64, segments: I64) -> F64:
    """The candidate cost matrix from one :class:`IntervalCostIndex` per volume and one per
    volume and datasource: the reference :func:`_grouped_costs` is tested against, and the
    fallback for intervals too long for :class:`GroupedCostIndex`."""
    a, b, ds = run.a[segments], run.b[segments], run.ds[segments]
    cost = np.zeros((len(segments), len(vols)), dtype=np.float64)
    p_seg, p_vol = run._projected_copies()
    in_tier = np.isin(p_vol, vols)
    p_seg, p_vol = p_seg[in_tier], p_vol[in_tier]
    order = np.lexsort((run.ds[p_seg], p_vol))
    p_seg, p_vol = p_seg[order], p_vol[order]
    p_ds = run.ds[p_seg]
    cand_ds = np.unique(ds)
    by_ds = {int(d): np.flatnonzero(ds == d) for d in cand_ds}
    for col, v in enumerate(vols):
        lo, hi = np.searchsorted(p_vol, [v, v + 1])
        if lo == hi:
            continue
        held = p_seg[lo:hi]
        index = IntervalCostIndex(run.a[held], run.b[held])
        cost[:, col] = index.query(a, b)
        held_ds = p_ds[lo:hi]
        for d, rows in by_ds.items():
            d_lo, d_hi = np.searchsorted(held_ds, [d, d + 1])
            if d_lo < d_hi:
                same = held[d_lo:d_hi]
                cost[rows, col] += IntervalCostIndex(run.a[same], run.b[same]).query(
                    a[rows], b[rows]
                )
    return cost


class _TierIndex:
    """The cost matrix ``costs(segments)[i, col]``: the cost of ``segments[i]`` on volume
    ``vols[col]`` — the joint cost with every projected copy there, doubled within a
    datasource — from one :class:`GroupedCostIndex` over the tier's copies grouped by volume
    and datasource (a volume's cost is the sum over its datasources' groups, plus the
    candidate's own datasource's group once more). Moves made after it was built
    (:meth:`moved`) are added to the costs pair by pair."""

    def __init__(
        self, run: _RunPlanner, vols: I64, projected: tuple[I64, I32] | None = None
    ) -> None:
        self.run, self.vols = run, vols
        seg = run.snap.segments
        p_seg, p_vol = run._projected_copies() if projected is None else projected
        self.col_of = np.full(run.nv, -1, dtype=np.int64)
        self.col_of[vols] = np.arange(len(vols))
        p_col = self.col_of[p_vol]
        keep = p_col >= 0
        p_seg, p_col = p_seg[keep], p_col[keep]
        self.n_ds = max(len(seg.datasources), int(run.ds.max()) + 1 if run.n else 1)
        self.index: GroupedCostIndex | None = GroupedCostIndex(
            p_col * self.n_ds + run.ds[p_seg],
            len(vols) * self.n_ds,
            seg.start_ms[p_seg],
            seg.end_ms[p_seg],
            run.origin_ms,
        )
        if self.index.max_len_units > GroupedCostIndex.MAX_LEN_UNITS:
            self.index = None
        # (segment, volume, +1 joins / -1 leaves) since the index was built.
        self.changes: list[tuple[int, int, float]] = []

    def moved(self, segment: int, to_volume: int, from_volume: int) -> None:
        self.changes += [(segment, to_volume, 1.0), (segment, from_volume, -1.0)]

    def costs(self, segments: I64) -> F64:
        run, vols = self.run, self.vols
        if self.index is None:
            # Intervals too long for the grouped index: per-volume indexes, from scratch.
            return _per_volume_costs(run, vols, segments)
        seg = run.snap.segments
        n_c, n_v, n_ds = len(segments), len(vols), self.n_ds
        groups = np.arange(n_v * n_ds, dtype=np.int64)
        # Asked group by group, each group's candidates in start order: the look-ups then
        # walk the index forwards (2x faster at 10^6 copies than candidate by candidate).
        by_start = np.argsort(seg.start_ms[segments], kind="stable")
        q_seg = np.tile(segments[by_start], len(groups))
        q_group = np.repeat(groups, n_c)
        asked = self.index.query(q_group, seg.start_ms[q_seg], seg.end_ms[q_seg])
        flat = np.empty((n_c, n_v * n_ds), dtype=np.float64)
        flat[by_start] = asked.reshape(n_v * n_ds, n_c).T
        per_group = flat.reshape(n_c, n_v, n_ds)
        cost = per_group.sum(axis=2)
        cost += per_group[np.arange(n_c), :, run.ds[segments]]
        a, b, ds = run.a[segments], run.b[segments], run.ds[segments]
        for s, v, sign in self.changes:
            col = int(self.col_of[v])
            if col >= 0:
                joint = joint_cost_to(a, b, float(run.a[s]), float(run.b[s]))
                cost[:, col] += sign * joint * (1.0 + (ds == run.ds[s]))
        return np.asarray(cost, dtype=np.float64)


# Per-segment matrices have one column per tier: adding their few columns is ~7x faster than
# ``sum(axis=1)``, whose inner loop runs over a row of 2-3 values (10^6 segments: 3 against
# 23 ms, and a run makes a handful of these).
def _row_sums(m: NDArray[Any]) -> I64:
    out = np.zeros(m.shape[0], dtype=np.int64)
    for j in range(m.shape[1]):
        out += m[:, j]
    return out


def _row_any(m: BoolArray) -> BoolArray:
    out = np.zeros(m.shape[0], dtype=np.bool_)
    for j in range(m.shape[1]):
        out |= m[:, j]
    return out


def _newest_first(segments: I64, end_ms: I64) -> I64:
    return segments[np.argsort(-end_ms[segments], kind="stable")]


def _tier_names(snapshot: ClusterSnapshot) -> list[str]:
    names = {v.tier for v in snapshot.volumes}
    for chain in [*snapshot.rules.values(), snapshot.default_rules]:
        for rule in chain:
            if isinstance(rule, LoadRule):
                names.update(rule.replicants)
    return sorted(names)


class _Timer:
    def __init__(self, into: dict[str, float]) -> None:
        self.into = into

    def __call__(self, name: str) -> _Timer:
        self.name = name
        return self

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        self.into[self.name] = time.perf_counter() - self.started
