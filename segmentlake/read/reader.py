"""Read exactly the visible timeline (see :mod:`segmentlake.storage.visible_rows`, which
compactions share), with a filter: its domain prunes segments, its expression the rows."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.names import SEGMENT_KEY_COLUMN
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.read.catalyst_domain import domain_of
from segmentlake.spark.user_sql import analysed, spark_sql_errors, with_user_sql
from segmentlake.storage.visible_rows import (
    key_in,
    output_columns,
    pruned_keys,
    visible_rows,
    within,
)

__all__ = ["read_visible", "read_visible_table"]

_log = logging.getLogger(__name__)


def read_visible(
    spark: SparkSession,
    path: str,
    timeline: VersionedIntervalTimeline,
    *,
    interval: Interval | None = None,
    columns: Sequence[str] | None = None,
    filter: str | Column | None = None,
    sources: Mapping[str, tuple[str, int]] | None = None,
) -> DataFrame:
    """The visible rows of the datasource table at ``path``, with ``__time`` and ``columns``
    (default: every dimension and metric), matching ``filter``; the rows of a ``__segment``
    value in ``sources`` come from the (table path, version) it names: a loaded copy."""
    domain = None
    if filter is not None:
        table = spark.read.format("delta").load(path)
        types = {field.name: field.dataType for field in table.schema.fields}
        domain = domain_of(filter, types, spark=spark)
    rows, pruned = visible_rows(
        spark, path, timeline, interval=interval, domain=domain, sources=sources
    )
    if domain:
        _log.debug("the filter's domain %s left out %d visible segments", domain, pruned)
    if filter is not None:
        rows = _filtered(rows, filter)
    return rows.select(*output_columns(rows, columns))


def read_visible_table(
    spark: SparkSession,
    path: str,
    version: int,
    timeline: Callable[[], VersionedIntervalTimeline],
    *,
    interval: Interval | None = None,
    columns: Sequence[str] | None = None,
    filter: str | Column | None = None,
) -> DataFrame:
    """The rows of the visible table at ``path`` (see
    :mod:`segmentlake.metadata.visible_table`) as of ``version``: a plain Delta scan, with
    ``__time`` in ``interval``, ``columns``, matching ``filter``. A filter whose domain rules
    out whole segments (their hash bucket or range cannot match) leaves them out by a
    partition filter, so Delta skips their files from the log (``timeline`` is read only
    then)."""
    rows = spark.read.format("delta").option("versionAsOf", version).load(path)
    if filter is not None:
        types = {field.name: field.dataType for field in rows.schema.fields}
        domain = domain_of(filter, types, spark=spark)
        if domain:
            pruned = pruned_keys(timeline(), interval or ETERNITY, domain)
            _log.debug("the filter's domain %s left out %d visible segments", domain, len(pruned))
            if pruned:
                rows = rows.where(~key_in(pruned))
    if interval is not None:
        rows = rows.where(within(interval.start_millis, interval.end_millis))
    if filter is not None:
        rows = _filtered(rows, filter)
    return rows.select(*output_columns(rows, columns))


def _filtered(rows: DataFrame, filter: str | Column) -> DataFrame:
    """``rows`` where ``filter`` holds; a filter that is not a boolean Spark SQL condition
    over their columns is a :class:`SpecError` naming it and the columns."""
    shown = filter if isinstance(filter, str) else str(filter)

    def describe() -> str:
        columns = [c for c in rows.columns if c != SEGMENT_KEY_COLUMN]
        return f"filter {shown!r} is not a boolean Spark SQL condition over the columns {columns}"

    if isinstance(filter, str):
        return with_user_sql(rows.where, filter, describe)
    with spark_sql_errors(describe):
        return analysed(rows.where(filter))
