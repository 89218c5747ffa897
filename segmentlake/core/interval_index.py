"""Which of many intervals overlap a query, without scanning them all.

Metadata decisions over 10^4 chunks at once (an append allocating an id per chunk, a publish
checking a lock per segment) would be quadratic if every question scanned every row. Segment
and lock intervals come in few distinct lengths (the segment granularities), so the index
keeps, per length, the starts sorted: an interval of length ``L`` overlaps ``[a, b)`` iff its
start lies in ``(a - L, b)``, one bisection per length.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import count
from typing import Generic, TypeVar

from sortedcontainers import SortedList

__all__ = ["IntervalIndex"]

T = TypeVar("T")
_AFTER = float("inf")
_BEFORE = float("-inf")


class IntervalIndex(Generic[T]):
    """Values keyed by half-open ``[start, end)`` intervals (epoch ms). Adding and asking
    interleave (an allocation grants a lock, then asks about the next chunk), so each length
    keeps its starts in a sorted list with logarithmic inserts, never a re-sort."""

    __slots__ = ("_by_length", "_next", "_values")

    def __init__(self, items: Iterable[tuple[int, int, T]] = ()) -> None:
        self._by_length: dict[int, SortedList] = {}
        self._values: dict[int, T] = {}
        self._next = count()
        for start, end, value in items:
            self.add(start, end, value)

    def add(self, start: int, end: int, value: T) -> None:
        number = next(self._next)
        self._values[number] = value
        entries = self._by_length.get(end - start)
        if entries is None:
            entries = self._by_length[end - start] = SortedList()
        entries.add((start, number))

    def overlapping(self, start: int, end: int) -> list[T]:
        """The values whose interval shares an instant with ``[start, end)``."""
        found: list[T] = []
        for length, entries in self._by_length.items():
            lo = entries.bisect_right((start - length, _AFTER))
            hi = entries.bisect_left((end, _BEFORE))
            if lo < hi:
                found.extend(self._values[number] for _, number in entries.islice(lo, hi))
        return found
