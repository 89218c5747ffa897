"""Filter domains and secondary-partition pruning: pruning never drops a segment that holds a
matching row (property tests over random rows, partitionings and filters), and it does prune."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentlake.core.filter_domain import (
    EMPTY,
    MAX_HASH_COMBINATIONS,
    Bound,
    Domain,
    Range,
    Values,
    and_domains,
    comparison,
    could_contain,
    intersect,
    or_domains,
    union,
)
from segmentlake.core.partition_hash import hash_bucket
from segmentlake.core.shard_spec import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    NumberedShardSpec,
    ShardSpec,
    SingleDimensionShardSpec,
    TombstoneShardSpec,
)
from segmentlake.errors import SpecError

COLUMNS = ("a", "b", "c")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Row = dict[str, str | None]
# A filter: ("eq", col, v) | ("in", col, vs) | ("cmp", op, col, v) | ("isnull", col)
#           | ("not", f) | ("and", f, g) | ("or", f, g)
Filter = tuple[Any, ...]

# Small strings that collide often, with the orderings that matter: "" first, "\x00" below
# "a", "a" a prefix of "ab", non-ASCII above ASCII, a 4-byte character.
# Half the strings come from a small pool, so that filters often match rows.
POOL = ["", "a", "ab", "a\x00", "b", "\x00", "é", "😀"]
strings = st.one_of(
    st.sampled_from(POOL), st.text(alphabet=["a", "b", "\x00", "é", "😀"], max_size=3)
)
values = st.one_of(st.none(), strings)
rows = st.lists(st.fixed_dictionaries(dict.fromkeys(COLUMNS, values)), max_size=30)
columns = st.sampled_from(COLUMNS)
dimensions = st.lists(columns, min_size=1, max_size=3, unique=True).map(tuple)

leaf_filters = st.one_of(
    st.tuples(st.just("eq"), columns, strings),
    st.tuples(st.just("in"), columns, st.lists(strings, min_size=1, max_size=4)),
    st.tuples(st.just("cmp"), st.sampled_from(["<", "<=", ">", ">="]), columns, strings),
    st.tuples(st.just("isnull"), columns),
)
filters = st.recursive(
    leaf_filters,
    lambda sub: st.one_of(
        st.tuples(st.just("not"), sub),
        st.tuples(st.sampled_from(["and", "or"]), sub, sub),
    ),
    max_leaves=6,
)


def _cmp(op: str, x: str, y: str) -> bool:
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def evaluate(f: Filter, row: Row) -> bool | None:
    """SQL's three-valued truth of the filter on a row (None: unknown)."""
    kind = f[0]
    if kind == "eq":
        v = row[f[1]]
        return None if v is None else v == f[2]
    if kind == "in":
        v = row[f[1]]
        return None if v is None else v in f[2]
    if kind == "cmp":
        v = row[f[2]]
        return None if v is None else _cmp(f[1], v, f[3])
    if kind == "isnull":
        return row[f[1]] is None
    if kind == "not":
        inner = evaluate(f[1], row)
        return None if inner is None else not inner
    left, right = evaluate(f[1], row), evaluate(f[2], row)
    if kind == "and":
        return False if False in (left, right) else (None if None in (left, right) else True)
    return True if True in (left, right) else (None if None in (left, right) else False)


def domain(f: Filter) -> Domain:
    """The domain the read layer derives for the filter (NOT and IS NULL: unconstrained)."""
    kind = f[0]
    if kind == "eq":
        return {f[1]: Values.of([f[2]])}
    if kind == "in":
        return {f[1]: Values.of(f[2])}
    if kind == "cmp":
        return {f[2]: comparison(f[1], f[3])}
    if kind in ("isnull", "not"):
        return {}
    combine = and_domains if kind == "and" else or_domains
    return combine(domain(f[1]), domain(f[2]))


def sort_key(t: Sequence[str | None]) -> list[tuple[bool, str]]:
    return [(v is not None, v or "") for v in t]


def range_segments(
    dims: tuple[str, ...], bounds: list[tuple[str | None, ...]]
) -> tuple[list[ShardSpec], Callable[[Row], int]]:
    """Range partitioning with these boundary tuples: segments [None, b1), [b1, b2), ...,
    [bn, None), and the index of a row's segment."""
    cuts = sorted(set(bounds), key=sort_key)
    ends: list[tuple[str | None, ...] | None] = [None, *cuts, None]
    specs: list[ShardSpec] = [
        DimensionRangeShardSpec(i, len(cuts) + 1, dims, ends[i], ends[i + 1])
        for i in range(len(cuts) + 1)
    ]

    def segment_of(row: Row) -> int:
        key = sort_key(tuple(row[d] for d in dims))
        return sum(1 for c in cuts if sort_key(c) <= key)

    return specs, segment_of


