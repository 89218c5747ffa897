"""Druid's filter JSON (``transformSpec.filter``) as a Spark SQL condition.

segmentlake's ``transformSpec.filter`` is a Spark SQL string; a Druid task brings Druid's filter
JSON instead. The common filters translate exactly:

* ``selector`` / ``equals`` (string match) / ``in`` — Druid compares a value's string form, so
  the column is cast to STRING: ``CAST(`location` AS STRING) = '3'`` matches the long 3;
* ``equals`` / ``range`` with a numeric ``matchValueType`` and ``bound`` with ``numeric``
  ordering compare as DOUBLE (``try_cast``: a value that is not a number never matches);
* ``bound`` / ``range`` on strings compare UTF-8 strings (Druid's ``lexicographic`` order);
* ``like``, ``null``, ``true``, ``false``, ``and``, ``or``, ``not``;
* ``regex`` — ``RLIKE``: both Druid and Spark run ``java.util.regex`` with ``find()`` (the
  pattern matches anywhere unless anchored);
* ``search`` with ``contains`` / ``insensitive_contains`` / ``fragment`` queries — ``contains``
  of the (lower-cased, unless case-sensitive) string form.

Null semantics are Druid's SQL-compatible ones (the default since Druid 28): ``""`` is not
null, ``{"type": "selector", "value": null}`` matches nulls. Everything else (``extractionFn``,
``javascript``, ``expression``, ``interval``, other search queries and orderings) is reported,
with its JSON path, instead of being guessed at.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from segmentlake.core.names import quote_identifier, sql_string
from segmentlake.core.spec_reader import at, is_int, safe_repr

__all__ = ["FILTER_TYPES", "druid_filter_sql"]

# filterTuning only picks between Druid's bitmap indexes and row matching; Spark has neither.
_NO_EFFECT = {"filterTuning"}
_NUMERIC_TYPES = ("LONG", "FLOAT", "DOUBLE")
# Java's Double.parseDouble forms (Druid's numeric bounds are strings or numbers); Python's
# float() would also take "1_0", " 1 " and "nan".
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
# Deeper filter trees are not written by hand; the bound keeps translation off Python's
# recursion limit.
_MAX_DEPTH = 64


class _Translator:
    """Translates one filter tree, collecting every problem with its JSON path."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.depth = 0

    def fail(self, path: str, message: str) -> str:
        self.problems.append(f"{path}: {message}")
        return "FALSE"  # a placeholder; the caller discards the SQL when there are problems

    def keys(self, obj: Mapping[str, Any], path: str, *accepted: str) -> None:
        for key in obj:
            if key not in accepted and key != "type" and key not in _NO_EFFECT:
                self.fail(
                    at(path, key),
                    f"not supported in a {safe_repr(obj.get('type'))} filter; accepted: "
                    + ", ".join(sorted(accepted)),
                )

    def column(self, obj: Mapping[str, Any], path: str, key: str) -> str:
        name = obj.get(key)
        if not isinstance(name, str) or not name:
            self.fail(f"{path}.{key}", f"must be a column name, got {safe_repr(name)}")
            return "``"
        return quote_identifier(name)

    def text(self, value: Any, path: str) -> str:
        """A value compared as a string: Druid matches a number's string form."""
        if isinstance(value, str):
            return sql_string(value)
        if is_int(value) and value.bit_length() <= 63:
            return sql_string(str(value))
        if isinstance(value, float) and math.isfinite(value):
            return sql_string(repr(value))
        return self.fail(path, f"must be a string or a number, got {safe_repr(value)}")

    def number(self, value: Any, path: str) -> str:
        """A value compared as a number: a JSON number or a decimal string ("10")."""
        number = _as_float(value)
        if not math.isfinite(number):
            self.fail(path, f"must be a finite number, got {safe_repr(value)}")
            return "0"
        return repr(number)

    def flag(self, obj: Mapping[str, Any], key: str, path: str) -> bool:
        value = obj.get(key, False)
        if isinstance(value, bool):
            return value
        self.fail(f"{path}.{key}", f"must be true or false, got {safe_repr(value)}")
        return False

    def value_type(self, obj: Mapping[str, Any], path: str) -> str | None:
        """``matchValueType``: STRING (the default) or a numeric type, in any case."""
        kind = obj.get("matchValueType", "STRING")
        if isinstance(kind, str) and kind.upper() in ("STRING", *_NUMERIC_TYPES):
            return kind.upper()
        self.fail(
            f"{path}.matchValueType",
            f"{safe_repr(kind)} is not supported; accepted: STRING, LONG, FLOAT, DOUBLE",
        )
        return None

    def translate(self, obj: Any, path: str) -> str:
        if not isinstance(obj, Mapping):
            return self.fail(path, f"a Druid filter must be a JSON object, got {safe_repr(obj)}")
        if self.depth >= _MAX_DEPTH:
            return self.fail(path, f"filters nested deeper than {_MAX_DEPTH} are not supported")
        kind = obj.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return self.fail(
                f"{path}.type",
                f"filter type {safe_repr(kind)} is not supported; accepted: "
                f"{', '.join(FILTER_TYPES)}, or write the condition as a Spark SQL string",
            )
        if "extractionFn" in obj:
            return self.fail(
                f"{path}.extractionFn",
                "extraction functions are not supported; derive a column with a transform "
                "and filter on it",
            )
        self.depth += 1
        try:
            return handler(self, obj, path)
        finally:
            self.depth -= 1


