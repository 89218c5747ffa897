"""Joda patterns (Druid's timestampSpec formats) as Spark patterns, without Spark: the
translation, the shape a value must have, and the letters refused with a reason."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segmentlake.core.ingest_spec import TimestampSpec
from segmentlake.core.joda_pattern import spark_pattern
from segmentlake.errors import SpecError


@pytest.mark.parametrize(
    ("joda", "spark"),
    [
        # Alone, a numeric field reads any width (Joda's MM reads "1"); between numeric
        # fields, its own width.
        ("yyyy-MM-dd HH:mm:ss", "y'-'M'-'d' 'H':'m':'s"),
        ("yyyyMMddHH", "yyyyMMddHH"),
        ("ss.SSS", "s'.'SSSSSSSSS"),  # Joda reads up to 9 fraction digits
        ("dd/MMM/yyyy:HH:mm:ss Z", "d'/'MMM'/'y':'H':'m':'s' 'XX"),
        ("yyyy-MM-dd'T'HH:mm:ssZZ", "y'-'M'-'d'T'H':'m':'sXXX"),
        ("MMMM d, yyyy h:mm a ZZZ", "MMMM' 'd', 'y' 'h':'m' 'a' 'VV"),
        ("h 'o''clock' a", "h' o''clock 'a"),  # adjacent literals: one quoted run
        ("yyyy[MM]#{}", "y'['M']#{}'"),  # Spark reserves []#{}; Joda reads them as text
        ("'unterminated", "'unterminated'"),  # as Joda: to the end
        ("G yyyy", "G' 'y"),
    ],
)
def test_joda_patterns_become_spark_patterns(joda: str, spark: str) -> None:
    assert spark_pattern(joda).pattern == spark


def test_a_leading_day_name_and_two_digit_years_are_flagged_for_the_parser() -> None:
    rfc1123 = spark_pattern("EEE, dd MMM yyyy HH:mm:ss Z")
    assert rfc1123.weekday
    assert rfc1123.pattern.startswith("', 'd")
    assert re.fullmatch(rfc1123.shape, "Tue, 05 Mar 2024 10:00:00 +0100", re.ASCII)
    assert spark_pattern("MM/dd/yy").two_digit_year
    assert not spark_pattern("MM/dd/yyyy").two_digit_year


@pytest.mark.parametrize(
    ("joda", "fits", "does_not"),
    [
        ("yyyy-MM-dd", ["2024-03-05", "2024-3-5", "0024-03-05"], ["0000-03-05", "-2024-03-05"]),
        ("yyyy-MM-dd", ["9999-12-31"], ["10000-01-01", "2024-03-05 ", "2024-03"]),
        ("yyyy-MM-dd", [], ["\uff12\uff10\uff12\uff14-03-05"]),  # other scripts' digits
        ("yyyyMMdd", ["20240305"], ["00000305", "2024035", "202403051"]),
        ("HH:mm Z", ["10:00 Z", "10:00 -0800"], ["10:00 -08:00", "10:00 PST"]),
        ("G yyyy", ["AD 2024", "ad 2024"], ["BC 2024"]),  # years before 1 fail in Spark
    ],
)
def test_the_shape_admits_only_what_spark_parses_safely(
    joda: str, fits: list[str], does_not: list[str]
) -> None:
    shape = spark_pattern(joda).shape
    assert all(re.fullmatch(shape, v, re.ASCII) for v in fits)
    assert not any(re.fullmatch(shape, v, re.ASCII) for v in does_not)


# Joda patterns and the strftime that prints the same text (zero-padded).
_PRINTED = {
    "yyyy-MM-dd HH:mm:ss": "%Y-%m-%d %H:%M:%S",
    "dd/MMM/yyyy:HH:mm:ss Z": "%d/%b/%Y:%H:%M:%S %z",
    "EEE, dd MMM yyyy HH:mm:ss Z": "%a, %d %b %Y %H:%M:%S %z",
    "yyyyMMddHHmmss": "%Y%m%d%H%M%S",
    "MMMM d yyyy hh:mm a": "%B %d %Y %I:%M %p",
    "D yyyy": "%j %Y",
}


@given(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    st.sampled_from(sorted(_PRINTED)),
)
def test_every_time_printed_by_a_pattern_has_its_shape(when: datetime, joda: str) -> None:
    printed = _PRINTED[joda].replace("%Y", f"{when.year:04d}")  # strftime may not pad it
    text = when.replace(tzinfo=UTC).strftime(printed)
    assert re.fullmatch(spark_pattern(joda).shape, text, re.ASCII), (joda, text)


@pytest.mark.parametrize(
    ("joda", "message"),
    [
        ("xxxx-ww", r"'x' \(the week-based year\) cannot be parsed by Spark"),
        ("yyyy-MM-dd e", r"'e' \(the day-of-week number\)"),
        ("CC", r"'C' \(the century of era\)"),
        ("yyyy z", r"a zone name \(z\) cannot be parsed .* use Z for an offset"),
        ("dd EEE yyyy", r"a day-of-week name \(E\) is only read at the start"),
        ("isoo", r"'i' is not a Joda pattern letter; quote literal text"),
        ("  ", r"timestampSpec.format is empty"),
    ],
)
def test_what_spark_cannot_parse_is_refused_with_what_to_use(joda: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        spark_pattern(joda)


def test_timestamp_spec_reads_druid_formats_and_missing_values() -> None:
    assert TimestampSpec("t", "ISO").format == "iso"  # Druid matches names in any case
    assert TimestampSpec("t", "Ruby").format == "ruby"
    assert TimestampSpec("t", "yyyy-MM-dd").spark_pattern is not None
    assert TimestampSpec("t", "auto").spark_pattern is None
    spec = TimestampSpec("t", "iso", "2010-01-01T00:00:00Z")  # type: ignore[arg-type]
    assert spec.missing_value == 1_262_304_000_000
    assert spec.to_json() == {
        "column": "t",
        "format": "iso",
        "missingValue": "2010-01-01T00:00:00.000Z",
    }
    with pytest.raises(SpecError, match=r"missingValue: cannot parse timestamp 'never'"):
        TimestampSpec("t", "iso", "never")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"missingValue must be a time in the years 0001-9999"):
        TimestampSpec("t", "iso", True)