def single_segments(dim: str, bounds: list[str]) -> tuple[list[ShardSpec], Callable[[Row], int]]:
    cuts = sorted(set(bounds))
    ends: list[str | None] = [None, *cuts, None]
    specs: list[ShardSpec] = [
        SingleDimensionShardSpec(i, len(cuts) + 1, dim, ends[i], ends[i + 1])
        for i in range(len(cuts) + 1)
    ]

    def segment_of(row: Row) -> int:
        v = row[dim]
        return 0 if v is None else sum(1 for c in cuts if c <= v)

    return specs, segment_of


def hash_segments(dims: tuple[str, ...], n: int) -> tuple[list[ShardSpec], Callable[[Row], int]]:
    specs: list[ShardSpec] = [HashBasedNumberedShardSpec(b, n, b, n, dims) for b in range(n)]
    return specs, lambda row: hash_bucket([row[d] for d in dims], n)


def assert_no_matching_row_pruned(
    data: list[Row], f: Filter, specs: list[ShardSpec], segment_of: Callable[[Row], int]
) -> None:
    dom = domain(f)
    for row in data:
        if evaluate(f, row):
            spec = specs[segment_of(row)]
            assert could_contain(spec, dom), (row, spec, dom)


# -- soundness: a matching row's segment is never pruned -------------------------------------


@SETTINGS
@given(data=rows, f=filters, dims=dimensions, bounds=st.data())
def test_range_pruning_keeps_every_matching_row(
    data: list[Row], f: Filter, dims: tuple[str, ...], bounds: st.DataObject
) -> None:
    cuts = bounds.draw(st.lists(st.tuples(*[values] * len(dims)), max_size=6))
    # Also cut at tuples of the rows themselves, so segments hold few distinct rows.
    cuts += [tuple(row[d] for d in dims) for row in data[:3]]
    assert_no_matching_row_pruned(data, f, *range_segments(dims, cuts))


@SETTINGS
@given(data=rows, f=filters, dim=columns, cuts=st.lists(strings, max_size=6))
def test_single_dim_pruning_keeps_every_matching_row(
    data: list[Row], f: Filter, dim: str, cuts: list[str]
) -> None:
    cuts += [v for row in data[:3] if (v := row[dim]) is not None]
    assert_no_matching_row_pruned(data, f, *single_segments(dim, cuts))


@SETTINGS
@given(data=rows, f=filters, dims=dimensions, n=st.integers(1, 8))
def test_hash_pruning_keeps_every_matching_row(
    data: list[Row], f: Filter, dims: tuple[str, ...], n: int
) -> None:
    assert_no_matching_row_pruned(data, f, *hash_segments(dims, n))


@SETTINGS
@given(f=filters, n=st.integers(1, 8))
def test_hash_over_every_dimension_never_prunes(f: Filter, n: int) -> None:
    dom = domain(f)
    assert all(could_contain(HashBasedNumberedShardSpec(b, n, b, n, ()), dom) for b in range(n))


value_sets = st.one_of(
    st.lists(strings, max_size=4).map(Values.of),
    st.tuples(st.sampled_from(["<", "<=", ">", ">="]), strings).map(lambda t: comparison(*t)),
    st.builds(
        Range,
        st.builds(Bound, strings, st.booleans()),
        st.builds(Bound, strings, st.booleans()),
    ),
)


def member(v: str, s: Values | Range) -> bool:
    if isinstance(s, Values):
        return v in s.values
    low, high = s.lower, s.upper
    above = low is None or v > low.value or (low.inclusive and v == low.value)
    below = high is None or v < high.value or (high.inclusive and v == high.value)
    return above and below


@SETTINGS
@given(x=value_sets, y=value_sets, v=strings)
def test_intersect_is_exact_and_union_holds_both(
    x: Values | Range, y: Values | Range, v: str
) -> None:
    assert member(v, intersect(x, y)) == (member(v, x) and member(v, y))
    if member(v, x) or member(v, y):
        assert member(v, union(x, y))


# -- pruning prunes ------------------------------------------------------------------------


def kept(specs: list[ShardSpec], dom: Domain) -> list[int]:
    return [s.partition_num for s in specs if could_contain(s, dom)]


def test_equality_keeps_one_of_eight_hash_buckets() -> None:
    specs, segment_of = hash_segments(("a",), 8)
    dom: Domain = {"a": Values.of(["fr"])}
    assert kept(specs, dom) == [segment_of({"a": "fr"})]


def test_in_keeps_the_buckets_of_its_values() -> None:
    specs, _ = hash_segments(("a", "b"), 8)
    dom: Domain = {"a": Values.of(["x", "y"]), "b": Values.of(["1"]), "c": Values.of(["z"])}
    wanted = sorted({hash_bucket([a, "1"], 8) for a in ("x", "y")})
    assert kept(specs, dom) == wanted


def test_hash_is_not_pruned_on_ranges_partial_dimensions_or_too_many_combinations() -> None:
    specs, _ = hash_segments(("a", "b"), 8)
    every = list(range(8))
    assert kept(specs, {"a": Values.of(["x"])}) == every  # b unconstrained
    assert kept(specs, {"a": Values.of(["x"]), "b": comparison("<", "m")}) == every
    many = Values.of(str(i) for i in range(33))
    assert MAX_HASH_COMBINATIONS < 33 * 33
    assert kept(specs, {"a": many, "b": many}) == every
    assert kept(specs, {"a": Values.of(["x"]), "b": EMPTY}) == []


