"""Druid's standard granularities: bucket an instant, iterate the buckets of an interval.

All buckets are aligned in UTC. Weeks start on Monday (Joda/ISO, as in Druid); quarters on
January, April, July and October. ``NONE`` buckets by millisecond and ``ALL`` is one bucket
spanning all time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from datetime import MAXYEAR as MAX_YEAR
from datetime import UTC, datetime

import numpy as np

from segmentlake.core.interval import (
    MAX_MILLIS,
    MIN_MILLIS,
    Interval,
    millis_to_datetime,
    to_millis,
)
from segmentlake.core.spec_reader import StrictEnumType, safe_repr
from segmentlake.errors import SpecError

__all__ = ["WEEK_ORIGIN_MILLIS", "Granularity", "bucket_granularities", "granularity_of_bucket"]

_SECOND = 1000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
# 1970-01-05 was a Monday: weeks are counted from there.
WEEK_ORIGIN_MILLIS = 4 * _DAY


class Granularity(enum.Enum, metaclass=StrictEnumType):
    """A time bucketing rule, named as in Druid (``Granularity.parse("day")``)."""

    NONE = ("none", 1, 0)
    SECOND = ("second", _SECOND, 0)
    MINUTE = ("minute", _MINUTE, 0)
    FIVE_MINUTE = ("five_minute", 5 * _MINUTE, 0)
    TEN_MINUTE = ("ten_minute", 10 * _MINUTE, 0)
    FIFTEEN_MINUTE = ("fifteen_minute", 15 * _MINUTE, 0)
    THIRTY_MINUTE = ("thirty_minute", 30 * _MINUTE, 0)
    HOUR = ("hour", _HOUR, 0)
    SIX_HOUR = ("six_hour", 6 * _HOUR, 0)
    EIGHT_HOUR = ("eight_hour", 8 * _HOUR, 0)
    DAY = ("day", _DAY, 0)
    WEEK = ("week", 7 * _DAY, 0)
    MONTH = ("month", 0, 1)
    QUARTER = ("quarter", 0, 3)
    YEAR = ("year", 0, 12)
    ALL = ("all", 0, 0)

    def __init__(self, json_name: str, fixed_millis: int, months: int) -> None:
        self.json_name = json_name
        self.fixed_millis = fixed_millis
        self.months = months

    @classmethod
    def parse(cls, value: str | Granularity | Mapping[str, object]) -> Granularity:
        """Accept a Granularity, a name in any case (``"DAY"``, ``"fifteen_minute"``), Druid's
        ``{"type": "day"}`` JSON form, or a Druid ``period`` / ``duration`` granularity that is
        one of these in UTC (``{"type": "period", "period": "PT1H"}``); one with another time
        zone, an origin or another length is refused."""
        if isinstance(value, Granularity):
            return value
        name: object = value
        if isinstance(value, Mapping) and value.get("type") in ("period", "duration"):
            return _standard(value)
        if isinstance(value, Mapping):
            if set(value) != {"type"}:
                raise SpecError(
                    f"granularity {safe_repr(value)} is not supported: only Druid's "
                    '{"type": <name>} form is, e.g. {"type": "day"} (no period, timeZone or '
                    f"origin: buckets are aligned in UTC); names: {_KNOWN}"
                )
            name = value["type"]
        if isinstance(name, str):
            for member in cls:
                if member.json_name == name.strip().lower():
                    return member
        raise SpecError(f"unknown granularity {safe_repr(value)}; expected one of {_KNOWN}")

    @classmethod
    def _missing_(cls, value: object) -> None:
        # Granularity("bogus") is a SpecError too, not a bare ValueError.
        raise SpecError(f"unknown granularity {safe_repr(value)}; expected one of {_KNOWN}")

    def bucket_start_millis(self, millis: int) -> int:
        """Start (epoch ms) of the bucket holding ``millis``."""
        if self is Granularity.ALL:
            return MIN_MILLIS
        if self is Granularity.WEEK:
            return millis - (millis - WEEK_ORIGIN_MILLIS) % self.fixed_millis
        if self.fixed_millis:
            return millis - millis % self.fixed_millis
        dt = millis_to_datetime(millis)
        month0 = (dt.month - 1) // self.months * self.months
        return to_millis(datetime(dt.year, month0 + 1, 1, tzinfo=UTC))

    def next_bucket_start_millis(self, bucket_start: int) -> int:
        """Start of the bucket after the one starting at ``bucket_start``."""
        if self is Granularity.ALL:
            return MAX_MILLIS
        # The last bucket of the calendar (year 9999, e.g. a "9999-12-31" sentinel timestamp)
        # ends at MAX_MILLIS, like ETERNITY, instead of overflowing datetime.
        if self.fixed_millis:
            return min(bucket_start + self.fixed_millis, MAX_MILLIS)
        dt = millis_to_datetime(bucket_start)
        total = dt.year * 12 + dt.month - 1 + self.months
        if total // 12 > MAX_YEAR:
            return MAX_MILLIS
        return to_millis(datetime(total // 12, total % 12 + 1, 1, tzinfo=UTC))

    def bucket(self, instant: datetime | int) -> Interval:
        """The bucket containing an instant (datetime or epoch ms)."""
        millis = instant if isinstance(instant, int) else to_millis(instant)
        start = self.bucket_start_millis(millis)
        return Interval.of_millis(start, self.next_bucket_start_millis(start))

    def truncate(self, instant: datetime) -> datetime:
        """The start of the bucket holding ``instant``."""
        return millis_to_datetime(self.bucket_start_millis(to_millis(instant)))

    def iterate(self, interval: Interval) -> Iterator[Interval]:
        """Every bucket that overlaps ``interval``, in time order."""
        if interval.is_empty():
            return
        start = self.bucket_start_millis(interval.start_millis)
        while start < interval.end_millis:
            end = self.next_bucket_start_millis(start)
            yield Interval.of_millis(start, end)
            start = end

    def is_aligned(self, interval: Interval) -> bool:
        """True when ``interval`` starts and ends on bucket boundaries of this granularity."""
        if self is Granularity.ALL:
            return interval.key == (MIN_MILLIS, MAX_MILLIS)
        start = interval.start_millis
        return (
            self.bucket_start_millis(start) == start
            and self.bucket_start_millis(interval.end_millis) == interval.end_millis
        )

    def starts_buckets(self, millis: np.ndarray) -> np.ndarray:
        """Whether each instant of ``millis`` (epoch ms, int64) starts one of this
        granularity's buckets, as a bool array: one vectorised test for the fixed lengths
        (an append checks every compacted chunk of its datasource, 10^5 of them)."""
        if self is Granularity.ALL:
            return np.asarray(millis == MIN_MILLIS)
        if self.fixed_millis:
            origin = WEEK_ORIGIN_MILLIS if self is Granularity.WEEK else 0
            return np.asarray((millis - origin) % self.fixed_millis == 0)
        values = millis.tolist()
        return np.fromiter((self.bucket_start_millis(m) == m for m in values), bool, len(values))

    def nests_in(self, coarser: Granularity) -> bool:
        """Whether each of this granularity's buckets lies in one bucket of ``coarser``: a
        query granularity that does not nest in the segment granularity (TEN_MINUTE in
        FIFTEEN_MINUTE, WEEK in MONTH) can truncate a row's time to before its chunk."""
        if self is Granularity.NONE or coarser is Granularity.ALL:
            return True
        if coarser is Granularity.NONE or self is Granularity.ALL:
            return self is coarser
        if self is Granularity.WEEK:
            return coarser is Granularity.WEEK
        if self.months:
            return bool(coarser.months) and coarser.months % self.months == 0
        # A fixed length: the coarser buckets must start on this one's boundaries and be whole
        # multiples of it (weeks and calendar units start at midnight).
        plain = coarser.fixed_millis and coarser is not Granularity.WEEK
        step = coarser.fixed_millis if plain else _DAY
        return step % self.fixed_millis == 0

    def __str__(self) -> str:
        return self.name


