"""``Lake``: a warehouse of segmented datasources — the entry point of segmentlake.

>>> lake = Lake(spark_session(), "/tmp/warehouse")          # doctest: +SKIP
>>> lake.timeline("wiki").lookup(Interval.parse("2024-01-01/P1D"))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from segmentlake.actions import TaskActions
from segmentlake.compact.control import (
    CompactionStatus,
    check_user_compaction_options,
    compaction_status,
    read_config,
    request_user_compaction,
    set_config,
    user_compactions,
)
from segmentlake.core.compaction import COMPACTION_MODES, CompactionMode
from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_jobs import (
    DEFAULT_BATCH_JOBS,
    DEFAULT_BATCH_ROWS,
    DEFAULT_BATCH_SEGMENTS,
)
from segmentlake.core.compaction_queue import DEFAULT_QUEUE_SIZE
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.locks import LockRequest, TaskLock
from segmentlake.core.names import (
    SEGMENT_KEY_COLUMN,
    check_datasource_name,
    check_name,
    datasource_table_path,
    quote_identifier,
    sql_path,
)
from segmentlake.core.partitions_spec import (
    DEFAULT_MAX_ROWS_PER_SEGMENT,
    PartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.core.retention_rules import Rule
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.spec_reader import (
    check_flag,
    check_list,
    check_number,
    check_path,
    check_text,
    safe_repr,
)
from segmentlake.core.storage_tiers import CoordinatorConfig, Volume
from segmentlake.core.task_options import MAX_LEASE_SECONDS, check_task_options
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import CommitConflict, DatasourceNotFound, SpecError, WarehouseNotFound
from segmentlake.ingest.report import TaskReport
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.cleanup import mark_overshadowed_unused
from segmentlake.metadata.cluster_records import (
    SegmentCopy,
    add_volume,
    coordinator_config,
    copies_of,
    remove_volume,
    set_coordinator_config,
    set_decommissioning,
    volumes,
)
from segmentlake.metadata.compaction_records import UserCompaction
from segmentlake.metadata.lockbox import Lockbox, LockResult
from segmentlake.metadata.migration import check_metadata_version
from segmentlake.metadata.publish import PublishResult
from segmentlake.metadata.records import (
    PendingSegment,
)
from segmentlake.metadata.rule_records import RuleAudit, rule_history, rules_of, set_rules
from segmentlake.metadata.segments import (
    VisiblePiece,
    set_used,
    used_segment_rows,
    used_segments,
    used_timeline,
    visible_pieces,
)
from segmentlake.metadata.store import MetadataStore
from segmentlake.metadata.table_log import TableLog, local_path
from segmentlake.metadata.tasks import task_reports
from segmentlake.metadata.transaction import RetryPolicy
from segmentlake.metadata.visible_table import (
    current_version,
    sync_visible_table,
    visible_table_path,
)

if TYPE_CHECKING:
    # Spark and the engines load on first use: inspecting metadata (the CLI's segments,
    # locks, timeline) must not pay for importing pyspark.
    from pyspark.sql import Column, DataFrame, SparkSession

    from segmentlake.compact.kill import KillReport
    from segmentlake.compact.manager import CompactionManager
    from segmentlake.coordinator.coordinator import Coordinator
    from segmentlake.ingest.task import IngestMode, IngestTarget
    from segmentlake.table import Datasource

__all__ = ["Lake"]

logger = logging.getLogger(__name__)


def _no_data(datasource: str, warehouse: str) -> DatasourceNotFound:
    return DatasourceNotFound(
        f"datasource {datasource!r} has no data in {warehouse} yet; ingest it first with "
        "lake.append or lake.overwrite"
    )


_SEGMENT_IDS = "segment ids (SegmentId, DataSegment or id strings)"


def _segment_id(value: SegmentId | DataSegment | str) -> SegmentId:
    if isinstance(value, SegmentId):
        sid = value
    elif isinstance(value, DataSegment):
        sid = value.id
    elif isinstance(value, str):
        sid = SegmentId.parse(value)
    else:
        raise SpecError(
            f"a segment is a SegmentId, a DataSegment or an id string, got {type(value).__name__}"
        )
    check_datasource_name(sid.datasource)
    return sid


class Lake:
    """The warehouse at ``warehouse``: any path Spark and Delta can write — a local directory,
    DBFS, an object store prefix.

    Opening writes nothing. Where no warehouse exists yet, the first write (an ingestion, a
    lock, a rule) creates it, while reads raise :class:`WarehouseNotFound` naming the path;
    ``create=False`` (or :meth:`open`) raises at once instead, and :meth:`create` creates it
    now. Datasource names follow one rule (:mod:`segmentlake.core.names`), checked by every
    method; an unknown datasource is a :class:`DatasourceNotFound`.

    ``lease_seconds`` is how long a task lock lives without a heartbeat: a crashed task blocks
    others for at most that long. The metadata is read and committed in this Python process
    (delta-rs, no JVM); ``spark`` is needed only for data — pass None to inspect a warehouse
    without starting Spark (a session is made, or the active one taken, on first need).
    ``storage_options`` go to delta-rs for object stores (credentials, endpoint); ``retry``
    is how metadata commits that lost a race back off (default :class:`RetryPolicy`).
    """

    def __init__(
        self,
        spark: SparkSession | None,
        warehouse: str,
        *,
        create: bool = True,
        lease_seconds: float = 60.0,
        retry: RetryPolicy | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        check_path(warehouse, "warehouse")
        check_number(lease_seconds, "lease_seconds", minimum=0.001, maximum=MAX_LEASE_SECONDS)
        check_flag(create, "create")
        _check_storage_options(storage_options)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise SpecError(f"retry must be a RetryPolicy or None, got {safe_repr(retry)}")
        self._spark = spark
        self.warehouse = _qualified(warehouse)
        _check_not_inside_a_table(self.warehouse)
        self.metadata = MetadataStore(self.warehouse, storage_options=storage_options)
        check_metadata_version(self.warehouse, self.metadata)
        if not create:
            self._require_warehouse()
        self.lockbox = Lockbox(
            self.metadata, lease_ms=int(lease_seconds * 1000), retry=retry or RetryPolicy()
        )

    @property
    def spark(self) -> SparkSession:
        """The Spark session data operations run on (started on first need)."""
        if self._spark is None:
            from segmentlake.spark.session import spark_session

            self._spark = spark_session()
        return self._spark

    @classmethod
    def open(cls, spark: SparkSession | None, warehouse: str, **options: Any) -> Lake:
        """The existing warehouse at ``warehouse``; :class:`WarehouseNotFound` if there is none
        (a typo in the path must not silently start a new, empty warehouse)."""
        return cls(spark, warehouse, create=False, **options)

    @classmethod
    def create(cls, spark: SparkSession | None, warehouse: str, **options: Any) -> Lake:
        """Create the warehouse at ``warehouse`` now (its metadata table) and open it; an
        existing warehouse is opened as it is.

        >>> lake = Lake.create(spark, "/data/warehouse")  # doctest: +SKIP
        """
        lake = cls(spark, warehouse, create=True, **options)
        lake.metadata.create()
        return lake

    def exists(self) -> bool:
        """Whether a warehouse exists at this path (False until :meth:`create` or a write)."""
        return self.metadata.exists()

    def datasources(self) -> list[str]:
        """The names of the warehouse's datasources, sorted."""
        self._require_warehouse()
        return _user_datasources(self.metadata.datasources())

    def _require_warehouse(self) -> None:
        if not self.metadata.exists():
            raise WarehouseNotFound(
                f"no segmentlake warehouse at {self.warehouse} (no metadata table at "
                f"{self.metadata.path}); check the path, or create one with "
                "Lake.create(spark, path) or a first lake.append / lake.overwrite"
            )

    def _require_datasource(self, datasource: str) -> str:
        """``datasource`` if the warehouse has it, else :class:`DatasourceNotFound`."""
        check_datasource_name(datasource)
        self._require_warehouse()
        known = _user_datasources(self.metadata.datasources())
        if datasource not in known:
            shown = ", ".join(repr(d) for d in known[:10]) or "none"
            raise DatasourceNotFound(
                f"no datasource {datasource!r} in warehouse {self.warehouse} (it has: {shown}"
                f"{', ...' if len(known) > 10 else ''}); ingest it first with lake.append or "
                "lake.overwrite"
            )
        return datasource

    def table(self, datasource: str, *, create: bool = False) -> Datasource:
        """The handle of ``datasource`` (a :class:`~segmentlake.table.Datasource`): append,
        overwrite, read, compact, ``.inspect`` and ``.maintenance`` of that one datasource.
        Opening is not creating: a datasource the warehouse does not have raises
        :class:`DatasourceNotFound` (or :class:`WarehouseNotFound`), unless ``create=True``,
        which hands out the handle anyway and lets its first append or overwrite create it
        (nothing is written now).

        >>> wiki = lake.table("wiki")  # doctest: +SKIP
        >>> wiki.read(interval="2024-01-01/P1D").count()  # doctest: +SKIP
        """
        from segmentlake.table import Datasource

        if check_flag(create, "create"):
            check_datasource_name(datasource)
        else:
            self._require_datasource(datasource)
        return Datasource(self, datasource)

    # -- segments ----------------------------------------------------------------------------

    def used_segments(
        self, datasource: str, interval: Interval | str | None = None
    ) -> list[DataSegment]:
        """Every used segment of ``datasource`` (overlapping ``interval`` if given), visible or
        not, ordered by interval, version and partition number."""
        span = None if interval is None else _interval(interval)
        segments = self._used_segments(self._require_datasource(datasource), span)
        segments.sort(key=lambda s: (s.interval.key, s.version, s.shard_spec.partition_num))
        return segments

    def segment_records(self, datasource: str, interval: Interval | str | None = None) -> pa.Table:
        """The used segments of ``datasource`` (overlapping ``interval``) as their typed metadata
        records in Arrow (``start_ms``, ``end_ms``, ``version``, ``partition_num``,
        ``shard_type``, ``visibility``, ``num_rows``, ``size_bytes``, ...), unordered, with no
        :class:`DataSegment` built: for listing or analysing 10^5+ segments.

        >>> records = lake.segment_records("wiki")  # doctest: +SKIP
        >>> records.group_by("visibility").aggregate([("id", "count")])  # doctest: +SKIP
        """
        span = None if interval is None else _interval(interval)
        return used_segment_rows(self.metadata, self._require_datasource(datasource), span)

    def timeline(self, datasource: str) -> VersionedIntervalTimeline:
        """The visible timeline of ``datasource``, built from its used segments."""
        # Lazily loaded: segments are built for the chunks a caller touches, not all 10^6.
        return used_timeline(self.metadata, self._require_datasource(datasource))

    def visible_pieces(
        self, datasource: str, interval: Interval | str | None = None
    ) -> list[VisiblePiece]:
        """The pieces of ``datasource``'s visible timeline (overlapping ``interval``) summed
        up: each piece's interval, the chunk serving it, its partition numbers and rows. The
        same pieces as ``timeline(datasource).lookup(interval)``, read from the records'
        visibility with no segment built.

        >>> [str(p.interval) for p in lake.visible_pieces("wiki", "2024-01-01/P1D")]
        ... # doctest: +SKIP
        """
        query = ETERNITY if interval is None else _interval(interval)
        return visible_pieces(self.metadata, self._require_datasource(datasource), query)

    def _used_segments(
        self, datasource: str, interval: Interval | str | None = None
    ) -> list[DataSegment]:
        span = None if interval is None else _interval(interval)
        return used_segments(self.metadata, datasource, span)

    def mark_unused(self, segment_ids: Iterable[SegmentId | DataSegment | str]) -> int:
        """Mark segments unused (they disappear from the timeline; data stays until killed).
        Returns how many changed; ids not found are ignored."""
        return self._set_used(segment_ids, used=False)

    def mark_used(self, segment_ids: Iterable[SegmentId | DataSegment | str]) -> int:
        """Mark segments used again; returns how many changed."""
        return self._set_used(segment_ids, used=True)

    def _set_used(self, segment_ids: Iterable[SegmentId | DataSegment | str], *, used: bool) -> int:
        by_datasource: dict[str, set[str]] = {}
        for value in check_list(segment_ids, "segment_ids", what=_SEGMENT_IDS):
            sid = _segment_id(value)
            by_datasource.setdefault(sid.datasource, set()).add(str(sid))
        changed = 0
        for datasource, ids in by_datasource.items():
            changed += len(
                set_used(
                    self.metadata,
                    datasource,
                    ids,
                    used=used,
                    operation="mark_used" if used else "mark_unused",
                    policy=self.lockbox.retry,
                )
            )
        return changed

    # -- the task-action API (moved to lake.actions) ------------------------------------------

    @property
    def actions(self) -> TaskActions:
        """The task-action API of this warehouse — locks, leases, segment allocation and
        publish (:class:`~segmentlake.actions.TaskActions`), for writers of their own.

        >>> lake.actions.try_lock("wiki", "2024-01-01/P1D", group_id="job-1")  # doctest: +SKIP
        """
        actions = self.__dict__.get("_actions")
        if actions is None or actions.lockbox is not self.lockbox:
            actions = self.__dict__["_actions"] = TaskActions(self.lockbox)
        return actions

    def lock_request(
        self, datasource: str, interval: Interval | str, **options: Any
    ) -> LockRequest:
        """Deprecated: use ``lake.actions.lock_request``."""
        _moved("lock_request")
        return self.actions.lock_request(datasource, interval, **options)

    def try_lock(self, datasource: str, interval: Interval | str, **options: Any) -> LockResult:
        """Deprecated: use ``lake.actions.try_lock``."""
        _moved("try_lock")
        return self.actions.try_lock(datasource, interval, **options)

    def lock(self, datasource: str, interval: Interval | str, **options: Any) -> TaskLock:
        """Deprecated: use ``lake.actions.lock``."""
        _moved("lock")
        return self.actions.lock(datasource, interval, **options)

    def heartbeat(self, datasource: str, group_id: str) -> list[TaskLock]:
        """Deprecated: use ``lake.actions.heartbeat``."""
        _moved("heartbeat")
        return self.actions.heartbeat(datasource, group_id)

    def release_locks(self, datasource: str, group_id: str, **options: Any) -> int:
        """Deprecated: use ``lake.actions.release_locks``."""
        _moved("release_locks")
        return self.actions.release_locks(datasource, group_id, **options)

    def allocate(
        self, datasource: str, requests: Sequence[AllocateRequest], **options: Any
    ) -> list[PendingSegment]:
        """Deprecated: use ``lake.actions.allocate``."""
        _moved("allocate")
        return self.actions.allocate(datasource, requests, **options)

    def publish(
        self, datasource: str, segments: Sequence[DataSegment], **options: Any
    ) -> PublishResult:
        """Deprecated: use ``lake.actions.publish``."""
        _moved("publish")
        return self.actions.publish(datasource, segments, **options)

    # -- locks -------------------------------------------------------------------------------

    def locks(self, datasource: str, *, include_expired: bool = False) -> list[TaskLock]:
        """The datasource's live locks (and expired ones with ``include_expired``)."""
        check_flag(include_expired, "include_expired")
        datasource = self._require_datasource(datasource)
        return self.lockbox.locks(datasource, include_expired=include_expired)

    # -- ingestion ---------------------------------------------------------------------------

    def append(
        self,
        df: DataFrame,
        datasource: str,
        spec: IngestionSpec | Mapping[str, Any],
        *,
        interval: Interval | str | None = None,
        task_id: str | None = None,
        priority: int = 0,
        lock_timeout_s: float = 60.0,
    ) -> TaskReport:
        """Append ``df``'s rows to ``datasource`` as new segments in the existing chunks'
        versions (ids allocated in the publish commit, after the write): existing data
        stays visible, and appends from any number of drivers never conflict. Rows outside
        ``interval`` (if given) are counted and skipped.

        Args:
            df: The input rows (a batch DataFrame; see :func:`append_stream` for streams).
            datasource: Created by its first ingestion.
            spec: Druid's ``dataSchema`` JSON (or a whole task spec) or an
                :class:`IngestionSpec`.
            interval: Rows outside it are counted and skipped (default: none).
            task_id: Names this run (letters, digits, ``_`` and ``-``; default: a fresh id).
                One that already succeeded raises :class:`TaskAlreadyPublished`, so a
                retried job never ingests its rows twice.
            priority: Lock priority: conflicting locks of strictly lower priority are revoked.
            lock_timeout_s: How long the publish waits while an overwrite holds a chunk.

        Returns:
            The task report: rows by fate, segments, bytes, seconds per phase
            (``report.summary()`` prints it).


        >>> spec = {"granularitySpec": {"segmentGranularity": "day"}}
        >>> lake.append(df, "wiki", spec).summary()  # doctest: +SKIP
        """
        return self._ingest(
            df, datasource, spec, "append", interval, task_id, priority, lock_timeout_s
        )

    def overwrite(
        self,
        df: DataFrame,
        datasource: str,
        spec: IngestionSpec | Mapping[str, Any],
        *,
        interval: Interval | str,
        task_id: str | None = None,
        priority: int = 0,
        lock_timeout_s: float = 60.0,
    ) -> TaskReport:
        """Replace ``interval`` of ``datasource`` with ``df``'s rows: exclusive time-chunk
        locks, a new version above every existing one, a tombstone for each chunk that gets
        no rows. ``interval`` must be aligned to the spec's segment granularity (which may
        differ from the existing data's). Until the publish commit readers see the old data;
        after it, only the new.

        Args:
            df: The input rows (a batch DataFrame; see :func:`append_stream` for streams).
            datasource: Created by its first ingestion.
            spec: Druid's ``dataSchema`` JSON (or a whole task spec) or an
                :class:`IngestionSpec`.
            interval: The span replaced, aligned to the spec's segment granularity; rows
                outside it are counted and skipped.
            task_id: Names this run (letters, digits, ``_`` and ``-``; default: a fresh id).
                One that already succeeded raises :class:`TaskAlreadyPublished`, so a
                retried job never ingests its rows twice.
            priority: Lock priority: conflicting locks of strictly lower priority are revoked.
            lock_timeout_s: How long to wait for the chunks' locks held by other tasks.

        Returns:
            The task report: rows by fate, segments, bytes, seconds per phase
            (``report.summary()`` prints it).
        """
        return self._ingest(
            df, datasource, spec, "overwrite", interval, task_id, priority, lock_timeout_s
        )

    def _ingest(
        self,
        df: DataFrame,
        datasource: str,
        spec: IngestionSpec | Mapping[str, Any],
        mode: IngestMode,
        interval: Interval | str | None,
        task_id: str | None,
        priority: int,
        lock_timeout_s: float,
    ) -> TaskReport:
        check_datasource_name(datasource)
        if not isinstance(spec, IngestionSpec):
            spec = IngestionSpec.from_dict(spec)
        from segmentlake.ingest.task import run_ingestion

        self.metadata.create()  # a first ingestion creates the warehouse before it writes
        return run_ingestion(
            self._target(),
            df,
            datasource,
            spec,
            mode=mode,
            interval=None if interval is None else _interval(interval),
            task_id=task_id,
            priority=priority,
            lock_timeout_s=lock_timeout_s,
        )

    # -- compaction ---------------------------------------------------------------------------

    def compact(
        self,
        datasource: str,
        interval: Interval | str | None = None,
        *,
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
        """Run one compaction of ``datasource`` (in ``interval``, default everything) now and
        return its report. Appends into the same days go on meanwhile and are never lost.

        * ``mode="minor"``: inside each chunk and version, the runs of visible segments with
          adjacent root partitions that the datasource's compaction planner picks (as the
          manager does, but merging two similar segments: a segment is never rewritten to
          absorb ones adding up to less than half its size) are merged (best-effort rollup) into
          ``ceil(rows / max_rows_per_segment)`` segments that overshadow them; segment
          locks on the inputs only. ``segments`` (ids) restricts it to those. While another
          task holds one of them it plans again for up to ``lock_timeout_s``, then raises
          :class:`LockRefused`.
        * ``mode="major"``: whole chunks re-ingested, each chunk's rows rolled up together,
          under a new version, optionally to another ``segment_granularity`` (e.g. HOUR →
          DAY), and partitioned by ``partitions_spec`` (default hashed by
          ``targetRowsPerSegment``; ``dynamic`` cuts each chunk to ``maxRowsPerSegment``, as
          a Druid compaction task does by default); REPLACE locks, and segments appended
          meanwhile are re-published under the new version.

        Chunks already compacted as wanted (their ``last_compaction_state``) are skipped.

        Args:
            datasource: The datasource to compact.
            interval: The span compacted (default: all the data).
            mode: ``"minor"`` or ``"major"`` (above).
            segment_granularity: Major only: the chunks' new segment granularity.
            partitions_spec: Major only: the partitioning (hashed, range, single_dim or
                dynamic; JSON or a spec object).
            query_granularity: Major only: the rows' time granularity (default: the
                segments' finest).
            rollup: Major only: roll rows up (default: only if every segment was).
            max_rows_per_segment: Minor only: the size the merged segments are cut to.
            segments: Minor only: compact only these segments (ids, strings or segments).
            task_id: Names this run (default: a fresh id).
            priority: Lock priority: conflicting locks of strictly lower priority are revoked.
            lock_timeout_s: How long to wait for locks other tasks hold.

        Returns:
            The task report (``status`` ``SKIPPED`` when nothing needed compacting).

        >>> lake.compact("wiki", "2024-01-01/P7D", mode="major", segment_granularity="DAY")
        ... # doctest: +SKIP
        """
        from segmentlake.compact.major import MajorCompaction, compact_major
        from segmentlake.compact.minor import compact_minor, on_demand_planner

        span = None if interval is None else _interval(interval)
        if mode not in COMPACTION_MODES:
            modes = " or ".join(map(repr, COMPACTION_MODES))
            raise SpecError(f"compaction mode must be {modes}, not {safe_repr(mode)}")
        check_task_options(task_id=task_id, priority=priority, lock_timeout_s=lock_timeout_s)
        if segments is not None:
            segments = check_list(segments, "segments", what=_SEGMENT_IDS)
        datasource = self._require_datasource(datasource)
        target = self._target()
        if mode == "major":
            if isinstance(partitions_spec, Mapping):
                partitions_spec = partitions_spec_from_dict(partitions_spec)
            options = MajorCompaction(
                segment_granularity=_granularity(segment_granularity),
                partitions_spec=partitions_spec,
                query_granularity=_granularity(query_granularity),
                rollup=rollup,
            )
            return compact_major(
                target,
                datasource,
                span,
                options,
                task_id=task_id,
                priority=priority,
                lock_timeout_s=lock_timeout_s,
            )
        if segment_granularity is not None or partitions_spec is not None:
            raise SpecError(
                "a minor compaction keeps each chunk and its partitioning; "
                "segment_granularity and partitions_spec need mode='major'"
            )
        return compact_minor(
            target,
            datasource,
            span,
            max_rows_per_segment=max_rows_per_segment,
            task_id=task_id,
            priority=priority,
            segments=None if segments is None else [str(_segment_id(s)) for s in segments],
            lock_timeout_s=lock_timeout_s,
            planner=on_demand_planner(
                read_config(self.metadata, datasource).planner, max_rows_per_segment
            ),
        )

    # -- the compaction manager -----------------------------------------------------------

    def set_compaction_config(
        self, datasource: str, config: CompactionConfig | Mapping[str, Any]
    ) -> CompactionConfig:
        """Store how the compaction manager compacts ``datasource``: its system planner, its
        selectors and user-compaction defaults (a :class:`CompactionConfig` or its JSON), or
        Druid's automatic compaction config JSON (docs/druid-specs.md), read with Druid's
        defaults.

        >>> lake.set_compaction_config("wiki", {"planner": {"type": "ratio", "ratio": 2},
        ...     "selectors": [{"type": "fingerprint", "maxRowsPerSegment": 1000000}]})
        ... # doctest: +SKIP
        """
        return set_config(self.metadata, check_datasource_name(datasource), config)

    def compaction_config(self, datasource: str) -> CompactionConfig:
        """``datasource``'s compaction config (the default one if none was set)."""
        return read_config(self.metadata, self._require_datasource(datasource))

    def compaction_manager(
        self,
        *,
        datasources: Sequence[str] | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        batch_jobs: int = DEFAULT_BATCH_JOBS,
        batch_segments: int = DEFAULT_BATCH_SEGMENTS,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> CompactionManager:
        """A compaction manager of this warehouse (every datasource unless ``datasources``);
        ``manager.run(compactors=2)`` runs it, ``manager.run(once=True)`` runs one pass and
        drains its jobs.

        Args:
            datasources: The datasources it manages (default: every one).
            queue_size: The most jobs it keeps queued ahead of its compactors.
            batch_jobs: The most minor jobs a compactor runs as one compaction (1 runs
                them one by one).
            batch_segments: The most input segments of one batch.
            batch_rows: The most input rows of one batch: bounds how long a batch holds its
                chunks' locks.
        """
        from segmentlake.compact.manager import CompactionManager, check_manager_sizes

        if datasources is not None:
            datasources = _datasource_names(datasources)
        # Before the Spark session the manager's target needs is found or started.
        check_manager_sizes(
            queue_size=queue_size,
            batch_jobs=batch_jobs,
            batch_segments=batch_segments,
            batch_rows=batch_rows,
        )
        return CompactionManager(
            self._target(),
            datasources=datasources,
            queue_size=queue_size,
            batch_jobs=batch_jobs,
            batch_segments=batch_segments,
            batch_rows=batch_rows,
        )

    def start_user_compaction(
        self,
        datasource: str,
        interval: Interval | str,
        *,
        max_rows_per_segment: int | None = None,
        max_segments_per_job: int | None = None,
        compaction_id: str | None = None,
    ) -> UserCompaction:
        """Ask the compaction manager to compact every chunk serving ``interval`` now down to
        its final form, in jobs of at most ``max_segments_per_job`` segments; returns the
        request at once (its ``compaction_id`` and ``status``). A running manager does the
        work; :meth:`user_compaction` tells how far it got.

        Args:
            datasource: The datasource to compact.
            interval: The span whose chunks are compacted.
            max_rows_per_segment: The compacted segments' size (default: the config's).
            max_segments_per_job: The most input segments one job takes (default: the
                config's).
            compaction_id: Names the request (default: a fresh id).

        Returns:
            The stored request.
        """
        span = _interval(interval)
        check_user_compaction_options(max_rows_per_segment, max_segments_per_job, compaction_id)
        return request_user_compaction(
            self.metadata,
            self._require_datasource(datasource),
            span,
            max_rows_per_segment=max_rows_per_segment,
            max_segments_per_job=max_segments_per_job,
            compaction_id=compaction_id,
            policy=self.lockbox.retry,
        )

    def user_compaction(self, datasource: str, compaction_id: str) -> UserCompaction:
        """The user compaction ``compaction_id`` as the metadata has it now."""
        for user in user_compactions(self.metadata, self._require_datasource(datasource)):
            if user.compaction_id == compaction_id:
                return user
        raise SpecError(f"no user compaction {compaction_id!r} in datasource {datasource!r}")

    def compaction_status(self, datasource: str) -> CompactionStatus:
        """``datasource``'s holds and selections, running jobs, user compactions and the jobs
        live managers have queued."""
        return compaction_status(self.metadata, self._require_datasource(datasource))

    def tasks(self, datasource: str) -> list[TaskReport]:
        """The reports of ``datasource``'s recorded tasks, oldest first."""
        datasource = self._require_datasource(datasource)
        return [TaskReport.from_json(r) for r in task_reports(self.metadata, datasource)]

    # -- retention rules, volumes and the coordinator -----------------------------------------

    def set_rules(
        self,
        datasource: str,
        rules: Sequence[Rule] | Sequence[Mapping[str, Any]] | str,
        *,
        author: str = "",
        comment: str = "",
    ) -> int:
        """Replace ``datasource``'s rule chain (``"_default"``: the chain every datasource falls
        back to) with ``rules`` — :class:`Rule` objects or Druid's rule JSON; the first rule
        that matches a segment decides. The change and an audit entry (who, when, old, new)
        are one commit; returns the chain's new revision.

        >>> lake.set_rules("wiki", [{"type": "loadByPeriod", "period": "P1M",
        ...     "tieredReplicants": {"hot": 1}}, {"type": "dropForever"}],
        ...     author="ops", comment="keep a month")  # doctest: +SKIP
        """
        return set_rules(
            self.metadata,
            _rules_name(datasource),
            rules,
            author=author,
            comment=comment,
            policy=self.lockbox.retry,
        )

    def rules(self, datasource: str) -> tuple[Rule, ...]:
        """``datasource``'s own rule chain (``()`` if none; ``"_default"``: the default chain)."""
        datasource = _rules_name(datasource)
        self._require_warehouse()
        return rules_of(self.metadata, datasource)

    def rule_history(self, datasource: str | None = None) -> list[RuleAudit]:
        """Every change of the rules (of ``datasource``), newest first."""
        datasource = None if datasource is None else _rules_name(datasource)
        self._require_warehouse()
        return rule_history(self.metadata, datasource)

    def add_volume(
        self,
        name: str,
        *,
        tier: str,
        path: str,
        capacity_bytes: int,
        priority: int = 0,
    ) -> Volume:
        """Register a volume of ``tier`` at ``path`` holding up to ``capacity_bytes`` of loaded
        segments (any path Spark writes: a local directory on each worker, a bucket), and mark
        it live; the next coordinator run starts loading onto it. ``priority`` orders tiers:
        a segment's first copy goes to the tier of highest priority its rule names.

        >>> lake.add_volume("nvme-1", tier="hot", path="/mnt/nvme1/sl", capacity_bytes=10**12)
        ... # doctest: +SKIP
        """
        check_name(name, what="volume")
        check_name(tier, what="tier")
        if not isinstance(path, str) or not path.strip():
            raise SpecError(f"volume {name!r} needs a non-empty path, got {path!r}")
        volume = Volume(name, tier, _qualified(path), capacity_bytes, priority=priority)
        from segmentlake.coordinator.volume_tables import prepare_volume

        prepare_volume(volume)
        return add_volume(self.metadata, volume, policy=self.lockbox.retry)

    def remove_volume(self, name: str) -> bool:
        """Deregister volume ``name`` (its data stays where it is); its copies are forgotten by
        the next coordinator run and re-replicated elsewhere. False if there was none."""
        check_name(name, what="volume")
        return remove_volume(self.metadata, name, policy=self.lockbox.retry)

    def decommission_volume(self, name: str, *, decommissioning: bool = True) -> Volume:
        """Start (or stop) decommissioning volume ``name``: runs move its copies to the other
        volumes of its tier, never letting a segment's replicas drop below its rule."""
        check_name(name, what="volume")
        return set_decommissioning(self.metadata, name, decommissioning, policy=self.lockbox.retry)

    def volumes(self) -> tuple[Volume, ...]:
        """Every registered volume."""
        self._require_warehouse()
        return volumes(self.metadata)

    def segment_copies(self, datasource: str) -> list[SegmentCopy]:
        """Every copy of ``datasource``'s segments on volumes, in any state."""
        return copies_of(self.metadata, self._require_datasource(datasource))

    def set_coordinator_config(
        self, config: CoordinatorConfig | Mapping[str, Any]
    ) -> CoordinatorConfig:
        """Store the coordinator's dynamic config (Druid's JSON names; keys left out keep
        their stored values)."""
        return set_coordinator_config(self.metadata, config, policy=self.lockbox.retry)

    def coordinator_config(self) -> CoordinatorConfig:
        """The coordinator's dynamic config (defaults where none was set)."""
        self._require_warehouse()
        return coordinator_config(self.metadata)

    def coordinator(
        self, *, datasources: Sequence[str] | None = None, loads_per_batch: int = 500
    ) -> Coordinator:
        """The coordinator of this warehouse's tiers: ``coordinator.run_once()`` applies the
        rules (retention included), plans loads, drops, moves and balancing, commits them and
        carries them out; ``coordinator.run(interval_s=60)`` keeps doing so.

        Args:
            datasources: The datasources it manages (default: every one).
            loads_per_batch: The most segment copies loaded onto a volume in one batch.
        """
        if datasources is not None:
            datasources = _datasource_names(datasources)
        from segmentlake.coordinator.coordinator import Coordinator

        return Coordinator(
            self.spark,
            self.warehouse,
            self.metadata,
            datasources=datasources,
            loads_per_batch=loads_per_batch,
            policy=self.lockbox.retry,
        )

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        datasource: str,
        interval: Interval | str | None = None,
        columns: Sequence[str] | None = None,
        filter: str | Column | None = None,
        *,
        tier: str | None = None,
        _sync: bool = True,
    ) -> DataFrame:
        """Exactly the visible rows of ``datasource`` (in ``interval``): ``__time`` (UTC
        TIMESTAMP) and ``columns`` (default every dimension and metric), matching ``filter``
        (Spark SQL or a Column). One Delta scan, pruned to the visible segments.

        With ``tier`` (default: the Spark conf ``segmentlake.read.tier``, if set), each
        visible segment loaded on a live volume of that tier is read from there, the others
        from deep storage: the same rows either way.

        >>> lake.read("wiki", "2024-01-01/P7D").groupBy("channel").count()  # doctest: +SKIP
        """
        from segmentlake.read.reader import read_visible, read_visible_table
        from segmentlake.read.tier_copies import TIER_CONF, copy_sources

        span = None if interval is None else _interval(interval)
        _check_filter(filter)
        if tier is not None:
            check_name(tier, what="tier")
        datasource = self._require_datasource(datasource)
        tier = tier or self.spark.conf.get(TIER_CONF, None) or None
        if tier is None:
            version = (
                self._visible_version(datasource)
                if _sync
                else current_version(self.metadata, datasource)
            )
            if version is not None:
                return read_visible_table(
                    self.spark,
                    self._spark_path(visible_table_path(self.warehouse, datasource)),
                    version,
                    lambda: self.timeline(datasource),
                    interval=span,
                    columns=columns,
                    filter=filter,
                )
        path = datasource_table_path(self.warehouse, datasource)
        if TableLog(path, storage_options=self.metadata.table.storage_options).version() < 0:
            raise _no_data(datasource, self.warehouse)
        sources = (
            None if tier is None else copy_sources(self.spark, self.metadata, datasource, tier)
        )
        return read_visible(
            self.spark,
            path,
            self.timeline(datasource),
            interval=span,
            columns=columns,
            filter=filter,
            sources=sources,
        )

    def _visible_version(self, datasource: str) -> int | None:
        """The visible table's version showing the timeline as of now (synced first); None
        when a sync could not land (then the datasource table is read, pruned by key: the
        metadata decides what is visible either way)."""
        try:
            report = sync_visible_table(self.metadata, datasource)
        except Exception as e:  # the read still has an exact way; say why it takes it
            logger.warning(
                "the visible table of %s could not be synced (%s: %s); reading through the "
                "datasource table", datasource, type(e).__name__, e,
            )  # fmt: skip
            return None
        if report.table_version is None:
            raise _no_data(datasource, self.warehouse)
        return report.table_version

    def _spark_path(self, path: str) -> str:
        """``path`` as Spark should store it in a view: absolute (a relative local path
        would resolve against whatever directory the querying session runs in)."""
        local = local_path(path)
        return path if local is None else os.path.abspath(local)

    def visible_table_path(self, datasource: str) -> str:
        """Where the visible table of ``datasource`` is: a Delta table holding exactly the
        visible rows, kept current by every commit (see
        :mod:`segmentlake.metadata.visible_table`). Any Delta reader can query it — e.g.
        ``spark-sql -e "SELECT count(*) FROM delta.`<path>`"`` with no segmentlake
        installed. Its ``__segment`` column names each row's segment.

        >>> spark.read.format("delta").load(lake.visible_table_path("wiki"))  # doctest: +SKIP
        """
        datasource = self._require_datasource(datasource)
        return self._spark_path(visible_table_path(self.warehouse, datasource))

    def view_sql(self, datasource: str, name: str | None = None, *, temporary: bool = False) -> str:
        """The ``CREATE VIEW`` statement of a view over the visible rows of ``datasource``
        (``__time``, dimensions, metrics): run it in any Spark SQL session or metastore, with
        or without segmentlake; the view stays exact as segments are published, compacted
        or dropped, with no re-registration.

        >>> print(lake.view_sql("wiki"))  # doctest: +SKIP
        CREATE OR REPLACE VIEW `wiki` AS SELECT * EXCEPT (`__segment`) FROM delta.`/wh/...`
        """
        view = _view_name(datasource, name)
        check_flag(temporary, "temporary")
        path = self.visible_table_path(datasource)
        kind = "TEMPORARY VIEW" if temporary else "VIEW"
        return (
            f"CREATE OR REPLACE {kind} {quote_identifier(view)} AS "
            f"SELECT * EXCEPT ({quote_identifier(SEGMENT_KEY_COLUMN)}) FROM {sql_path(path)}"
        )

    def register_view(
        self, datasource: str, name: str | None = None, *, temporary: bool = True
    ) -> str:
        """Register a view ``name`` (default: the datasource's name) of the visible rows of
        ``datasource`` for ``spark.sql``; returns the name. The view reads the visible table
        (:meth:`visible_table_path`), so it stays exact after later appends, overwrites,
        compactions and kills with no re-registration. ``temporary=False`` makes it a
        persistent view in the session catalog, which other sessions (and a Thrift server
        on the same metastore) see. Names that are not plain SQL identifiers
        (``wiki-edits``) are quoted in SQL: ``SELECT * FROM `wiki-edits```.

        >>> lake.register_view("wiki")  # doctest: +SKIP
        'wiki'
        >>> spark.sql("SELECT channel, count(*) FROM wiki GROUP BY channel")  # doctest: +SKIP
        """
        view = _view_name(datasource, name)
        check_flag(temporary, "temporary")
        datasource = self._require_datasource(datasource)
        if self._visible_version(datasource) is None:
            raise CommitConflict(
                f"the visible table of {datasource!r} could not be brought up to date (too "
                "many concurrent commits); retry register_view"
            )
        self.spark.sql(self.view_sql(datasource, view, temporary=temporary))
        return view

    # -- cleanup and kill --------------------------------------------------------------------

    def mark_overshadowed_unused(self, datasource: str) -> list[SegmentId]:
        """Mark every used segment of ``datasource`` that the timeline can never serve again
        (fully overshadowed by newer data) unused, in one commit, and return their ids: reads
        do not change, timelines get smaller, and the segments become candidates for
        :meth:`kill` (Druid coordinator's cleanup duty). Returns ``[]`` and commits nothing
        when there is none.

        >>> lake.overwrite(df, "wiki", spec, interval="2024-01-01/P1D")  # doctest: +SKIP
        >>> len(lake.mark_overshadowed_unused("wiki"))  # doctest: +SKIP
        2
        """
        datasource = self._require_datasource(datasource)
        return mark_overshadowed_unused(self.metadata, datasource, policy=self.lockbox.retry)

    def kill(
        self,
        datasource: str,
        *,
        interval: Interval | str | None = None,
        older_than: timedelta | float = timedelta(hours=1),
        vacuum_retention_hours: float | None = None,
        vacuum: bool = True,
    ) -> KillReport:
        """Permanently delete ``datasource``'s segments that have been unused for at least
        ``older_than`` (a timedelta, or seconds), wholly inside ``interval`` if given (Druid's
        kill task): their records go in one commit (so ``mark_used`` cannot bring them back),
        then their rows, unless a used segment still serves them; without ``interval``, rows
        that no segment references and older than ``older_than`` (failed tasks) go too. Then
        (unless ``vacuum=False``: it lists the whole table) VACUUM removes deleted files older
        than ``vacuum_retention_hours`` (default: the table's
        ``delta.deletedFileRetentionDuration``, 7 days unless set; Delta refuses less, raised
        as :class:`SpecError`). Used data is never touched. Returns a report.

        >>> lake.kill("wiki", older_than=timedelta(days=7)).summary()  # doctest: +SKIP
        """
        older_than_ms = _duration_ms(older_than)
        span = None if interval is None else _interval(interval)
        from segmentlake.compact.kill import check_kill_arguments, kill_unused

        check_kill_arguments(older_than_ms, vacuum_retention_hours, vacuum)
        return kill_unused(
            self.spark,
            self.warehouse,
            self.metadata,
            self._require_datasource(datasource),
            older_than_ms=older_than_ms,
            interval=span,
            vacuum_retention_hours=vacuum_retention_hours,
            vacuum=vacuum,
            policy=self.lockbox.retry,
        )

    # -- inspection --------------------------------------------------------------------------

    def register_system_views(self, *, prefix: str = "segmentlake_") -> list[str]:
        """Register ``<prefix>segments``, ``locks``, ``pending_segments``, ``tasks`` as temp
        views over the metadata (Druid's ``sys`` tables); returns their names."""
        self._require_warehouse()
        from segmentlake.metadata.views import register_system_views

        return register_system_views(self.spark, self.metadata, prefix=prefix)

    def _target(self) -> IngestTarget:
        from segmentlake.ingest.task import IngestTarget

        return IngestTarget(self.spark, self.warehouse, self.lockbox)

    def __repr__(self) -> str:
        return f"Lake({self.warehouse!r})"


def _moved(name: str) -> None:
    """Warn that ``Lake.<name>`` moved to the task-action API (``lake.actions.<name>``)."""
    warnings.warn(
        f"Lake.{name} is deprecated: the task-action API moved to lake.actions "
        f"(lake.actions.{name}); user operations are on lake.table(datasource)",
        DeprecationWarning,
        stacklevel=3,
    )


def qualified_warehouse(warehouse: str) -> str:
    """The warehouse path as Lake keeps it (absolute, or a URI as given)."""
    return _qualified(warehouse)


def _qualified(warehouse: str) -> str:
    """A URI stays as it is; a plain path becomes absolute (Delta reads ``delta.`path```
    as a path only when it is absolute)."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", warehouse):
        return warehouse.rstrip("/")
    return os.path.abspath(warehouse)


def _check_not_inside_a_table(warehouse: str) -> None:
    """Refuse a local path that is a Delta table (a datasource's, say): a warehouse there
    would put its metadata and datasources inside another table's directory."""
    local = warehouse.removeprefix("file:")
    if "://" in warehouse or not local.startswith("/"):
        return  # remote stores: checking costs a round trip; Delta refuses nested writes later
    _check_path_lengths(warehouse, local)
    if os.path.isdir(os.path.join(local, "_delta_log")):
        raise SpecError(
            f"{warehouse} is a Delta table, not a warehouse; a warehouse is the directory "
            "that holds _segmentlake/ and one directory per datasource"
        )
    if os.path.exists(local) and not os.path.isdir(local):
        raise SpecError(f"warehouse {warehouse} is a file; a warehouse is a directory")


# What local file systems allow (Linux's NAME_MAX and PATH_MAX, in bytes); the deepest file a
# warehouse holds (a 255-character datasource's segment files) is under 512 bytes below it.
_MAX_NAME_BYTES = 255
_MAX_WAREHOUSE_BYTES = 4096 - 512


def _check_path_lengths(warehouse: str, local: str) -> None:
    """Refuse a local warehouse path the file system could not hold files under (it used to
    fail at the first commit, inside delta-rs: "Could not create local directory")."""
    too_long = [part for part in local.split("/") if len(part.encode()) > _MAX_NAME_BYTES]
    if too_long:
        raise SpecError(
            f"warehouse {safe_repr(warehouse)} has a directory name of "
            f"{len(too_long[0].encode())} bytes; file systems allow {_MAX_NAME_BYTES}"
        )
    if len(local.encode()) > _MAX_WAREHOUSE_BYTES:
        raise SpecError(
            f"warehouse path of {len(local.encode())} bytes is too long: its files lie up to "
            f"512 bytes deeper, and paths may have 4096; use one of {_MAX_WAREHOUSE_BYTES} "
            "bytes at most"
        )


def _user_datasources(partitions: Iterable[str]) -> list[str]:
    """The metadata partitions that are datasources (segmentlake's own start with '_')."""
    return sorted(p for p in partitions if not p.startswith("_"))


def _rules_name(datasource: str) -> str:
    """A datasource name, or ``_default`` (the chain every datasource falls back to)."""
    return datasource if datasource == "_default" else check_datasource_name(datasource)


def _granularity(value: Granularity | str | None) -> Granularity | None:
    return None if value is None else Granularity.parse(value)


def _interval(value: Interval | str) -> Interval:
    return value if isinstance(value, Interval) else Interval.parse(value)


def _check_filter(value: object) -> None:
    """A read's filter: None, a Spark SQL boolean expression or a Column (what is wrong
    inside one, a syntax error or an unknown column, is found when it is applied and raised
    as a SpecError too; see :mod:`segmentlake.spark.user_sql`)."""
    if value is None:
        return
    if isinstance(value, str):
        if not value.strip():
            raise SpecError("filter must be a Spark SQL boolean expression, got an empty string")
        return
    from pyspark.sql import Column

    if not isinstance(value, Column):
        raise SpecError(
            f"filter must be a Spark SQL boolean expression or a Column, got {safe_repr(value)}"
        )


def _check_storage_options(value: object) -> None:
    """Object-store options: None, or a mapping of option names to string values (what
    delta-rs and Hadoop take; a number or a nested mapping would fail deep inside a read)."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise SpecError(f"storage_options must be a mapping of strings, got {safe_repr(value)}")
    wrong = [k for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str)]
    if wrong:
        raise SpecError(
            f"storage_options must map option names to string values; {safe_repr(wrong[:3])} "
            "do not (e.g. {'AWS_REGION': 'eu-west-1', 'AWS_ALLOW_HTTP': 'true'})"
        )


def _view_name(datasource: str, name: object) -> str:
    """The name of a view of ``datasource``: ``name``, or by default the datasource's. Any
    text Spark takes in backticks may name a view, but not a blank one or one with control
    characters, which no SQL text a user types could name again."""
    if name is None:
        return check_datasource_name(datasource)
    view = check_text(name, "a view name", what="a non-blank string")
    controls = sorted({c for c in view if ord(c) < 32 or ord(c) == 127})
    if controls:
        raise SpecError(
            f"a view name must have no control characters, got {safe_repr(view)} "
            f"(with {', '.join(map(repr, controls[:5]))})"
        )
    return view


def _datasource_names(value: object) -> list[str]:
    """A list of datasource names (a single name is refused: it is not read letter by letter)."""
    return [check_datasource_name(d) for d in check_list(value, "datasources", what="names")]


def _duration_ms(value: timedelta | float) -> int:
    """A non-negative duration (a timedelta, or seconds) in milliseconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise SpecError(
            f"older_than must be a non-negative timedelta or number of seconds, got {value!r}; "
            "e.g. timedelta(days=7) or 3600"
        )
    return round(seconds * 1000)
