"""Druid's ``CostBalancerStrategy`` joint cost of two segments, naive and fast.

The joint cost of intervals X and Y is ``∫_X ∫_Y e^(-λ|x-y|) dy dx`` with λ = ln 2 / 24 h
(a 24-hour half-life), doubled when both belong to one datasource: segments close in time are
queried together, so a volume holding many of them is a hot spot. A volume's cost for a
segment is the sum over the copies it holds. Druid computes it one pair at a time, which is
the bottleneck of big clusters (28.7 ms per segment to cost 100k segments, apache/druid#12419).

In units of 1/λ (``to_units``), with ``G(u) = e^(-|u|) + |u|`` (a double antiderivative of
``e^(-|x-y|)``): ``J([a,b), [c,d)) = G(b-c) + G(a-d) - G(b-d) - G(a-c)``. For disjoint
intervals it factors — Y before X (d ≤ a): ``(1 - e^(a-b)) (e^(d-a) - e^(c-a))``; Y after X
(c ≥ b): ``(1 - e^(a-b)) (e^(b-c) - e^(b-d))`` — so the sum over every copy before (after)
a segment is a prefix (suffix) sum over copies sorted by end (start): the
:class:`IntervalCostIndex`. Only overlapping pairs are summed pairwise.

:func:`naive_joint_cost` is Druid's case-split formula, one call per pair: the test oracle
and the benchmark baseline.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "HALF_LIFE_HOURS",
    "LAMBDA_PER_HOUR",
    "MILLIS_PER_UNIT",
    "UNIT_COST_TO_HOURS2",
    "GroupedCostIndex",
    "IntervalCostIndex",
    "joint_cost_to",
    "joint_cost_units",
    "naive_cost",
    "naive_joint_cost",
    "pairwise_cost_units",
    "to_units",
]

F64 = NDArray[np.float64]

HALF_LIFE_HOURS = 24.0
LAMBDA_PER_HOUR = math.log(2) / HALF_LIFE_HOURS
MILLIS_PER_UNIT = 3_600_000 / LAMBDA_PER_HOUR
UNIT_COST_TO_HOURS2 = 1.0 / LAMBDA_PER_HOUR**2
# Prefix sums are kept per block of this many units with exponents <= 0; a block two or more
# blocks away contributes less than e^-256 of a neighbour's cost and is left out.
_BLOCK_UNITS = 256.0
# Runs at least this long get a cumsum call each in :func:`_segmented_cumsum`.
_LONG_RUN = 256


def to_units(millis: ArrayLike, origin_ms: int) -> F64:
    """Epoch milliseconds as 1/λ units since ``origin_ms`` (moderate values, no overflow)."""
    return (np.asarray(millis, dtype=np.float64) - float(origin_ms)) / MILLIS_PER_UNIT


# -- the naive oracle --------------------------------------------------------------------------


def _interval_cost(x1: float, y0: float, y1: float) -> float:
    """``∫_0^x1 ∫_y0^y1 e^(-|x-y|) dy dx`` by Druid's case split (λ = 1)."""
    if x1 == 0 or y1 == y0:
        return 0.0
    if y0 < 0:  # symmetric: make X the one that starts first
        x1, y0, y1 = y1 - y0, -y0, x1 - y0
    if y0 < x1:
        # X = A + B (+ C) where A = [0, y0) precedes Y, B = [y0, min(x1, y1)) is shared, and
        # C = [min, max) is the rest of whichever is longer.
        beta = min(x1, y1) - y0
        gamma = max(x1, y1) - y0
        return (
            _interval_cost(y0, y0, y1)  # A with Y
            + _interval_cost(beta, beta, gamma)  # B with C
            + 2 * (beta + math.exp(-beta) - 1)  # B with B
        )
    return (math.exp(-y1) - math.exp(-y0)) - (math.exp(x1 - y1) - math.exp(x1 - y0))


def naive_joint_cost(
    x_start_ms: int, x_end_ms: int, y_start_ms: int, y_end_ms: int, *, same_datasource: bool
) -> float:
    """Druid's joint cost of two segments' intervals, in hours², one Python call per pair."""
    x0 = x_start_ms / MILLIS_PER_UNIT
    x1 = (x_end_ms - x_start_ms) / MILLIS_PER_UNIT
    y0 = y_start_ms / MILLIS_PER_UNIT - x0
    y1 = y_end_ms / MILLIS_PER_UNIT - x0
    cost = _interval_cost(x1, y0, y1) * UNIT_COST_TO_HOURS2
    return 2.0 * cost if same_datasource else cost


