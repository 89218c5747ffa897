"""The datasource handle and the module-level read.

``lake.table("wiki")`` hands out a :class:`Datasource`, the handle of one datasource, shaped
like pyiceberg's ``catalog.load_table(...)`` and Delta's ``DeltaTable.forPath``: opening a
datasource the warehouse does not have raises :class:`~segmentlake.errors.DatasourceNotFound`
(open is not create), and its methods are the per-datasource operations — append, overwrite,
read, compact — plus two side namespaces, ``.inspect`` (DataFrames of its metadata) and
``.maintenance`` (marking segments used or unused, kill). Every method delegates to the
:class:`~segmentlake.lake.Lake` method of the same name, so the two always agree.

:func:`read` reads a datasource in one call and creates nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from segmentlake.core.compaction import CompactionMode
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import Interval
from segmentlake.core.partitions_spec import DEFAULT_MAX_ROWS_PER_SEGMENT, PartitionsSpec
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.spec_reader import check_list
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import SpecError
from segmentlake.ingest.report import TaskReport
from segmentlake.inspect import DatasourceInspect

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from segmentlake.compact.kill import KillReport
    from segmentlake.lake import Lake

__all__ = ["Datasource", "DatasourceMaintenance", "read"]


class Datasource:
    """One datasource of a warehouse — get it with ``lake.table(name)``.

    ``append`` / ``overwrite`` ingest a DataFrame under a spec (Druid's ``dataSchema`` JSON or
    an :class:`~segmentlake.IngestionSpec`) and return the task report; ``read`` returns
    exactly the visible rows as a DataFrame; ``compact`` runs one compaction now; ``inspect``
    and ``maintenance`` hold the rest. The handle holds no state of its own: every call reads
    the metadata as it is then.

    >>> wiki = lake.table("wiki", create=True)  # doctest: +SKIP
    >>> wiki.append(df, {"granularitySpec": {"segmentGranularity": "day"}})  # doctest: +SKIP
    >>> wiki.read(interval="2024-01-01/P7D").groupBy("channel").count()  # doctest: +SKIP
    """

    def __init__(self, lake: Lake, name: str) -> None:
        self.lake = lake
        self.name = name
        self.inspect = DatasourceInspect(self)
        self.maintenance = DatasourceMaintenance(self)

    def exists(self) -> bool:
        """Whether the warehouse has this datasource now (a handle opened with
        ``create=True`` has none until its first write)."""
        return self.lake.exists() and self.name in self.lake.datasources()

    # -- ingestion -----------------------------------------------------------------------------

    def append(
        self,
        df: DataFrame,
        spec: IngestionSpec | Mapping[str, Any],
        *,
        interval: Interval | str | None = None,
        task_id: str | None = None,
        priority: int = 0,
        lock_timeout_s: float = 60.0,
    ) -> TaskReport:
        """Append ``df``'s rows as new segments in the existing chunks' versions: existing data
        stays visible and concurrent appends never conflict (see :meth:`Lake.append`, whose
        arguments these are).

        Returns:
            The task report.

        >>> wiki.append(df, spec).summary()  # doctest: +SKIP
        """
        return self.lake.append(
            df,
            self.name,
            spec,
            interval=interval,
            task_id=task_id,
            priority=priority,
            lock_timeout_s=lock_timeout_s,
        )

    def overwrite(
        self,
        df: DataFrame,
        spec: IngestionSpec | Mapping[str, Any],
        *,
        interval: Interval | str,
        task_id: str | None = None,
        priority: int = 0,
        lock_timeout_s: float = 60.0,
    ) -> TaskReport:
        """Replace ``interval`` (aligned to the spec's segment granularity) with ``df``'s rows
        under a new version; chunks that get no rows get a tombstone (see
        :meth:`Lake.overwrite`, whose arguments these are).

        Returns:
            The task report.

        >>> wiki.overwrite(df, spec, interval="2024-01-01/P1D")  # doctest: +SKIP
        """
        return self.lake.overwrite(
            df,
            self.name,
            spec,
            interval=interval,
            task_id=task_id,
            priority=priority,
            lock_timeout_s=lock_timeout_s,
        )

    # -- reading -------------------------------------------------------------------------------

    def read(
        self,
        *,
        interval: Interval | str | None = None,
        columns: Sequence[str] | None = None,
        filter: str | Column | None = None,
        tier: str | None = None,
    ) -> DataFrame:
        """Exactly the visible rows (in ``interval``): ``__time`` and ``columns`` (default every
        dimension and metric) matching ``filter`` (see :meth:`Lake.read`).

        Args:
            interval: Only rows in it (default: all).
            columns: The columns besides ``__time`` (default: every dimension and metric).
            filter: A Spark SQL condition or a Column.
            tier: Read segments loaded on this tier's live volumes from there (default: the
                Spark conf ``segmentlake.read.tier``); the rows are the same.

        Returns:
            A DataFrame of those rows.

        >>> wiki.read(interval="2024-01-01/P1D", filter="channel = '#en'").count()
        ... # doctest: +SKIP
        """
        return self.lake.read(
            self.name, interval=interval, columns=columns, filter=filter, tier=tier
        )

    def register_view(self, name: str | None = None, *, temporary: bool = True) -> str:
        """Register a live view of the visible rows (default name: the datasource's) for
        ``spark.sql``, temporary or persistent; returns its name (see
        :meth:`Lake.register_view`).

        >>> spark.sql(f"SELECT count(*) FROM {wiki.register_view()}")  # doctest: +SKIP
        """
        return self.lake.register_view(self.name, name=name, temporary=temporary)

    def used_segments(self, *, interval: Interval | str | None = None) -> list[DataSegment]:
        """The used segments (overlapping ``interval``), visible or not, as
        :class:`DataSegment` objects ordered by interval, version and partition number.

        >>> [str(s.id) for s in wiki.used_segments(interval="2024-01-01/P1D")]  # doctest: +SKIP
        """
        return self.lake.used_segments(self.name, interval=interval)

    def timeline(self) -> VersionedIntervalTimeline:
        """The visible timeline, built from the used segments.

        >>> wiki.timeline().lookup(Interval.parse("2024-01-01/P1D"))  # doctest: +SKIP
        """
        return self.lake.timeline(self.name)

    # -- compaction ----------------------------------------------------------------------------

    def compact(
        self,
        *,
        interval: Interval | str | None = None,
        mode: CompactionMode = "minor",
        segment_granularity: Granularity | str | None = None,
        partitions_spec: PartitionsSpec | Mapping[str, Any] | None = None,
        query_granularity: Granularity | str | None = None,
        rollup: bool | None = None,
        max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT,
        segments: Iterable[SegmentId | DataSegment | str] | None = None,
        task_id: str | None = None,
        priority: int = 0,
        lock_timeout_s: float = 60.0,
    ) -> TaskReport:
        """Run one compaction now (``mode="minor"``: merge small segments inside each chunk;
        ``"major"``: re-ingest whole chunks with perfect rollup, optionally to another
        ``segment_granularity``) and return its report (see :meth:`Lake.compact`, whose
        arguments these are).

        >>> wiki.compact(interval="2024-01-01/P7D", mode="major", segment_granularity="DAY")
        ... # doctest: +SKIP
        """
        return self.lake.compact(
            self.name,
            interval=interval,
            mode=mode,
            segment_granularity=segment_granularity,
            partitions_spec=partitions_spec,
            query_granularity=query_granularity,
            rollup=rollup,
            max_rows_per_segment=max_rows_per_segment,
            segments=segments,
            task_id=task_id,
            priority=priority,
            lock_timeout_s=lock_timeout_s,
        )

    def __repr__(self) -> str:
        return f"Datasource({self.lake.warehouse!r}, {self.name!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datasource):
            return NotImplemented
        return (self.lake.warehouse, self.name) == (other.lake.warehouse, other.name)

    def __hash__(self) -> int:
        return hash((self.lake.warehouse, self.name))


class DatasourceMaintenance:
    """Changes to a datasource's segments that no ingestion makes: mark segments used or
    unused, mark what newer data overshadows unused, and kill unused segments for good.

    >>> wiki.maintenance.mark_overshadowed_unused()  # doctest: +SKIP
    >>> wiki.maintenance.kill(older_than=timedelta(days=7)).summary()  # doctest: +SKIP
    """

    def __init__(self, table: Datasource) -> None:
        self._table = table

    def mark_unused(self, segment_ids: Iterable[SegmentId | DataSegment | str]) -> int:
        """Mark segments of this datasource unused (they leave the timeline; their rows stay
        until killed); returns how many changed. An id of another datasource is a
        :class:`SpecError`.

        >>> wiki.maintenance.mark_unused(wiki.used_segments()[:1])  # doctest: +SKIP
        1
        """
        return self._table.lake.mark_unused(self._own(segment_ids))

    def mark_used(self, segment_ids: Iterable[SegmentId | DataSegment | str]) -> int:
        """Mark segments of this datasource used again; returns how many changed.

        >>> wiki.maintenance.mark_used(["wiki_2024-01-01T00:00:00.000Z_..."])  # doctest: +SKIP
        """
        return self._table.lake.mark_used(self._own(segment_ids))

    def mark_overshadowed_unused(self) -> list[SegmentId]:
        """Mark every used segment the timeline can never serve again unused in one commit
        and return their ids (Druid coordinator's cleanup duty; reads do not change).

        >>> len(wiki.maintenance.mark_overshadowed_unused())  # doctest: +SKIP
        2
        """
        return self._table.lake.mark_overshadowed_unused(self._table.name)

    def kill(
        self,
        *,
        interval: Interval | str | None = None,
        older_than: timedelta | float = timedelta(hours=1),
        vacuum_retention_hours: float | None = None,
        vacuum: bool = True,
    ) -> KillReport:
        """Permanently delete segments unused for at least ``older_than`` (wholly inside
        ``interval`` if given) — records, then rows, then VACUUM (see :meth:`Lake.kill`).

        >>> wiki.maintenance.kill(older_than=0, vacuum=False).killed  # doctest: +SKIP
        """
        return self._table.lake.kill(
            self._table.name,
            interval=interval,
            older_than=older_than,
            vacuum_retention_hours=vacuum_retention_hours,
            vacuum=vacuum,
        )

    def _own(self, segment_ids: Iterable[SegmentId | DataSegment | str]) -> list[SegmentId]:
        from segmentlake.lake import _SEGMENT_IDS, _segment_id

        given = check_list(segment_ids, "segment_ids", what=_SEGMENT_IDS)
        ids = [_segment_id(value) for value in given]
        others = sorted({str(sid) for sid in ids if sid.datasource != self._table.name})
        if others:
            raise SpecError(
                f"segments of another datasource given to {self._table.name!r}: "
                f"{', '.join(others[:5])}{', ...' if len(others) > 5 else ''}"
            )
        return ids

    def __repr__(self) -> str:
        return f"{self._table!r}.maintenance"


def read(
    spark: SparkSession | None,
    warehouse: str,
    datasource: str,
    *,
    interval: Interval | str | None = None,
    columns: Sequence[str] | None = None,
    filter: str | Column | None = None,
) -> DataFrame:
    """Exactly the visible rows of ``datasource`` in ``warehouse`` (in ``interval``, only
    ``columns``, matching ``filter``) as a DataFrame — :meth:`Lake.read` of an opened, never
    created, warehouse. Creates nothing: a path without a warehouse raises
    :class:`~segmentlake.errors.WarehouseNotFound`, an unknown datasource
    :class:`~segmentlake.errors.DatasourceNotFound`.

    >>> import segmentlake
    >>> segmentlake.read(spark, "/data/warehouse", "wiki", interval="2024-01-01/P1D")
    ... # doctest: +SKIP
    """
    from segmentlake.lake import Lake

    lake = Lake.open(spark, warehouse)
    # Read-only: the visible table when it is current, else the datasource table pruned by
    # key; a sync would commit.
    return lake.read(datasource, interval=interval, columns=columns, filter=filter, _sync=False)