def test_single_dim_prunes_half_open_ranges() -> None:
    specs, _ = single_segments("a", ["c", "m"])  # [-, c) [c, m) [m, -)
    assert kept(specs, {"a": Values.of(["d"])}) == [1]
    assert kept(specs, {"a": Values.of(["c"])}) == [1]
    assert kept(specs, {"a": comparison("<", "c")}) == [0]
    assert kept(specs, {"a": comparison("<=", "c")}) == [0, 1]
    assert kept(specs, {"a": comparison(">=", "m")}) == [2]
    assert kept(specs, {"a": comparison(">", "c")}) == [1, 2]
    assert kept(specs, {"b": Values.of(["d"])}) == [0, 1, 2]


def test_range_prunes_on_the_first_dimension_and_on_shared_prefixes() -> None:
    cuts: list[tuple[str | None, ...]] = [("fr", "m"), ("fr", "t"), ("us", "c")]
    specs, _ = range_segments(("country", "city"), cuts)
    # [-, fr m) [fr m, fr t) [fr t, us c) [us c, -)
    assert kept(specs, {"country": Values.of(["de"])}) == [0]
    assert kept(specs, {"country": Values.of(["fr"])}) == [0, 1, 2]
    assert kept(specs, {"country": Values.of(["fr"]), "city": Values.of(["nice"])}) == [1]
    assert kept(specs, {"country": Values.of(["us"]), "city": Values.of(["a"])}) == [2]
    assert kept(specs, {"country": Values.of(["us"]), "city": Values.of(["ny"])}) == [3]
    assert kept(specs, {"country": comparison(">", "fr")}) == [2, 3]
    # Only the second dimension: it bounds the segment whose ends share the prefix "fr".
    assert kept(specs, {"city": Values.of(["a"])}) == [0, 2, 3]


def test_null_bounds_sort_first() -> None:
    cuts: list[tuple[str | None, ...]] = [(None, "k"), ("a", None)]
    specs, _ = range_segments(("a", "b"), cuts)
    # [-, (null, k)) [(null, k), (a, null)) [(a, null), -): a non-null a is never in the first.
    assert kept(specs, {"a": Values.of([""])}) == [1]
    assert kept(specs, {"a": Values.of(["a"])}) == [2]  # (a, b) < (a, null) for no b
    assert kept(specs, {"b": Values.of(["z"])}) == [1, 2]  # (null, z) is above (null, k)


def test_other_shard_specs_and_empty_domains_prune_nothing() -> None:
    dom: Domain = {"a": EMPTY}
    assert could_contain(NumberedShardSpec(0), dom)
    assert could_contain(TombstoneShardSpec(), dom)
    assert could_contain(SingleDimensionShardSpec(0, 1, "a", None, "c"), {})


# -- the algebra ---------------------------------------------------------------------------


def test_and_intersects_and_or_forgets_one_sided_columns() -> None:
    a_x = {"a": Values.of(["x"])}
    assert and_domains(a_x, {"a": Values.of(["y"])}) == {"a": EMPTY}
    assert and_domains(a_x, {"b": Values.of(["y"])}) == {**a_x, "b": Values.of(["y"])}
    assert or_domains(a_x, {"b": Values.of(["y"])}) == {}
    assert or_domains(a_x, {"a": Values.of(["y"])}) == {"a": Values.of(["x", "y"])}
    # An unsatisfiable side adds nothing.
    assert or_domains({"a": EMPTY}, {"b": Values.of(["y"])}) == {"b": Values.of(["y"])}


def test_ranges_meet_to_points_and_join_to_hulls() -> None:
    assert intersect(comparison(">=", "k"), comparison("<=", "k")) == Values.of(["k"])
    assert intersect(comparison(">", "k"), comparison("<=", "k")) == EMPTY
    assert union(comparison("<", "c"), Values.of(["f"])) == Range(None, Bound("f", True))
    assert union(comparison(">", "c"), comparison(">=", "c")) == comparison(">=", "c")
    assert union(EMPTY, comparison(">", "c")) == comparison(">", "c")


def test_value_sets_hold_strings_only() -> None:
    with pytest.raises(SpecError, match="non-null strings"):
        Values.of(["x", None])  # type: ignore[list-item]
    with pytest.raises(SpecError, match="comparison operator"):
        comparison("=", "x")


def test_every_combination_is_hashed_in_order() -> None:
    # The bucket of a combination is that of the dimension values in the spec's order.
    spec_ab = HashBasedNumberedShardSpec(0, 4, hash_bucket(["x", "1"], 4), 4, ("a", "b"))
    dom: Domain = {"b": Values.of(["1"]), "a": Values.of(["x"])}
    assert could_contain(spec_ab, dom)
    others = [b for b in range(4) if b != spec_ab.bucket_id]
    assert not any(
        could_contain(HashBasedNumberedShardSpec(b, 4, b, 4, ("a", "b")), dom) for b in others
    )
