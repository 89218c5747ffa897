"""Granularity: Druid's UTC buckets (weeks start on Monday, quarters on Jan/Apr/Jul/Oct)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from segmentlake.core.granularity import Granularity, bucket_granularities, granularity_of_bucket
from segmentlake.core.interval import ETERNITY, MAX_MILLIS, MIN_MILLIS, Interval, to_millis
from segmentlake.errors import SpecError

G = Granularity


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def iv(text: str) -> Interval:
    return Interval.parse(text)


INSTANT = utc(2024, 5, 17, 13, 47, 29, 123_456)  # a Friday in Q2 of a leap year


@pytest.mark.parametrize(
    ("granularity", "bucket"),
    [
        (G.NONE, "2024-05-17T13:47:29.123Z/2024-05-17T13:47:29.124Z"),
        (G.SECOND, "2024-05-17T13:47:29Z/2024-05-17T13:47:30Z"),
        (G.MINUTE, "2024-05-17T13:47Z/2024-05-17T13:48Z"),
        (G.FIFTEEN_MINUTE, "2024-05-17T13:45Z/2024-05-17T14:00Z"),
        (G.THIRTY_MINUTE, "2024-05-17T13:30Z/2024-05-17T14:00Z"),
        (G.HOUR, "2024-05-17T13:00Z/2024-05-17T14:00Z"),
        (G.SIX_HOUR, "2024-05-17T12:00Z/2024-05-17T18:00Z"),
        (G.DAY, "2024-05-17/2024-05-18"),
        (G.WEEK, "2024-05-13/2024-05-20"),
        (G.MONTH, "2024-05-01/2024-06-01"),
        (G.QUARTER, "2024-04-01/2024-07-01"),
        (G.YEAR, "2024-01-01/2025-01-01"),
    ],
)
def test_bucket_and_truncate_for_every_granularity(granularity, bucket):
    expected = iv(bucket)
    assert granularity.bucket(INSTANT) == expected
    assert granularity.bucket(to_millis(INSTANT)) == expected
    assert granularity.truncate(INSTANT) == expected.start
    assert granularity.truncate(INSTANT).tzinfo == UTC
    assert granularity.is_aligned(expected)


def test_all_is_one_bucket_spanning_all_time():
    assert G.ALL.bucket(INSTANT) == ETERNITY
    assert G.ALL.bucket(utc(1, 1, 1)) == ETERNITY
    assert G.ALL.bucket(utc(1969, 12, 31, 23, 59, 59)) == ETERNITY
    assert G.ALL.truncate(INSTANT) == ETERNITY.start
    assert list(G.ALL.iterate(iv("2024-01-01/P1Y"))) == [ETERNITY]
    assert G.ALL.is_aligned(ETERNITY)
    assert not G.ALL.is_aligned(iv("2024-01-01/P1Y"))


def test_none_is_one_millisecond():
    bucket = G.NONE.bucket(INSTANT)
    assert bucket.duration_millis == 1
    assert list(G.NONE.iterate(iv("2024-01-01/PT0.005S"))) == [
        Interval.of_millis(to_millis(utc(2024, 1, 1)) + i, to_millis(utc(2024, 1, 1)) + i + 1)
        for i in range(5)
    ]
    assert G.NONE.is_aligned(iv("2024-01-01T00:00:00.001Z/PT0.003S"))


@pytest.mark.parametrize(
    ("day", "monday"),
    [
        (utc(2024, 1, 3), utc(2024, 1, 1)),  # Wednesday
        (utc(2024, 1, 1), utc(2024, 1, 1)),  # Monday itself
        (utc(2024, 1, 7, 23, 59, 59, 999_000), utc(2024, 1, 1)),  # Sunday, last ms
        (utc(2024, 1, 8), utc(2024, 1, 8)),
        (utc(2023, 1, 1), utc(2022, 12, 26)),  # Sunday: week starts in the previous year
        (utc(1970, 1, 1), utc(1969, 12, 29)),  # the epoch was a Thursday
        (utc(1969, 12, 31), utc(1969, 12, 29)),
        (utc(1900, 3, 1), utc(1900, 2, 26)),
    ],
)
def test_week_starts_on_monday(day, monday):
    bucket = G.WEEK.bucket(day)
    assert bucket.start == monday
    assert bucket.start.weekday() == 0
    assert bucket.end == monday + timedelta(days=7)


@pytest.mark.parametrize(
    ("month", "quarter_start", "quarter_end"),
    [
        (1, utc(2024, 1, 1), utc(2024, 4, 1)),
        (3, utc(2024, 1, 1), utc(2024, 4, 1)),
        (4, utc(2024, 4, 1), utc(2024, 7, 1)),
        (6, utc(2024, 4, 1), utc(2024, 7, 1)),
        (7, utc(2024, 7, 1), utc(2024, 10, 1)),
        (9, utc(2024, 7, 1), utc(2024, 10, 1)),
        (10, utc(2024, 10, 1), utc(2025, 1, 1)),
        (12, utc(2024, 10, 1), utc(2025, 1, 1)),
    ],
)
def test_quarters(month, quarter_start, quarter_end):
    assert G.QUARTER.bucket(utc(2024, month, 15)) == Interval(quarter_start, quarter_end)


@pytest.mark.parametrize(
    ("year", "feb_days", "year_days"),
    [(2024, 29, 366), (2023, 28, 365), (2000, 29, 366), (1900, 28, 365), (2100, 28, 365)],
)
def test_leap_years(year, feb_days, year_days):
    assert G.MONTH.bucket(utc(year, 2, 10)).duration_millis == feb_days * 86_400_000
    assert G.YEAR.bucket(utc(year, 7, 1)).duration_millis == year_days * 86_400_000
    assert G.DAY.bucket(utc(year, 2, 28, 23)).end == utc(year, 2, 28) + timedelta(days=1)


def test_december_month_rolls_into_next_year():
    assert G.MONTH.bucket(utc(2024, 12, 31, 23, 59)) == iv("2024-12-01/2025-01-01")
    assert G.YEAR.bucket(utc(2024, 12, 31, 23, 59)) == iv("2024-01-01/2025-01-01")


def test_bucket_boundaries_are_half_open():
    assert G.DAY.bucket(utc(2024, 1, 2)) == iv("2024-01-02/2024-01-03")
    assert G.DAY.bucket(utc(2024, 1, 1, 23, 59, 59, 999_000)) == iv("2024-01-01/2024-01-02")
    assert G.HOUR.bucket(utc(1969, 12, 31, 23, 30)) == iv("1969-12-31T23:00Z/1970-01-01T00:00Z")


def test_bucket_of_non_utc_datetime_is_in_utc():
    tokyo = timezone(timedelta(hours=9))
    # 2024-01-02T03:00+09:00 is 2024-01-01T18:00Z: the UTC day is the 1st.
    assert G.DAY.bucket(datetime(2024, 1, 2, 3, tzinfo=tokyo)) == iv("2024-01-01/2024-01-02")


def test_bucket_of_naive_datetime_is_rejected():
    with pytest.raises(SpecError, match="no time zone"):
        G.DAY.bucket(datetime(2024, 1, 1))
    with pytest.raises(SpecError, match="no time zone"):
        G.DAY.truncate(datetime(2024, 1, 1))


@pytest.mark.parametrize("granularity", [g for g in Granularity if g is not G.ALL])
def test_last_bucket_of_the_calendar_ends_at_max_millis(granularity):
    # "9999-12-31" is a common far-future sentinel; bucketing it must not overflow datetime.
    instant = utc(9999, 12, 31, 23, 59, 59)
    bucket = granularity.bucket(instant)
    assert bucket.contains_millis(to_millis(instant))
    assert bucket.end_millis <= MAX_MILLIS
    assert list(granularity.iterate(iv("9999-12-31T23:59:59Z/PT0.5S")))[-1].end_millis <= MAX_MILLIS
    assert G.YEAR.bucket(instant) == Interval.of_millis(to_millis(utc(9999, 1, 1)), MAX_MILLIS)


# --------------------------------------------------------------------------- iterate


def test_iterate_days():
    assert list(G.DAY.iterate(iv("2024-01-01/2024-01-04"))) == [
        iv("2024-01-01/2024-01-02"),
        iv("2024-01-02/2024-01-03"),
        iv("2024-01-03/2024-01-04"),
    ]


def test_iterate_months_over_leap_february():
    assert list(G.MONTH.iterate(iv("2024-01-01/2024-04-01"))) == [
        iv("2024-01-01/2024-02-01"),
        iv("2024-02-01/2024-03-01"),
        iv("2024-03-01/2024-04-01"),
    ]


def test_iterate_quarters_and_years():
    assert [str(b.start.date()) for b in G.QUARTER.iterate(iv("2024-01-01/2025-01-01"))] == [
        "2024-01-01",
        "2024-04-01",
        "2024-07-01",
        "2024-10-01",
    ]
    assert len(list(G.YEAR.iterate(iv("2000-01-01/2024-01-01")))) == 24


def test_iterate_unaligned_interval_yields_every_overlapping_bucket():
    buckets = list(G.DAY.iterate(iv("2024-01-01T12:00Z/2024-01-03T01:00Z")))
    assert buckets == [
        iv("2024-01-01/2024-01-02"),
        iv("2024-01-02/2024-01-03"),
        iv("2024-01-03/2024-01-04"),
    ]
    assert list(G.WEEK.iterate(iv("2024-01-03/P1D"))) == [iv("2024-01-01/2024-01-08")]


def test_iterate_empty_interval_yields_nothing():
    assert list(G.DAY.iterate(iv("2024-01-01/2024-01-01"))) == []


def test_iterate_is_lazy():
    buckets = G.NONE.iterate(iv("2000-01-01/2024-01-01"))  # ~7.6e11 buckets
    assert next(buckets) == iv("2000-01-01/PT0.001S")


def test_is_aligned():
    assert G.DAY.is_aligned(iv("2024-01-01/2024-01-03"))
    assert not G.DAY.is_aligned(iv("2024-01-01/2024-01-02T01:00Z"))
    assert not G.DAY.is_aligned(iv("2024-01-01T01:00Z/2024-01-02"))
    assert G.WEEK.is_aligned(iv("2024-01-01/P2W"))
    assert not G.WEEK.is_aligned(iv("2024-01-02/P1W"))
    assert G.MONTH.is_aligned(iv("2024-01-01/2024-03-01"))
    assert not G.MONTH.is_aligned(iv("2024-01-01/P30D"))
    assert G.QUARTER.is_aligned(iv("2024-04-01/2024-07-01"))
    assert not G.QUARTER.is_aligned(iv("2024-02-01/2024-05-01"))
    assert G.HOUR.is_aligned(iv("2024-01-01T05:00Z/PT3H"))


# --------------------------------------------------------------------------- parse


@pytest.mark.parametrize("member", list(Granularity))
def test_parse_by_name_any_case_and_json_form(member):
    assert G.parse(member.json_name) is member
    assert G.parse(member.json_name.upper()) is member
    assert G.parse(member.name) is member
    assert G.parse(f"  {member.json_name.title()} ") is member
    assert G.parse({"type": member.json_name}) is member
    assert G.parse({"type": member.name}) is member
    assert G.parse(member) is member


def test_parse_examples():
    assert G.parse("five_minute") is G.FIVE_MINUTE  # every one of Druid's standard names
    assert G.parse("TEN_MINUTE") is G.TEN_MINUTE
    assert G.parse({"type": "eight_hour"}) is G.EIGHT_HOUR
    assert G.parse("day") is G.DAY
    assert G.parse("DAY") is G.DAY
    assert G.parse("fifteen_minute") is G.FIFTEEN_MINUTE
    assert G.parse({"type": "day"}) is G.DAY
    assert G.parse({"type": "all"}) is G.ALL
    assert str(G.DAY) == "DAY"


@pytest.mark.parametrize("bad", ["fortnight", "", "days", {"type": "fortnight"}, {}, None, 1])
def test_parse_unknown_lists_valid_names(bad):
    with pytest.raises(SpecError) as info:
        G.parse(bad)  # type: ignore[arg-type]
    message = str(info.value)
    assert repr(bad) in message
    for name in ("NONE", "SECOND", "FIFTEEN_MINUTE", "DAY", "WEEK", "QUARTER", "YEAR", "ALL"):
        assert name in message


# --------------------------------------------------------------------------- properties

# Every representable instant but the very last millisecond (MAX_MILLIS is ETERNITY's open end).
_instants = st.integers(min_value=MIN_MILLIS, max_value=MAX_MILLIS - 1)
_granularities = st.sampled_from(list(Granularity))


@given(_instants, _granularities)
def test_bucket_contains_instant_is_aligned_and_next_abuts(millis, granularity):
    bucket = granularity.bucket(millis)
    assert bucket.contains_millis(millis)
    assert bucket.duration_millis > 0
    assert granularity.bucket_start_millis(millis) == bucket.start_millis
    assert granularity.bucket_start_millis(bucket.start_millis) == bucket.start_millis
    assert granularity.bucket(bucket.end_millis - 1) == bucket
    if bucket.end_millis < MAX_MILLIS:
        assert granularity.is_aligned(bucket)
        following = granularity.bucket(bucket.end_millis)
        assert following.abuts(bucket)
        assert following.start_millis == bucket.end_millis
        assert following.duration_millis > 0


@given(_instants, _granularities)
def test_truncate_is_idempotent(millis, granularity):
    dt = Interval.of_millis(millis, millis).start
    once = granularity.truncate(dt)
    assert once <= dt
    assert granularity.truncate(once) == once


_recent = st.integers(min_value=to_millis(utc(1990, 1, 1)), max_value=to_millis(utc(2050, 1, 1)))
_coarse = st.sampled_from([G.HOUR, G.SIX_HOUR, G.DAY, G.WEEK, G.MONTH, G.QUARTER, G.YEAR, G.ALL])


@given(_recent, st.integers(min_value=0, max_value=40 * 86_400_000), _coarse)
def test_iterate_covers_the_interval_with_contiguous_buckets(start, length, granularity):
    interval = Interval.of_millis(start, min(start + length, MAX_MILLIS))
    buckets = list(granularity.iterate(interval))
    if interval.is_empty():
        assert buckets == []
        return
    assert buckets[0].contains_millis(interval.start_millis)
    assert buckets[-1].contains_millis(interval.end_millis - 1)
    for before, after in itertools.pairwise(buckets):
        assert before.end_millis == after.start_millis
    for bucket in buckets:
        assert bucket.overlaps(interval)
        assert granularity.bucket(bucket.start_millis) == bucket
    if granularity.is_aligned(interval):
        assert buckets[0].start_millis == interval.start_millis
        assert buckets[-1].end_millis == interval.end_millis


@given(
    st.sampled_from(list(Granularity)),
    st.integers(min_value=MIN_MILLIS, max_value=MAX_MILLIS - 1),
    st.integers(min_value=-2, max_value=2),
)
def test_the_granularity_of_a_bucket_is_the_finest_whose_bucket_it_is(
    granularity: Granularity, instant: int, nudge: int
) -> None:
    bucket = granularity.bucket(instant)
    # A bucket, or an interval just off one (its end moved by a few ms).
    end = max(bucket.start_millis + 1, min(bucket.end_millis + nudge, MAX_MILLIS))
    interval = Interval.of_millis(bucket.start_millis, end)
    finest = next((g for g in Granularity if g.bucket(interval.start_millis) == interval), None)
    assert granularity_of_bucket(interval) == finest
    if nudge == 0:
        assert finest is not None


@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Granularity)),
            st.integers(min_value=MIN_MILLIS, max_value=MAX_MILLIS - 1),
            st.integers(min_value=-2, max_value=2),
        ),
        max_size=12,
    ),
    st.sampled_from(list(Granularity)),
)
def test_the_vectorised_bucket_tests_agree_with_the_scalar_ones(
    drawn: list[tuple[Granularity, int, int]], asked: Granularity
) -> None:
    # An append checks 10^5 compacted chunks at once; each answer is the one-at-a-time one.
    intervals = []
    for granularity, instant, nudge in drawn:
        bucket = granularity.bucket(instant)
        end = max(bucket.start_millis + 1, min(bucket.end_millis + nudge, MAX_MILLIS))
        intervals.append(Interval.of_millis(bucket.start_millis, end))
    starts = np.array([i.start_millis for i in intervals], dtype=np.int64)
    ends = np.array([i.end_millis for i in intervals], dtype=np.int64)

    masks = bucket_granularities(starts, ends)
    found = [next((g for g, m in masks.items() if m[k]), None) for k in range(len(intervals))]
    assert found == [granularity_of_bucket(i) for i in intervals]
    assert all(sum(bool(m[k]) for m in masks.values()) <= 1 for k in range(len(intervals)))
    for instants in (starts, ends):
        expected = [asked.bucket_start_millis(m) == m for m in instants.tolist()]
        assert asked.starts_buckets(instants).tolist() == expected


@given(_instants, _granularities, _granularities)
def test_a_granularity_that_nests_has_its_buckets_inside_the_coarser_ones(millis, fine, coarse):
    if fine.nests_in(coarse):
        inner, outer = fine.bucket(millis), coarse.bucket(millis)
        assert outer.start_millis <= inner.start_millis
        assert inner.end_millis <= outer.end_millis


@pytest.mark.parametrize(
    ("fine", "coarse", "instant"),
    [
        (G.TEN_MINUTE, G.FIFTEEN_MINUTE, "2024-03-01T00:16:00Z"),
        (G.SIX_HOUR, G.EIGHT_HOUR, "2024-03-01T08:00:00Z"),
        (G.WEEK, G.MONTH, "2024-03-01T00:00:00Z"),  # a Friday: its week began in February
        (G.WEEK, G.YEAR, "2021-01-01T00:00:00Z"),
    ],
)
def test_what_does_not_nest_has_a_bucket_reaching_out_of_the_coarser_one(
    fine: G, coarse: G, instant: str
) -> None:
    assert not fine.nests_in(coarse)
    at = to_millis(datetime.fromisoformat(instant))
    assert fine.bucket(at).start_millis < coarse.bucket(at).start_millis


@pytest.mark.parametrize(
    ("druid", "member"),
    [
        ({"type": "period", "period": "PT1H"}, G.HOUR),
        ({"type": "period", "period": "p1w", "timeZone": "UTC"}, G.WEEK),
        ({"type": "period", "period": "P3M"}, G.QUARTER),
        ({"type": "duration", "duration": 300_000}, G.FIVE_MINUTE),
    ],
)
def test_druid_period_and_duration_granularities_that_are_standard_ones(druid, member):
    assert G.parse(druid) is member


@pytest.mark.parametrize(
    ("druid", "message"),
    [
        ({"type": "period", "period": "PT2H"}, "none of Druid's standard granularities"),
        ({"type": "duration", "duration": 7 * 86_400_000}, "none of Druid's standard"),  # epoch
        ({"type": "period", "period": "P1D", "timeZone": "Asia/Tokyo"}, "aligned in UTC"),
        ({"type": "period", "period": "PT1H", "origin": "2024-01-01T00:30Z"}, "no origin"),
    ],
)
def test_other_periods_are_refused_with_the_standard_ones_listed(druid, message):
    with pytest.raises(SpecError, match=message) as info:
        G.parse(druid)
    assert "PT15M" in str(info.value)
