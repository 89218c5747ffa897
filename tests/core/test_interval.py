"""Interval, Period and timestamp helpers: Druid/Joda semantics for half-open UTC intervals."""

from __future__ import annotations

import pickle
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segmentlake.core.interval import (
    ETERNITY,
    MAX_MILLIS,
    MIN_MILLIS,
    Interval,
    Period,
    format_timestamp,
    millis_to_datetime,
    parse_timestamp,
    to_millis,
)
from segmentlake.errors import SegmentLakeError, SpecError


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def iv(text: str) -> Interval:
    return Interval.parse(text)


# --------------------------------------------------------------------------- construction


def test_construct_from_utc_datetimes():
    interval = Interval(utc(2024, 1, 1), utc(2024, 1, 2))
    assert interval.start == utc(2024, 1, 1)
    assert interval.end == utc(2024, 1, 2)
    assert interval.start_millis == 1704067200000
    assert interval.end_millis == 1704067200000 + 86_400_000
    assert interval.duration_millis == 86_400_000
    assert interval.key == (1704067200000, 1704153600000)


def test_naive_datetime_is_rejected_with_a_helpful_message():
    with pytest.raises(SpecError, match=r"no time zone.*tz-aware") as info:
        Interval(datetime(2024, 1, 1), utc(2024, 1, 2))
    assert "2024-01-01T00:00:00" in str(info.value)
    with pytest.raises(SpecError, match="no time zone"):
        Interval(utc(2024, 1, 1), datetime(2024, 1, 2))


def test_spec_error_is_a_value_error_and_a_segmentlake_error():
    with pytest.raises(ValueError, match="no time zone"):
        Interval(datetime(2024, 1, 1), utc(2024, 1, 2))
    with pytest.raises(SegmentLakeError):
        Interval.parse("nope")


@pytest.mark.parametrize("bad", ["2024-01-01", 1704067200000, None])
def test_non_datetime_bounds_are_rejected(bad):
    with pytest.raises(SpecError, match="expected a tz-aware datetime"):
        Interval(bad, utc(2024, 1, 2))


def test_non_utc_aware_datetimes_are_converted_to_utc():
    plus5 = timezone(timedelta(hours=5))
    interval = Interval(
        datetime(2024, 1, 1, 5, tzinfo=plus5), datetime(2024, 1, 2, 5, tzinfo=plus5)
    )
    assert interval == iv("2024-01-01/2024-01-02")
    assert interval.start.tzinfo == UTC
    assert interval.start.utcoffset() == timedelta(0)
    assert interval.start.hour == 0


def test_sub_millisecond_precision_is_floored_to_milliseconds():
    a = Interval(utc(2024, 1, 1, 0, 0, 0, 1_999), utc(2024, 1, 1, 0, 0, 1, 999_999))
    assert a.start == utc(2024, 1, 1, 0, 0, 0, 1_000)
    assert a.end == utc(2024, 1, 1, 0, 0, 1, 999_000)
    b = Interval(utc(2024, 1, 1, 0, 0, 0, 1_000), utc(2024, 1, 1, 0, 0, 1, 999_000))
    assert a == b
    assert hash(a) == hash(b)
    assert str(a) == "2024-01-01T00:00:00.001Z/2024-01-01T00:00:01.999Z"


def test_end_before_start_is_rejected():
    with pytest.raises(SpecError, match="before its start"):
        Interval(utc(2024, 1, 2), utc(2024, 1, 1))
    with pytest.raises(SpecError, match="before its start"):
        Interval.of_millis(10, 9)
    with pytest.raises(SpecError, match="2024-01-02/2024-01-01"):
        iv("2024-01-02/2024-01-01")


def test_empty_interval_is_allowed():
    empty = Interval(utc(2024, 1, 1), utc(2024, 1, 1))
    assert empty.is_empty()
    assert empty.duration_millis == 0
    assert not iv("2024-01-01/P1D").is_empty()


def test_interval_is_frozen_and_hashable():
    interval = iv("2024-01-01/2024-01-02")
    with pytest.raises(AttributeError):
        interval.start = utc(2020, 1, 1)  # type: ignore[misc]
    assert {interval, iv("2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z")} == {interval}


def test_pickle_round_trip():
    interval = iv("2024-01-01T01:02:03.456Z/P1D")
    again = pickle.loads(pickle.dumps(interval))
    assert again == interval
    assert again.key == interval.key


