"""A user's Spark SQL — a read's filter, an ingestion's ``transformSpec`` filter and
transforms — as one expression, with Spark's errors about it raised as :class:`SpecError`.

Spark's ``expr`` reads a *named* expression: ``"channel = '#en' AND"`` parses as the condition
``channel = '#en'`` aliased ``AND``, so a cut-off filter would silently keep more rows than
meant. Parenthesised, the text must be one whole expression (an alias is not allowed inside
parentheses), and a trailing ``--`` comment cannot swallow the closing parenthesis, which
goes on a line of its own.

A classic session analyses a DataFrame as it is built; Spark Connect only when it runs, so
there :func:`analysed` asks the server to analyse it now (one round trip), and a bad filter
fails where it is given rather than inside a write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from segmentlake.errors import SpecError, first_line
from segmentlake.spark.connect import is_connect

__all__ = ["analysed", "spark_sql_errors", "user_expression", "with_user_sql"]


def user_expression(text: str) -> Column:
    """``text`` as one Spark SQL expression, never an aliased one (see the module)."""
    return F.expr(f"(\n{text}\n)")


def with_user_sql(
    build: Callable[[Column], DataFrame], text: str, describe: Callable[[], str]
) -> DataFrame:
    """``build(user_expression(text))``, analysed; when Spark refuses it, a
    :class:`SpecError` starting with ``describe()`` and giving Spark's reason for ``text`` as
    the user wrote it (the positions in a syntax error are theirs, not of the parenthesised
    text), or saying that ``text`` is an expression followed by an alias."""
    try:
        return analysed(build(user_expression(text)))
    except AnalysisException as err:  # parse errors included, classic and Connect
        try:
            analysed(build(F.expr(text)))
        except AnalysisException as as_written:
            raise SpecError(f"{describe()}: {first_line(as_written)}") from as_written
        raise SpecError(
            f"{describe()}: Spark reads it as an expression followed by a column alias (a "
            "condition cut off after AND or OR, or two expressions with no operator between "
            "them); give one whole expression"
        ) from err


@contextmanager
def spark_sql_errors(describe: Callable[[], str]) -> Iterator[None]:
    """Raise Spark's analysis and parse errors inside the block as :class:`SpecError`,
    ``describe()`` (what was given and what it is read against) before Spark's first line."""
    try:
        yield
    except AnalysisException as err:  # parse errors included, classic and Connect
        raise SpecError(f"{describe()}: {first_line(err)}") from err


def analysed(frame: DataFrame) -> DataFrame:
    """``frame``, analysed by now: on Spark Connect the server is asked whether it streams
    (errors in the plan raise here; its schema would not do, as a filter's is copied from
    the frame it filters without asking); a classic session analysed it when it was built."""
    if is_connect(frame.sparkSession):
        _ = frame.isStreaming
    return frame
