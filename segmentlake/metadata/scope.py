"""What a metadata transaction read and wrote, for conflict checks finer than a datasource.

A commit records its *write scope* in the Delta commit's ``commitInfo``; a transaction that
lost the race for the next log version compares its *read scope* with the write scopes of the
commits that won: it must decide again only if one of them wrote something it read. Two
commits on different time chunks of one datasource therefore never conflict, and commits on
different datasources never do.

A scope is a set of half-open time ranges (epoch ms; a segment, lock or pending allocation row
is in the scope of its interval) plus a set of keys (rows without an interval: a task group's
lease, a task's ledger row, a config row), or *everything* in the datasource.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["EVERYTHING", "NOTHING", "Scope"]


def _merged(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, disjoint, non-adjacent ranges covering the same instants (empty ones dropped)."""
    items = ranges if isinstance(ranges, list | tuple) else list(ranges)
    if len(items) > _MANY:
        return _merged_many(items)
    out: list[list[int]] = []
    for start, end in sorted(r for r in items if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return tuple((s, e) for s, e in out)


_FAR = 2**63  # beyond any end: (start, _FAR) sorts after every range starting at start
# From this many ranges on, merging runs in numpy (the scope of a 10^5-segment publish).
_MANY = 512


def _merged_many(items: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """:func:`_merged` of many ranges: sort, then a running maximum of the ends starts a new
    range wherever a start lies beyond every earlier end."""
    spans = np.array(items, dtype=np.int64).reshape(-1, 2)
    spans = spans[spans[:, 0] < spans[:, 1]]
    if not len(spans):
        return ()
    spans = spans[np.lexsort((spans[:, 1], spans[:, 0]))]
    starts = spans[:, 0]
    reach = np.maximum.accumulate(spans[:, 1])
    first = np.ones(len(spans), dtype=bool)
    first[1:] = starts[1:] > reach[:-1]
    last = np.append(np.flatnonzero(first)[1:] - 1, len(spans) - 1)
    return tuple(zip(starts[first].tolist(), reach[last].tolist(), strict=True))


@dataclass(frozen=True, slots=True)
class Scope:
    """Time ranges and keys of one datasource (``everything``: all of it)."""

    ranges: tuple[tuple[int, int], ...] = ()
    keys: frozenset[str] = frozenset()
    everything: bool = False

    @classmethod
    def of(
        cls,
        ranges: Iterable[tuple[int, int]] = (),
        keys: Iterable[str] = (),
    ) -> Scope:
        return cls(_merged(ranges), frozenset(keys))

    def __or__(self, other: Scope) -> Scope:
        if self.everything or other.everything:
            return EVERYTHING
        return Scope(_merged(self.ranges + other.ranges), self.keys | other.keys)

    def __bool__(self) -> bool:
        return self.everything or bool(self.ranges) or bool(self.keys)

    def overlaps(self, other: Scope) -> bool:
        """Whether a write of one could change what the other read."""
        if not self or not other:
            return False
        if self.everything or other.everything:
            return True
        if self.keys & other.keys:
            return True
        return _ranges_overlap(self.ranges, other.ranges)

    def overlaps_range(self, start: int, end: int) -> bool:
        """Whether the instants ``[start, end)`` meet the scope's time ranges: one bisect,
        no scope made (a visibility change asks this of every used segment it read)."""
        if self.everything:
            return start < end
        i = bisect.bisect_left(self.ranges, (end,))  # the ranges from here start at or after end
        return start < end and i > 0 and self.ranges[i - 1][1] > start

    def covers_range(self, start: int, end: int) -> bool:
        """Whether every instant of ``[start, end)`` is in the scope's time ranges."""
        if self.everything or start >= end:
            return True
        i = bisect.bisect_right(self.ranges, (start, _FAR))  # ranges starting at or before
        return i > 0 and self.ranges[i - 1][0] <= start and self.ranges[i - 1][1] >= end

    def to_json(self) -> dict[str, Any]:
        if self.everything:
            return {"all": True}
        return {"time": [list(r) for r in self.ranges], "keys": sorted(self.keys)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> Scope:
        """A recorded scope; a commit that recorded none (another writer) is everything."""
        if not obj or obj.get("all"):
            return EVERYTHING
        return cls.of(((int(s), int(e)) for s, e in obj.get("time", ())), obj.get("keys", ()))


def _ranges_overlap(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    """Two sorted disjoint range lists share an instant (a binary search per range of the
    shorter list)."""
    if len(a) > len(b):
        a, b = b, a
    ends = [e for _, e in b]
    for start, end in a:
        i = bisect.bisect_right(ends, start)  # the first range of b ending after start
        if i < len(b) and b[i][0] < end:
            return True
    return False


EVERYTHING = Scope(everything=True)
NOTHING = Scope()