def test_of_millis_and_sorting():
    a, b, c = Interval.of_millis(0, 10), Interval.of_millis(0, 20), Interval.of_millis(5, 6)
    assert a.start == utc(1970, 1, 1)
    assert sorted([c, b, a]) == [a, b, c]


# --------------------------------------------------------------------------- half-open relations


def test_half_open_contains_millis():
    interval = iv("2024-01-01/2024-01-02")
    assert interval.contains_millis(interval.start_millis)
    assert interval.contains_millis(interval.end_millis - 1)
    assert not interval.contains_millis(interval.end_millis)
    assert not interval.contains_millis(interval.start_millis - 1)


def test_contains_interval():
    day = iv("2024-01-01/2024-01-02")
    assert day.contains(day)
    assert day.contains(iv("2024-01-01T06:00/PT1H"))
    assert day.contains(iv("2024-01-01T23:00/2024-01-02"))
    assert not day.contains(iv("2024-01-01T23:00/2024-01-02T00:00:00.001Z"))
    assert not day.contains(iv("2023-12-31T23:59:59.999Z/2024-01-01T01:00"))
    assert not iv("2024-01-01T06:00/PT1H").contains(day)


def test_adjacent_intervals_abut_but_do_not_overlap():
    a, b = iv("2024-01-01/2024-01-02"), iv("2024-01-02/2024-01-03")
    assert a.abuts(b)
    assert b.abuts(a)
    assert not a.overlaps(b)
    assert not b.overlaps(a)
    assert a.intersection(b) is None


def test_overlaps_and_intersection():
    a, b = iv("2024-01-01/2024-01-03"), iv("2024-01-02/2024-01-04")
    assert a.overlaps(b)
    assert b.overlaps(a)
    assert not a.abuts(b)
    assert a.intersection(b) == iv("2024-01-02/2024-01-03")
    assert b.intersection(a) == iv("2024-01-02/2024-01-03")
    inner = iv("2024-01-01T12:00/PT1H")
    assert a.intersection(inner) == inner
    assert a.intersection(a) == a


def test_disjoint_intervals():
    a, b = iv("2024-01-01/2024-01-02"), iv("2024-01-05/2024-01-06")
    assert not a.overlaps(b)
    assert not a.abuts(b)
    assert a.intersection(b) is None


def test_one_millisecond_overlap():
    a = iv("2024-01-01/2024-01-02T00:00:00.001Z")
    b = iv("2024-01-02/2024-01-03")
    assert a.overlaps(b)
    assert a.intersection(b) == Interval.of_millis(b.start_millis, b.start_millis + 1)


_millis = st.integers(min_value=to_millis(utc(1900, 1, 1)), max_value=to_millis(utc(2100, 1, 1)))


@st.composite
def intervals(draw: st.DrawFn, *, min_length: int = 0) -> Interval:
    a, b = draw(_millis), draw(_millis)
    return Interval.of_millis(min(a, b), max(a, b) + min_length)


# Non-empty: like Joda, overlaps() is true for an empty interval strictly inside another, though
# they share no instant (and intersection() is None there).
@given(intervals(min_length=1), intervals(min_length=1), _millis)
def test_relations_agree_with_pointwise_membership(a: Interval, b: Interval, t: int):
    both = a.contains_millis(t) and b.contains_millis(t)
    inter = a.intersection(b)
    assert (inter is not None and inter.contains_millis(t)) == both
    if both:
        assert a.overlaps(b)
    assert a.overlaps(b) == b.overlaps(a)
    assert a.abuts(b) == b.abuts(a)
    assert (inter is not None) == a.overlaps(b)
    if inter is not None:
        assert a.contains(inter)
        assert b.contains(inter)


# --------------------------------------------------------------------------- parsing


def test_parse_start_end():
    assert iv("2024-01-01/2024-01-02") == Interval(utc(2024, 1, 1), utc(2024, 1, 2))
    assert iv("2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z") == iv("2024-01-01/2024-01-02")
    assert iv(" 2024-01-01 / 2024-01-02 ") == iv("2024-01-01/2024-01-02")


def test_parse_timestamps_with_offsets_convert_to_utc():
    assert iv("2024-01-01T05:00:00+05:00/2024-01-01T19:00:00-05:00") == iv(
        "2024-01-01T00:00Z/2024-01-02T00:00Z"
    )