_KNOWN = ", ".join(m.json_name.upper() for m in Granularity)


_FINEST_FIRST = tuple(Granularity)  # iterating the enum itself costs a generator a call
# No two granularities' buckets have one fixed length, and no calendar bucket has any of them.
_FIXED_BY_LENGTH = {g.fixed_millis: g for g in Granularity if g.fixed_millis}


_PERIODS = {
    "PT1S": Granularity.SECOND,
    "PT1M": Granularity.MINUTE,
    "PT5M": Granularity.FIVE_MINUTE,
    "PT10M": Granularity.TEN_MINUTE,
    "PT15M": Granularity.FIFTEEN_MINUTE,
    "PT30M": Granularity.THIRTY_MINUTE,
    "PT1H": Granularity.HOUR,
    "PT6H": Granularity.SIX_HOUR,
    "PT8H": Granularity.EIGHT_HOUR,
    "P1D": Granularity.DAY,
    "P1W": Granularity.WEEK,
    "P1M": Granularity.MONTH,
    "P3M": Granularity.QUARTER,
    "P1Y": Granularity.YEAR,
}
_UTC = (None, "UTC", "Etc/UTC", "GMT", "Z", "+00:00")


def _standard(value: Mapping[str, object]) -> Granularity:
    """The standard granularity a Druid ``period`` or ``duration`` granularity is."""
    kind = value.get("type")
    unknown = set(value) - {"type", kind, "timeZone", "origin"}
    if unknown or value.get("timeZone") not in _UTC or value.get("origin") is not None:
        raise SpecError(
            f"granularity {safe_repr(value)} is not supported: buckets are aligned in UTC with "
            "no origin (no timeZone other than UTC, no origin); periods: " + ", ".join(_PERIODS)
        )
    if kind == "period":
        period = value.get("period")
        member = _PERIODS.get(period.upper()) if isinstance(period, str) else None
    else:  # a duration counts from the epoch, a Thursday: never ISO weeks
        length = value.get("duration")
        member = _FIXED_BY_LENGTH.get(length) if type(length) is int else None
        member = None if member is Granularity.WEEK else member
    if member is None:
        raise SpecError(
            f"granularity {safe_repr(value)} is none of Druid's standard granularities, which "
            "segmentlake buckets by; periods: " + ", ".join(_PERIODS)
        )
    return member