def _as_float(value: Any) -> float:
    """``value`` as a float, NaN when it is no number (a huge integer is none either)."""
    numeric = (is_int(value) and value.bit_length() <= 63) or isinstance(value, float)
    if numeric or (isinstance(value, str) and _DECIMAL.fullmatch(value)):
        return float(value)
    return math.nan


def _selector(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "dimension", "value")
    column = t.column(obj, path, "dimension")
    if obj.get("value") is None:
        return f"({column} IS NULL)"
    return f"(CAST({column} AS STRING) = {t.text(obj['value'], path + '.value')})"


def _equals(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "column", "matchValueType", "matchValue")
    column = t.column(obj, path, "column")
    kind = t.value_type(obj, path)
    value = obj.get("matchValue")
    if kind in _NUMERIC_TYPES:
        return f"(try_cast({column} AS DOUBLE) = {t.number(value, path + '.matchValue')})"
    return f"(CAST({column} AS STRING) = {t.text(value, path + '.matchValue')})"


def _in(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "dimension", "values")
    column = t.column(obj, path, "dimension")
    values = obj.get("values")
    if not isinstance(values, list):
        return t.fail(f"{path}.values", f"must be a list of values, got {safe_repr(values)}")
    parts = []
    texts = [t.text(v, f"{path}.values[{i}]") for i, v in enumerate(values) if v is not None]
    if texts:
        parts.append(f"CAST({column} AS STRING) IN ({', '.join(texts)})")
    if any(v is None for v in values):
        parts.append(f"{column} IS NULL")
    return "(" + (" OR ".join(parts) or "FALSE") + ")"


def _null(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "column")
    return f"({t.column(obj, path, 'column')} IS NULL)"


def _like(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "dimension", "pattern", "escape")
    column = t.column(obj, path, "dimension")
    pattern = t.text(obj.get("pattern"), path + ".pattern")
    escape = obj.get("escape")
    if escape is None:
        return f"(CAST({column} AS STRING) LIKE {pattern})"
    if not isinstance(escape, str) or len(escape) != 1:
        return t.fail(f"{path}.escape", f"must be one character, got {safe_repr(escape)}")
    return f"(CAST({column} AS STRING) LIKE {pattern} ESCAPE {sql_string(escape)})"


def _regex(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "dimension", "pattern")
    column = t.column(obj, path, "dimension")
    pattern = obj.get("pattern")
    if not isinstance(pattern, str):
        return t.fail(f"{path}.pattern", f"must be a regular expression, got {safe_repr(pattern)}")
    return f"(CAST({column} AS STRING) RLIKE {sql_string(pattern)})"


_SEARCH_QUERIES = ("contains", "insensitive_contains", "fragment")


def _search(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "dimension", "query")
    column = t.column(obj, path, "dimension")
    query, where = obj.get("query"), f"{path}.query"
    kind = query.get("type") if isinstance(query, Mapping) else None
    if not isinstance(query, Mapping) or kind not in _SEARCH_QUERIES:
        return t.fail(
            where,
            f"must be a search query of type {', '.join(_SEARCH_QUERIES)}, got {safe_repr(query)}",
        )
    if kind == "fragment":
        t.keys(query, where, "values", "caseSensitive")
        values = query.get("values")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return t.fail(f"{where}.values", f"must be a list of strings, got {safe_repr(values)}")
    else:
        t.keys(query, where, "value", *(["caseSensitive"] if kind == "contains" else []))
        values = [query.get("value")]
        if not isinstance(values[0], str):
            return t.fail(f"{where}.value", f"must be a string, got {safe_repr(values[0])}")
    sensitive = kind != "insensitive_contains" and t.flag(query, "caseSensitive", where)
    text = f"CAST({column} AS STRING)"
    if not sensitive:  # Druid lower-cases both sides
        text, values = f"lower({text})", [v.lower() for v in values]
    parts = [f"contains({text}, {sql_string(v)})" for v in values]
    return "(" + (" AND ".join(parts) or f"{column} IS NOT NULL") + ")"