def test_parse_timestamps_without_offset_are_utc():
    assert iv("2024-01-01T10:00:00/2024-01-01T11:00:00") == Interval(
        utc(2024, 1, 1, 10), utc(2024, 1, 1, 11)
    )


def test_parse_fractional_seconds():
    interval = iv("2024-01-01T00:00:00.123Z/2024-01-01T00:00:01.5Z")
    assert interval.start == utc(2024, 1, 1, 0, 0, 0, 123_000)
    assert interval.end == utc(2024, 1, 1, 0, 0, 1, 500_000)
    # Sub-millisecond digits are dropped (floored), as Druid keeps milliseconds only.
    assert iv("2024-01-01T00:00:00.123456789Z/P1D").start_millis % 1000 == 123


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("2024-01-01/P1D", utc(2024, 1, 1), utc(2024, 1, 2)),
        ("2024-01-01T10:00/PT15M", utc(2024, 1, 1, 10), utc(2024, 1, 1, 10, 15)),
        ("2024-01-01/PT1H", utc(2024, 1, 1), utc(2024, 1, 1, 1)),
        ("2024-01-01/P1W", utc(2024, 1, 1), utc(2024, 1, 8)),
        ("2024-01-01/P1DT2H", utc(2024, 1, 1), utc(2024, 1, 2, 2)),
        ("2024-01-01/PT1.5S", utc(2024, 1, 1), utc(2024, 1, 1, 0, 0, 1, 500_000)),
        ("2024-01-01/PT0.001S", utc(2024, 1, 1), utc(2024, 1, 1, 0, 0, 0, 1_000)),
        ("2024-01-01/P1M", utc(2024, 1, 1), utc(2024, 2, 1)),
        ("2024-01-01/P1Y", utc(2024, 1, 1), utc(2025, 1, 1)),
        ("2024-01-01/P1Y2M3DT4H5M6S", utc(2024, 1, 1), utc(2025, 3, 4, 4, 5, 6)),
        ("2024-01-01/p1d", utc(2024, 1, 1), utc(2024, 1, 2)),
        # Month arithmetic clamps to the last day of the month (Joda plusMonths).
        ("2024-01-31/P1M", utc(2024, 1, 31), utc(2024, 2, 29)),
        ("2023-01-31/P1M", utc(2023, 1, 31), utc(2023, 2, 28)),
        ("2024-02-29/P1Y", utc(2024, 2, 29), utc(2025, 2, 28)),
        ("2024-03-31/P1M", utc(2024, 3, 31), utc(2024, 4, 30)),
        # Period before an end.
        ("P1D/2024-01-02", utc(2024, 1, 1), utc(2024, 1, 2)),
        ("P1M/2024-03-01", utc(2024, 2, 1), utc(2024, 3, 1)),
        ("P1M/2024-03-31", utc(2024, 2, 29), utc(2024, 3, 31)),
        ("PT15M/2024-01-01T00:00Z", utc(2023, 12, 31, 23, 45), utc(2024, 1, 1)),
        ("P1W/2024-01-08", utc(2024, 1, 1), utc(2024, 1, 8)),
    ],
)
def test_parse_with_period(text, start, end):
    assert iv(text) == Interval(start, end)


