"""Half-open UTC time intervals, ISO-8601 timestamps and periods (Druid/Joda semantics).

Internally an instant is an integer count of milliseconds since the epoch (Druid's own
precision); ``datetime`` objects are the public face. ``Interval`` keeps both so that hot paths
(the timeline) compare plain integers.
"""

from __future__ import annotations

import calendar
import operator
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from segmentlake.core.spec_reader import check_int, safe_repr
from segmentlake.errors import SpecError

__all__ = [
    "ETERNITY",
    "Interval",
    "Period",
    "format_timestamp",
    "millis_to_datetime",
    "parse_timestamp",
    "to_millis",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
MIN_MILLIS = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // _MS
MAX_MILLIS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // _MS


def to_millis(value: datetime) -> int:
    """Milliseconds since the epoch of a tz-aware datetime (sub-millisecond part floored)."""
    if not isinstance(value, datetime):
        raise SpecError(
            f"expected a tz-aware datetime, got {type(value).__name__} {safe_repr(value)}; use "
            "datetime(2024, 1, 1, tzinfo=timezone.utc) or Interval.parse('2024-01-01/2024-01-02')"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise SpecError(
            f"timestamp {value.isoformat()} has no time zone; "
            "pass a tz-aware datetime, e.g. datetime(2024, 1, 1, tzinfo=timezone.utc)"
        )
    return (value - _EPOCH) // _MS


def millis_to_datetime(millis: int) -> datetime:
    """The UTC datetime of an epoch-millisecond count."""
    return _EPOCH + timedelta(milliseconds=millis)


def format_timestamp(value: datetime | int) -> str:
    """Druid's timestamp form: ``2024-01-01T00:00:00.000Z``."""
    if isinstance(value, int):
        return _format_millis(value)
    return _format_datetime(value.astimezone(UTC))


@lru_cache(maxsize=1 << 17)
def _format_millis(millis: int) -> str:
    # Segment ids and records format the same chunk bounds over and over (10^4 segments
    # of one publish share their hours): formatting is most of building an id.
    return _format_datetime(millis_to_datetime(millis))


def _format_datetime(dt: datetime) -> str:
    # Not strftime: its %Y does not zero-pad years below 1000 on glibc ("1-01-01T..."), which
    # is not ISO-8601 and does not parse back.
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
        f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO-8601 timestamp or date; a value without offset is taken as UTC.

    >>> parse_timestamp("2024-01-01")
    datetime.datetime(2024, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if not isinstance(text, str):
        raise SpecError(f"a timestamp must be an ISO-8601 string, got {safe_repr(text)}")
    raw = text.strip()
    try:
        if not raw.isascii():  # ISO-8601 is ASCII; Python would read other digits too
            raise ValueError(text)
        if len(raw) == 10:
            parsed = datetime.combine(date.fromisoformat(raw), datetime.min.time())
        else:
            parsed = datetime.fromisoformat(raw)
        # An offset can carry the first or last day of the calendar out of it.
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError) as e:
        raise SpecError(
            f"cannot parse timestamp {safe_repr(text)}; expected ISO-8601 such as "
            "'2024-01-01' or '2024-01-01T12:00:00.000Z' (years 0001-9999)"
        ) from e


# ASCII digits only, at most 18 of them per number (Python would read other scripts' digits,
# and no period of the calendar needs more).
_N = r"\d{1,18}"
_PERIOD = re.compile(
    rf"^P(?!$)(?:(?P<years>{_N})Y)?(?:(?P<months>{_N})M)?(?:(?P<weeks>{_N})W)?(?:(?P<days>{_N})D)?"
    rf"(?:T(?=\d)(?:(?P<hours>{_N})H)?(?:(?P<minutes>{_N})M)?(?:(?P<seconds>{_N}(?:\.\d{{1,3}})?)S)?)?$",
    re.ASCII,
)
# The calendar's span (years 1-9999): a longer period reaches past either end from anywhere.
_MAX_PERIOD_MONTHS = 9999 * 12


_ZERO_PERIOD = re.compile(r"P(?:0+[YMWD])*(?:T(?:0+[HMS])+)?")


def is_zero_period(text: object) -> bool:
    """Whether ``text`` is an ISO-8601 period of length zero (``P0D``, ``PT0S``,
    ``P0Y0M0D``), which :meth:`Period.parse` refuses: a period must have a positive length."""
    if not isinstance(text, str):
        return False
    raw = text.strip().upper()
    return raw != "P" and _ZERO_PERIOD.fullmatch(raw) is not None


@dataclass(frozen=True, slots=True)
class Period:
    """An ISO-8601 period such as ``P1D``, ``PT15M`` or ``P1Y2M``; months and years are calendar
    units, the rest fixed durations (UTC has no DST)."""

    months: int = 0
    millis: int = 0

    def __post_init__(self) -> None:
        check_int(self.months, "period months")
        check_int(self.millis, "period millis")

    @classmethod
    def parse(cls, text: str) -> Period:
        """Parse ``P[nY][nM][nW][nD][T[nH][nM][n[.fff]S]]``."""
        match = _PERIOD.match(text.strip().upper()) if isinstance(text, str) else None
        if match is None:
            raise SpecError(
                f"cannot parse period {safe_repr(text)}; expected ISO-8601 such as 'P1D', "
                "'PT1H', 'P1M'"
            )
        g = {k: v or "0" for k, v in match.groupdict().items()}
        months = int(g["years"]) * 12 + int(g["months"])
        millis = (
            ((int(g["weeks"]) * 7 + int(g["days"])) * 24 + int(g["hours"])) * 3_600_000
            + int(g["minutes"]) * 60_000
            + round(float(g["seconds"]) * 1000)
        )
        if months == 0 and millis == 0:
            raise SpecError(
                f"period {safe_repr(text)} is empty; a period must have a positive length"
            )
        if months > _MAX_PERIOD_MONTHS or millis > MAX_MILLIS - MIN_MILLIS:
            raise SpecError(f"period {safe_repr(text)} is longer than the calendar (years 1-9999)")
        return cls(months=months, millis=millis)

    def to_iso(self) -> str:
        """The ISO-8601 text :meth:`parse` reads back as this period (``P1D``, ``PT1H30M``)."""
        years, months = divmod(self.months, 12)
        days, rest = divmod(self.millis, 86_400_000)
        hours, rest = divmod(rest, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        seconds = f"{rest // 1000}" if rest % 1000 == 0 else f"{rest / 1000:.3f}".rstrip("0")
        date = "".join(f"{n}{unit}" for n, unit in ((years, "Y"), (months, "M"), (days, "D")) if n)
        clock = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
        clock += f"{seconds}S" if rest else ""
        return f"P{date}" + (f"T{clock}" if clock else "")

    def add_to(self, millis: int, times: int = 1) -> int:
        """The instant ``times`` periods after (or before, if negative) ``millis``; a
        :class:`SpecError` when that is outside the calendar (years 1-9999)."""
        if self.months:
            dt = millis_to_datetime(millis)
            total = dt.year * 12 + (dt.month - 1) + self.months * times
            year, month = divmod(total, 12)
            if not 1 <= year <= 9999:
                raise SpecError(_beyond(self, millis, times))
            day = min(dt.day, calendar.monthrange(year, month + 1)[1])
            millis = to_millis(dt.replace(year=year, month=month + 1, day=day))
        result = millis + self.millis * times
        if not MIN_MILLIS <= result <= MAX_MILLIS:
            raise SpecError(_beyond(self, millis, times))
        return result


def _beyond(period: Period, millis: int, times: int) -> str:
    return (
        f"{times} x {period} from {format_timestamp(millis)} is outside the calendar "
        "(years 0001-9999)"
    )


@dataclass(frozen=True, slots=True)
class Interval:
    """A half-open UTC interval ``[start, end)``.

    ``Interval.parse`` accepts Druid's forms: ``start/end``, ``start/P1D`` and ``P1D/end``.

    >>> Interval.parse("2024-01-01/P1D")
    Interval('2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z')
    """

    start: datetime
    end: datetime
    start_millis: int = field(init=False, repr=False, compare=False)
    end_millis: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        start_ms, end_ms = to_millis(self.start), to_millis(self.end)
        if end_ms < start_ms:
            raise SpecError(
                f"interval end {format_timestamp(self.end)} is before its start "
                f"{format_timestamp(self.start)}; an interval is [start, end) with start <= end"
            )
        # Normalise to UTC millisecond precision so equal instants compare equal.
        object.__setattr__(self, "start", millis_to_datetime(start_ms))
        object.__setattr__(self, "end", millis_to_datetime(end_ms))
        object.__setattr__(self, "start_millis", start_ms)
        object.__setattr__(self, "end_millis", end_ms)

    @classmethod
    def of_millis(cls, start_millis: int, end_millis: int) -> Interval:
        """Build from epoch milliseconds."""
        if not (
            type(start_millis) is int
            and type(end_millis) is int
            and MIN_MILLIS <= start_millis <= end_millis <= MAX_MILLIS
        ):  # the general path names what is wrong
            start, end = _millis(start_millis), _millis(end_millis)
            return cls(millis_to_datetime(start), millis_to_datetime(end))
        # Already normalised: skip __post_init__'s round trip (10^5 segments are built from
        # metadata rows at a time).
        interval = object.__new__(cls)
        object.__setattr__(interval, "start", millis_to_datetime(start_millis))
        object.__setattr__(interval, "end", millis_to_datetime(end_millis))
        object.__setattr__(interval, "start_millis", start_millis)
        object.__setattr__(interval, "end_millis", end_millis)
        return interval

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Parse ``start/end``, ``start/PERIOD`` or ``PERIOD/end`` (ISO-8601)."""
        if not isinstance(text, str) or text.count("/") != 1:
            raise SpecError(
                f"cannot parse interval {safe_repr(text)}; expected 'start/end', 'start/P1D' or "
                "'P1D/end', e.g. '2024-01-01/2024-01-02'"
            )
        left, right = (part.strip() for part in text.split("/"))
        if left.upper().startswith("P") and right.upper().startswith("P"):
            raise SpecError(
                f"interval {safe_repr(text)} has two periods; one side must be a timestamp"
            )
        try:
            if right.upper().startswith("P"):
                start = to_millis(parse_timestamp(left))
                return cls.of_millis(start, Period.parse(right).add_to(start))
            if left.upper().startswith("P"):
                end = to_millis(parse_timestamp(right))
                return cls.of_millis(Period.parse(left).add_to(end, -1), end)
            return cls(parse_timestamp(left), parse_timestamp(right))
        except (ValueError, OverflowError) as e:  # SpecError is a ValueError
            # Name the whole input; period arithmetic past year 9999 raises ValueError or
            # OverflowError from datetime.
            raise SpecError(f"cannot parse interval {safe_repr(text)}: {e}") from e

    @property
    def key(self) -> tuple[int, int]:
        """``(start_millis, end_millis)``: a cheap hashable identity."""
        return (self.start_millis, self.end_millis)

    @property
    def duration_millis(self) -> int:
        return self.end_millis - self.start_millis

    def is_empty(self) -> bool:
        return self.start_millis == self.end_millis

    def contains(self, other: Interval) -> bool:
        """True when ``other`` lies wholly inside this interval."""
        return self.start_millis <= other.start_millis and other.end_millis <= self.end_millis

    def contains_millis(self, instant: int) -> bool:
        return self.start_millis <= instant < self.end_millis

    def overlaps(self, other: Interval) -> bool:
        """True when the two intervals share at least one instant."""
        return self.start_millis < other.end_millis and other.start_millis < self.end_millis

    def abuts(self, other: Interval) -> bool:
        return self.end_millis == other.start_millis or other.end_millis == self.start_millis

    def intersection(self, other: Interval) -> Interval | None:
        """The overlap of the two intervals, or None when they share no instant."""
        start = max(self.start_millis, other.start_millis)
        end = min(self.end_millis, other.end_millis)
        return Interval.of_millis(start, end) if start < end else None

    def __str__(self) -> str:
        return f"{format_timestamp(self.start_millis)}/{format_timestamp(self.end_millis)}"

    def __repr__(self) -> str:
        return f"Interval('{self}')"

    def __lt__(self, other: Interval) -> bool:
        return self.key < other.key


def _millis(value: object) -> int:
    """An interval bound in epoch milliseconds: an integer (numpy's too, not a bool or a
    float) within the calendar."""
    number = None
    if not isinstance(value, bool) and hasattr(type(value), "__index__"):
        # The __index__ check is SupportsIndex's own test; isinstance against the runtime
        # Protocol would narrow it but costs microseconds on this hot path.
        number = operator.index(value)  # type: ignore[arg-type]
    if number is None or not MIN_MILLIS <= number <= MAX_MILLIS:
        raise SpecError(
            "an interval bound must be epoch milliseconds within years 0001-9999, got "
            + safe_repr(value)
        )
    return number


ETERNITY = Interval.of_millis(MIN_MILLIS, MAX_MILLIS)
