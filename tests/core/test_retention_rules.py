"""Druid's rule matrix: every rule type against segments before, across, inside and after its
period or interval, includeFuture, the default chain, JSON and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.interval import Interval
from segmentlake.core.retention_rules import (
    DEFAULT_RULES,
    DEFAULT_TIER,
    BroadcastRule,
    DropRule,
    LoadRule,
    Rule,
    match_rules,
    rule_for,
    rule_from_json,
    rules_from_json,
    rules_to_json,
)
from segmentlake.errors import SpecError

# One calendar month back from 2024-03-31 is 2024-02-29 (clamped): "recent" = [02-29, 03-31).
NOW = Interval.parse("2024-03-31T00:00:00Z/P1D").start_millis


def seg(text: str) -> Interval:
    return Interval.parse(text)


BEFORE = seg("2024-01-01/2024-01-02")
ACROSS_START = seg("2024-02-28/2024-03-02")
INSIDE = seg("2024-03-10/2024-03-11")
ACROSS_NOW = seg("2024-03-30/2024-04-02")
FUTURE = seg("2024-05-01/2024-05-02")
CASES = (BEFORE, ACROSS_START, INSIDE, ACROSS_NOW, FUTURE)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (LoadRule.forever(), (True, True, True, True, True)),
        (LoadRule.by_period("P1M"), (False, True, True, True, True)),
        (LoadRule.by_period("P1M", include_future=False), (False, True, True, True, False)),
        (BroadcastRule.by_period("P1M"), (False, True, True, True, True)),
        (BroadcastRule.by_period("P1M", include_future=False), (False, True, True, True, False)),
        (DropRule.forever(), (True, True, True, True, True)),
        (DropRule.by_period("P1M"), (False, False, True, True, True)),
        (DropRule.by_period("P1M", include_future=False), (False, False, True, False, False)),
        (DropRule.before_by_period("P1M"), (True, False, False, False, False)),
        (LoadRule.by_interval("2024-03-01/2024-04-01"), (False, True, True, True, False)),
        (BroadcastRule.by_interval("2024-03-01/2024-04-01"), (False, True, True, True, False)),
        (DropRule.by_interval("2024-03-01/2024-04-01"), (False, False, True, False, False)),
        (BroadcastRule.forever(), (True, True, True, True, True)),
    ],
    ids=lambda v: v.type if isinstance(v, Rule) else "",
)
def test_rule_matrix(rule: Rule, expected: tuple[bool, ...]) -> None:
    assert tuple(rule.applies_to(i, NOW) for i in CASES) == expected


def test_drop_before_by_period_edge_and_calendar_months() -> None:
    rule = DropRule.before_by_period("P1M")
    month_ago = seg("2024-02-29/2024-03-01").start_millis  # 2024-03-31 minus one month
    assert rule.applies_to(Interval.of_millis(month_ago - 86_400_000, month_ago), NOW)
    assert not rule.applies_to(Interval.of_millis(month_ago - 86_400_000, month_ago + 1), NOW)


def test_first_match_wins_and_the_default_chain_catches_the_rest() -> None:
    chain = (LoadRule.by_period("P7D", {"hot": 2}), DropRule.by_interval("2024-01-01/2024-02-01"))
    default = (LoadRule.forever({"cold": 1}),)
    assert rule_for(INSIDE, NOW, chain, default) == default[0]
    assert rule_for(ACROSS_NOW, NOW, chain, default) == chain[0]
    assert rule_for(BEFORE, NOW, chain, default) == chain[1]
    assert rule_for(BEFORE, NOW, (), ()) is None
    assert (LoadRule.forever({DEFAULT_TIER: 2}),) == DEFAULT_RULES


@pytest.mark.parametrize(
    "data",
    [
        {
            "type": "loadByPeriod",
            "period": "P1M",
            "includeFuture": True,
            "tieredReplicants": {"hot": 1, "_default_tier": 1},
        },
        {"type": "loadByPeriod", "period": "P1M", "includeFuture": False, "tieredReplicants": {}},
        {"type": "loadForever", "tieredReplicants": {"hot": 2}},
        {
            "type": "loadByInterval",
            "interval": "2024-01-01T00:00:00.000Z/2025-01-01T00:00:00.000Z",
            "tieredReplicants": {"cold": 1},
        },
        {"type": "dropForever"},
        {"type": "dropByPeriod", "period": "P3M", "includeFuture": True},
        {"type": "dropBeforeByPeriod", "period": "P1Y"},
        {"type": "dropByInterval", "interval": "2024-01-01T00:00:00.000Z/2025-01-01T00:00:00.000Z"},
        {"type": "broadcastForever"},
        {"type": "broadcastByPeriod", "period": "PT6H", "includeFuture": True},
        {
            "type": "broadcastByInterval",
            "interval": "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z",
        },
    ],
)
def test_json_round_trips(data: dict[str, object]) -> None:
    rule = rule_from_json(data)
    assert rule_from_json(rule.to_json()) == rule
    assert rules_from_json(rules_to_json([rule])) == (rule,)
    assert rule.to_json()["type"] == data["type"]


def test_null_tiered_replicants_follow_use_default_tier_for_null() -> None:
    assert rule_from_json({"type": "loadForever"}).replicants == {DEFAULT_TIER: 2}  # type: ignore[attr-defined]
    no_tier = rule_from_json({"type": "loadForever", "useDefaultTierForNull": False})
    assert no_tier.replicants == {}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "loadSometimes"}, "unknown rule type"),
        ({"type": "loadByPeriod", "tieredReplicants": {}}, "needs 'period'"),
        ({"type": "loadForever", "tieredReplicants": {"hot": -1}}, "integer >= 0"),
        ({"type": "loadForever", "tieredReplicants": {"hot": True}}, "integer >= 0"),
        ({"type": "dropByPeriod", "period": "1 month"}, "ISO-8601"),
        ({"type": "dropForever", "period": "P1D"}, "unknown keys"),
        ({"type": "dropBeforeByPeriod", "period": "P1D", "includeFuture": True}, "unknown keys"),
        ({"type": "dropByInterval", "interval": "yesterday"}, "interval"),
    ],
)
def test_bad_rules_name_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        rule_from_json(data)


def test_bad_rule_lists() -> None:
    with pytest.raises(SpecError, match="not valid JSON"):
        rules_from_json("[{")
    with pytest.raises(SpecError, match="JSON list"):
        rules_from_json('{"type": "dropForever"}')


CHAIN = (
    LoadRule.by_period("P7D", {"hot": 2}),
    DropRule.by_period("P1D", include_future=False),
    BroadcastRule.by_interval("2024-02-01/2024-02-10"),
    DropRule.before_by_period("P2M"),
    LoadRule.by_period("P1M", {"cold": 1}, include_future=False),
    DropRule.by_interval("2023-01-01/2024-03-01"),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-200, 100), st.sampled_from([1, 6, 24, 24 * 30])), min_size=1)
)
def test_vectorized_matching_equals_rule_by_rule(spans: list[tuple[int, int]]) -> None:
    hour = 3_600_000
    starts = np.array([NOW + d * 24 * hour for d, _ in spans], dtype=np.int64)
    ends = starts + np.array([h * hour for _, h in spans], dtype=np.int64)
    matched = match_rules(CHAIN, starts, ends, NOW)
    for s, e, m in zip(starts, ends, matched, strict=True):
        expected = rule_for(Interval.of_millis(int(s), int(e)), NOW, CHAIN, ())
        assert (CHAIN[m] if m >= 0 else None) == expected
