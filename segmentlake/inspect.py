"""``table.inspect``: a datasource's metadata as Spark DataFrames (pyiceberg's ``inspect``).

Each method is one of the warehouse's system views (:mod:`segmentlake.metadata.views`, Druid's
``sys`` tables — the same columns ``lake.register_system_views()`` registers) restricted to
the datasource, read when the DataFrame runs; ``history()`` is the metadata log's commits that
changed the datasource (:mod:`segmentlake.metadata.history`). Nothing here writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from segmentlake.core.interval import Interval
from segmentlake.core.spec_reader import check_flag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from segmentlake.table import Datasource

__all__ = ["DatasourceInspect"]


class DatasourceInspect:
    """The metadata of one datasource as DataFrames: :meth:`segments`, :meth:`locks`,
    :meth:`pending_segments`, :meth:`tasks`, :meth:`compaction` and :meth:`history`.

    >>> wiki = lake.table("wiki")  # doctest: +SKIP
    >>> wiki.inspect.segments().groupBy("is_visible").count().show()  # doctest: +SKIP
    """

    def __init__(self, table: Datasource) -> None:
        self._table = table

    def segments(
        self, *, interval: Interval | str | None = None, include_unused: bool = False
    ) -> DataFrame:
        """One row per segment record: ``segment_id``, ``start``, ``end``, ``version``,
        ``partition_num``, ``used``, ``visibility``, ``is_visible``, ``shard_spec``,
        ``num_rows``, ``size``, ``load_spec``, ... — the used segments (also the unused ones
        not killed yet with ``include_unused=True``), overlapping ``interval`` if given.

        >>> wiki.inspect.segments(interval="2024-01-01/P1D").select("segment_id").show()
        ... # doctest: +SKIP
        """
        from pyspark.sql import functions as F

        # Bad arguments are a SpecError before any Spark plan is made.
        span = None
        if interval is not None:
            span = interval if isinstance(interval, Interval) else Interval.parse(interval)
        check_flag(include_unused, "include_unused")
        frame = self._view("segments")
        if not include_unused:
            frame = frame.where(F.col("used"))
        if span is not None:
            frame = frame.where(
                (F.col("start") < F.lit(span.end)) & (F.col("end") > F.lit(span.start))
            )
        return frame

    def locks(self, *, include_expired: bool = False) -> DataFrame:
        """The datasource's live task locks (``lock_id``, ``group_id``, ``task_id``,
        ``lock_type``, ``granularity``, ``priority``, ``start``, ``end``, ``version``,
        ``expires``, ...), and revoked or expired ones with ``include_expired=True``.

        >>> wiki.inspect.locks().select("group_id", "lock_type").show()  # doctest: +SKIP
        """
        from pyspark.sql import functions as F

        check_flag(include_expired, "include_expired")
        frame = self._view("locks")
        return frame if include_expired else frame.where(F.col("live"))

    def pending_segments(self) -> DataFrame:
        """Segment ids allocated to running tasks and not published yet (``segment_id``,
        ``sequence_name``, ``group_id``, ``start``, ``end``, ``version``, ...).

        >>> wiki.inspect.pending_segments().count()  # doctest: +SKIP
        """
        return self._view("pending_segments")

    def tasks(self) -> DataFrame:
        """The datasource's recorded tasks: ``task_id``, ``type``, ``status``, ``updated``,
        ``task_seconds``, ``bytes_processed``, ``shuffle_bytes`` and the JSON ``report``.

        >>> wiki.inspect.tasks().orderBy("updated").show()  # doctest: +SKIP
        """
        return self._view("tasks")

    def compaction(self) -> DataFrame:
        """The compaction manager's picture of the datasource: holds, selections, running and
        queued jobs, user compactions (``entry``, ``id``, ``type``, ``status``, ...).

        >>> wiki.inspect.compaction().where("entry = 'running'").show()  # doctest: +SKIP
        """
        return self._view("compaction")

    def history(self, *, limit: int = 100) -> DataFrame:
        """The newest ``limit`` metadata commits that changed the datasource, newest first:
        ``version`` (of the metadata table), ``timestamp``, ``operation`` (``publish``,
        ``mark_unused``, ``lock``, ...) and ``commit_id``. Read from the metadata log now (one
        small read per log entry, back as far as the log keeps them).

        >>> wiki.inspect.history(limit=10).show()  # doctest: +SKIP
        """
        from segmentlake.metadata.history import HISTORY_SCHEMA, datasource_history

        lake = self._table.lake
        table = datasource_history(lake.metadata, self._table.name, limit=limit)
        spark = lake.spark
        if table.num_rows == 0:
            from pyspark.sql.pandas.types import from_arrow_schema

            return spark.createDataFrame([], from_arrow_schema(HISTORY_SCHEMA))
        return spark.createDataFrame(table)

    def _view(self, view: str) -> DataFrame:
        from pyspark.sql import functions as F

        from segmentlake.metadata.views import system_view_sql

        lake = self._table.lake
        lake._require_warehouse()
        frame = lake.spark.sql(system_view_sql(lake.metadata, view))
        return frame.where(F.col("datasource") == F.lit(self._table.name))

    def __repr__(self) -> str:
        return f"{self._table!r}.inspect"
