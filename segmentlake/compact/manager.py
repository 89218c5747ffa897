"""The compaction manager: find chunks that need compaction, plan jobs, queue them with bounded
memory, and run them on local compactors (threads sharing the process's Spark session).

Everything that must survive a crash is in the metadata (holds, selections, reservations, user
compactions, selectors' last runs); the queues are only a cache of the plan, rebuilt by the
next pass. Several managers may run on one warehouse: every step is a conditional commit, and
a job two of them queue is reserved by one and refused to the other before any work.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from segmentlake.compact.control import ManagerSnapshot, publish_manager_snapshot, read_config
from segmentlake.compact.duties import DutyReport, decide_duties
from segmentlake.compact.major import MajorCompaction, compact_major
from segmentlake.compact.manager_state import (
    MANAGER_READS,
    ManagerState,
    ViewCache,
    read_manager_state,
)
from segmentlake.compact.minor import compact_minor
from segmentlake.compact.reservation import BatchReservation, Reservation
from segmentlake.core.compaction_jobs import (
    DEFAULT_BATCH_JOBS,
    DEFAULT_BATCH_ROWS,
    DEFAULT_BATCH_SEGMENTS,
    DEFAULT_GROUP,
    ChunkView,
    CompactionJob,
    CompactionKind,
    job_priority,
)
from segmentlake.core.compaction_planning import (
    PlannedJob,
    consecutive_groups,
    major_span,
    needs_major,
    selection_jobs,
    whole_groups,
)
from segmentlake.core.compaction_queue import DEFAULT_QUEUE_SIZE, JobQueue
from segmentlake.core.spec_reader import check_flag, check_int, check_number, check_text, show
from segmentlake.core.task_options import MAX_LEASE_SECONDS
from segmentlake.errors import LockRefused, SegmentLakeError, SpecError, first_line
from segmentlake.ingest.report import TaskReport
from segmentlake.ingest.task import IngestTarget, new_task_id
from segmentlake.metadata.store import PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, transact

__all__ = [
    "DEFAULT_BATCH_JOBS",
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_BATCH_SEGMENTS",
    "CompactionManager",
    "JobOutcome",
    "PassReport",
]

logger = logging.getLogger(__name__)


# Manager lock priority: ingestion's default (0), never above it — a higher priority would
# revoke a user's overwrite lock. One value for every kind: selections, not lock priorities,
# keep jobs apart.
_LOCK_PRIORITY = 0
# How soon a running manager's pass loop notices ``stop`` between passes.
_STOP_POLL_S = 0.2


@dataclass
class PassReport:
    """What one manager pass did."""

    datasources: int = 0
    chunks: int = 0
    planned: int = 0
    queued: int = 0
    invalid: int = 0
    recent: int = 0  # chunks left to the appends (skipOffsetFromLatest)
    duties: DutyReport = field(default_factory=DutyReport)
    seconds: float = 0.0

    def summary(self) -> str:
        d = self.duties
        recent = f" ({self.recent} recent, left to appends)" if self.recent else ""
        return (
            f"{self.chunks} chunk(s){recent}, {self.planned} job(s) planned, "
            f"{self.queued} queued, "
            f"{d.held} held, {d.selected} selected, {d.chunks_done} chunk(s) done, "
            f"{d.selector_runs} selector run(s), {d.expired} expired, {self.seconds:.2f}s"
        )


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """How a job ended on a compactor: ``committed``, ``refused`` (another got there first or
    its inputs changed; nothing written) or ``failed``."""

    job: CompactionJob
    status: str
    report: TaskReport | None = None
    error: str | None = None


def check_manager_sizes(**sizes: object) -> None:
    """Refuse a queue or batch size that is not an integer >= 1 (SpecError naming it). The
    manager checks them when made, not when its first queue is: a bad size fails the call
    that names it, not a run minutes later."""
    for name, value in sizes.items():
        check_int(value, name, minimum=1)


class CompactionManager:
    """Plans and runs compactions of a warehouse's datasources.

    >>> manager = CompactionManager(target)  # doctest: +SKIP
    >>> manager.run(compactors=2, once=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        target: IngestTarget,
        *,
        datasources: Sequence[str] | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        manager_id: str | None = None,
        report_status: bool = True,
        status_lease_s: float = 120.0,
        on_outcome: Callable[[JobOutcome], None] | None = None,
        batch_jobs: int = DEFAULT_BATCH_JOBS,
        batch_segments: int = DEFAULT_BATCH_SEGMENTS,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> None:
        check_manager_sizes(
            queue_size=queue_size,
            batch_jobs=batch_jobs,
            batch_segments=batch_segments,
            batch_rows=batch_rows,
        )
        check_flag(report_status, "report_status")
        check_number(status_lease_s, "status_lease_s", minimum=0.001, maximum=MAX_LEASE_SECONDS)
        if manager_id is not None:
            check_text(manager_id, "manager_id")
        if on_outcome is not None and not callable(on_outcome):
            wrong = show(on_outcome)
            raise SpecError(f"on_outcome must be a function of a JobOutcome, got {wrong}")
        self.batch_jobs = batch_jobs
        self.batch_segments = batch_segments
        self.batch_rows = batch_rows
        self.target = target
        self.store = target.lockbox.store
        self.datasources = None if datasources is None else list(datasources)
        self.queue_size = queue_size
        self.manager_id = manager_id or (
            f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        )
        self.queues: dict[str, JobQueue] = {}
        self._planned: dict[tuple[str, str], tuple[str, ...]] = {}
        self._view_caches: dict[str, ViewCache] = {}
        self._lock = threading.RLock()  # take_batch runs inside the compactor loop's section
        self._wake = threading.Event()
        self.outcomes: dict[str, int] = {"committed": 0, "refused": 0, "failed": 0}
        self.commit_retries = 0
        self.retries_by_operation: dict[str, int] = {}
        self.last_pass: PassReport | None = None
        self.report_status = report_status
        self.on_outcome = on_outcome
        self.status_lease_ms = int(status_lease_s * 1000)

    # -- one pass ------------------------------------------------------------------------------

    def run_pass(self) -> PassReport:
        """Run the duties of every datasource, then plan and queue its jobs."""
        started = time.monotonic()
        report = PassReport()
        for datasource in self._datasources():
            report.datasources += 1
            duties, ms = self._duties(datasource)
            _add(report.duties, duties)
            if duties.changed:  # plan on what the duties left, not on what they read
                state = self.store.read(datasource, MANAGER_READS)
                ms = read_manager_state(state, now_ms(), self._cache(datasource))
            self._plan(datasource, ms, report)
        report.queued = sum(len(q) for q in self.queues.values())
        if self.report_status:
            self._report_status()
        report.seconds = time.monotonic() - started
        self.last_pass = report
        logger.info("compaction pass: %s", report.summary())
        return report

    def _report_status(self) -> None:
        """Tell other processes (status, SQL view) what this manager has queued."""
        at = now_ms()
        with self._lock:
            queued = {group: len(q) for group, q in self.queues.items()}
            top = tuple(j for q in self.queues.values() for j in q.jobs()[:20])
            outcomes = dict(self.outcomes)
        snapshot = ManagerSnapshot(
            self.manager_id, queued, top, outcomes, at, at + self.status_lease_ms
        )
        try:
            publish_manager_snapshot(self.store, snapshot, policy=self.target.lockbox.retry)
        except Exception:  # status is advisory: never stop compacting over it
            logger.warning("could not publish the manager's status", exc_info=True)

    def _datasources(self) -> list[str]:
        if self.datasources is not None:
            return self.datasources
        return [d for d in self.store.datasources() if not d.startswith("_")]

    def _cache(self, datasource: str) -> ViewCache:
        cache = self._view_caches.get(datasource)
        if cache is None:
            cache = self._view_caches[datasource] = ViewCache()
        return cache

    def _duties(self, datasource: str) -> tuple[DutyReport, ManagerState]:
        cache = self._cache(datasource)

        def decide(state: PartitionState) -> Decision[tuple[DutyReport, ManagerState]]:
            at = now_ms()
            ms = read_manager_state(state, at, cache)
            changes, report = decide_duties(datasource, ms, at)
            return Decision(changes, (report, ms))

        return transact(
            self.store,
            datasource,
            decide,
            operation="compaction_duties",
            condition=MANAGER_READS,
            policy=self.target.lockbox.retry,
        )

    def _plan(self, datasource: str, ms: ManagerState, report: PassReport) -> None:
        seen = set()
        majors: set[tuple[int, int]] = set()  # spans given a major job this pass
        cutoff = _skip_cutoff(ms)
        for chunk_id, view in ms.views.items():
            report.chunks += 1
            recent = cutoff is not None and view.chunk.interval.end_millis > cutoff
            report.recent += recent
            jobs = self._jobs(datasource, view, ms, report, majors, recent=recent)
            key = (datasource, chunk_id)
            seen.add(key)
            ids = tuple(j.job_id for j in jobs)
            if not ids and not self._planned.get(key):
                continue  # nothing planned before or now: the idle pass's fast path
            self._planned[key] = ids
            # Offered again every pass: a job evicted from a full queue, or one whose
            # compactor failed, comes back while the chunk still needs it.
            self._replace(datasource, view, jobs)
            report.planned += len(jobs)
        for key in [k for k in self._planned if k[0] == datasource and k not in seen]:
            del self._planned[key]
            with self._lock:
                for queue in self.queues.values():
                    queue.replace_chunk(_queue_chunk(datasource, key[1]), [])

    def _jobs(
        self,
        datasource: str,
        view: ChunkView,
        ms: ManagerState,
        report: PassReport,
        majors: set[tuple[int, int]],
        *,
        recent: bool = False,
    ) -> list[CompactionJob]:
        """The chunk's jobs: its major job, else its selection's and the planner's; a
        ``recent`` chunk (within the config's skipOffsetFromLatest) gets no system job."""
        major = None if recent else _major_job(datasource, view, ms, majors)
        if major is not None:
            return [major]  # it rewrites every segment: no minor job in the chunk meanwhile
        planned: list[tuple[CompactionKind, str | None, PlannedJob]] = []
        selection = view.selection
        if selection is not None:
            planned += [(selection.kind, selection.owner, p) for p in selection_jobs(view)]
        if view.visible and not recent:
            planned += [(CompactionKind.SYSTEM, None, p) for p in ms.config.planner.plan(view)]
        jobs = []
        for kind, owner, p in planned:
            problem = _invalid(view, kind, p)
            if problem:
                report.invalid += 1
                logger.warning("planner job for %s dropped: %s", view.chunk, problem)
                continue
            jobs.append(
                CompactionJob(
                    view.chunk,
                    kind,
                    p.segments,
                    job_priority(kind, p.score),
                    p.group,
                    owner,
                    p.final,
                    p.max_rows_per_segment or ms.config.max_rows_per_segment,
                    datasource,
                    input_rows=_rows_of(view, p.segments),
                )
            )
        return jobs

    def _replace(self, datasource: str, view: ChunkView, jobs: list[CompactionJob]) -> None:
        by_group: dict[str, list[CompactionJob]] = {}
        for job in jobs:
            by_group.setdefault(job.group, []).append(job)
        with self._lock:
            for group in set(by_group) | set(self.queues):
                self.queue(group).replace_chunk(
                    _queue_chunk(datasource, view.chunk.row_id), by_group.get(group, [])
                )

    def queue(self, group: str) -> JobQueue:
        """The queue of compactor group ``group`` (created empty on first use)."""
        queue = self.queues.get(group)
        if queue is None:
            queue = self.queues[group] = JobQueue(self.queue_size, key=_queue_key)
        return queue

    # -- compactors ----------------------------------------------------------------------------

    def take(self, group: str = DEFAULT_GROUP) -> CompactionJob | None:
        """The best queued job of ``group`` (removed from the queue), or None."""
        with self._lock:
            return self.queue(group).poll()

    def take_batch(self, group: str = DEFAULT_GROUP) -> list[CompactionJob]:
        """The best queued job of ``group`` and, for a minor one, the next best minor jobs of
        its datasource and target that fit the batch (one per chunk), removed from the queue."""
        with self._lock:
            queue = self.queue(group)
            first = queue.poll()
            if first is None:
                return []
            batch = [first]
            if first.major or self.batch_jobs == 1:
                return batch
            chunks = {first.chunk}
            segments, rows = len(first.segments), first.input_rows
            for job in queue.jobs():
                if len(batch) >= self.batch_jobs:
                    break
                if not _batches_with(first, job) or job.chunk in chunks:
                    continue
                if segments + len(job.segments) > self.batch_segments:
                    continue
                if rows + job.input_rows > self.batch_rows:
                    continue
                queue.delete(job.job_id)
                batch.append(job)
                chunks.add(job.chunk)
                segments, rows = segments + len(job.segments), rows + job.input_rows
            return batch

    def run_batch(self, jobs: Sequence[CompactionJob], *, compactor: str) -> list[JobOutcome]:
        """Run ``jobs`` (from :meth:`take_batch`) as ONE minor compaction: one reservation
        commit, one Spark write, one publish. If the batch is refused (a job's chunk changed
        or another compactor reserved one), its jobs run one by one: the others still land."""
        if len(jobs) == 1:
            return [self.run_job(jobs[0], compactor=compactor)]
        first = jobs[0]
        task_id = new_task_id("compact_batch", first.datasource)
        lease_ms = self.target.lockbox.lease_ms
        hooks = BatchReservation(
            tuple(Reservation(j.datasource, j, compactor, task_id, lease_ms) for j in jobs)
        )
        try:
            report = compact_minor(
                self.target,
                first.datasource,
                None,
                max_rows_per_segment=first.max_rows_per_segment,
                task_id=task_id,
                priority=_LOCK_PRIORITY,
                segments=[s for j in jobs for s in j.segments],
                hooks=hooks,
            )
        except (LockRefused, SpecError) as e:
            logger.info(
                "%s: batch of %d refused (%s); one by one", compactor, len(jobs), first_line(e)
            )
            return [self.run_job(j, compactor=compactor) for j in jobs]
        except Exception as e:
            logger.warning("%s: batch of %d jobs failed", compactor, len(jobs), exc_info=True)
            hooks.abandon(self.store)
            error = f"{type(e).__name__}: {e}"
            return [self._count(JobOutcome(j, "failed", error=error)) for j in jobs]
        self._retried(report)
        logger.info("%s: batch of %d jobs committed in one publish", compactor, len(jobs))
        return [self._count(JobOutcome(j, "committed", report)) for j in jobs]

    def run_job(
        self,
        job: CompactionJob,
        *,
        compactor: str,
        on_started: Callable[[CompactionJob], None] | None = None,
    ) -> JobOutcome:
        """Reserve ``job``, compact, commit; refused when someone else got there first.
        ``on_started`` runs once the job is reserved (its locks held and renewed)."""
        if job.major:
            return self._run_major(job, compactor=compactor)
        task_id = new_task_id(f"compact_{job.kind.value}", job.datasource)
        reservation = Reservation(
            job.datasource, job, compactor, task_id, self.target.lockbox.lease_ms, on_started
        )
        try:
            report = compact_minor(
                self.target,
                job.datasource,
                None,
                max_rows_per_segment=job.max_rows_per_segment,
                task_id=task_id,
                priority=_LOCK_PRIORITY,
                segments=job.segments,
                hooks=reservation,
            )
        except (LockRefused, SpecError) as e:
            logger.info("%s: job %s refused: %s", compactor, job.job_id, first_line(e))
            return self._count(JobOutcome(job, "refused", error=first_line(e)))
        except Exception as e:
            logger.warning("%s: job %s failed", compactor, job.job_id, exc_info=True)
            reservation.abandon(self.store)
            return self._count(JobOutcome(job, "failed", error=f"{type(e).__name__}: {e}"))
        self._retried(report)
        return self._count(JobOutcome(job, "committed", report))

    def _run_major(self, job: CompactionJob, *, compactor: str) -> JobOutcome:
        """A major compaction of the job's chunk to the datasource's target. No reservation:
        its REPLACE locks refuse minor compactions of the chunk and other majors (no wait),
        and it re-plans after reading the segments, so a chunk already re-chunked is skipped.
        A crashed one leaves only locks whose lease runs out."""
        config = read_config(self.store, job.datasource)
        options = MajorCompaction(
            segment_granularity=config.segment_granularity,
            partitions_spec=config.major_partitions(),
        )
        span = major_span(job.chunk, config.segment_granularity)
        try:
            report = compact_major(
                self.target,
                job.datasource,
                span,
                options,
                task_id=new_task_id("compact_major", job.datasource),
                priority=_LOCK_PRIORITY,
                lock_timeout_s=0.0,
            )
        except (LockRefused, SpecError) as e:
            logger.info("%s: major job %s refused: %s", compactor, job.job_id, first_line(e))
            return self._count(JobOutcome(job, "refused", error=first_line(e)))
        except Exception as e:
            logger.warning("%s: major job %s failed", compactor, job.job_id, exc_info=True)
            return self._count(JobOutcome(job, "failed", error=f"{type(e).__name__}: {e}"))
        if report.status != "SUCCESS":
            return self._count(JobOutcome(job, "refused", report, error=report.status))
        self._retried(report)
        return self._count(JobOutcome(job, "committed", report))

    def _retried(self, report: TaskReport) -> None:
        with self._lock:
            self.commit_retries += sum(report.retries.values())
            for operation, n in report.retries.items():
                self.retries_by_operation[operation] = (
                    self.retries_by_operation.get(operation, 0) + n
                )

    def _count(self, outcome: JobOutcome) -> JobOutcome:
        with self._lock:
            self.outcomes[outcome.status] += 1
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        if outcome.status == "committed":
            self._wake.set()
        return outcome

    def run(
        self,
        *,
        compactors: int = 1,
        group: str = DEFAULT_GROUP,
        once: bool = False,
        interval_s: float = 10.0,
        stop: threading.Event | None = None,
        on_pass: Callable[[CompactionManager, PassReport], None] | None = None,
    ) -> None:
        """Run passes and ``compactors`` compactor threads of ``group`` until ``stop`` is set;
        with ``once``, one pass whose jobs are drained, then return (a Databricks job)."""
        check_int(compactors, "compactors", minimum=0, maximum=1024)
        check_text(group, "group", what="a non-empty compaction group name")
        if check_flag(once, "once") and not compactors:
            # It would wait forever for a queue nobody drains.
            raise SpecError("once=True needs at least one compactor to drain the pass's jobs")
        check_number(interval_s, "interval_s", minimum=0)
        stop = stop or threading.Event()
        busy = [0]
        threads = [
            threading.Thread(
                target=self._compactor_loop,
                args=(f"{self.manager_id}/c{n}", group, stop, busy),
                name=f"compactor-{n}",
                daemon=True,
            )
            for n in range(compactors)
        ]
        report = self.run_pass()
        if on_pass:
            on_pass(self, report)
        for thread in threads:
            thread.start()
        try:
            while not stop.is_set():
                if once and not len(self.queue(group)) and not busy[0]:
                    break
                if once:
                    time.sleep(0.2)
                    continue
                self._wait_for_pass(interval_s, stop)
                if stop.is_set():
                    break
                try:
                    report = self.run_pass()
                except SegmentLakeError:
                    # A pass that lost too many commit races (or similar) is retried at the
                    # next one: its duties committed all or nothing, and the queues stay.
                    logger.warning("compaction pass failed; retrying next time", exc_info=True)
                    continue
                if on_pass:
                    on_pass(self, report)
        finally:
            stop.set()
            for thread in threads:
                thread.join()

    def _wait_for_pass(self, interval_s: float, stop: threading.Event) -> None:
        """Until the next pass is due: ``interval_s`` passed or a job committed (it changed
        its chunk: plan what follows now), or ``stop`` was set (noticed within a poll). Jobs a
        pass queues do not wake it: compactors take them from the queue, and a pass woken by
        its own jobs ran back to back for as long as a backlog lasted, each a metadata commit
        (1,232 passes in 10 s with one job queued)."""
        deadline = time.monotonic() + interval_s
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self._wake.wait(min(left, _STOP_POLL_S)):
                break
        self._wake.clear()

    def _compactor_loop(
        self, name: str, group: str, stop: threading.Event, busy: list[int]
    ) -> None:
        while not stop.is_set():
            with self._lock:  # one critical section: run(once=True) never sees 0 and 0
                jobs = self.take_batch(group)
                busy[0] += bool(jobs)
            if not jobs:
                stop.wait(0.2)
                continue
            try:
                self.run_batch(jobs, compactor=name)
            finally:
                with self._lock:
                    busy[0] -= 1


def _add(total: DutyReport, more: DutyReport) -> None:
    for name in (
        "expired",
        "held",
        "selected",
        "chunks_done",
        "users_finished",
        "selector_runs",
        "selector_skips",
    ):
        setattr(total, name, getattr(total, name) + getattr(more, name))


def _batches_with(first: CompactionJob, job: CompactionJob) -> bool:
    """Whether ``job`` may share ``first``'s minor compaction: same datasource and output
    target, both minor."""
    return (
        not job.major
        and job.datasource == first.datasource
        and job.max_rows_per_segment == first.max_rows_per_segment
    )


def _major_job(
    datasource: str, view: ChunkView, ms: ManagerState, majors: set[tuple[int, int]]
) -> CompactionJob | None:
    """The chunk's major job when it differs from the datasource's target chunking: only in
    a chunk no selection or running compaction holds, one per target span and pass."""
    config = ms.config
    if not config.major_target or view.selection is not None or view.running:
        return None
    wanted = config.major_partitions().to_json()
    granularity = config.segment_granularity
    if not needs_major(view, segment_granularity=granularity, partitions_spec=wanted):
        return None
    span = major_span(view.chunk, granularity).key
    ids = whole_groups(view.visible, [str(s.id) for s in view.visible if not s.is_tombstone])
    if span in majors or not ids:
        return None
    majors.add(span)
    return CompactionJob(
        view.chunk,
        CompactionKind.SYSTEM,
        ids,
        job_priority(CompactionKind.SYSTEM, len(view.visible)),
        DEFAULT_GROUP,
        max_rows_per_segment=config.max_rows_per_segment,
        datasource=datasource,
        major=True,
    )


def _skip_cutoff(ms: ManagerState) -> int | None:
    """Where the data left to the appends begins (the config's skipOffsetFromLatest before
    the end of the datasource's latest data, as Druid counts it); None: nothing is left."""
    if ms.config.skip_offset_from_latest is None:
        return None
    ends = [
        v.chunk.interval.end_millis
        for v in ms.views.values()
        if any(not s.is_tombstone for s in v.visible)
    ]
    return None if not ends else ms.config.skip_cutoff(max(ends))


def _rows_of(view: ChunkView, ids: Sequence[str]) -> int:
    wanted = set(ids)
    return sum(s.num_rows for s in view.visible if str(s.id) in wanted)


def _queue_chunk(datasource: str, chunk_id: str) -> str:
    return f"{datasource}/{chunk_id}"


def _queue_key(job: CompactionJob) -> str:
    return _queue_chunk(job.datasource, job.chunk.row_id)


def _invalid(view: ChunkView, kind: CompactionKind, planned: PlannedJob) -> str | None:
    """Why a planned job may not run (None: it may): its segments must be whole, complete
    atomic update groups visible in the chunk, not busy, and a system job's not selected."""
    ids = set(planned.segments)
    if len(ids) != len(planned.segments) or not ids:
        return "no segments, or a segment listed twice"
    exclude = view.busy_ids
    if kind is CompactionKind.SYSTEM:
        if view.held:
            return "the chunk is held"
        exclude = exclude | view.selected_ids
    runs = consecutive_groups(view.visible, exclude=exclude)
    whole = {str(s.id) for run in runs for group in run for s in group}
    if not ids <= whole:
        return f"segments {sorted(ids - whole)[:5]} are not free, whole, visible groups"
    return None
