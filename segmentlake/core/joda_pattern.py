"""Joda-Time ``DateTimeFormat`` patterns — what Druid's ``timestampSpec.format`` takes besides
its named formats — as the Spark datetime patterns that parse the same strings.

Druid parses a pattern such as ``"yyyy-MM-dd HH:mm:ss"`` or ``"dd/MMM/yyyy:HH:mm:ss Z"`` with
Joda-Time; Spark's ``to_timestamp`` takes ``java.time`` patterns, whose letters mostly mean
the same but parse differently in ways that matter for real input:

* Joda reads a numeric field that has no numeric neighbour with as many digits as are there
  (``MM`` reads ``1`` and ``01``; ``SSS`` up to 9 fraction digits); Spark reads a repeated
  letter as a fixed width. Such fields become the single letter (variable width) or nine
  ``S``; fields next to another numeric field keep their width (``yyyyMMdd``).
* Joda's ``Z`` is an offset such as ``-0800`` (or ``Z``), ``ZZ`` one such as ``-08:00``, and
  ``ZZZ`` a zone id; Spark's are ``XX``, ``XXX`` and ``VV``.
* Joda's ``yy`` reads a year in the century around 30 years ago (1946-2045 in 2026); Spark's
  reads 2000-2099, so :attr:`SparkPattern.two_digit_year` asks the caller to move later years
  back a century.
* Every non-letter is a literal in Joda; Spark reserves ``[``, ``]``, ``#``, ``{`` and ``}``,
  so literals are quoted.

Letters Spark cannot parse — week-based fields (``x``, ``w``, ``e``), the century (``C``) and a
zone name (``z``, which Joda cannot parse either) — and letters that are no Joda pattern letter
raise :class:`~segmentlake.errors.SpecError` naming the letter and what to use instead. A
day-of-week name (``E``) is read and ignored, as a check Spark cannot make: it is removed from
the pattern, and the caller removes the word from the value (:attr:`SparkPattern.weekday`).

    >>> spark_pattern("dd/MMM/yyyy:HH:mm:ss Z").pattern
    "d'/'MMM'/'y':'H':'m':'s' 'XX"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from segmentlake.errors import SpecError

__all__ = ["SparkPattern", "spark_pattern"]

# Joda's numeric fields (DateTimeFormat.isNumericToken); M is numeric up to two letters.
_NUMERIC = set("CxyYdhHmsSeDkKw")
# Letters Spark reads as a variable-width number when written once.
_WIDTH_TWO = set("dhHmsKk")
_UNPARSEABLE = {
    "C": "the century of era",
    "x": "the week-based year",
    "w": "the week of the week-based year",
    "e": "the day-of-week number",
}
_TOKEN = re.compile(r"([A-Za-z])\1*|'(?:[^']|'')*'?|[^A-Za-z']+")


@dataclass(frozen=True, slots=True)
class SparkPattern:
    """A Joda pattern translated for Spark's ``to_timestamp``: ``pattern``; ``shape``, a
    regular expression (Java's and Python's) that a whole value must match before Spark parses
    it, because Spark's ``try_to_timestamp`` fails the query, not the row, on a year outside
    1-9999 (``0000``, ``-2024``, ``99999``); ``two_digit_year``
    when it reads a year of two digits (Joda's century differs from Spark's, see the module);
    ``weekday`` when the Joda pattern starts with a day-of-week name, which Spark cannot parse:
    ``pattern`` then omits it, and the value's leading word must be removed before parsing;
    ``zoned`` when it reads a zone (``Z``): without one, a value is a UTC time (Joda's default
    zone in Druid), not one in the Spark session's zone."""

    pattern: str
    shape: str
    two_digit_year: bool = False
    weekday: bool = False
    zoned: bool = False


def spark_pattern(joda: str) -> SparkPattern:
    """The Spark datetime pattern that parses what the Joda pattern ``joda`` parses; a
    :class:`SpecError` naming the letter when Spark cannot, or ``joda`` is no Joda pattern."""
    if not joda.strip():
        raise SpecError("timestampSpec.format is empty; expected a named format or a Joda pattern")
    tokens = [m.group(0) for m in _TOKEN.finditer(joda)]
    weekday = bool(tokens) and tokens[0][0] == "E"
    if weekday:
        tokens = tokens[1:]
    if any(t[0] == "E" for t in tokens):
        raise SpecError(
            f"timestampSpec.format {joda!r}: a day-of-week name (E) is only read at the start of "
            "the pattern (as in 'EEE, dd MMM yyyy HH:mm:ss Z'); Spark cannot parse it elsewhere"
        )
    out, shape, literal, two_digit_year = [], ["[A-Za-z]+"] if weekday else [], [], False
    for i, token in enumerate(tokens):
        letter = token[0]
        if not letter.isalpha():
            literal.append(_unquoted(token) if letter == "'" else token)
            continue
        if literal:  # one quoted run: two adjacent ones would read as an escaped quote
            out.append(_quoted("".join(literal)))
            shape.append(_literal_shape("".join(literal)))
            literal = []
        # Between numeric fields Joda reads fixed widths (yyyyMMdd); elsewhere, any width.
        adjacent = any(0 <= j < len(tokens) and _numeric(tokens[j]) for j in (i - 1, i + 1))
        two_digit_year |= letter in "yY" and len(token) == 2
        field = _field(joda, token, adjacent)
        out.append(field)
        shape.append(_field_shape(field))
    if literal:
        out.append(_quoted("".join(literal)))
        shape.append(_literal_shape("".join(literal)))
    return SparkPattern(
        "".join(out),
        "".join(shape),
        two_digit_year=two_digit_year,
        weekday=weekday,
        zoned=any(t[0] == "Z" for t in tokens),
    )


