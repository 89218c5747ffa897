"""Physical removal from a datasource table: a Delta DELETE of whole ``__segment`` keys, and
VACUUM, which removes the deleted files from storage once Delta's own retention allows it
(``delta.deletedFileRetentionDuration``, 7 days by default; time travel until then). Delta's
retention check stays on: a retention shorter than the table's is refused before anything is
deleted. Which keys may go is the caller's decision (the kill task: only keys no used segment
references).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from pyspark.sql import SparkSession

from segmentlake.core.names import SEGMENT_KEY_COLUMN, quote_identifier, sql_path, sql_string
from segmentlake.errors import SpecError, first_line
from segmentlake.metadata.conflicts import retrying_table_commit
from segmentlake.metadata.table_log import TableLog
from segmentlake.spark.connect import default_parallelism
from segmentlake.storage.table_files import checkpoint_if_due

__all__ = [
    "DEFAULT_RETENTION_HOURS",
    "RETENTION_PROPERTY",
    "check_vacuum_retention",
    "delete_keys",
    "interval_hours",
    "vacuum_table",
]

logger = logging.getLogger(__name__)

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
DEFAULT_RETENTION_HOURS = 168.0  # Delta's default: interval 1 week
_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
_KEYS_PER_DELETE = 10_000


def delete_keys(spark: SparkSession, log: TableLog, keys: list[str]) -> None:
    """Delete every row under ``keys`` from the table of ``log``: whole files (a partition
    predicate), one Delta commit per batch of keys. Concurrent appends write other keys and
    do not conflict; a conflict with another delete is retried (deleting is idempotent). A
    delete that passes a checkpoint multiple checkpoints the table, as a write does."""
    path = log.uri
    before = log.version()

    def delete(batch: list[str]) -> None:
        # SQL rather than delta.tables.DeltaTable: it plans on the latest snapshot at each
        # attempt, and it works where the Python DeltaTable API does not (Spark Connect).
        keys_sql = ", ".join(map(sql_string, batch))
        column = quote_identifier(SEGMENT_KEY_COLUMN)
        spark.sql(f"DELETE FROM {sql_path(path)} WHERE {column} IN ({keys_sql})")

    for start in range(0, len(keys), _KEYS_PER_DELETE):
        batch = keys[start : start + _KEYS_PER_DELETE]
        retrying_table_commit(
            partial(delete, batch), what=f"DELETE of {len(batch)} key(s) from {path}"
        )
    checkpoint_if_due(log, before, log.version())


def vacuum_table(
    spark: SparkSession, log: TableLog, hours: float | None, *, directories: int
) -> int | None:
    """VACUUM the table; the number of files removed, from the ``VACUUM END`` commit Delta
    logs (None if it logged none)."""
    before = log.version()
    retain = "" if hours is None else f" RETAIN {float(hours)} HOURS"
    try:
        with _listing_parallelism(spark, directories):
            spark.sql(f"VACUUM {sql_path(log.uri)}{retain}")
    except Exception as e:
        if "RETENTION_PERIOD_TOO_SHORT" not in str(e) and "retention period" not in str(e):
            raise
        raise _retention_refused(log, hours, e) from e
    removed = None
    for version in range(before + 1, log.version() + 1):
        for action in log.commit_actions(version):
            info = action.get("commitInfo") or {}
            metrics = info.get("operationMetrics") or {}
            if info.get("operation") == "VACUUM END" and "numDeletedFiles" in metrics:
                removed = int(metrics["numDeletedFiles"])
    if removed is not None:
        logger.info("VACUUM of %s removed %d file(s)", log.uri, removed)
    return removed


@contextmanager
def _listing_parallelism(spark: SparkSession, directories: int) -> Iterator[None]:
    """VACUUM lists the table's directories in ``parallelPartitionDiscovery.parallelism``
    Spark tasks, 10,000 by default whatever the table's size: one VACUUM of a table of a few
    directories ran dozens of jobs, most with a stage of 10,000 tasks, minutes on a small
    machine. Unless the session set it, size it to the table: about 10
    directories (``__segment`` values) per task, at least the default parallelism."""
    conf = spark.conf
    if conf.get(_LISTING_PARALLELISM, None) is not None:
        yield
        return
    wanted = max(default_parallelism(spark), math.ceil(directories / 10))
    conf.set(_LISTING_PARALLELISM, str(min(wanted, 10_000)))
    try:
        yield
    finally:
        conf.unset(_LISTING_PARALLELISM)


def check_vacuum_retention(spark: SparkSession, log: TableLog, hours: float) -> None:
    """Refuse, before anything is deleted, a retention Delta's check would refuse at the end."""
    if (spark.conf.get(_CHECK_CONF, "true") or "true").lower() == "false":
        return  # the platform turned Delta's check off; that is its call, not ours
    table_hours = _table_retention_hours(log)
    if table_hours is not None and hours < table_hours:
        raise _retention_refused(log, hours, None)


def _table_retention_hours(log: TableLog) -> float | None:
    value = log.properties().get(RETENTION_PROPERTY)
    return DEFAULT_RETENTION_HOURS if value is None else interval_hours(value)


_UNIT_HOURS = {
    "week": 168.0,
    "day": 24.0,
    "hour": 1.0,
    "minute": 1 / 60,
    "second": 1 / 3600,
    "millisecond": 1 / 3_600_000,
    "microsecond": 1 / 3_600_000_000,
}
_INTERVAL_PART = re.compile(r"(-?\d+(?:\.\d+)?)\s*([a-z]+?)s?\b")


def interval_hours(text: str) -> float | None:
    """Hours of a Delta interval property such as ``interval 1 week`` or ``interval 0 hours``
    (None if it is not of that form)."""
    body = text.strip().lower()
    body = body.removeprefix("interval").strip()
    parts = _INTERVAL_PART.findall(body)
    if not parts or _INTERVAL_PART.sub("", body).strip():
        return None
    hours = 0.0
    for number, unit in parts:
        if unit not in _UNIT_HOURS:
            return None
        hours += float(number) * _UNIT_HOURS[unit]
    return hours


def _retention_refused(log: TableLog, hours: float | None, error: Exception | None) -> SpecError:
    value = log.properties().get(RETENTION_PROPERTY) or "interval 1 week"
    table_hours = _table_retention_hours(log)
    at_least = f"{table_hours:g}" if table_hours is not None else f"the table's {value}"
    if error is not None:
        found = re.search(r"at least (\d+(?:\.\d+)?) hours", str(error))
        at_least = found.group(1) if found else at_least
        delta_says = f"; Delta says: {first_line(error)}"
    else:
        delta_says = ""
    asked = "the default retention" if hours is None else f"a retention of {hours:g} hours"
    return SpecError(
        f"VACUUM of {log.uri} with {asked} would be refused by "
        f"Delta's retention check (the table's {RETENTION_PROPERTY} is {value!r}){delta_says}. "
        f"Pass vacuum_retention_hours >= {at_least} (or None for the table's retention), or, "
        f"if no write to the table can run longer than that, lower the table's retention "
        f"first: ALTER TABLE {sql_path(log.uri)} SET TBLPROPERTIES "
        f"('{RETENTION_PROPERTY}' = 'interval 24 hours')"
    )
