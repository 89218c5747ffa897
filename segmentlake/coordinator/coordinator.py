"""The coordinator: each run reads the cluster from the metadata, plans with the pure
:func:`~segmentlake.core.coordinator_run.plan_run`, commits the plan, and (unless told not to)
carries out queued loads and drops on the volumes.

A run commits, per datasource, ONE conditional change of its copies (new loads, drops,
cancelled loads, copies of dead volumes forgotten) and, for segments a drop rule retires, ONE
change marking them unused. Loads run in batches — one Spark job per volume and datasource
per batch — and each batch's commit turns its copies ``LOADED`` and a finished move's source
``DROPPING``; drops delete rows no remaining copy on the volume shares, then the records.
Queued work survives the process: a later run, in any process, carries it out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from pyspark.sql import SparkSession

from segmentlake.compact.kill import kill_unused
from segmentlake.coordinator.volume_tables import drop_rows, load_rows, volume_alive
from segmentlake.core.coordinator_run import (
    ClusterSnapshot,
    CoordinatorPlan,
    RunStats,
    SegmentCopies,
    ServedSegments,
    plan_run,
)
from segmentlake.core.load_spec import segment_key
from segmentlake.core.retention_rules import DEFAULT_RULES_KEY
from segmentlake.core.segment import DataSegment
from segmentlake.core.spec_reader import check_flag, check_int, check_number
from segmentlake.core.storage_tiers import CoordinatorConfig, CopyState, LoadReason, Volume
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.faults import crash_point
from segmentlake.metadata.cleanup import mark_overshadowed_unused
from segmentlake.metadata.cluster_records import (
    SegmentCopy,
    coordinator_config,
    copies_of,
    record_copy_changes,
    record_dropped,
    record_loaded,
    volumes,
)
from segmentlake.metadata.queries import USED_SEGMENTS
from segmentlake.metadata.records import SEGMENT_COLUMNS, segments_from_rows
from segmentlake.metadata.rule_records import all_rules
from segmentlake.metadata.segments import set_used
from segmentlake.metadata.store import MetadataStore, now_ms
from segmentlake.metadata.transaction import RetryPolicy

__all__ = ["Coordinator", "CoordinatorReport"]

logger = logging.getLogger(__name__)

_MAX_ALERTS_LOGGED = 10


@dataclass
class CoordinatorReport:
    """One run: what the planner found and decided, what the run committed and carried out."""

    stats: RunStats
    live_volumes: list[str] = field(default_factory=list)
    dead_volumes: list[str] = field(default_factory=list)
    forgotten_copies: int = 0
    marked_unused: int = 0
    overshadowed_unused: int = 0
    alerts: list[str] = field(default_factory=list)
    loaded: int = 0
    dropped: int = 0
    failed_loads: int = 0
    killed: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        s = self.stats
        return (
            f"{s.segments} segments, {len(self.live_volumes)} live volumes"
            f"{f' ({len(self.dead_volumes)} dead)' if self.dead_volumes else ''}: "
            f"unreplicated {s.unreplicated}, unavailable {s.unavailable}; queued {s.loads} loads, "
            f"{s.replicas} replicas, {s.decommission_moves} decommission moves, "
            f"{s.balance_moves} balance moves, {s.drops} drops, {s.cancels} cancels; "
            f"retired {self.marked_unused}, overshadowed marked unused "
            f"{self.overshadowed_unused}; loaded {self.loaded}, dropped {self.dropped}, "
            f"failed {self.failed_loads}; alerts {len(self.alerts)}; "
            f"plan {self.seconds.get('plan', 0):.2f}s, run {self.seconds.get('total', 0):.1f}s"
        )


@dataclass
class _ClusterView:
    """A snapshot with the maps back to names: served segments by row, copies by index."""

    snapshot: ClusterSnapshot
    segments: list[DataSegment]
    copies: list[SegmentCopy]
    dead_copies: list[SegmentCopy]
    live: list[Volume]
    dead: list[Volume]
    config: CoordinatorConfig


class Coordinator:
    """The coordinator of a warehouse's storage tiers (see the module). Build it with
    ``lake.coordinator()``."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str,
        store: MetadataStore,
        *,
        datasources: Sequence[str] | None = None,
        loads_per_batch: int = 500,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.spark, self.warehouse, self.store = spark, warehouse, store
        # An empty list manages no datasource, as the compaction manager's does.
        self.datasources = None if datasources is None else list(datasources)
        self.loads_per_batch = check_int(loads_per_batch, "loads_per_batch", minimum=1)
        self.policy = policy or RetryPolicy()
        # When each segment was first seen with no loaded copy (alerts), across runs.
        self._unavailable_since: dict[str, int] = {}

    # -- one run -------------------------------------------------------------------------

    def run_once(self, *, execute: bool = True) -> CoordinatorReport:
        """Plan, commit and (with ``execute``) carry out one run; returns its report."""
        check_flag(execute, "execute")
        started = time.perf_counter()
        seconds: dict[str, float] = {}
        view = self._view()
        seconds["read"] = time.perf_counter() - started
        planned = time.perf_counter()
        plan = plan_run(view.snapshot, view.config)
        seconds["plan"] = time.perf_counter() - planned
        report = CoordinatorReport(
            plan.stats,
            live_volumes=[v.name for v in view.live],
            dead_volumes=[v.name for v in view.dead],
            seconds=seconds,
        )
        committed = time.perf_counter()
        report.forgotten_copies = self._commit_copies(view, plan)
        report.marked_unused = self._retire(view, plan)
        report.overshadowed_unused = self._mark_overshadowed(
            view.config.mark_segment_as_unused_delay_millis
        )
        seconds["commit"] = time.perf_counter() - committed
        self._remember_unavailable(view, plan)
        report.alerts = [str(view.segments[int(i)].id) for i in plan.alerts]
        self._log_alerts(report.alerts, view.config)
        if execute:
            executed = time.perf_counter()
            report.loaded, report.dropped, report.failed_loads = self.execute()
            seconds["execute"] = time.perf_counter() - executed
        if view.config.kill_unused_after_seconds is not None:
            report.killed = self._kill(view.config.kill_unused_after_seconds)
        seconds["total"] = time.perf_counter() - started
        logger.info("coordinator run: %s", report.summary())
        return report

    def run(
        self,
        *,
        interval_s: float = 60.0,
        runs: int | None = None,
        stop: threading.Event | None = None,
        on_run: Callable[[CoordinatorReport], None] | None = None,
    ) -> None:
        """Run every ``interval_s`` seconds until ``stop`` is set (or ``runs`` runs). A failed
        run is logged and the next one tries again."""
        # Checked before the first run: a bad value would otherwise fail after it.
        check_number(interval_s, "interval_s", minimum=0)
        if runs is not None:
            check_int(runs, "runs", minimum=0)
        stop = stop or threading.Event()
        done = 0
        while not stop.is_set() and (runs is None or done < runs):
            began = time.monotonic()
            try:
                report = self.run_once()
                if on_run is not None:
                    on_run(report)
            except Exception:
                logger.exception("coordinator run failed; the next run retries")
            done += 1
            if runs is not None and done >= runs:
                break
            stop.wait(max(0.0, interval_s - (time.monotonic() - began)))

    # -- reading the cluster -------------------------------------------------------------

    def _datasources(self) -> list[str]:
        if self.datasources is not None:
            return list(self.datasources)
        return [d for d in self.store.datasources() if not d.startswith("_")]

    def _view(self) -> _ClusterView:
        registered = volumes(self.store)
        alive = {v.name: volume_alive(v) for v in registered}
        live = [v for v in registered if alive[v.name]]
        dead = [v for v in registered if not alive[v.name]]
        for volume in dead:
            logger.warning("volume %s (%s) is gone: its copies are lost", volume.name, volume.path)
        rules = all_rules(self.store)
        default = rules.pop(DEFAULT_RULES_KEY, ())
        segments: list[DataSegment] = []
        copies: list[SegmentCopy] = []
        for datasource in self._datasources():
            segments.extend(self._served(datasource))
            copies.extend(copies_of(self.store, datasource))
        live_index = {v.name: i for i, v in enumerate(live)}
        row_of = {str(s.id): i for i, s in enumerate(segments)}
        kept = [c for c in copies if c.volume in live_index]
        dead_copies = [c for c in copies if c.volume not in live_index]
        served = ServedSegments.of(
            [
                (str(s.id), s.datasource, s.interval.start_millis, s.interval.end_millis, s.size)
                for s in segments
            ]
        )
        snapshot = ClusterSnapshot(
            volumes=tuple(live),
            segments=served,
            copies=SegmentCopies.of(
                [
                    (
                        row_of.get(c.segment_id, -1),
                        live_index[c.volume],
                        int(c.state),
                        int(c.reason),
                        live_index.get(c.move_from, -1) if c.move_from else -1,
                    )
                    for c in kept
                ]
            ),
            rules=rules,
            default_rules=default,
            now_ms=now_ms(),
            unavailable_since_ms=np.array(
                [self._unavailable_since.get(str(s.id), -1) for s in segments], dtype=np.int64
            ),
        )
        return _ClusterView(
            snapshot, segments, kept, dead_copies, live, dead, coordinator_config(self.store)
        )

    def _served(self, datasource: str) -> list[DataSegment]:
        """The segments a reader can see: used, visible on the timeline, with rows."""
        rows = self.store.rows(datasource, USED_SEGMENTS, columns=SEGMENT_COLUMNS)
        timeline = VersionedIntervalTimeline(segments_from_rows(rows))
        return [s for s in timeline.visible_segments() if not s.is_tombstone]

    # -- committing a plan ---------------------------------------------------------------

    def _commit_copies(self, view: _ClusterView, plan: CoordinatorPlan) -> int:
        """One commit per datasource with changes; returns how many dead copies it forgot."""
        now = now_ms()
        live = view.live
        changes: dict[str, list[tuple[str, SegmentCopy | None, SegmentCopy]]] = {}
        for k in range(len(plan.load_segment)):
            segment = view.segments[int(plan.load_segment[k])]
            source = int(plan.load_move_from[k])
            copy = SegmentCopy(
                datasource=segment.datasource,
                segment_id=str(segment.id),
                volume=live[int(plan.load_volume[k])].name,
                state=CopyState.LOADING,
                reason=LoadReason(int(plan.load_reason[k])),
                key=segment_key(segment),
                start_ms=segment.interval.start_millis,
                end_ms=segment.interval.end_millis,
                size_bytes=segment.size,
                move_from=live[source].name if source >= 0 else None,
                since_ms=now,
            )
            changes.setdefault(copy.datasource, []).append(("insert", None, copy))
        for i in plan.drop_copies:
            old = view.copies[int(i)]
            new = replace(old, state=CopyState.DROPPING, since_ms=now)
            changes.setdefault(old.datasource, []).append(("drop", old, new))
        for i in plan.cancel_copies:
            old = view.copies[int(i)]
            changes.setdefault(old.datasource, []).append(("delete", old, old))
        for old in view.dead_copies:
            changes.setdefault(old.datasource, []).append(("delete", old, old))
        for datasource, items in changes.items():
            record_copy_changes(self.store, datasource, items, policy=self.policy)
        return len(view.dead_copies)

    def _retire(self, view: _ClusterView, plan: CoordinatorPlan) -> int:
        """Mark the segments a drop rule matched unused: one commit per datasource."""
        by_datasource: dict[str, set[str]] = {}
        for i in plan.mark_unused:
            segment = view.segments[int(i)]
            by_datasource.setdefault(segment.datasource, set()).add(str(segment.id))
        changed = 0
        for datasource, ids in by_datasource.items():
            done = set_used(
                self.store,
                datasource,
                ids,
                used=False,
                operation="retention_drop",
                policy=self.policy,
            )
            changed += len(done)
        if changed:
            logger.info("retention rules marked %d segments unused", changed)
        return changed

    def _mark_overshadowed(self, delay_ms: int) -> int:
        """Druid's cleanup duty: mark unused what has been fully overshadowed for at least
        ``delay_ms`` (no read changes: the timeline is the same without it), so timelines and
        every decision over them stay the size of what is served."""
        marked = 0
        for datasource in self._datasources():
            marked += len(
                mark_overshadowed_unused(
                    self.store, datasource, overshadowed_for_ms=delay_ms, policy=self.policy
                )
            )
        return marked

    def _remember_unavailable(self, view: _ClusterView, plan: CoordinatorPlan) -> None:
        self._unavailable_since = {
            str(view.segments[i].id): int(since)
            for i, since in enumerate(plan.unavailable_since_ms)
            if since >= 0
        }

    def _log_alerts(self, alerts: list[str], config: CoordinatorConfig) -> None:
        if not alerts:
            return
        limit = config.segment_loading_max_seconds_before_alerting
        logger.warning(
            "ALERT: %d segments have had no loaded copy for more than %.0f s (rules ask for "
            "copies; check the tiers' volumes and queues): %s%s",
            len(alerts),
            limit,
            ", ".join(alerts[:_MAX_ALERTS_LOGGED]),
            " …" if len(alerts) > _MAX_ALERTS_LOGGED else "",
        )

    def _kill(self, older_than_s: float) -> int:
        killed = 0
        for datasource in self._datasources():
            report = kill_unused(
                self.spark,
                self.warehouse,
                self.store,
                datasource,
                older_than_ms=int(older_than_s * 1000),
                vacuum=False,
                policy=self.policy,
            )
            killed += len(report.killed)
        return killed

    # -- carrying out the queues ---------------------------------------------------------

    def execute(self) -> tuple[int, int, int]:
        """Carry out every queued load and drop on live volumes; returns (copies loaded,
        copies dropped, loads failed). A failed batch stays queued for the next run."""
        live = {v.name: v for v in volumes(self.store) if volume_alive(v)}
        loaded = dropped = failed = 0
        for datasource in self._datasources():
            copies = copies_of(self.store, datasource)
            for name, volume in live.items():
                mine = [c for c in copies if c.volume == name]
                loading = [c for c in mine if c.state == CopyState.LOADING]
                for start in range(0, len(loading), self.loads_per_batch):
                    batch = loading[start : start + self.loads_per_batch]
                    try:
                        loaded += self._load(volume, datasource, batch)
                    except Exception:
                        failed += len(batch)
                        logger.exception(
                            "loading %d segments of %s onto %s failed; they stay queued",
                            len(batch),
                            datasource,
                            name,
                        )
                dropped += self._drop(volume, datasource)
        return loaded, dropped, failed

    def _load(self, volume: Volume, datasource: str, batch: list[SegmentCopy]) -> int:
        keys = sorted({c.key for c in batch})
        version = load_rows(self.spark, self.warehouse, volume, datasource, keys)
        crash_point("coordinator.after_load")
        return record_loaded(self.store, datasource, batch, version, policy=self.policy)

    def _drop(self, volume: Volume, datasource: str) -> int:
        mine = [c for c in copies_of(self.store, datasource) if c.volume == volume.name]
        dropping = [c for c in mine if c.state == CopyState.DROPPING]
        if not dropping:
            return 0
        # Copies of one segment under two ids (upgraded copies) share rows: keep those.
        kept = {c.key for c in mine if c.state != CopyState.DROPPING}
        drop_rows(self.spark, volume, datasource, sorted({c.key for c in dropping} - kept))
        ids = {c.row_id for c in dropping}
        return record_dropped(self.store, datasource, ids, policy=self.policy)