def _numeric(token: str) -> bool:
    letter = token[0]
    return letter in _NUMERIC or (letter == "M" and len(token) <= 2)


def _field(joda: str, token: str, adjacent: bool) -> str:
    """The Spark letters for one Joda field ``token`` (a run of one letter)."""
    letter, count = token[0], len(token)
    if letter in _UNPARSEABLE:
        raise SpecError(
            f"timestampSpec.format {joda!r}: {letter!r} ({_UNPARSEABLE[letter]}) cannot be parsed "
            "by Spark; use year (yyyy), month (MM) and day of month (dd) or day of year (D)"
        )
    if letter == "z":
        raise SpecError(
            f"timestampSpec.format {joda!r}: a zone name (z) cannot be parsed (Joda cannot "
            "either); use Z for an offset such as -0800, ZZ for -08:00 or ZZZ for a zone id"
        )
    if letter in "yY":
        if count == 2:
            return "yy"
        return "yyyy" if adjacent else "y"
    if letter == "M":
        if count >= 3:
            return "MMMM" if count >= 4 else "MMM"
        return "M" * count if adjacent else "M"
    if letter in _WIDTH_TWO:
        return letter * min(count, 2) if adjacent else letter
    if letter == "D":
        return "D" * min(count, 3) if adjacent else "D"
    if letter == "S":
        return "S" * min(count, 9) if adjacent else "S" * 9
    if letter in "Ga":
        return letter
    if letter == "Z":
        return {1: "XX", 2: "XXX"}.get(count, "VV")
    raise SpecError(
        f"timestampSpec.format {joda!r}: {letter!r} is not a Joda pattern letter; quote literal "
        "text ('T'), or use one of the named formats auto, iso, posix, millis, micro, nano, ruby"
    )


def _unquoted(token: str) -> str:
    """The text of a quoted Joda literal: ``''`` is one quote, inside quotes or out; an
    unterminated quote runs to the end, as in Joda."""
    if token == "''":
        return "'"
    body = token[1:-1] if len(token) > 1 and token.endswith("'") else token[1:]
    return body.replace("''", "'")


def _quoted(text: str) -> str:
    """``text`` as a Spark pattern literal."""
    return "'" + text.replace("'", "''") + "'"


# What each Spark field reads, as a regular expression: a year of 1-9999 (Spark's
# try_to_timestamp raises on others), numbers of at most their width, English names.
_YEAR = "(?=[0-9]{0,3}[1-9])"
_FIELD_SHAPES = {
    "y": _YEAR + "[0-9]{1,4}",
    "yyyy": _YEAR + "[0-9]{4}",
    "yy": "[0-9]{2}",
    "MMM": "[A-Za-z]{3,4}",
    "MMMM": "[A-Za-z]{3,9}",
    "D": "[0-9]{1,3}",
    "G": "(?i:AD|CE)",
    "a": "(?i:AM|PM)",
    "XX": "(?:Z|[+-][0-9]{4})",
    "XXX": "(?:Z|[+-][0-9]{2}:[0-9]{2})",
    "VV": "[A-Za-z0-9][A-Za-z0-9_/+:-]*",
    "S" * 9: "[0-9]{1,9}",
}


def _field_shape(field: str) -> str:
    """The regular expression of what the Spark field ``field`` reads."""
    if field in _FIELD_SHAPES:
        return _FIELD_SHAPES[field]
    if len(field) == 1:  # d, H, h, K, k, m, s, M: one or two digits
        return "[0-9]{1,2}"
    return f"[0-9]{{{len(field)}}}"  # a fixed width between numeric fields


def _literal_shape(text: str) -> str:
    """``text`` matched literally: every character but a letter or digit escaped, which both
    Java's and Python's regular expressions read as that character."""
    return "".join(c if c.isalnum() else "\\" + c for c in text)