def naive_cost(x: tuple[int, int, str], others: Iterable[tuple[int, int, str]]) -> float:
    """The cost of segment ``x`` = (start_ms, end_ms, datasource) on a volume holding
    ``others``: the sum of the pairwise joint costs (the baseline the index replaces)."""
    return sum(
        naive_joint_cost(x[0], x[1], y[0], y[1], same_datasource=x[2] == y[2]) for y in others
    )


# -- vectorized ----------------------------------------------------------------------------------


def _g(u: F64) -> F64:
    au = np.abs(u)
    # expm1 keeps the small-|u| terms exact; the constant 1 of e^-|u| cancels in J.
    return np.asarray(np.expm1(-au) + au, dtype=np.float64)


def joint_cost_units(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike) -> F64:
    """Exact ``J([a,b), [c,d))`` in 1/λ units (no 1/λ², no datasource factor), broadcast.
    Disjoint pairs use the factored form: the G form would cancel large terms."""
    a, b, c, d = (np.asarray(v, dtype=np.float64) for v in (a, b, c, d))
    a, b, c, d = np.broadcast_arrays(a, b, c, d)
    width = -np.expm1(a - b)  # 1 - e^(a-b), exact for short X
    before = d <= a
    after = c >= b
    with np.errstate(over="ignore", invalid="ignore"):
        j_before = width * (np.exp(np.minimum(d - a, 0.0)) - np.exp(np.minimum(c - a, 0.0)))
        j_after = width * (np.exp(np.minimum(b - c, 0.0)) - np.exp(np.minimum(b - d, 0.0)))
        j_overlap = _g(b - c) + _g(a - d) - _g(b - d) - _g(a - c)
    out = np.where(before, j_before, np.where(after, j_after, j_overlap))
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def joint_cost_to(a: F64, b: F64, c: float, d: float) -> F64:
    """:func:`joint_cost_units` of many intervals with one (``[c, d)``), equal to it element
    for element but computing each case only where it applies: the incremental updates of
    the coordinator call it once per decision, so its cost is the balancer's."""
    out = np.empty(len(a), dtype=np.float64)
    width = -np.expm1(a - b)
    before = d <= a
    after = c >= b
    mid = ~(before | after)
    ab = a[before]
    out[before] = width[before] * (
        np.exp(np.minimum(d - ab, 0.0)) - np.exp(np.minimum(c - ab, 0.0))
    )
    ba = b[after]
    out[after] = width[after] * (np.exp(np.minimum(ba - c, 0.0)) - np.exp(np.minimum(ba - d, 0.0)))
    am, bm = a[mid], b[mid]
    out[mid] = _g(bm - c) + _g(am - d) - _g(bm - d) - _g(am - c)
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def pairwise_cost_units(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike) -> F64:
    """For each X_i = [a_i, b_i): ``Σ_j J(X_i, [c_j, d_j))`` over a small set, densely."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    c, d = np.asarray(c, dtype=np.float64), np.asarray(d, dtype=np.float64)
    if not len(c) or not len(a):
        return np.zeros(len(a), dtype=np.float64)
    cost = joint_cost_units(a[:, None], b[:, None], c[None, :], d[None, :])
    return np.asarray(cost.sum(axis=1), dtype=np.float64)


class IntervalCostIndex:
    """A static set S of intervals (1/λ units) answering ``query(a, b)[i] = Σ_{Y∈S}
    J([a_i, b_i), Y)`` for many intervals at once: prefix sums for the copies wholly before
    or after each query, pairwise sums for the few that overlap it (see the module)."""

    def __init__(self, starts: ArrayLike, ends: ArrayLike) -> None:
        c = np.asarray(starts, dtype=np.float64)
        d = np.asarray(ends, dtype=np.float64)
        if c.shape != d.shape or c.ndim != 1:
            raise ValueError("starts and ends must be 1-D arrays of one length")
        # Sorted by end, for "before": value e^(d-R) - e^(c-R), R = the end of d's block.
        by_end = np.argsort(d, kind="stable")
        self._end_d, self._end_c = d[by_end], c[by_end]
        block = np.floor(self._end_d / _BLOCK_UNITS)
        ref = (block + 1) * _BLOCK_UNITS
        values = np.exp(self._end_d - ref) - np.exp(self._end_c - ref)
        self._end_block, self._end_prefix = block, _block_prefix(block, values)
        # Sorted by start, for "after": value e^(R-c) - e^(R-d), R = the start of c's block.
        by_start = np.argsort(c, kind="stable")
        self._start_c, self._start_d = c[by_start], d[by_start]
        block = np.floor(self._start_c / _BLOCK_UNITS)
        ref = block * _BLOCK_UNITS
        values = np.exp(ref - self._start_c) - np.exp(ref - self._start_d)
        self._start_block, self._start_suffix = block, _block_suffix(block, values)
        self._max_len = float((d - c).max()) if len(c) else 0.0

    def __len__(self) -> int:
        return len(self._end_d)

    def query(self, a: ArrayLike, b: ArrayLike) -> F64:
        qa, qb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if not len(self) or not len(qa):
            return np.zeros(len(qa), dtype=np.float64)
        width = -np.expm1(qa - qb)
        return np.asarray(
            width * (self._before(qa) + self._after(qb)) + self._overlapping(qa, qb),
            dtype=np.float64,
        )

    def _before(self, a: F64) -> F64:
        """``Σ_{d ≤ a} (e^(d-a) - e^(c-a))`` from the query's block and the one before."""
        n = np.searchsorted(self._end_d, a, side="right")  # copies with d <= a
        block = np.floor(a / _BLOCK_UNITS)
        total = np.zeros(len(a), dtype=np.float64)
        for offset in (0.0, 1.0):
            b_id = block - offset
            lo = np.searchsorted(self._end_block, b_id, side="left")
            hi = np.minimum(np.searchsorted(self._end_block, b_id, side="right"), n)
            has = hi > lo
            # The running sum restarts at the block: its value at hi - 1 is the block's part.
            sums = np.where(has, self._end_prefix[np.maximum(hi - 1, 0)], 0.0)
            scale = np.exp(np.minimum((b_id + 1) * _BLOCK_UNITS - a, 700.0))
            total += np.where(has, sums * scale, 0.0)
        return total

    def _after(self, b: F64) -> F64:
        """``Σ_{c ≥ b} (e^(b-c) - e^(b-d))`` from the query's block and the one after."""
        first = np.searchsorted(self._start_c, b, side="left")  # copies with c >= b
        block = np.floor(b / _BLOCK_UNITS)
        total = np.zeros(len(b), dtype=np.float64)
        for offset in (0.0, 1.0):
            b_id = block + offset
            lo = np.maximum(np.searchsorted(self._start_block, b_id, side="left"), first)
            hi = np.searchsorted(self._start_block, b_id, side="right")
            has = hi > lo
            sums = np.where(has, self._start_suffix[np.minimum(lo, len(self) - 1)], 0.0)
            scale = np.exp(np.minimum(b - b_id * _BLOCK_UNITS, 700.0))
            total += np.where(has, sums * scale, 0.0)
        return total

    def _overlapping(self, a: F64, b: F64) -> F64:
        """Exact pairwise sums over the copies overlapping each query (d > a and c < b)."""
        lo = np.searchsorted(self._start_c, a - self._max_len, side="right")
        hi = np.searchsorted(self._start_c, b, side="left")
        counts = np.maximum(hi - lo, 0)
        total = int(counts.sum())
        out = np.zeros(len(a), dtype=np.float64)
        if not total:
            return out
        query = np.repeat(np.arange(len(a)), counts)
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        other = np.repeat(lo, counts) + offsets
        c, d = self._start_c[other], self._start_d[other]
        qa, qb = a[query], b[query]
        overlap = (d > qa) & (c < qb)
        cost = joint_cost_units(qa[overlap], qb[overlap], c[overlap], d[overlap])
        return np.bincount(query[overlap], cost, minlength=len(a)).astype(np.float64)


