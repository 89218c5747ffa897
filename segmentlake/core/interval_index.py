"""Which of many intervals overlap a query, without scanning them all.

Metadata decisions over 10^4 chunks at once (an append allocating an id per chunk, a publish
checking a lock per segment) would be quadratic if every question scanned every row. Segment
and lock intervals come in few distinct lengths (the segment granularities), so the index
keeps, per length, the starts sorted: an interval of length ``L`` overlaps ``[a, b)`` iff its
start lies in ``(a - L, b)``, one bisection per length.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Generic, TypeVar

__all__ = ["IntervalIndex"]

T = TypeVar("T")


class IntervalIndex(Generic[T]):
    """Values keyed by half-open ``[start, end)`` intervals (epoch ms)."""

    __slots__ = ("_by_length", "_sorted")

    def __init__(self, items: Iterable[tuple[int, int, T]] = ()) -> None:
        self._by_length: dict[int, list[tuple[int, int, T]]] = {}
        self._sorted = True
        for start, end, value in items:
            self.add(start, end, value)

    def add(self, start: int, end: int, value: T) -> None:
        self._by_length.setdefault(end - start, []).append((start, id(value), value))
        self._sorted = False

    def overlapping(self, start: int, end: int) -> list[T]:
        """The values whose interval shares an instant with ``[start, end)``."""
        self._sort()
        found: list[T] = []
        for length, entries in self._by_length.items():
            lo = bisect_right(entries, (start - length, float("inf")))
            hi = bisect_left(entries, (end, float("-inf")))
            found.extend(value for _, _, value in entries[lo:hi])
        return found

    def _sort(self) -> None:
        if not self._sorted:
            for entries in self._by_length.values():
                entries.sort(key=lambda e: (e[0], e[1]))
            self._sorted = True
