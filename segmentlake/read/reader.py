"""Read exactly the visible timeline (see :mod:`segmentlake.ingest.visible_rows`, which
compactions share), with a filter: its domain prunes segments, its expression the rows."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.core.filter_domain import Domain
from segmentlake.core.interval import Interval
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.ingest.visible_rows import (
    TIME_COLUMN,
    key_in,
    output_columns,
    partitions,
    sql_string,
    visible_rows,
)
from segmentlake.read.filter_domain import domain_of

__all__ = ["TIME_COLUMN", "key_in", "read_visible", "sql_string", "visible_partitions"]

_log = logging.getLogger(__name__)


def visible_partitions(
    timeline: VersionedIntervalTimeline, interval: Interval, domain: Domain | None = None
) -> tuple[list[str], dict[tuple[int, int], list[str]]]:
    """The ``__segment`` values whose every row in ``interval`` is visible, and, per visible
    piece that covers only part of its chunk, the values to read within that piece only;
    without the segments whose shard spec holds no row in ``domain`` (a filter's)."""
    whole, partial, pruned = partitions(timeline, interval, domain)
    if domain:
        _log.debug("the filter's domain %s left out %d visible segments", domain, pruned)
    return whole, partial


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
        rows = rows.where(F.expr(filter) if isinstance(filter, str) else filter)
    return rows.select(*output_columns(rows, columns))