class GroupedCostIndex:
    """Many :class:`IntervalCostIndex` es at once — one per group of a set of intervals (the
    coordinator's groups: volume and datasource) — from one sort by (group, start):
    ``query(g, a, b)[i] = Σ_{Y in group g[i]} J([a_i, b_i), Y)``.

    Intervals come as epoch milliseconds (exact integer ordering), costs in 1/λ units since
    ``origin_ms`` (:func:`to_units`). With ``L`` the longest interval, a copy starting at or
    before ``a - L`` ends at or before ``a``: copies are wholly before (start ≤ a - L: prefix
    sums over the start order), wholly after (start ≥ b: suffix sums), or in the short window
    between, summed pairwise — so no second sort by end. Prefix sums restart per (group,
    block of starts), as in :class:`IntervalCostIndex`; blocks two or more before the query's
    are left out, which needs ``L`` well under a block (:attr:`MAX_LEN_UNITS`)."""

    MAX_LEN_UNITS = 64.0

    def __init__(
        self,
        groups: ArrayLike,
        n_groups: int,
        start_ms: ArrayLike,
        end_ms: ArrayLike,
        origin_ms: int,
    ) -> None:
        g = np.asarray(groups, dtype=np.int64)
        s_ms = np.asarray(start_ms, dtype=np.int64)
        e_ms = np.asarray(end_ms, dtype=np.int64)
        if not (g.shape == s_ms.shape == e_ms.shape) or g.ndim != 1:
            raise ValueError("groups, starts and ends must be 1-D arrays of one length")
        self.origin_ms, self.n_groups = int(origin_ms), int(n_groups)
        self.t0 = int(s_ms.min()) if len(s_ms) else 0
        self.span = (int(s_ms.max()) - self.t0 + 2) if len(s_ms) else 2
        self.max_len_ms = int((e_ms - s_ms).max()) if len(s_ms) else 0
        # Sorted by (group, start) in two stable passes: by start (copies usually come in
        # about segment order, which timsort takes in near-linear time), then by group (a
        # radix sort for small integers) — the order of one stable sort by (group, start).
        order = np.argsort(s_ms, kind="stable")
        by_group = g[order]
        if self.n_groups <= np.iinfo(np.int16).max:
            by_group = by_group.astype(np.int16)
        order = order[np.argsort(by_group, kind="stable")]
        # Each group's copies are contiguous now: their groups come from the counts, not from
        # another gather (two random gathers in all, the starts and the ends).
        sizes = np.bincount(g, minlength=self.n_groups)
        self.group_lo = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        g_sorted = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        s_sorted, e_sorted = s_ms[order], e_ms[order]
        self.key = g_sorted * self.span + (s_sorted - self.t0)
        c = to_units(s_sorted, self.origin_ms)
        d = to_units(e_sorted, self.origin_ms)
        self.c, self.d = c, d
        blk = np.floor(c / _BLOCK_UNITS)
        self.b0 = float(blk.min()) if len(c) else 0.0
        self.nb = int(blk.max() - self.b0) + 1 if len(c) else 1
        self.run = g_sorted * self.nb + (blk - self.b0).astype(np.int64)
        # Each run's first position, for the block look-ups (a short array to search).
        if len(c):
            firsts = np.flatnonzero(np.r_[True, self.run[1:] != self.run[:-1]])
        else:
            firsts = np.zeros(0, dtype=np.int64)
        self.run_ids = self.run[firsts]
        self.run_bounds = np.r_[firsts, len(c)]
        # Two exponentials per copy, from its block's start (u = e^(c - blk), v = e^(d - blk),
        # both within e^(_BLOCK_UNITS + MAX_LEN_UNITS)): the prefix terms are
        # e^(d - ref) - e^(c - ref) with ref the block's end, the suffix terms
        # e^(ref - c) - e^(ref - d) with ref its start.
        ref = blk * _BLOCK_UNITS
        with np.errstate(over="ignore"):  # only past MAX_LEN_UNITS, where no caller uses it
            u, v = np.exp(c - ref), np.exp(d - ref)
        self.prefix = _segmented_cumsum(self.run, (v - u) * math.exp(-_BLOCK_UNITS))
        values = 1.0 / u - 1.0 / v
        self.suffix = _segmented_cumsum(self.run[::-1], values[::-1])[::-1]

    def __len__(self) -> int:
        return len(self.key)

    @property
    def max_len_units(self) -> float:
        return self.max_len_ms / MILLIS_PER_UNIT

    def query(self, groups: ArrayLike, a_ms: ArrayLike, b_ms: ArrayLike) -> F64:
        qg = np.asarray(groups, dtype=np.int64)
        qa_ms = np.asarray(a_ms, dtype=np.int64)
        qb_ms = np.asarray(b_ms, dtype=np.int64)
        if not len(self) or not len(qg):
            return np.zeros(len(qg), dtype=np.float64)
        a = to_units(qa_ms, self.origin_ms)
        b = to_units(qb_ms, self.origin_ms)
        glo, ghi = self.group_lo[qg], self.group_lo[qg + 1]
        base = qg * self.span
        # Copies starting at or before a - L (wholly before), and at or after b (after).
        rel = np.minimum(np.maximum(qa_ms - self.max_len_ms - self.t0, -1), self.span - 1)
        n = np.minimum(np.maximum(np.searchsorted(self.key, base + rel, side="right"), glo), ghi)
        rel = np.minimum(np.maximum(qb_ms - self.t0, 0), self.span - 1)
        first = np.minimum(np.maximum(np.searchsorted(self.key, base + rel, side="left"), glo), ghi)
        before = np.zeros(len(qg), dtype=np.float64)
        block = np.floor(a / _BLOCK_UNITS)
        for offset in (0.0, 1.0):
            b_id = block - offset
            lo, hi, valid = self._run_bounds(qg, b_id)
            hi = np.minimum(hi, n)
            has = valid & (hi > lo)
            sums = np.where(has, self.prefix[np.maximum(hi - 1, 0)], 0.0)
            scale = np.exp(np.minimum((b_id + 1) * _BLOCK_UNITS - a, 700.0))
            before += np.where(has, sums * scale, 0.0)
        after = np.zeros(len(qg), dtype=np.float64)
        block = np.floor(b / _BLOCK_UNITS)
        for offset in (0.0, 1.0):
            b_id = block + offset
            lo, hi, valid = self._run_bounds(qg, b_id)
            lo = np.maximum(lo, first)
            has = valid & (hi > lo)
            sums = np.where(has, self.suffix[np.minimum(lo, len(self) - 1)], 0.0)
            scale = np.exp(np.minimum(b - b_id * _BLOCK_UNITS, 700.0))
            after += np.where(has, sums * scale, 0.0)
        width = -np.expm1(a - b)
        return np.asarray(width * (before + after) + self._window(a, b, n, first), dtype=np.float64)

    def _run_bounds(self, qg: NDArray[np.int64], b_id: F64) -> tuple[Any, Any, Any]:
        rel = b_id - self.b0
        valid = (rel >= 0) & (rel < self.nb)
        run = qg * self.nb + np.minimum(np.maximum(rel, 0), self.nb - 1).astype(np.int64)
        k = np.searchsorted(self.run_ids, run, side="left")
        found = k < len(self.run_ids)
        found[found] = self.run_ids[k[found]] == run[found]
        valid &= found
        lo = self.run_bounds[k]
        hi = self.run_bounds[np.minimum(k + 1, len(self.run_ids))]
        return lo, hi, valid

    def _window(self, a: F64, b: F64, lo: Any, hi: Any) -> F64:
        """Exact pairwise sums over the copies starting in (a - L, b) of each query."""
        counts = np.maximum(hi - lo, 0)
        total = int(counts.sum())
        if not total:
            return np.zeros(len(a), dtype=np.float64)
        query = np.repeat(np.arange(len(a)), counts)
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        other = np.repeat(lo, counts) + offsets
        cost = joint_cost_units(a[query], b[query], self.c[other], self.d[other])
        return np.bincount(query, cost, minlength=len(a)).astype(np.float64)


