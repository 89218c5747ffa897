"""Minor compaction: merge small segments inside their chunk and version, under segment locks.

1. **plan**: per chunk, the jobs the datasource's compaction planner (the manager's
   :class:`~segmentlake.core.compaction_planning.RatioPlanner` by default) picks from its
   visible segments, so a large segment is never rewritten to absorb a few small ones;
2. **lock**: an EXCLUSIVE segment lock on every input, in one commit that also checks each
   input is still used and visible — so of two compactions wanting one segment, one wins and
   the other is refused (:class:`LockRefused`) before writing anything. Appends take APPEND
   locks on fresh ids and never conflict;
3. **write**: ONE Spark job reads the inputs' rows (clipped to their chunk), rolls rows with
   equal time and dimensions up within each run (best effort), and writes each run as
   ``ceil(rows / max)`` segments, hash-bucketed by time and dimensions;
4. **allocate**: ids from the overwrite space 32768-65535 of each chunk, with their locks;
5. **publish**: ``NumberedOverwriteShardSpec`` segments (root range = the run's, minor
   version = highest input minor + 1, group size = the run's outputs) in ONE commit that
   checks the input locks are still held and the inputs still used.

Appended segments of the same chunk get first-generation ids outside the runs' root ranges,
so the outputs never hide them.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from pyspark.sql import Column
from pyspark.sql import functions as F

from segmentlake.compact.source import used_segments
from segmentlake.core.compaction import MINOR, MinorRun, compaction_state, merged_schema, minor_runs
from segmentlake.core.compaction_jobs import ChunkKey, ChunkView
from segmentlake.core.compaction_planning import CompactionPlanner, RatioPlanner
from segmentlake.core.ingest_spec import MetricSpec
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.load_spec import delta_load_spec, segment_key
from segmentlake.core.locks import LockGranularity, LockRequest, LockType
from segmentlake.core.names import (
    SEGMENT_KEY_COLUMN,
    TIME_COLUMN,
    datasource_table_path,
    quote_identifier,
)
from segmentlake.core.partitions_spec import DEFAULT_MAX_ROWS_PER_SEGMENT
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import NumberedOverwriteShardSpec
from segmentlake.core.spec_reader import FIRST_LAST_TYPES
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import LockRefused, SpecError, first_line
from segmentlake.faults import crash_point
from segmentlake.ingest.report import RowStats, TaskReport
from segmentlake.ingest.rollup import first_last_sql
from segmentlake.ingest.task import IngestTarget, new_task_id
from segmentlake.metadata.allocation import AllocateRequest, allocate
from segmentlake.metadata.heartbeat import LeaseKeeper
from segmentlake.metadata.lockbox import Lockbox
from segmentlake.metadata.publish import publish
from segmentlake.metadata.queries import Condition
from segmentlake.metadata.records import LOCK, SEGMENT, lock_from_row, segments_from_rows
from segmentlake.metadata.scope import NOTHING, Scope
from segmentlake.metadata.store import Change, PartitionState, now_ms
from segmentlake.metadata.table_log import TableLog
from segmentlake.metadata.tasks import record_task, task_row
from segmentlake.metadata.transaction import CommitLog, recording_commits
from segmentlake.storage.table_files import WrittenSegment, write_rows, written_segments
from segmentlake.storage.visible_rows import key_in

__all__ = [
    "DEFAULT_MAX_ROWS_PER_SEGMENT",
    "CompactionHooks",
    "compact_minor",
    "on_demand_planner",
    "planned_runs",
]

logger = logging.getLogger(__name__)


class CompactionHooks(Protocol):
    """What a caller adds to a minor compaction's two commits: rows both decisions read,
    changes (or a LockRefused) on the lock's state, and on the publish's state and outputs;
    ``on_started`` runs once the locks are held and their heartbeat beats."""

    @property
    def reads(self) -> Condition: ...

    @property
    def scope(self) -> Scope: ...

    def on_lock(self, state: PartitionState) -> Sequence[Change]: ...

    def on_started(self) -> None: ...

    def on_publish(
        self, state: PartitionState, outputs: Sequence[DataSegment]
    ) -> Sequence[Change]: ...


_RUN = "__run"
# The broadcast table of runs: an input key, its run, the run's chunk bounds and outputs.
_KEY, _LO, _HI, _OUTPUTS = "__run_key", "__run_lo", "__run_hi", "__run_outputs"


def compact_minor(
    target: IngestTarget,
    datasource: str,
    interval: Interval | None,
    *,
    max_rows_per_segment: int,
    task_id: str | None,
    priority: int,
    segments: Sequence[str] | None = None,
    hooks: CompactionHooks | None = None,
    lock_timeout_s: float = 0.0,
    planner: CompactionPlanner | None = None,
) -> TaskReport:
    """Run one minor compaction of ``interval`` (default: everything) to the end; with
    ``segments`` (ids), only of those, else of the jobs ``planner`` (default: a
    :class:`RatioPlanner` to ``max_rows_per_segment``) plans per chunk. ``hooks`` add
    conditions and changes to its lock and publish commits (the compaction manager's
    reservation). While another task holds an input's lock it plans and tries again for up
    to ``lock_timeout_s``, then raises :class:`LockRefused`."""
    task_id = task_id or new_task_id("compact_minor", datasource)
    store = target.lockbox.store
    span = None if interval is None else str(interval)
    deadline = time.monotonic() + lock_timeout_s
    with recording_commits() as commits:
        while True:
            timeline = VersionedIntervalTimeline(
                used_segments(store, datasource, interval or ETERNITY)
            )
            runs = _runs(timeline, interval or ETERNITY, max_rows_per_segment, segments, planner)
            if not runs:
                logger.info("%s: nothing to compact", task_id)
                report = RowStats()
                return TaskReport(task_id, "compact_minor", datasource, "SKIPPED", span, report)
            job = _Job(
                target, datasource, task_id, runs, priority, span, max_rows_per_segment, hooks
            )
            job.commits = commits
            try:
                job.lock()
                break
            except LockRefused:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)  # a holder finishing, or its lease running out
        try:
            with job.heartbeat():
                if hooks is not None:
                    hooks.on_started()
                return job.run()
        except BaseException as err:
            job.fail(err)
            raise


def _runs(
    timeline: VersionedIntervalTimeline,
    interval: Interval,
    max_rows: int,
    chosen: Sequence[str] | None,
    planner: CompactionPlanner | None = None,
) -> list[MinorRun]:
    """The runs of every chunk overlapping ``interval`` (each chunk's visible segments once,
    however many pieces of the timeline it serves): the ``chosen`` ones if given, else the
    planner's jobs."""
    chunks: dict[tuple[tuple[int, int], str], dict[DataSegment, None]] = {}
    wanted = None if chosen is None else {str(i) for i in chosen}
    for holder in timeline.lookup(interval):
        key = (holder.chunk_interval.key, holder.version)
        members = [s for s in holder.segments if wanted is None or str(s.id) in wanted]
        chunks.setdefault(key, {}).update(dict.fromkeys(members))
    if wanted is not None:
        found = {str(s.id) for members in chunks.values() for s in members}
        if found != wanted:
            raise SpecError(
                f"segments {sorted(wanted - found)} are not visible segments of the datasource"
                + ("" if interval == ETERNITY else f" in {interval}")
                + "; a minor compaction takes visible segments only (see lake.timeline)"
            )
    runs = []
    for (_, version), segments in sorted(chunks.items(), key=lambda kv: kv[0]):
        if wanted is not None:
            runs += minor_runs(list(segments), max_rows_per_segment=max_rows, only_if_useful=False)
        else:
            runs += planned_runs(list(segments), version, max_rows, planner)
    return runs


