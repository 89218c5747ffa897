"""The Spark work a block of driver code caused: task time and bytes, summed over its jobs.

``measure_jobs`` tags every job the calling thread starts inside the block (a Spark job tag,
which Delta forwards to the threads it runs checkpoint jobs in) and, on exit, sums the
block's stages as Spark's status store has them, which is what the Spark UI shows per stage.
Job tags add to the caller's tags and leave its job group and description alone, so blocks
nest (an outer block counts its inner blocks' jobs too). Jobs of other threads are not
counted. Where there is no JVM (Spark Connect) or anything fails, the block runs as usual and
its ``metrics`` stay ``None``. The store keeps the last ``spark.ui.retainedJobs`` and
``spark.ui.retainedStages`` (1000 each by default) whether or not the UI is enabled, and drops
skipped stages before any other; a block whose stages that ran were dropped is not measured
(``None``), one that only lost skipped stages is.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from segmentlake.errors import first_line
from segmentlake.spark.connect import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["JobMetrics", "MeasuredJobs", "measure_jobs"]

logger = logging.getLogger(__name__)

# The status store is fed by an asynchronous listener: a job that has returned may not be
# there yet. A busy driver catches up in milliseconds; past this, no numbers beat wrong ones.
_WAIT_S = 2.0
_POLL_S = 0.005
_SKIPPED = "SKIPPED"
_UNFINISHED = frozenset({"RUNNING", "UNKNOWN"})


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """Sums over Spark jobs and their stages that ran (skipped stages reused an earlier
    shuffle and count nothing). ``executor_run_ms`` is the tasks' run time added up, so it
    exceeds wall time when tasks run in parallel; ``spill_bytes`` is what tasks spilled to
    disk. ``JobMetrics()`` is zero and ``+`` adds field by field."""

    jobs: int = 0
    stages: int = 0
    tasks: int = 0
    executor_run_ms: int = 0
    input_bytes: int = 0
    input_records: int = 0
    shuffle_read_bytes: int = 0
    shuffle_write_bytes: int = 0
    output_bytes: int = 0
    output_records: int = 0
    spill_bytes: int = 0

    def __add__(self, other: JobMetrics) -> JobMetrics:
        if not isinstance(other, JobMetrics):
            return NotImplemented
        return JobMetrics(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobMetrics:
        """The inverse of ``to_json``; keys it does not know are ignored, missing ones are 0."""
        return cls(**{f.name: int(data.get(f.name) or 0) for f in fields(cls)})


@dataclass(slots=True)
class MeasuredJobs:
    """What ``measure_jobs`` yields: ``metrics`` is set when the block exits, and stays
    ``None`` if they could not be read."""

    label: str
    metrics: JobMetrics | None = None


@contextmanager
def measure_jobs(spark: SparkSession, label: str) -> Iterator[MeasuredJobs]:
    """Measure the Spark jobs this thread runs inside the block (see the module); ``label``
    names the block in logs. Never raises on its own account, even if the block fails (a
    failed block's jobs are measured too); costs a few py4j calls per job and stage."""
    measured = MeasuredJobs(label)
    probe = _Probe.start(spark, label)
    try:
        yield measured
    except Exception:
        if probe is not None:
            measured.metrics = probe.finish()
        raise
    except BaseException:
        if probe is not None:  # interrupted: untag, but do not make the exit wait
            probe.untag()
        raise
    else:
        if probe is not None:
            measured.metrics = probe.finish()


class _Probe:
    """The JVM side of one ``measure_jobs`` block: its job tag and the job ids around it."""

    def __init__(self, spark: SparkSession, label: str) -> None:
        self.label = label
        self.sc = spark.sparkContext  # Spark Connect has none: raises
        self.jvm: Any = self.sc._jvm
        self.context = self.sc._jsc.sc()
        self.scheduler = self.context.dagScheduler()
        self.tag = f"segmentlake-metrics-{uuid.uuid4().hex}"
        # Job ids only grow: every job started during the block gets one in [first, end).
        self.first: int = self.scheduler.nextJobId()
        self.end = self.first
        self.unseen = self.first  # the jobs below it are in the status store

    @classmethod
    def start(cls, spark: SparkSession, label: str) -> _Probe | None:
        if is_connect(spark):  # the status store is in the server's JVM, out of reach
            logger.debug("%s: no Spark job metrics over Spark Connect", label)
            return None
        try:
            probe = cls(spark, label)
            probe.sc.addJobTag(probe.tag)
        except Exception as err:
            logger.debug("%s: no Spark job metrics (%s)", label, first_line(err))
            return None
        return probe

    def untag(self) -> bool:
        """Stop tagging this thread's jobs and note the next job id; ``False`` if the JVM
        could not be asked (a session stopped in the block, say). Called once."""
        try:
            self.end = self.scheduler.nextJobId()
            self.sc.removeJobTag(self.tag)
        except Exception as err:
            logger.info(
                "%s: could not remove job tag %s (%s)", self.label, self.tag, first_line(err)
            )
            return False
        return True

    def finish(self) -> JobMetrics | None:
        """Untag the thread, wait for the store to have the block's jobs finished, sum them."""
        if not self.untag():
            return None
        if self.end == self.first:
            return JobMetrics()  # no job started anywhere: nothing to wait for
        try:
            store = self.context.statusStore()
            found = self._wait(store, self.context.statusTracker())
            if found is None:
                logger.info(
                    "%s: no Spark job metrics (the status store did not have the block's jobs "
                    "finished within %.0fs)",
                    self.label,
                    _WAIT_S,
                )
                return None
            jobs, stage_ids, skipped = found
            stages = [self._stage(store, s) for s in sorted(stage_ids)]
            ran = [s for s in stages if s is not None]
            # The store evicts skipped stages first (they have no completion time), as soon as
            # it holds more than spark.ui.retainedStages: a missing stage the jobs report as
            # skipped counted nothing anyway. More missing than that means work was dropped.
            missing = len(stages) - len(ran)
            if missing > skipped:
                logger.info(
                    "%s: no Spark job metrics (the status store dropped %d of the block's %d "
                    "stages; spark.ui.retainedStages bounds it)",
                    self.label,
                    missing,
                    len(stages),
                )
                return None
            return sum(ran, JobMetrics(jobs=jobs))
        except Exception as err:
            logger.info("%s: no Spark job metrics (%s)", self.label, first_line(err))
            return None

    def _wait(self, store: Any, tracker: Any) -> tuple[int, set[int], int] | None:
        deadline = time.monotonic() + _WAIT_S
        while True:
            found = self._finished_jobs(store, tracker)
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(_POLL_S)

    def _finished_jobs(self, store: Any, tracker: Any) -> tuple[int, set[int], int] | None:
        """The number of the block's jobs, their stage ids and how many stages they skipped
        (a stage two jobs skip counts twice), or ``None`` while the store lacks a job started
        before the block ended or has one of the block's unfinished."""
        while self.unseen < self.end:  # a job seen stays seen: check each one once
            if tracker.getJobInfo(self.unseen).isEmpty():
                return None
            self.unseen += 1
        tagged = _ints(self.jvm.java.util.Arrays.toString(tracker.getJobIdsForTag(self.tag)))
        # A thread started in the block may run tagged jobs after it: not the block's.
        ids = [i for i in tagged if i < self.end]
        stage_ids: set[int] = set()
        skipped = 0
        for job_id in ids:
            job = store.job(job_id)
            if job.status().toString() in _UNFINISHED:
                return None
            # A stage shared by two jobs of the block is listed by both: count it once.
            stage_ids.update(_ints(job.stageIds().mkString(",")))
            skipped += job.numSkippedStages()
        return len(ids), stage_ids, skipped

    def _stage(self, store: Any, stage_id: int) -> JobMetrics | None:
        """A stage's work over all its attempts (a retry reruns only the lost partitions);
        zero if it was skipped, i.e. it reused the shuffle files of an earlier stage; ``None``
        if the store no longer has it."""
        try:
            last = store.lastStageAttempt(stage_id)
        except Exception as err:  # py4j wraps the store's NoSuchElementException
            logger.debug(
                "%s: stage %d is not in the status store (%s)",
                self.label,
                stage_id,
                first_line(err),
            )
            return None
        if last.status().toString() == _SKIPPED:
            return JobMetrics()
        # Scala default arguments are not visible to py4j: details off, no task filter, no
        # summaries, no quantiles.
        no_filter = self.jvm.java.util.ArrayList()
        # pyspark types the gateway Optional; a context with a JVM (measured here) has one.
        no_quantiles = self.sc._gateway.new_array(self.jvm.double, 0)  # type: ignore[union-attr]
        earlier = [
            store.stageAttempt(stage_id, a, False, no_filter, False, no_quantiles)._1()
            for a in range(last.attemptId())
        ]
        return sum((_attempt_metrics(a) for a in [*earlier, last]), JobMetrics(stages=1))


def _attempt_metrics(stage: Any) -> JobMetrics:
    """One stage attempt's totals (a ``StageData`` of Spark's REST API)."""
    return JobMetrics(
        tasks=stage.numCompleteTasks() + stage.numFailedTasks() + stage.numKilledTasks(),
        executor_run_ms=stage.executorRunTime(),
        input_bytes=stage.inputBytes(),
        input_records=stage.inputRecords(),
        shuffle_read_bytes=stage.shuffleReadBytes(),
        shuffle_write_bytes=stage.shuffleWriteBytes(),
        output_bytes=stage.outputBytes(),
        output_records=stage.outputRecords(),
        spill_bytes=stage.diskBytesSpilled(),
    )


def _ints(text: str) -> list[int]:
    """Integers out of ``"1,2"`` or Java's ``"[1, 2]"``: one py4j call fetches a whole array,
    where iterating it would cost one call per element."""
    return [int(part) for part in text.strip("[]").split(",") if part.strip()]