def granularity_of_bucket(interval: Interval) -> Granularity | None:
    """The finest granularity of which ``interval`` is one bucket (a chunk's segment
    granularity), or None when it is no granularity's bucket."""
    start, end = interval.start_millis, interval.end_millis
    fixed = _FIXED_BY_LENGTH.get(end - start)
    if fixed is not None:
        return fixed if fixed.bucket_start_millis(start) == start else None
    for member in _FINEST_FIRST:
        if member.fixed_millis and end != MAX_MILLIS:
            continue  # (only the last bucket before MAX_MILLIS is cut short)
        if member.bucket(start) == interval:
            return member
    return None


def bucket_granularities(starts: np.ndarray, ends: np.ndarray) -> dict[Granularity, np.ndarray]:
    """:func:`granularity_of_bucket` of each interval ``[starts[i], ends[i])`` (epoch ms,
    int64 arrays), as a bool mask per granularity found; an interval in no mask is no
    granularity's bucket. Fixed lengths are tested in numpy, the calendar's one by one."""
    lengths = ends - starts
    found: dict[Granularity, np.ndarray] = {}
    calendar = np.ones(len(starts), dtype=bool)
    for length, member in _FIXED_BY_LENGTH.items():
        this_length = lengths == length
        calendar &= ~this_length
        mask = this_length & member.starts_buckets(starts)
        if mask.any():
            found[member] = mask
    for i in np.flatnonzero(calendar).tolist():
        some = granularity_of_bucket(Interval.of_millis(int(starts[i]), int(ends[i])))
        if some is not None:
            found.setdefault(some, np.zeros(len(starts), dtype=bool))[i] = True
    return found
