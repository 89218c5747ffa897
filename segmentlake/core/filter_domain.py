"""What a filter allows per column, and whether a segment's secondary partition can hold it.

A :data:`Domain` maps a column to the :data:`ValueSet` a row's value must lie in for the row to
match the filter: a finite set of strings (:class:`Values`) or a string range (:class:`Range`).
An absent column is unconstrained, null included; a value set never admits null, because an
equality or comparison is never true on null. Domains over-approximate: ``AND`` intersects,
``OR`` unions (ranges by their hull) and forgets columns constrained on only one side, so every
matching row always lies in the domain.

:func:`could_contain` is the pruning test (Druid broker's ``possibleInDomain``): it is False
only when a segment's shard spec proves that none of its rows lie in the domain.

* hashed — when each partition dimension is a finite set, the rows matching the domain hash to
  the buckets of the combinations of those values (at most :data:`MAX_HASH_COMBINATIONS`);
* range / single_dim — the segment holds the tuples in ``[start, end)``, nulls first, strings by
  code point (= Spark's UTF-8 byte order); the test is exact up to the density of strings;
* any other shard spec (and a hash over no dimensions, i.e. time and every dimension) — True.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import prod

from segmentlake.core.partition_hash import hash_bucket
from segmentlake.core.shard_spec import (
    HASH_PARTITION_FUNCTION,
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    ShardSpec,
    SingleDimensionShardSpec,
)
from segmentlake.errors import SpecError

__all__ = [
    "EMPTY",
    "MAX_HASH_COMBINATIONS",
    "Bound",
    "Domain",
    "Range",
    "ValueSet",
    "Values",
    "and_domains",
    "comparison",
    "could_contain",
    "intersect",
    "or_domains",
    "union",
]

# Above this many value combinations over a hash spec's dimensions, hashing them all costs more
# than reading the segments it could save; such a domain prunes nothing.
MAX_HASH_COMBINATIONS = 1024


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of a :class:`Range`: ``value`` itself included or not."""

    value: str
    inclusive: bool