# An on-demand compaction merges two similar segments (the manager waits for three): any ratio
# above 1 still never lets a large segment absorb much smaller ones, so work stays logarithmic.
ON_DEMAND_RATIO = 1.5


def on_demand_planner(configured: CompactionPlanner, max_rows: int) -> CompactionPlanner:
    """The planner of ``lake.compact(mode="minor")``: the datasource's (the manager's), to
    ``max_rows`` per output, with a ratio of at most :data:`ON_DEMAND_RATIO`."""
    if not isinstance(configured, RatioPlanner):
        return configured
    return replace(
        configured,
        ratio=min(configured.ratio, ON_DEMAND_RATIO),
        max_rows_per_segment=max_rows,
    )


def planned_runs(
    visible: Sequence[DataSegment],
    version: str,
    max_rows: int,
    planner: CompactionPlanner | None = None,
) -> list[MinorRun]:
    """The runs ``planner`` picks from one chunk's visible segments. The manager's planner,
    not maximal runs: merging every adjacent group would rewrite a large segment each time a
    few small ones land next to it (quadratic work)."""
    planner = planner or RatioPlanner(max_rows_per_segment=max_rows)
    data = [s for s in visible if not s.is_tombstone]
    if not data:
        return []
    view = ChunkView(ChunkKey(data[0].interval, version), tuple(visible))
    by_id = {str(s.id): s for s in data}
    runs = []
    for job in planner.plan(view):
        inputs = tuple(by_id[i] for i in job.segments)
        rows = sum(s.num_rows for s in inputs)
        outputs = max(1, math.ceil(rows / (job.max_rows_per_segment or max_rows)))
        runs.append(MinorRun(inputs, outputs))
    return runs


