"""Druid's coordinator rules — load, drop and broadcast, forever, by period or by interval —
with Druid's JSON and matching semantics.

A datasource has a chain of rules, and every datasource falls back to the ``_default`` chain:
for each segment the coordinator takes the first rule of ``chain + default chain`` that
applies to the segment's interval, relative to now. A load rule says how many copies each
tier keeps (``tieredReplicants``); a drop rule retires the segment (marks it unused, later
killed); a broadcast rule puts a copy on every volume.

Matching (``recent`` = the ``period`` up to now):

* ``load/broadcastByPeriod``: with ``includeFuture`` (the default) the segment ends after
  ``recent`` starts; without, it overlaps ``recent``. ``…ByInterval``: it overlaps the interval.
* ``dropByPeriod``: with ``includeFuture`` the segment starts at or after ``recent`` starts;
  without, ``recent`` contains it. ``dropBeforeByPeriod``: it ends at or before now - period.
  ``dropByInterval``: the interval contains it.

>>> chain = rules_from_json('[{"type": "loadByPeriod", "period": "P1M",'
...     ' "tieredReplicants": {"hot": 2}}, {"type": "dropForever"}]')
>>> [rule.type for rule in chain]
['loadByPeriod', 'dropForever']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from segmentlake.core.interval import MIN_MILLIS, Interval, Period
from segmentlake.core.spec_reader import INT32_MAX, check_flag, int_problem, safe_repr
from segmentlake.errors import SpecError

__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_RULES_KEY",
    "DEFAULT_TIER",
    "BroadcastRule",
    "DropRule",
    "LoadRule",
    "Rule",
    "match_rules",
    "rule_for",
    "rule_from_json",
    "rules_from_json",
    "rules_to_json",
]

DEFAULT_TIER = "_default_tier"
DEFAULT_RULES_KEY = "_default"
_DEFAULT_REPLICANTS = 2

I64 = NDArray[np.int64]
Mask = NDArray[np.bool_]

# Per type: its kind, and which of period / interval it takes.
_TYPES: dict[str, tuple[str, str | None]] = {
    "loadForever": ("load", None),
    "loadByPeriod": ("load", "period"),
    "loadByInterval": ("load", "interval"),
    "dropForever": ("drop", None),
    "dropByPeriod": ("drop", "period"),
    "dropBeforeByPeriod": ("drop", "period"),
    "dropByInterval": ("drop", "interval"),
    "broadcastForever": ("broadcast", None),
    "broadcastByPeriod": ("broadcast", "period"),
    "broadcastByInterval": ("broadcast", "interval"),
}


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule of any kind: ``type`` is Druid's name (see the module for the meanings)."""

    kind: ClassVar[str] = ""
    type: str
    period: Period | None = None
    interval: Interval | None = None
    include_future: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or _TYPES.get(self.type, ("", None))[0] != self.kind:
            known = sorted(t for t, (k, _) in _TYPES.items() if k == self.kind)
            raise SpecError(
                f"{safe_repr(self.type)} is not a {self.kind} rule type; use one of {known}"
            )
        takes = _TYPES[self.type][1]
        for name, kind in (("period", Period), ("interval", Interval)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise SpecError(
                    f"rule {self.type} {name} must be a {kind.__name__}, got {safe_repr(value)}"
                )
            if (value is not None) != (takes == name):
                need = "needs" if takes == name else "takes no"
                raise SpecError(f"rule {self.type} {need} {name!r}")
        check_flag(self.include_future, f"rule {self.type} includeFuture")

    def _recent(self, now_ms: int) -> tuple[int, int]:
        assert self.period is not None
        try:
            return self.period.add_to(now_ms, -1), now_ms
        except SpecError:  # the period reaches before year 1: it covers all the past
            return MIN_MILLIS, now_ms

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        """Whether the rule matches a segment of ``interval`` at ``now_ms``."""
        mask = self.applies_mask(
            np.array([interval.start_millis], dtype=np.int64),
            np.array([interval.end_millis], dtype=np.int64),
            now_ms,
        )
        return bool(mask[0])

    def applies_mask(self, start_ms: I64, end_ms: I64, now_ms: int) -> Mask:
        """:meth:`applies_to` for many segments at once."""
        if self.period is None and self.interval is None:
            return np.ones(len(start_ms), dtype=bool)
        if self.interval is not None:
            lo, hi = self.interval.start_millis, self.interval.end_millis
            if self.kind == "drop":  # contains
                return np.asarray((start_ms >= lo) & (end_ms <= hi))
            return np.asarray((start_ms < hi) & (end_ms > lo))  # overlaps
        lo, hi = self._recent(now_ms)
        if self.type == "dropBeforeByPeriod":
            return np.asarray(end_ms <= lo)
        if self.kind == "drop":
            if self.include_future:
                return np.asarray(start_ms >= lo)
            return np.asarray((start_ms >= lo) & (end_ms <= hi))
        if self.include_future:
            return np.asarray(end_ms > lo)
        return np.asarray((start_ms < hi) & (end_ms > lo))

    def to_json(self) -> dict[str, Any]:
        """Druid's JSON of the rule."""
        out: dict[str, Any] = {"type": self.type}
        if self.period is not None:
            out["period"] = _period_text(self.period)
            if self.type != "dropBeforeByPeriod":
                out["includeFuture"] = self.include_future
        if self.interval is not None:
            out["interval"] = str(self.interval)
        return out


@dataclass(frozen=True, slots=True)
class LoadRule(Rule):
    """Keep ``tiered_replicants`` copies per tier of the segments the rule matches."""

    kind: ClassVar[str] = "load"
    tiered_replicants: tuple[tuple[str, int], ...] = field(default=())

    def __post_init__(self) -> None:
        Rule.__post_init__(self)
        pairs = self.tiered_replicants
        if not isinstance(pairs, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 for p in pairs
        ):
            raise SpecError(
                f"rule {self.type}: tiered_replicants must be (tier, count) pairs, got "
                + safe_repr(pairs)
            )
        for tier, count in pairs:
            if not isinstance(tier, str) or not tier:
                raise SpecError(
                    f"rule {self.type}: tier names must be non-empty strings, got "
                    + safe_repr(tier)
                )
            # Druid's replicant counts are Java ints.
            if int_problem(count, minimum=0, maximum=INT32_MAX) is not None:
                raise SpecError(
                    f"rule {self.type}: replicants of tier {tier!r} must be an integer >= 0 "
                    f"(at most {INT32_MAX}), got {safe_repr(count)}"
                )

    @property
    def replicants(self) -> dict[str, int]:
        return dict(self.tiered_replicants)

    def to_json(self) -> dict[str, Any]:
        return {**Rule.to_json(self), "tieredReplicants": self.replicants}

    @classmethod
    def forever(cls, replicants: Mapping[str, int] | None = None) -> LoadRule:
        return cls("loadForever", tiered_replicants=_tiers(replicants))

    @classmethod
    def by_period(
        cls,
        period: str | Period,
        replicants: Mapping[str, int] | None = None,
        *,
        include_future: bool = True,
    ) -> LoadRule:
        return cls(
            "loadByPeriod",
            period=_period(period),
            include_future=include_future,
            tiered_replicants=_tiers(replicants),
        )

    @classmethod
    def by_interval(
        cls, interval: str | Interval, replicants: Mapping[str, int] | None = None
    ) -> LoadRule:
        return cls(
            "loadByInterval", interval=_interval(interval), tiered_replicants=_tiers(replicants)
        )


@dataclass(frozen=True, slots=True)
class DropRule(Rule):
    """Retire the segments the rule matches: they are marked unused, later killed."""

    kind: ClassVar[str] = "drop"

    @classmethod
    def forever(cls) -> DropRule:
        return cls("dropForever")

    @classmethod
    def by_period(cls, period: str | Period, *, include_future: bool = True) -> DropRule:
        return cls("dropByPeriod", period=_period(period), include_future=include_future)

    @classmethod
    def before_by_period(cls, period: str | Period) -> DropRule:
        return cls("dropBeforeByPeriod", period=_period(period))

    @classmethod
    def by_interval(cls, interval: str | Interval) -> DropRule:
        return cls("dropByInterval", interval=_interval(interval))


@dataclass(frozen=True, slots=True)
class BroadcastRule(Rule):
    """Keep a copy of the segments the rule matches on every active volume."""

    kind: ClassVar[str] = "broadcast"

    @classmethod
    def forever(cls) -> BroadcastRule:
        return cls("broadcastForever")

    @classmethod
    def by_period(cls, period: str | Period, *, include_future: bool = True) -> BroadcastRule:
        return cls("broadcastByPeriod", period=_period(period), include_future=include_future)

    @classmethod
    def by_interval(cls, interval: str | Interval) -> BroadcastRule:
        return cls("broadcastByInterval", interval=_interval(interval))


def rule_from_json(data: Mapping[str, Any]) -> Rule:
    """The rule of Druid's rule JSON (``{"type": "loadByPeriod", "period": "P1M", …}``)."""
    if not isinstance(data, Mapping):
        raise SpecError(f"a rule must be a JSON object, got {safe_repr(data)}")
    name = data.get("type")
    if not isinstance(name, str) or name not in _TYPES:
        raise SpecError(f"unknown rule type {safe_repr(name)}; known: {sorted(_TYPES)}")
    kind, takes = _TYPES[name]
    allowed = {"type"} | ({takes} if takes else set())
    if takes == "period" and name != "dropBeforeByPeriod":
        allowed.add("includeFuture")
    if kind == "load":
        allowed |= {"tieredReplicants", "useDefaultTierForNull"}
    unknown = sorted(k if isinstance(k, str) else safe_repr(k) for k in data if k not in allowed)
    if unknown:
        raise SpecError(f"rule {name} has unknown keys {unknown}; it takes {sorted(allowed)}")
    common: dict[str, Any] = {
        "period": _period(data["period"]) if "period" in data else None,
        "interval": _interval(data["interval"]) if "interval" in data else None,
        "include_future": _flag(data, "includeFuture", name),
    }
    if kind == "load":
        use_default = _flag(data, "useDefaultTierForNull", name)
        replicants = data.get("tieredReplicants")
        if replicants is None:
            replicants = {DEFAULT_TIER: _DEFAULT_REPLICANTS} if use_default else {}
        if not isinstance(replicants, Mapping):
            raise SpecError(
                f"rule {name}: tieredReplicants must be an object, got {safe_repr(replicants)}"
            )
        return LoadRule(name, tiered_replicants=_tiers(replicants), **common)
    rule_class = DropRule if kind == "drop" else BroadcastRule
    return rule_class(name, **common)


def _flag(data: Mapping[str, Any], key: str, rule: str) -> bool:
    """A flag of rule JSON; missing or null is Druid's default, true."""
    value = data.get(key)
    return True if value is None else check_flag(value, f"rule {rule} {key}")


def rules_from_json(data: str | Sequence[Mapping[str, Any] | Rule]) -> tuple[Rule, ...]:
    """A chain from a JSON list (or its text); :class:`Rule` objects pass through."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as e:  # a number of 4300+ digits; deep nesting
            raise SpecError(f"rules are not valid JSON: {safe_repr(e)}") from None
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise SpecError(f"rules must be a JSON list of rule objects, got {safe_repr(data)}")
    return tuple(_rule(r, i) for i, r in enumerate(data))


def _rule(data: Mapping[str, Any] | Rule, index: int) -> Rule:
    if isinstance(data, Rule):
        return data
    try:
        return rule_from_json(data)
    except SpecError as e:
        raise SpecError(f"rules[{index}]: {e}") from None


def rules_to_json(rules: Sequence[Rule]) -> list[dict[str, Any]]:
    return [rule.to_json() for rule in rules]


def rule_for(
    interval: Interval, now_ms: int, chain: Sequence[Rule], default_chain: Sequence[Rule]
) -> Rule | None:
    """The first rule of ``chain``, then of ``default_chain``, that applies; None if none."""
    for rule in (*chain, *default_chain):
        if rule.applies_to(interval, now_ms):
            return rule
    return None


def match_rules(
    chain: Sequence[Rule], start_ms: I64, end_ms: I64, now_ms: int
) -> NDArray[np.int32]:
    """For each segment, the index of the first rule of ``chain`` that applies (-1: none)."""
    out = np.full(len(start_ms), -1, dtype=np.int32)
    open_ = np.ones(len(start_ms), dtype=bool)
    for i, rule in enumerate(chain):
        if not open_.any():
            break
        hit = open_ & rule.applies_mask(start_ms, end_ms, now_ms)
        out[hit] = i
        open_ &= ~hit
    return out


def _tiers(replicants: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
    if replicants is None:
        return ((DEFAULT_TIER, _DEFAULT_REPLICANTS),)
    if not isinstance(replicants, Mapping):
        raise SpecError(f"tiered replicants must be a mapping, got {safe_repr(replicants)}")
    bad = [t for t in replicants if not isinstance(t, str)]
    if bad:  # checked before sorting: names of mixed types do not sort
        raise SpecError(f"tier names must be non-empty strings, got {safe_repr(bad[0])}")
    return tuple(sorted(replicants.items()))


def _period(value: str | Period) -> Period:
    if isinstance(value, Period):
        return value
    if not isinstance(value, str):
        raise SpecError(
            f"a rule period must be an ISO-8601 string such as 'P1M', got {safe_repr(value)}"
        )
    return Period.parse(value)


def _interval(value: str | Interval) -> Interval:
    if isinstance(value, Interval):
        return value
    if not isinstance(value, str):
        raise SpecError(f"a rule interval must be an ISO interval string, got {safe_repr(value)}")
    return Interval.parse(value)


def _period_text(period: Period) -> str:
    years, months = divmod(period.months, 12)
    text = "P" + (f"{years}Y" if years else "") + (f"{months}M" if months else "")
    millis = period.millis
    days, rest = divmod(millis, 86_400_000)
    text += f"{days}D" if days else ""
    if rest:
        hours, rest = divmod(rest, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        text += "T" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
        text += f"{rest / 1000:g}S" if rest else ""
    return text


# Druid's factory default chain.
DEFAULT_RULES: tuple[Rule, ...] = (LoadRule.forever({DEFAULT_TIER: _DEFAULT_REPLICANTS}),)