@dataclass(frozen=True, slots=True)
class Values:
    """A finite set of non-null strings (empty: no row matches)."""

    values: frozenset[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", frozenset(self.values))
        if not all(isinstance(v, str) for v in self.values):
            raise SpecError(f"a value set holds non-null strings only, got {set(self.values)}")

    @classmethod
    def of(cls, values: Iterable[str]) -> Values:
        return cls(frozenset(values))


@dataclass(frozen=True, slots=True)
class Range:
    """The non-null strings between ``lower`` and ``upper`` (None: unbounded on that side)."""

    lower: Bound | None = None
    upper: Bound | None = None


ValueSet = Values | Range
Domain = Mapping[str, ValueSet]
EMPTY = Values(frozenset())

# A sort key under which null comes first, then strings by code point.
_Key = tuple[bool, str]
# A bound on keys: (key, inclusive).
_KeyBound = tuple[_Key, bool]
_NULL_KEY: _Key = (False, "")


def _key(value: str | None) -> _Key:
    return (False, "") if value is None else (True, value)


def comparison(op: str, value: str) -> Range:
    """The range of ``column <op> value`` for ``op`` in ``<``, ``<=``, ``>``, ``>=``."""
    if op in ("<", "<="):
        return Range(upper=Bound(value, op == "<="))
    if op in (">", ">="):
        return Range(lower=Bound(value, op == ">="))
    raise SpecError(f"comparison operator must be one of <, <=, >, >=; got {op!r}")


# -- bounds --------------------------------------------------------------------------------


def _lower(bound: Bound | None) -> _KeyBound:
    # A range never admits null: with no lower bound it starts just above null.
    return (_NULL_KEY, False) if bound is None else (_key(bound.value), bound.inclusive)


def _upper(bound: Bound | None) -> _KeyBound | None:
    return None if bound is None else (_key(bound.value), bound.inclusive)


def _tighter_lower(a: _KeyBound, b: _KeyBound) -> _KeyBound:
    if a[0] != b[0]:
        return max(a, b)
    return (a[0], a[1] and b[1])


def _tighter_upper(a: _KeyBound | None, b: _KeyBound | None) -> _KeyBound | None:
    if a is None or b is None:
        return b if a is None else a
    if a[0] != b[0]:
        return min(a, b)
    return (a[0], a[1] and b[1])


def _nonempty(lower: _KeyBound, upper: _KeyBound | None) -> bool:
    # Conservative: a gap between two distinct keys counts as holding a value, although no
    # string lies strictly between "a" and "a\0".
    if upper is None or lower[0] < upper[0]:
        return True
    return lower[0] == upper[0] and lower[1] and upper[1]


def _above(key: _Key, lower: _KeyBound) -> bool:
    return key > lower[0] or (key == lower[0] and lower[1])


def _below(key: _Key, upper: _KeyBound | None) -> bool:
    return upper is None or key < upper[0] or (key == upper[0] and upper[1])


def _in_range(value: str, r: Range) -> bool:
    return _above(_key(value), _lower(r.lower)) and _below(_key(value), _upper(r.upper))


def _range_of(lower: _KeyBound, upper: _KeyBound | None) -> ValueSet:
    # Back from key bounds to a value set: empty, a single value, or a range.
    if not _nonempty(lower, upper):
        return EMPTY
    if upper is not None and lower[0] == upper[0]:
        return Values(frozenset({lower[0][1]}))
    low = None if lower[0] == _NULL_KEY else Bound(lower[0][1], lower[1])
    return Range(low, None if upper is None else Bound(upper[0][1], upper[1]))


# -- set algebra ---------------------------------------------------------------------------


def intersect(a: ValueSet, b: ValueSet) -> ValueSet:
    """The values in both ``a`` and ``b`` (exact)."""
    if isinstance(a, Values):
        if isinstance(b, Values):
            return Values(a.values & b.values)
        return Values(frozenset(v for v in a.values if _in_range(v, b)))
    if isinstance(b, Values):
        return intersect(b, a)
    return _range_of(
        _tighter_lower(_lower(a.lower), _lower(b.lower)),
        _tighter_upper(_upper(a.upper), _upper(b.upper)),
    )


def _hull(a: Range, b: Range) -> Range:
    # The looser bound on each side (on a tie, the inclusive one); a missing bound is loosest.
    low = None
    if a.lower is not None and b.lower is not None:
        low = min(a.lower, b.lower, key=lambda x: (x.value, not x.inclusive))
    high = None
    if a.upper is not None and b.upper is not None:
        high = max(a.upper, b.upper, key=lambda x: (x.value, x.inclusive))
    return Range(low, high)


def _as_range(values: Values) -> Range:
    return Range(Bound(min(values.values), True), Bound(max(values.values), True))


def union(a: ValueSet, b: ValueSet) -> ValueSet:
    """A value set holding ``a`` and ``b``: exact for two finite sets, else the ranges' hull."""
    if isinstance(a, Values) and isinstance(b, Values):
        return Values(a.values | b.values)
    if a == EMPTY or b == EMPTY:
        return b if a == EMPTY else a
    ra = _as_range(a) if isinstance(a, Values) else a
    rb = _as_range(b) if isinstance(b, Values) else b
    return _hull(ra, rb)


def and_domains(a: Domain, b: Domain) -> Domain:
    """The domain of ``a AND b``: per column, the intersection."""
    out = dict(a)
    for column, values in b.items():
        out[column] = intersect(out[column], values) if column in out else values
    return out


def _unsatisfiable(domain: Domain) -> bool:
    return any(values == EMPTY for values in domain.values())


def or_domains(a: Domain, b: Domain) -> Domain:
    """The domain of ``a OR b``: per column constrained on both sides, the union; a column
    constrained on one side only is unconstrained (the other side admits anything there)."""
    if _unsatisfiable(a) or _unsatisfiable(b):
        return b if _unsatisfiable(a) else a
    return {column: union(a[column], b[column]) for column in a.keys() & b.keys()}


# -- pruning -------------------------------------------------------------------------------


def could_contain(shard_spec: ShardSpec, domain: Domain) -> bool:
    """False only when no row of a segment with ``shard_spec`` can lie in ``domain``."""
    if not domain:
        return True
    if isinstance(shard_spec, HashBasedNumberedShardSpec):
        return _hash_could_contain(shard_spec, domain)
    if isinstance(shard_spec, DimensionRangeShardSpec):
        constraints = tuple(domain.get(d) for d in shard_spec.dimensions)
        return _tuples_meet(constraints, shard_spec.start, shard_spec.end)
    if isinstance(shard_spec, SingleDimensionShardSpec):
        start = None if shard_spec.start is None else (shard_spec.start,)
        end = None if shard_spec.end is None else (shard_spec.end,)
        return _tuples_meet((domain.get(shard_spec.dimension),), start, end)
    return True


def _hash_could_contain(spec: HashBasedNumberedShardSpec, domain: Domain) -> bool:
    # With no partition dimensions the hash covers time and every dimension: never prunable.
    if not spec.partition_dimensions or spec.partition_function != HASH_PARTITION_FUNCTION:
        return True
    constraints = tuple(domain.get(d) for d in spec.partition_dimensions)
    finite: list[Values] = []
    for c in constraints:
        if not isinstance(c, Values):
            return True
        finite.append(c)
    buckets = _reachable_buckets(tuple(finite), spec.num_buckets)
    return buckets is None or spec.bucket_id in buckets


@lru_cache(maxsize=256)
def _reachable_buckets(sets: tuple[Values, ...], num_buckets: int) -> frozenset[int] | None:
    # Cached: every segment of a hashed interval asks the same question.
    if prod(len(s.values) for s in sets) > MAX_HASH_COMBINATIONS:
        return None
    try:
        return frozenset(
            hash_bucket(combination, num_buckets)
            for combination in itertools.product(*(sorted(s.values) for s in sets))
        )
    except UnicodeEncodeError:  # a lone surrogate: Spark's bytes for it are not ours
        return None


def _admits(constraint: ValueSet | None, value: str | None) -> bool:
    if constraint is None:
        return True
    if value is None:
        return False
    if isinstance(constraint, Values):
        return value in constraint.values
    return _in_range(value, constraint)


def _meets_between(
    constraint: ValueSet | None, low: str | None, has_low: bool, high: str | None, has_high: bool
) -> bool:
    # Whether the constraint admits a value strictly between the given bounds (nulls first).
    lower: _KeyBound = (_key(low), False) if has_low else (_NULL_KEY, True)
    upper: _KeyBound | None = (_key(high), False) if has_high else None
    if constraint is None:
        return _nonempty(lower, upper)
    if isinstance(constraint, Values):
        return any(_above(_key(v), lower) and _below(_key(v), upper) for v in constraint.values)
    return _nonempty(
        _tighter_lower(lower, _lower(constraint.lower)),
        _tighter_upper(upper, _upper(constraint.upper)),
    )


def _tuples_meet(
    constraints: Sequence[ValueSet | None],
    start: Sequence[str | None] | None,
    end: Sequence[str | None] | None,
) -> bool:
    """Whether some tuple admitted by ``constraints`` lies in ``[start, end)`` (None: open)."""
    if any(c == EMPTY for c in constraints):
        return False

    def walk(i: int, on_start: bool, on_end: bool) -> bool:
        # on_start / on_end: the tuple's first i values equal start's / end's first i values.
        if not (on_start or on_end):
            return True
        if i == len(constraints):
            return not on_end  # equal to start is inside, equal to end is not
        c = constraints[i]
        s = start[i] if on_start and start is not None else None
        e = end[i] if on_end and end is not None else None
        if _meets_between(c, s, on_start, e, on_end):
            return True
        if on_start and _admits(c, s) and walk(i + 1, True, on_end and s == e):
            return True
        return on_end and not (on_start and s == e) and _admits(c, e) and walk(i + 1, False, True)

    return walk(0, start is not None, end is not None)