class _Job:
    """One minor compaction while it runs."""

    def __init__(
        self,
        target: IngestTarget,
        datasource: str,
        task_id: str,
        runs: list[MinorRun],
        priority: int,
        span: str | None,
        max_rows_per_segment: int,
        hooks: CompactionHooks | None,
    ) -> None:
        self.target = target
        self.lockbox: Lockbox = target.lockbox
        self.datasource = datasource
        self.task_id = task_id
        self.runs = runs
        self.priority = priority
        self.span = span
        self.max_rows_per_segment = max_rows_per_segment
        self.hooks = hooks
        self.inputs = [s for run in runs for s in run.inputs]
        self.token = uuid.uuid4().hex[:16]
        self.phases: dict[str, float] = {}
        self.rows = RowStats()
        self.commits: CommitLog | None = None  # set by compact_minor
        self.keeper: LeaseKeeper | None = None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = time.monotonic() - started
            logger.info("%s: %s took %.2fs", self.task_id, name, self.phases[name])

    def lock(self) -> None:
        requests = [
            LockRequest(
                self.task_id,
                self.task_id,
                self.datasource,
                s.interval,
                LockType.EXCLUSIVE,
                LockGranularity.SEGMENT,
                self.priority,
                s.version,
                s.shard_spec.partition_num,
            )
            for s in self.inputs
        ]
        with self.phase("lock"):
            result = self.lockbox.try_lock_all(
                requests,
                requirements=[self._inputs_visible],
                reads=None if self.hooks is None else self.hooks.reads,
                extra_scope=NOTHING if self.hooks is None else self.hooks.scope,
                extra_changes=None if self.hooks is None else self.hooks.on_lock,
            )
        if not result.granted:
            holders = sorted({lk.group_id for lk in result.conflicting})
            raise LockRefused(
                f"minor compaction {self.task_id} of {self.datasource} refused: "
                f"{len(result.conflicting)} of its {len(self.inputs)} input segment(s) are "
                f"locked by {holders}; try again when they are done",
                conflicting=result.conflicting,
            )
        logger.info("%s: locked %d input segment(s)", self.task_id, len(self.inputs))

    def _inputs_visible(self, state: PartitionState) -> None:
        """Every input is still used and visible (no other compaction replaced it)."""
        used = [r for r in state.of(SEGMENT) if r["used"]]
        timeline = VersionedIntervalTimeline(segments_from_rows(used))
        for seg in self.inputs:
            visible = {s.id for s in timeline.visible_segments(seg.interval)}
            if seg.id not in visible:
                raise LockRefused(
                    f"minor compaction {self.task_id}: input {seg.id} is no longer visible "
                    "(another compaction or an overwrite replaced it); plan again"
                )

    def _inputs_locked(self, state: PartitionState) -> None:
        """The publish's check: the inputs are still used and their locks still held."""
        at = now_ms()
        held = [
            lk
            for lk in map(lock_from_row, state.of(LOCK))
            if lk.group_id == self.task_id and lk.is_live(at)
        ]
        used = {r["id"] for r in state.of(SEGMENT) if r["used"]}
        for seg in self.inputs:
            if str(seg.id) not in used:
                raise LockRefused(f"minor compaction {self.task_id}: input {seg.id} is unused")
            spec = seg.shard_spec
            if not any(lk.covers(seg.interval, seg.version, spec.partition_num) for lk in held):
                raise LockRefused(
                    f"minor compaction {self.task_id}: its lock on input {seg.id} was revoked "
                    "or expired; nothing published"
                )

    @contextmanager
    def heartbeat(self) -> Iterator[None]:
        self.keeper = LeaseKeeper(self.lockbox, self.datasource, self.task_id)
        try:
            yield
        finally:
            self.keeper.finish(renew=False)

    def run(self) -> TaskReport:
        path = datasource_table_path(self.target.warehouse, self.datasource)
        dimensions, schema = merged_schema(self.inputs)
        state = compaction_state(
            MINOR,
            dimensions,
            schema,
            segment_granularity=None,
            # The target, not the rows this run happened to give each output: later passes
            # compare states to tell what is compacted as wanted.
            partitions_spec={"type": "dynamic", "maxRowsPerSegment": self.max_rows_per_segment},
        )
        with self.phase("write"):
            written = self._write(path, dimensions, schema)
        crash_point("compact.after_write")
        outputs = self._describe(written, path, dimensions, schema, state)
        with self.phase("allocate"):
            outputs = self._allocate(outputs)
        self.rows = RowStats(
            rows_in=sum(s.num_rows for s in self.inputs),
            processed=sum(s.num_rows for s in self.inputs),
            rows_out=sum(s.num_rows for _, s in outputs),
        )
        segments = [seg for _, seg in outputs]
        results = self._results(segments)
        with self.phase("publish"):
            assert self.keeper is not None
            self.keeper.finish(renew=True)  # a whole lease, and no renewal racing the publish
            row = task_row(
                self.datasource,
                self.task_id,
                self.report("SUCCESS", **results).to_json(),
                interval=None,
                now_ms=now_ms(),
            )
            publish(
                self.lockbox,
                self.datasource,
                segments,
                group_id=self.task_id,
                extra_rows=[row],
                requirements=[self._inputs_locked],
                reads=None if self.hooks is None else self.hooks.reads,
                extra_scope=NOTHING if self.hooks is None else self.hooks.scope,
                extra_changes=self._publish_hook(segments),
            )
        report = self.report("SUCCESS", **results)
        logger.info("%s", report.summary())
        return report

    def _publish_hook(
        self, outputs: list[DataSegment]
    ) -> Callable[[PartitionState], Sequence[Change]] | None:
        hooks = self.hooks
        if hooks is None:
            return None
        return lambda state: hooks.on_publish(state, outputs)

    def _write(
        self, path: str, dimensions: Sequence[str], schema: SegmentSchema
    ) -> dict[str, WrittenSegment]:
        """ONE Spark job: each run's rows, rolled up within the run if the segments are,
        bucketed into its outputs and written under ``<chunk>.<run>.<bucket>.<token>``."""
        spark = self.target.spark
        table = spark.read.format("delta").load(path)
        # Each input key's run, the run's chunk and its number of outputs, as a broadcast
        # table: a hash lookup per row. Literal maps and an OR over the runs cost each row
        # a scan of every run, and a batch of many runs outgrew whole-stage codegen.
        inputs = [
            (segment_key(seg), i, *run.interval.key, run.outputs)
            for i, run in enumerate(self.runs)
            for seg in run.inputs
        ]
        runs = spark.createDataFrame(
            inputs, f"{_KEY} STRING, {_RUN} INT, {_LO} BIGINT, {_HI} BIGINT, {_OUTPUTS} INT"
        )
        t = F.col(TIME_COLUMN)
        rows = (
            table.where(key_in([key for key, *_ in inputs]))
            .join(F.broadcast(runs), F.col(SEGMENT_KEY_COLUMN) == F.col(_KEY))
            # Rows of an upgraded copy may lie outside its chunk: keep each run's chunk only.
            .where((t >= F.timestamp_millis(F.col(_LO))) & (t < F.timestamp_millis(F.col(_HI))))
        )
        dims = [F.col(d) if d in table.columns else F.lit(None).alias(d) for d in dimensions]
        names = [m.name for m in schema.aggregators]
        run_columns = [F.col(_RUN), F.col(_LO), F.col(_OUTPUTS)]
        if schema.rollup:
            aggregates = [_combine(m).alias(m.name) for m in schema.combining()]
            # _LO and _OUTPUTS follow from _RUN: grouping by them splits no group.
            rows = rows.groupBy(*run_columns, t, *dims).agg(
                *(aggregates or [F.count(F.lit(1)).alias("__n")])
            )
            dims = [F.col(d) for d in dimensions]
        bucket = F.pmod(F.xxhash64(t, *[F.col(d) for d in dimensions]), F.col(_OUTPUTS))
        key = F.concat_ws(
            ".",
            F.col(_LO).cast("string"),
            F.col(_RUN).cast("string"),
            bucket.cast("string"),
            F.lit(self.token),
        )
        rows = (
            rows.select(t, *dims, *[F.col(n) for n in names], *run_columns)
            .withColumn(SEGMENT_KEY_COLUMN, key)
            .drop(_RUN, _LO, _OUTPUTS)
            .repartition(SEGMENT_KEY_COLUMN)
        )
        log = TableLog(path, storage_options=self.lockbox.store.table.storage_options)
        versions = write_rows(log, rows)
        suffix = f".{self.token}"
        return written_segments(log, versions, lambda k: k.endswith(suffix))

    def _describe(
        self,
        written: dict[str, WrittenSegment],
        path: str,
        dimensions: Sequence[str],
        schema: SegmentSchema,
        state: dict[str, Any],
    ) -> list[tuple[int, DataSegment]]:
        """(run index, output segment with a provisional id) per written key; a run's
        outputs form one atomic update group."""
        by_run: dict[int, list[WrittenSegment]] = {}
        for key in sorted(written):
            by_run.setdefault(int(key.split(".")[1]), []).append(written[key])
        outputs = []
        for i, found in sorted(by_run.items()):
            run = self.runs[i]
            start, end = run.root_range
            for w in found:
                spec = NumberedOverwriteShardSpec(32768, start, end, run.minor_version, len(found))
                outputs.append(
                    (
                        i,
                        DataSegment(
                            self.datasource,
                            run.interval,
                            run.version,
                            spec,
                            load_spec=delta_load_spec(path, w.key),
                            dimensions=tuple(dimensions),
                            metrics=tuple(m.name for m in schema.aggregators),
                            size=w.size,
                            num_rows=w.num_rows,
                            last_compaction_state=state,
                            schema=schema,
                        ),
                    )
                )
        return outputs

    def _allocate(self, outputs: list[tuple[int, DataSegment]]) -> list[tuple[int, DataSegment]]:
        """Give each output an id from its chunk's overwrite space, with its lock."""
        by_version: dict[str, list[int]] = {}
        for n, (_, seg) in enumerate(outputs):
            by_version.setdefault(seg.version, []).append(n)
        final = list(outputs)
        for version, indexes in by_version.items():
            requests = [
                AllocateRequest(seg.interval, f"{self.task_id}|{segment_key(seg)}")
                for seg in (outputs[n][1] for n in indexes)
            ]
            pending = allocate(
                self.lockbox,
                self.datasource,
                requests,
                group_id=self.task_id,
                task_id=self.task_id,
                priority=self.priority,
                overwrite_version=version,
            )
            for n, p in zip(indexes, pending, strict=True):
                i, seg = outputs[n]
                old = seg.shard_spec
                assert isinstance(old, NumberedOverwriteShardSpec)
                spec = replace(old, partition_num=p.segment_id.partition_num)
                final[n] = (i, replace(seg, shard_spec=spec))
        return final

    def _results(self, segments: list[DataSegment]) -> dict[str, object]:
        return {
            "segments": len(segments),
            "bytes": sum(s.size for s in segments),
            "files": len(segments),
            "largest_segment_rows": max((s.num_rows for s in segments), default=0),
            "input_segments": len(self.inputs),
            "input_bytes": sum(s.size for s in self.inputs),
        }

    def report(self, status: str, **values: Any) -> TaskReport:
        commits = self.commits
        return TaskReport(
            task_id=self.task_id,
            type="compact_minor",
            datasource=self.datasource,
            status=status,
            interval=self.span,
            rows=self.rows,
            phases=dict(self.phases),
            commits=dict(commits.commits) if commits else {},
            retries=dict(commits.retries) if commits else {},
            **values,
        )

    def fail(self, err: BaseException) -> None:
        try:
            self.lockbox.release(self.datasource, self.task_id)
            report = self.report("FAILED", error=f"{type(err).__name__}: {first_line(err)}")
            row = task_row(
                self.datasource, self.task_id, report.to_json(), interval=None, now_ms=now_ms()
            )
            record_task(self.lockbox.store, row, policy=self.lockbox.retry)
        except Exception:
            logger.warning("%s: could not release locks or record the failure", self.task_id)


def _combine(metric: MetricSpec) -> Column:
    """The Spark aggregate of a combining aggregator over its stored column."""
    column = F.col(metric.name)
    if metric.type == "HLLSketchMerge":
        return F.hll_union_agg(column, True)
    if metric.type == "thetaSketch":
        return F.theta_union_agg(column, metric.lg_nominal_entries)
    if metric.type == "quantilesDoublesSketch":
        return F.kll_merge_agg_double(column, metric.k)
    if metric.type in FIRST_LAST_TYPES:
        return F.expr(first_last_sql(metric, quote_identifier(metric.name)))
    if metric.type == "floatSum":  # Spark sums FLOATs as a DOUBLE; the column is FLOAT
        return F.sum(column).cast("float")
    if metric.type.endswith("Min"):
        return F.min(column)
    if metric.type.endswith("Max"):
        return F.max(column)
    return F.sum(column)
