"""The rows of exactly the visible timeline, as one Delta scan pruned to the visible segments'
partitions — what reads, compactions and the coordinator all scan.

The timeline (from the metadata) says which segments serve which pieces of time. The scan
keeps the partitions (``__segment`` values, from each segment's load spec) of every visible
segment — Delta prunes the other files from its log, without listing directories — and, for a
segment that is only partly visible (a newer version covers some of its chunk), keeps only its
rows inside the visible pieces. With a filter's domain, segments whose secondary partition
(hash bucket or dimension range) holds no row it can match are left out of the scan as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.core.filter_domain import Domain, could_contain
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.load_spec import segment_key
from segmentlake.core.names import SEGMENT_KEY_COLUMN, TIME_COLUMN, sql_string
from segmentlake.core.spec_reader import check_list
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import SpecError

__all__ = [
    "key_in",
    "output_columns",
    "partitions",
    "pruned_keys",
    "visible_rows",
    "within",
]


def partitions(
    timeline: VersionedIntervalTimeline, interval: Interval, domain: Domain | None = None
) -> tuple[list[str], dict[tuple[int, int], list[str]], int]:
    """The ``__segment`` values whose every row in ``interval`` is visible; per visible piece
    that covers only part of its chunk, the values to read within that piece only; and how
    many visible segments ``domain`` (a filter's) left out."""
    whole: dict[str, None] = {}
    partial: dict[tuple[int, int], list[str]] = {}
    pruned = set()
    for holder in timeline.lookup(interval):
        piece = holder.interval
        for segment in holder.segments:
            if domain and not could_contain(segment.shard_spec, domain):
                pruned.add(segment.id)
                continue
            # Whole when the piece holds every row of the segment the query asks for (the
            # global time filter clips to the query); an upgraded copy's rows may lie beyond
            # its chunk, hence its rows interval, not its interval.
            rows = segment.rows_interval
            if piece.start_millis <= max(rows.start_millis, interval.start_millis) and (
                piece.end_millis >= min(rows.end_millis, interval.end_millis)
            ):
                whole[segment_key(segment)] = None
            else:
                partial.setdefault(piece.key, []).append(segment_key(segment))
    return list(whole), partial, len(pruned)


def pruned_keys(
    timeline: VersionedIntervalTimeline, interval: Interval, domain: Domain
) -> list[str]:
    """The ``__segment`` values of the visible segments in ``interval`` whose shard spec
    holds no row ``domain`` (a filter's) can match, and that no other visible segment
    there needs."""
    pruned: set[str] = set()
    kept: set[str] = set()
    for holder in timeline.lookup(interval):
        for segment in holder.segments:
            key = segment_key(segment)
            (kept if could_contain(segment.shard_spec, domain) else pruned).add(key)
    return sorted(pruned - kept)


def visible_rows(
    spark: SparkSession,
    path: str,
    timeline: VersionedIntervalTimeline,
    *,
    interval: Interval | None = None,
    domain: Domain | None = None,
    sources: Mapping[str, tuple[str, int]] | None = None,
) -> tuple[DataFrame, int]:
    """The visible rows of the datasource table at ``path`` in ``interval`` (every column,
    ``__segment`` included; see the module), and how many segments ``domain`` pruned.

    ``sources`` maps a ``__segment`` value to another table holding the same rows (a loaded
    copy on a volume) and the version to read it at: those rows come from there instead."""
    span = interval or ETERNITY
    whole, partial, pruned = partitions(timeline, span, domain)
    sources = sources or {}
    deep_whole = [k for k in whole if k not in sources]
    deep_partial = {p: [k for k in ks if k not in sources] for p, ks in partial.items()}
    rows = _scan(spark.read.format("delta").load(path), deep_whole, deep_partial, interval)
    for (table_path, version), keys in _by_table(sources, whole, partial).items():
        table = spark.read.format("delta").option("versionAsOf", version).load(table_path)
        piece_whole = [k for k in whole if k in keys]
        piece_partial = {p: [k for k in ks if k in keys] for p, ks in partial.items()}
        copied = _scan(table, piece_whole, piece_partial, interval)
        rows = rows.unionByName(copied, allowMissingColumns=True)
    return rows, pruned


def _by_table(
    sources: Mapping[str, tuple[str, int]],
    whole: Sequence[str],
    partial: Mapping[tuple[int, int], Sequence[str]],
) -> dict[tuple[str, int], set[str]]:
    """The keys to read from each other table: those visible and found in ``sources``."""
    tables: dict[tuple[str, int], set[str]] = {}
    for key in [*whole, *(k for ks in partial.values() for k in ks)]:
        if key in sources:
            tables.setdefault(sources[key], set()).add(key)
    return tables


def _scan(
    table: DataFrame,
    whole: Sequence[str],
    partial: Mapping[tuple[int, int], Sequence[str]],
    interval: Interval | None,
) -> DataFrame:
    partial = {p: ks for p, ks in partial.items() if ks}
    keys = [*whole, *(k for ks in partial.values() for k in ks)]
    # A pure partition predicate first: Delta prunes files with it from the log alone.
    rows = table.where(key_in(keys))
    if partial:
        visible = key_in(whole)
        for (start, end), piece_keys in partial.items():
            visible = visible | (key_in(piece_keys) & within(start, end))
        rows = rows.where(visible)
    if interval is not None:
        rows = rows.where(within(interval.start_millis, interval.end_millis))
    return rows


def key_in(keys: Sequence[str]) -> Column:
    """``__segment IN (keys)`` as ONE SQL expression: ``Column.isin`` makes a py4j call per
    value, seconds for tens of thousands of keys where this takes milliseconds."""
    if not keys:
        return F.lit(False)
    return F.expr(f"`{SEGMENT_KEY_COLUMN}` IN ({','.join(map(sql_string, keys))})")


def within(start: int, end: int) -> Column:
    """``__time`` in ``[start, end)`` (epoch millis)."""
    t = F.col(TIME_COLUMN)
    return (t >= F.timestamp_millis(F.lit(start))) & (t < F.timestamp_millis(F.lit(end)))


def output_columns(table: DataFrame, wanted: Sequence[str] | None) -> list[str]:
    """``__time`` and the ``wanted`` columns (default: every dimension and metric)."""
    available = [c for c in table.columns if c != SEGMENT_KEY_COLUMN]
    if wanted is None:
        return available
    wanted = check_list(wanted, "columns", what="column names")
    missing = [c for c in wanted if c not in available]
    if missing:
        raise SpecError(f"columns {missing} are not in the datasource; it has {available}")
    twice = sorted({c for c in wanted if wanted.count(c) > 1})
    if twice:
        # Spark would return the column twice, and any later reference to it is ambiguous.
        raise SpecError(f"columns lists {twice} more than once; name each column once")
    return [TIME_COLUMN, *[c for c in wanted if c != TIME_COLUMN]]
