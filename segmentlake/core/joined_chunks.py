"""The existing chunks an append joins whole: chunks coarser than its buckets (a compaction
to DAY under HOUR appends), each taking the rows of every bucket it holds as one segment.

Held as two sorted int64 arrays rather than an :class:`~segmentlake.core.interval.Interval`
each: a datasource compacted over 300 years of days has 10^5 of them, and making, checking
and mapping that many intervals cost an append 0.6-0.9 s whenever they changed or a new
driver first read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from segmentlake.core.granularity import Granularity, bucket_granularities
from segmentlake.core.interval import Interval

__all__ = ["JoinedChunks"]


@dataclass(frozen=True, eq=False)
class JoinedChunks:
    """Disjoint chunks (``starts``, ``ends``: epoch ms, sorted by start), each one bucket of
    some granularity; raises ``ValueError`` otherwise. ``JoinedChunks.of(intervals)`` builds
    one from intervals, ``JoinedChunks.empty()`` is none."""

    starts: np.ndarray
    ends: np.ndarray
    _groups: Mapping[Granularity, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts = np.asarray(self.starts, dtype=np.int64)
        ends = np.asarray(self.ends, dtype=np.int64)
        if starts.ndim != 1 or starts.shape != ends.shape:
            raise ValueError(
                f"starts and ends must be 1-d of one length: {starts.shape}, {ends.shape}"
            )
        if not (np.all(starts < ends) and np.all(ends[:-1] <= starts[1:])):
            raise ValueError("joined chunks must be non-empty, sorted by start and disjoint")
        groups = bucket_granularities(starts, ends)
        covered = np.zeros(len(starts), dtype=bool)
        for mask in groups.values():
            covered |= mask
        if not covered.all():
            first = int(np.flatnonzero(~covered)[0])
            odd = Interval.of_millis(int(starts[first]), int(ends[first]))
            raise ValueError(f"joined chunk {odd} is no granularity's bucket")
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "ends", ends)
        object.__setattr__(self, "_groups", groups)

    @classmethod
    def of(cls, intervals: Iterable[Interval]) -> JoinedChunks:
        ordered = sorted(intervals, key=lambda i: (i.start_millis, i.end_millis))
        return cls(
            np.array([i.start_millis for i in ordered], dtype=np.int64),
            np.array([i.end_millis for i in ordered], dtype=np.int64),
        )

    @classmethod
    def empty(cls) -> JoinedChunks:
        return cls(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.starts)

    def __bool__(self) -> bool:
        return len(self.starts) > 0

    def intervals(self) -> tuple[Interval, ...]:
        """Every chunk as an interval, in order (one object each: for small sets)."""
        pairs = zip(self.starts.tolist(), self.ends.tolist(), strict=True)
        return tuple(Interval.of_millis(s, e) for s, e in pairs)

    def starting_at(self, start_ms: int) -> Interval | None:
        """The chunk that starts at ``start_ms``, if one does."""
        i = int(np.searchsorted(self.starts, start_ms))
        if i < len(self.starts) and int(self.starts[i]) == start_ms:
            return Interval.of_millis(start_ms, int(self.ends[i]))
        return None

    def by_granularity(self) -> dict[Granularity, tuple[np.ndarray, np.ndarray]]:
        """The chunks of each granularity, as (starts, ends) in order."""
        return {g: (self.starts[m], self.ends[m]) for g, m in self._groups.items()}
