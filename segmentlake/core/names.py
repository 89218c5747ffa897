"""The one rule for the names users give things, and the SQL quoting of whatever it allows.

A datasource name becomes a directory (``<warehouse>/<name>``), a metadata partition value,
a default SQL view name and a CLI argument, so it must be safe as all four. Druid's own rule
(non-empty, no leading ``.``, no ``/``, no whitespace but the space, no control characters) is
not enough for paths that Hadoop globs (``*``, ``?``, ``[``, ``{``), URIs (``:``, ``%``, ``\\``)
and SQL text (quotes, backticks), so segmentlake allows a plain subset:

* 1 to 255 characters (a file name's limit);
* ASCII letters, digits, ``_``, ``-``, ``.`` and the space;
* starting with a letter or a digit: ``.`` would make ``.``/``..`` escape the warehouse,
  ``_`` is reserved for segmentlake's own directories and metadata partitions
  (``_segmentlake``, ``_rules``, ``_copies.<datasource>``), ``-`` reads as a CLI option;
* not ending with a space or a ``.`` (both vanish or confuse on some file systems and shells).

Every name the rule allows is quoted (:func:`quote_identifier`) wherever it reaches SQL.
"""

from __future__ import annotations

import re

from segmentlake.errors import SpecError

__all__ = [
    "MAX_NAME_LENGTH",
    "NAME_RULE",
    "SEGMENT_KEY_COLUMN",
    "TIME_COLUMN",
    "check_datasource_name",
    "check_name",
    "datasource_table_path",
    "quote_identifier",
    "sql_path",
    "sql_string",
]

# Hidden columns of the datasource tables (DESIGN §1): the row time, and the Delta partition
# value that holds one segment's rows.
TIME_COLUMN = "__time"
SEGMENT_KEY_COLUMN = "__segment"

MAX_NAME_LENGTH = 255
NAME_RULE = (
    "1-255 ASCII letters, digits, '_', '-', '.' or spaces, starting with a letter or digit "
    "and not ending with a space or '.'"
)
_ALLOWED = re.compile(r"[A-Za-z0-9_.\- ]*")


def _problem(name: str) -> str | None:
    """What ``name`` breaks of the rule, or None."""
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"it has {len(name)} characters, more than {MAX_NAME_LENGTH}"
    bad = sorted({c for c in name if not _ALLOWED.fullmatch(c)})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        return f"it contains {shown}"
    if not name[0].isalnum():
        reserved = " ('_' is reserved for segmentlake's own names)" if name[0] == "_" else ""
        return f"it starts with {name[0]!r}{reserved}"
    if name[-1] in " .":
        return f"it ends with {name[-1]!r}"
    return None


def check_name(value: object, *, what: str) -> str:
    """``value`` if it is a name the rule allows; else :class:`SpecError` naming the rule.

    >>> check_name("wiki-edits 2024", what="datasource")
    'wiki-edits 2024'
    """
    if not isinstance(value, str):
        raise SpecError(f"{what} name must be a string ({NAME_RULE}), got {type(value).__name__}")
    problem = _problem(value)
    if problem is not None:
        raise SpecError(f"{what} name {value!r} is not allowed: {problem}; a name is {NAME_RULE}")
    return value


def check_datasource_name(value: object) -> str:
    """A datasource name the rule allows (see the module), else :class:`SpecError`."""
    return check_name(value, what="datasource")


def quote_identifier(name: str) -> str:
    """``name`` as one Spark SQL identifier: in backticks, backticks doubled.

    >>> quote_identifier("wiki edits")
    '`wiki edits`'
    """
    return "`" + name.replace("`", "``") + "`"


def sql_path(path: str) -> str:
    """A Delta table path as Spark SQL's ``delta.`<path>``` table reference."""
    return "delta." + quote_identifier(path)


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal: single quotes, with quotes and backslashes
    escaped (Spark reads ``\\`` as an escape in literals)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def datasource_table_path(warehouse: str, datasource: str) -> str:
    """The datasource table under ``warehouse``: every segment's rows (DESIGN §1)."""
    return f"{warehouse.rstrip('/')}/{datasource}"
