"""The name rule: what it allows is safe as a path segment and quotable in SQL; everything
else is a SpecError that states the rule."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.names import (
    NAME_RULE,
    check_datasource_name,
    quote_identifier,
    sql_string,
)
from segmentlake.errors import SpecError

REFUSED = [
    "",
    ".",
    "..",
    "../x",
    "a/b",
    "/abs",
    "a\\b",
    ".hidden",
    "_segmentlake",
    "_x",
    "-rf",
    " lead",
    "trail ",
    "dot.",
    "tab\tx",
    "new\nline",
    "nul\x00",
    "back`tick",
    "quote'x",
    'dq"x',
    "star*",
    "q?",
    "br[1]",
    "{a,b}",
    "c:x",
    "pct%20",
    "ünïcode",
    "x" * 256,
]
ALLOWED = ["wiki", "wiki-edits", "wiki.v2", "Wiki Edits 2024", "0day", "a", "a_b", "x" * 255]


@pytest.mark.parametrize("name", REFUSED)
def test_refused_names_say_the_rule(name: str) -> None:
    with pytest.raises(SpecError) as info:
        check_datasource_name(name)
    assert NAME_RULE in str(info.value)


@pytest.mark.parametrize("name", ALLOWED)
def test_allowed_names(name: str) -> None:
    assert check_datasource_name(name) == name


@pytest.mark.parametrize("value", [None, 3, b"wiki", ["wiki"]])
def test_non_strings_are_refused(value: object) -> None:
    with pytest.raises(SpecError, match="must be a string"):
        check_datasource_name(value)


_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\- ]{0,254}")


@settings(max_examples=3000, deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"[A-Za-z0-9_.\- `'/*]{0,12}", fullmatch=True))
def test_allowed_iff_a_safe_path_segment(name: str) -> None:
    """Allowed exactly when the name is one plain path segment: no separator, nothing a
    shell, Hadoop glob or SQL literal would read specially, never '.' or '..'."""
    expected = bool(_SAFE.fullmatch(name)) and name[-1] not in " ."
    try:
        check_datasource_name(name)
        allowed = True
    except SpecError:
        allowed = False
    assert allowed == expected
    if allowed:
        assert name not in (".", "..")
        assert "/" not in name
        assert "\\" not in name


@given(st.text(max_size=30))
def test_quoting_round_trips(text: str) -> None:
    quoted = quote_identifier(text)
    assert quoted.startswith("`")
    assert quoted.endswith("`")
    assert quoted[1:-1].replace("``", "").count("`") == 0
    literal = sql_string(text)
    assert literal[0] == literal[-1] == "'"