def _segmented_cumsum(run: NDArray[np.int64], values: F64) -> F64:
    """Running sums of ``values`` restarting where ``run`` changes (equal runs adjacent),
    each run summed in order as ``np.cumsum`` would: runs of similar length are padded into
    one 2-D array per power of two and summed along rows."""
    n = len(values)
    out = np.empty(n, dtype=np.float64)
    if not n:
        return out
    starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    lens = np.diff(np.r_[starts, n])
    # Long runs one at a time (few), short ones padded together (many).
    long = lens >= _LONG_RUN
    for lo, length in zip(starts[long].tolist(), lens[long].tolist(), strict=True):
        np.cumsum(values[lo : lo + length], out=out[lo : lo + length])
    starts, lens = starts[~long], lens[~long]
    width_log = np.ceil(np.log2(lens)).astype(np.int64)
    for k in np.unique(width_log).tolist():
        sel = width_log == k
        cols = np.arange(1 << k)
        idx = starts[sel, None] + cols[None, :]
        mask = cols[None, :] < lens[sel, None]
        padded = np.where(mask, values[np.minimum(idx, n - 1)], 0.0)
        out[idx[mask]] = np.cumsum(padded, axis=1)[mask]
    return out


def _block_prefix(block: F64, values: F64) -> F64:
    """Running sums of ``values`` restarting at each block (blocks sorted; a block holds
    values of very different scales, so each gets its own running sum)."""
    out = np.empty_like(values)
    starts: list[int] = (
        np.flatnonzero(np.r_[True, block[1:] != block[:-1]]).tolist() if len(values) else []
    )
    bounds = [*starts, len(values)]
    for lo, hi in itertools.pairwise(bounds):
        out[lo:hi] = np.cumsum(values[lo:hi])
    return out


def _block_suffix(block: F64, values: F64) -> F64:
    """Sums of ``values`` from each position to the end of its block."""
    rev = _block_prefix(block[::-1], values[::-1])
    return np.asarray(rev[::-1], dtype=np.float64)