@pytest.mark.parametrize(
    "bad",
    [
        "2024-01-01",
        "a/b",
        "P1D/P1D",
        "",
        "2024-13-01/2024-01-02",
        "2024-01-01/2024-02-30",
        "2024-01-01/2024-01-02/2024-01-03",
        "2024-01-01/P",
        "2024-01-01/PT",
        "2024-01-01/P0D",
        "2024-01-01/P1.5D",
        "2024-01-01/-P1D",
        "2024-01-01/P1X",
        "/2024-01-02",
        "2024-01-01/",
        "2024-01-02/2024-01-01",
    ],
)
def test_parse_bad_strings_raise_spec_error_naming_the_input(bad):
    with pytest.raises(SpecError) as info:
        Interval.parse(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", ["a/b", "2024-13-01/2024-01-02", "2024-01-01/P1X"])
def test_parse_error_names_the_whole_interval(bad):
    with pytest.raises(SpecError, match=re.escape(f"cannot parse interval {bad!r}")):
        Interval.parse(bad)


@pytest.mark.parametrize("bad", [None, 20240101, b"2024-01-01/2024-01-02"])
def test_parse_non_string_raises_spec_error(bad):
    with pytest.raises(SpecError, match="cannot parse interval"):
        Interval.parse(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    ["2024-01-01/P10000Y", "9999-12-31/P1D", "2024-01-01/P99999999999D", "P10000Y/2024-01-01"],
)
def test_parse_periods_beyond_the_calendar_raise_spec_error(text):
    with pytest.raises(SpecError, match="cannot parse interval"):
        Interval.parse(text)


# --------------------------------------------------------------------------- formatting


def test_str_is_druid_form():
    assert str(iv("2024-01-01/2024-01-02")) == "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"
    assert str(iv("2024-01-01T01:02:03.045Z/PT1S")) == (
        "2024-01-01T01:02:03.045Z/2024-01-01T01:02:04.045Z"
    )
    assert repr(iv("2024-01-01/P1D")) == (
        "Interval('2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z')"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-01/2024-01-02",
        "2024-01-31/P1M",
        "1969-12-31T23:59:59.999Z/1970-01-01T00:00:00.001Z",
        "0001-01-01/0002-01-01",
        "0999-06-15T12:00:00.5Z/P1D",
        "9999-01-01/9999-12-31",
    ],
)
def test_str_round_trips_through_parse(text):
    interval = iv(text)
    assert iv(str(interval)) == interval


def test_eternity_round_trips():
    assert str(ETERNITY).startswith("0001-01-01T00:00:00.000Z/")
    assert iv(str(ETERNITY)) == ETERNITY
    assert ETERNITY.key == (MIN_MILLIS, MAX_MILLIS)


@given(intervals())
def test_str_round_trip_property(interval: Interval):
    assert iv(str(interval)) == interval


def test_format_timestamp_and_helpers():
    assert format_timestamp(utc(2024, 1, 1)) == "2024-01-01T00:00:00.000Z"
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert format_timestamp(-1) == "1969-12-31T23:59:59.999Z"
    assert format_timestamp(utc(5, 3, 4, 5, 6, 7, 8_900)) == "0005-03-04T05:06:07.008Z"
    plus1 = timezone(timedelta(hours=1))
    assert format_timestamp(datetime(2024, 1, 1, 1, tzinfo=plus1)) == "2024-01-01T00:00:00.000Z"
    assert millis_to_datetime(86_400_000) == utc(1970, 1, 2)
    assert to_millis(utc(1969, 12, 31, 23, 59, 59, 999_500)) == -1  # floored, not truncated


def test_parse_timestamp():
    assert parse_timestamp("2024-01-01") == utc(2024, 1, 1)
    assert parse_timestamp("2024-01-01T12:00:00.000Z") == utc(2024, 1, 1, 12)
    assert parse_timestamp("2024-01-01T12:00:00+02:00") == utc(2024, 1, 1, 10)
    assert parse_timestamp("2024-01-01T12:00:00+02:00").tzinfo == UTC
    with pytest.raises(SpecError, match="'2024-1-1x'"):
        parse_timestamp("2024-1-1x")


def test_period_parse():
    assert Period.parse("P1D") == Period(millis=86_400_000)
    assert Period.parse("P1W") == Period(millis=7 * 86_400_000)
    assert Period.parse("PT15M") == Period(millis=15 * 60_000)
    assert Period.parse("P1Y2M") == Period(months=14)
    assert Period.parse("P1DT2H") == Period(millis=26 * 3_600_000)
    assert Period.parse("PT0.25S") == Period(millis=250)
    with pytest.raises(SpecError, match="'P0D'"):
        Period.parse("P0D")
    with pytest.raises(SpecError, match="'1D'"):
        Period.parse("1D")


def test_period_add_to_backwards_and_forwards():
    jan31 = to_millis(utc(2024, 1, 31))
    assert Period.parse("P1M").add_to(jan31) == to_millis(utc(2024, 2, 29))
    assert Period.parse("P1M").add_to(jan31, 2) == to_millis(utc(2024, 3, 31))
    assert Period.parse("P1M").add_to(jan31, -2) == to_millis(utc(2023, 11, 30))
    assert Period.parse("PT1H").add_to(0, -1) == -3_600_000