def _bounds(
    t: _Translator,
    column: str,
    lower: tuple[Any, bool],
    upper: tuple[Any, bool],
    numeric: bool,
    path: str,
) -> str:
    """``lower``/``upper`` are (value or None, strict); ``column`` is already quoted."""
    value = f"try_cast({column} AS DOUBLE)" if numeric else f"CAST({column} AS STRING)"
    parts = []
    for (bound, strict), ops, key in ((lower, (">", ">="), "lower"), (upper, ("<", "<="), "upper")):
        if bound is None:
            continue
        literal = t.number(bound, f"{path}.{key}") if numeric else t.text(bound, f"{path}.{key}")
        parts.append(f"{value} {ops[0] if strict else ops[1]} {literal}")
    if not parts:  # no bound: every non-null value
        parts.append(f"{column} IS NOT NULL")
    return "(" + " AND ".join(parts) + ")"


def _bound(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "dimension", "lower", "upper", "lowerStrict", "upperStrict", "ordering")
    column = t.column(obj, path, "dimension")
    ordering = obj.get("ordering", "lexicographic")
    if isinstance(ordering, Mapping) and set(ordering) == {"type"}:
        ordering = ordering["type"]  # Druid's {"type": "numeric"} form
    if not isinstance(ordering, str) or ordering not in ("lexicographic", "numeric"):
        return t.fail(
            f"{path}.ordering",
            f"{safe_repr(ordering)} is not supported; accepted: lexicographic, numeric",
        )
    lower = (obj.get("lower"), t.flag(obj, "lowerStrict", path))
    upper = (obj.get("upper"), t.flag(obj, "upperStrict", path))
    return _bounds(t, column, lower, upper, ordering == "numeric", path)


def _range(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "column", "matchValueType", "lower", "upper", "lowerOpen", "upperOpen")
    column = t.column(obj, path, "column")
    kind = t.value_type(obj, path)
    lower = (obj.get("lower"), t.flag(obj, "lowerOpen", path))
    upper = (obj.get("upper"), t.flag(obj, "upperOpen", path))
    return _bounds(t, column, lower, upper, kind in _NUMERIC_TYPES, path)


def _junction(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "fields")
    fields = obj.get("fields")
    if not isinstance(fields, list) or not fields:
        return t.fail(
            f"{path}.fields", f"must be a non-empty list of filters, got {safe_repr(fields)}"
        )
    parts = [t.translate(f, f"{path}.fields[{i}]") for i, f in enumerate(fields)]
    return "(" + f" {str(obj['type']).upper()} ".join(parts) + ")"


def _not(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
    t.keys(obj, path, "field")
    # Three-valued, as Druid's SQL-compatible mode: NOT of a comparison with null stays null,
    # and the row is dropped (segmentlake keeps only rows whose filter is TRUE).
    return f"(NOT {t.translate(obj.get('field'), path + '.field')})"


def _constant(value: str) -> Callable[[_Translator, Mapping[str, Any], str], str]:
    def translate(t: _Translator, obj: Mapping[str, Any], path: str) -> str:
        t.keys(obj, path)
        return value

    return translate


_HANDLERS: Mapping[str, Callable[[_Translator, Mapping[str, Any], str], str]] = {
    "selector": _selector,
    "equals": _equals,
    "in": _in,
    "null": _null,
    "like": _like,
    "regex": _regex,
    "search": _search,
    "bound": _bound,
    "range": _range,
    "and": _junction,
    "or": _junction,
    "not": _not,
    "true": _constant("TRUE"),
    "false": _constant("FALSE"),
}
FILTER_TYPES = tuple(_HANDLERS)


def druid_filter_sql(obj: Any, path: str) -> tuple[str | None, list[str]]:
    """Translate Druid's filter JSON at ``path`` into a Spark SQL condition: ``(sql, [])``, or
    ``(None, problems)`` listing every part that has no exact translation, each with its path."""
    translator = _Translator()
    sql = translator.translate(obj, path)
    if translator.problems:
        return None, translator.problems
    return sql, []
