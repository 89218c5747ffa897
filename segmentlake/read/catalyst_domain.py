"""The domain (:mod:`segmentlake.core.filter_domain`) of a Spark filter, read from its Catalyst
expression before analysis.

Recognised: ``=``, ``<=>`` with a non-null literal, ``IN`` (literals only; null items dropped,
as they never make the test true), ``<``, ``<=``, ``>``, ``>=`` with the literal on either
side, ``AND`` and ``OR``, written in SQL or with the Column API (which builds functions named
``=``, ``in``, ``and``...). The column is one unqualified name, resolved case-insensitively
against the table's columns. A string literal on a STRING column (binary collation) gives its
value; an integral literal on an integral column gives ``str(value)``, for equality and ``IN``
only (hashed partitioning hashes the value cast to a string). Everything else — ``NOT``,
functions, casts, other types, nested or qualified names — constrains nothing.

The expression is reached through py4j (classic Spark only). Under Spark Connect, or when
anything is unexpected, the domain is empty: reading it never fails a query and never prunes
more than the filter allows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql.types import DataType, IntegralType, StringType

from segmentlake.core.filter_domain import (
    Domain,
    Values,
    and_domains,
    comparison,
    or_domains,
)
from segmentlake.spark.user_sql import user_expression

__all__ = ["domain_of"]

_log = logging.getLogger(__name__)

# Catalyst class names of the recognised predicates, and the Column API's function names.
_FUNCTIONS = {
    "=": "EqualTo",
    "==": "EqualTo",
    "<=>": "EqualNullSafe",
    "<": "LessThan",
    "<=": "LessThanOrEqual",
    ">": "GreaterThan",
    ">=": "GreaterThanOrEqual",
    "in": "In",
    "and": "And",
    "or": "Or",
}
_COMPARISONS = {
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_INTEGRAL_LITERALS = frozenset({"tinyint", "smallint", "int", "bigint"})

# A Catalyst literal as (its type's simple string, its JVM value).
_Literal = tuple[str, Any]


def domain_of(
    filter: str | Column,
    column_types: Mapping[str, DataType],
    *,
    spark: SparkSession | None = None,
) -> Domain:
    """What ``filter`` (Spark SQL or a Column) allows per column of a table with
    ``column_types``; empty (nothing known) whenever the expression cannot be read."""
    try:
        expression = _catalyst(filter, spark)
        if expression is None:
            _log.debug("filter %r: no Catalyst expression (Spark Connect?); no pruning", filter)
            return {}
        return _CatalystWalker(column_types).domain(expression)
    except Exception:
        _log.debug("filter %r: domain not read; no pruning", filter, exc_info=True)
        return {}


def _catalyst(filter: str | Column, spark: SparkSession | None) -> Any:
    column = user_expression(filter) if isinstance(filter, str) else filter
    jc = getattr(column, "_jc", None)
    session = spark or SparkSession.getActiveSession()
    jsession = getattr(session, "_jsparkSession", None)
    if jc is None or jsession is None:
        return None
    # Spark 4 columns hold a ColumnNode; the classic session converts it to an Expression.
    return jsession.expression(jc)


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _operator(node: Any) -> tuple[str, list[Any]]:
    """The predicate's Catalyst class name (Column API functions mapped to it) and operands."""
    kind = str(node.getClass().getSimpleName())
    if kind != "UnresolvedFunction":
        return kind, _seq(node.children())
    parts = _seq(node.nameParts())
    if len(parts) != 1 or node.isDistinct() or node.filter().isDefined():
        return "", []
    return _FUNCTIONS.get(str(parts[0]).lower(), ""), _seq(node.arguments())


def _literal(node: Any) -> _Literal | None:
    if str(node.getClass().getSimpleName()) != "Literal":
        return None
    return str(node.dataType().simpleString()), node.value()


def _text(value: Any) -> str:
    # A string literal's value is a JVM UTF8String.
    return value if isinstance(value, str) else str(value.toString())


def _is_binary_string(data_type: DataType) -> bool:
    # A collated column (UTF8_LCASE...) compares values that differ in bytes as equal.
    return isinstance(data_type, StringType) and (
        getattr(data_type, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    )


class _CatalystWalker:
    """Walks one expression against one table's columns."""

    def __init__(self, column_types: Mapping[str, DataType]) -> None:
        self._types = column_types
        self._names: dict[str, str | None] = {}
        for name in column_types:
            # Two columns differing only in case: a name matching both resolves to neither.
            self._names[name.lower()] = None if name.lower() in self._names else name

    def domain(self, node: Any) -> Domain:
        kind, args = _operator(node)
        if kind in ("And", "Or") and len(args) == 2:
            combine: Callable[[Domain, Domain], Domain] = (
                and_domains if kind == "And" else or_domains
            )
            return combine(self.domain(args[0]), self.domain(args[1]))
        if kind in ("EqualTo", "EqualNullSafe") and len(args) == 2:
            return self._equality(*args)
        if kind == "In" and len(args) >= 2:
            return self._in(args[0], args[1:])
        if kind in _COMPARISONS and len(args) == 2:
            return self._comparison(_COMPARISONS[kind], *args)
        return {}

    def _column(self, node: Any) -> str | None:
        if str(node.getClass().getSimpleName()) != "UnresolvedAttribute":
            return None
        parts = _seq(node.nameParts())
        return self._names.get(str(parts[0]).lower()) if len(parts) == 1 else None

    def _value(self, column: str, literal: _Literal | None) -> str | None:
        """The literal as the string the partitioning sees, when equality on it is exact."""
        if literal is None or literal[1] is None:
            return None
        type_name, value = literal
        column_type = self._types[column]
        if _is_binary_string(column_type) and type_name == "string":
            return _text(value)
        if isinstance(column_type, IntegralType) and type_name in _INTEGRAL_LITERALS:
            return str(int(value))
        return None

    def _equality(self, left: Any, right: Any) -> Domain:
        column, other = (left, right) if self._column(left) else (right, left)
        name = self._column(column)
        value = None if name is None else self._value(name, _literal(other))
        return {} if name is None or value is None else {name: Values.of([value])}

    def _in(self, target: Any, items: list[Any]) -> Domain:
        name = self._column(target)
        if name is None:
            return {}
        literals = [_literal(item) for item in items]
        if any(lit is None for lit in literals):
            return {}
        present = [lit for lit in literals if lit is not None and lit[1] is not None]
        values = [self._value(name, lit) for lit in present]
        if not values or any(v is None for v in values):
            return {}
        return {name: Values.of(v for v in values if v is not None)}

    def _comparison(self, op: str, left: Any, right: Any) -> Domain:
        name = self._column(left)
        if name is None:
            name, op, right = self._column(right), _FLIPPED[op], left
        literal = _literal(right)
        if name is None or literal is None or literal[1] is None:
            return {}
        # Only strings: numbers compare by value, their partition strings do not.
        if not (_is_binary_string(self._types[name]) and literal[0] == "string"):
            return {}
        return {name: comparison(op, _text(literal[1]))}
