"""Batch ingestion tasks: ``append`` (ids at publish) and ``overwrite`` (time-chunk locks).

Both run these phases, each logged as it ends:

1. **parse** — the input's rows become Spark expressions (times, chunks, typed metric
   inputs, a rejection reason); bad specs fail here, before anything else;
2. **lock** (overwrite) — one exclusive time-chunk lock per chunk, all in one commit;
3. **write** — ONE Spark job writes one segment per chunk (an append: per existing coarser
   chunk it joins, else per bucket; :mod:`~segmentlake.metadata.chunk_layout`) into the
   datasource's Delta table, under ``__segment`` values unique to this task, and counts
   every input row by fate as it goes (observed metrics). Unparseable rows beyond
   ``max_parse_exceptions`` fail the task right after it; no file holds more than 80% of
   ``max_rows_per_segment`` rows, and a segment above it becomes several by moving whole
   files to new keys in one Delta commit (**split**: metadata only, no row written twice);
4. **publish** — an append's segment ids (in the existing chunks' versions, with the lock
   check allocation makes) and its segments, or an overwrite's segments and tombstones, with
   the task's report, in one metadata commit; an overwrite's checks that its locks are
   still held and releases them.

A failure anywhere publishes nothing: the rows already written are under keys no segment
points to, so no reader sees them, and the old data stays visible.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypedDict, get_args

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import Interval
from segmentlake.core.joined_chunks import JoinedChunks
from segmentlake.core.load_spec import delta_load_spec
from segmentlake.core.locks import LockGranularity, LockRequest, LockType
from segmentlake.core.names import SEGMENT_KEY_COLUMN, check_datasource_name, datasource_table_path
from segmentlake.core.partitions_spec import DynamicPartitionsSpec
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import NumberedShardSpec, ShardSpec, TombstoneShardSpec
from segmentlake.core.task_options import check_task_options
from segmentlake.errors import (
    BadRowsError,
    LockRefused,
    SpecError,
    TaskAlreadyPublished,
    first_line,
)
from segmentlake.faults import crash_point
from segmentlake.ingest.parse import (
    FILTERED,
    OUTSIDE_INTERVAL,
    REASON,
    ParsedInput,
    fate_counts,
    is_parse_exception,
    parse_input,
)
from segmentlake.ingest.partitioning import Partitioning
from segmentlake.ingest.report import RowStats, TaskReport
from segmentlake.ingest.rollup import perfect_rollup_rows, segment_rows
from segmentlake.metadata.allocation import AllocateRequest, ChunkLayoutChanged
from segmentlake.metadata.append_publish import publish_append
from segmentlake.metadata.chunk_layout import last_read_joinable_chunks
from segmentlake.metadata.file_moves import rekey_files
from segmentlake.metadata.heartbeat import LeaseKeeper
from segmentlake.metadata.lockbox import Lockbox
from segmentlake.metadata.publish import publish
from segmentlake.metadata.queries import row_of
from segmentlake.metadata.records import TASK
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import PartitionState, now_ms
from segmentlake.metadata.table_log import TableLog
from segmentlake.metadata.tasks import published_report, record_task, succeeded_in, task_row
from segmentlake.metadata.transaction import CommitLog, recording_commits
from segmentlake.spark.job_metrics import JobMetrics, measure_jobs
from segmentlake.spark.observed import observed_metrics
from segmentlake.storage.segment_keys import key_order
from segmentlake.storage.table_files import (
    WrittenSegment,
    checkpoint_if_due,
    pack_files,
    write_rows,
    written_segments,
)

__all__ = ["IngestMode", "IngestTarget", "Replacing", "new_task_id", "run_ingestion"]

# "compact" is major compaction's re-ingestion (it comes with ``replacing``), not a user's.
IngestMode = Literal["append", "overwrite", "compact"]
# The run-time check's list: the surface is called from untyped code too.
_INGEST_MODES: tuple[IngestMode, ...] = get_args(IngestMode)

# Split segments are filled to 80% of maxRowsPerSegment: the headroom of the hash-bucket
# split this replaced, so segment sizes stayed what they were.
_FILL = 0.8

logger = logging.getLogger(__name__)

_SHOWN_BAD_ROWS = 5


@dataclass(frozen=True, slots=True)
class IngestTarget:
    """What an ingestion needs of a warehouse."""

    spark: SparkSession
    warehouse: str
    lockbox: Lockbox


@dataclass(frozen=True, slots=True)
class Replacing:
    """What a compaction brings to an ingestion run (``mode="compact"``): the version of the
    REPLACE locks it already holds under the task id, the ids of every used segment it read
    (appended ones outside them are upgraded at publish), and what its segments record."""

    version: str
    replaced: frozenset[str]
    schema: SegmentSchema
    compaction_state: Mapping[str, Any]
    input_segments: int
    input_bytes: int
    skipped_chunks: int = 0
    keeper: LeaseKeeper | None = None  # renewing the locks since they were granted
    phases: Mapping[str, float] = field(default_factory=dict)  # before the engine's


class _ReplacingValues(TypedDict, total=False):
    """The report fields a compaction run adds (its keys are :class:`TaskReport`'s)."""

    input_segments: int
    input_bytes: int
    skipped_chunks: int


@dataclass
class _RunningTask:
    """The mutable state of one task while it runs."""

    target: IngestTarget
    mode: IngestMode
    datasource: str
    spec: IngestionSpec
    interval: Interval | None
    task_id: str
    df: DataFrame
    # Names this task's storage partitions; random, so a retried task id never reuses them.
    key_token: str = field(default_factory=lambda: new_key_token())
    phases: dict[str, float] = field(default_factory=dict)
    phase_metrics: dict[str, JobMetrics] = field(default_factory=dict)
    rows: RowStats = field(default_factory=RowStats)
    replacing: Replacing | None = None
    commits: CommitLog = field(default_factory=lambda: CommitLog({}, {}))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block and sum the Spark work it runs (a failing phase counts too)."""
        started = time.monotonic()
        jobs = None
        try:
            with measure_jobs(self.target.spark, f"{self.task_id}:{name}") as jobs:
                yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.monotonic() - started
            if jobs is not None and jobs.metrics is not None:
                before = self.phase_metrics.get(name, JobMetrics())
                self.phase_metrics[name] = before + jobs.metrics
            logger.info("%s: %s took %.2fs", self.task_id, name, self.phases[name])

    def report(self, status: str, **values: Any) -> TaskReport:
        return TaskReport(
            task_id=self.task_id,
            type=self.mode,
            datasource=self.datasource,
            status=status,
            interval=None if self.interval is None else str(self.interval),
            rows=self.rows,
            phases=dict(self.phases),
            phase_metrics={k: m.to_json() for k, m in self.phase_metrics.items()},
            commits=dict(self.commits.commits),
            retries=dict(self.commits.retries),
            **self._replacing_values(),
            **values,
        )

    def _replacing_values(self) -> _ReplacingValues:
        if self.replacing is None:
            return {}
        return {
            "input_segments": self.replacing.input_segments,
            "input_bytes": self.replacing.input_bytes,
            "skipped_chunks": self.replacing.skipped_chunks,
        }


def run_ingestion(
    target: IngestTarget,
    df: DataFrame,
    datasource: str,
    spec: IngestionSpec,
    *,
    mode: IngestMode,
    interval: Interval | None,
    task_id: str | None,
    lock_timeout_s: float,
    priority: int = 0,
    replacing: Replacing | None = None,
) -> TaskReport:
    """Run one append, overwrite or compaction task to the end and return its report (see
    the module). A compaction (``mode="compact"``, with ``replacing``) already holds its
    locks under ``task_id``; its segments replace whole chunks and leave no tombstones."""
    _check_request(datasource, spec, mode, interval)
    if not isinstance(df, DataFrame):
        raise SpecError(f"rows must be a Spark DataFrame, got {type(df).__name__}")
    if df.isStreaming:  # Spark would refuse it mid-task, with the task recorded as failed
        raise SpecError(
            f"rows is a streaming DataFrame, and lake.{mode} reads a batch DataFrame once. "
            "Ingest a stream with segmentlake.streaming.append_stream(lake, stream, "
            "datasource, spec, checkpoint_location=...), one append per micro-batch, exactly "
            "once"
        )
    check_task_options(task_id=task_id, priority=priority, lock_timeout_s=lock_timeout_s)
    if (mode == "compact") != (replacing is not None):
        raise SpecError("a compaction run, and only it, comes with what it replaces")
    if task_id is not None:
        _refuse_published(target, datasource, task_id)
    run = _RunningTask(
        target, mode, datasource, spec, interval, task_id or new_task_id(mode, datasource), df
    )
    run.replacing = replacing
    if replacing is not None:
        run.phases.update(replacing.phases)
    with recording_commits() as run.commits:
        return _run(run, priority, lock_timeout_s)


def _refuse_published(target: IngestTarget, datasource: str, task_id: str) -> None:
    """A task id names one run of a task: once it succeeded, its rows are published, and a
    second run (a replayed streaming batch, a retried job) would ingest them twice."""
    report = published_report(target.lockbox.store, datasource, task_id)
    if report is not None:
        raise TaskAlreadyPublished(
            f"task {task_id!r} of datasource {datasource!r} already succeeded "
            f"({report.get('segments', 0)} segment(s), "
            f"{(report.get('rows') or {}).get('rows_out', 0)} rows); give a new task_id, or "
            "none, to ingest these rows again",
            report=report,
        )


def _not_published_before(task_id: str) -> Callable[[PartitionState], None]:
    """The publish commit's own check (two runs with one task id racing to publish)."""

    def check(state: PartitionState) -> None:
        report = succeeded_in(state, task_id)
        if report is not None:
            raise TaskAlreadyPublished(
                f"task {task_id!r} was published by another run meanwhile", report=report
            )

    return check


def _run(run: _RunningTask, priority: int, lock_timeout_s: float) -> TaskReport:
    spec = run.spec
    partitions = spec.partitions_spec
    if isinstance(partitions, DynamicPartitionsSpec) and partitions.max_total_rows is not None:
        logger.info(
            "%s: maxTotalRows has no effect: each segment streams from one Spark task to "
            "storage, so no rows wait in memory to be pushed",
            run.task_id,
        )
    with run.phase("parse"):
        parsed = parse_input(run.df, spec, interval=run.interval)  # spec errors: before locks
    version = None if run.replacing is None else run.replacing.version
    if run.mode == "overwrite":
        with run.phase("lock"):
            version = _lock_chunks(run, priority, lock_timeout_s)
    try:
        with _heartbeat(run, enabled=version is not None) as beat:
            return _ingest(run, parsed, version, priority, lock_timeout_s, beat)
    except BaseException as err:
        _fail(run, err)
        raise


def _ingest(
    run: _RunningTask,
    parsed: ParsedInput,
    version: str | None,
    priority: int,
    lock_timeout_s: float,
    beat: LeaseKeeper | _NoHeartbeat,
) -> TaskReport:
    path = datasource_table_path(run.target.warehouse, run.datasource)
    crash_point("ingest.after_parse")
    joined = JoinedChunks.empty() if version is not None else _joinable_chunks(run)
    while True:
        try:
            return _write_and_publish(
                run, parsed, path, version, joined, priority, lock_timeout_s, beat
            )
        except ChunkLayoutChanged as changed:
            if not joined:
                raise
            # Rare (a compaction changed the granularity since the layout was read): the
            # rows written for whole chunks stay under keys no segment names, like a failed
            # task's; written by bucket, each joins whatever holds it now. A new token: a
            # chunk's first bucket starts where the chunk does, and one key would name the
            # rows of both writes.
            logger.info("%s: %s; writing again by bucket", run.task_id, changed)
            joined = JoinedChunks.empty()
            run.key_token = new_key_token()


def _joinable_chunks(run: _RunningTask) -> JoinedChunks:
    granularity = run.spec.granularity_spec.segment_granularity
    store = run.target.lockbox.store
    joined = last_read_joinable_chunks(store, run.datasource, granularity, run.interval)
    if joined:
        logger.info(
            "%s: %d existing chunk(s) coarser than %s: one segment each",
            run.task_id, len(joined), granularity.name,
        )  # fmt: skip
    return joined


def _write_and_publish(
    run: _RunningTask,
    parsed: ParsedInput,
    path: str,
    version: str | None,
    joined: JoinedChunks,
    priority: int,
    lock_timeout_s: float,
    beat: LeaseKeeper | _NoHeartbeat,
) -> TaskReport:
    with run.phase("write"):
        written, versions, partitioning = _write(run, parsed, path, joined)
    limit = _segment_row_limit(run)
    if (
        partitioning is None
        and limit is not None
        and any(w.num_rows > limit for w in written.values())
    ):
        with run.phase("split"):
            written = _split(run, path, written, versions, limit)
    run.rows = replace(run.rows, rows_out=sum(w.num_rows for w in written.values()))
    crash_point("ingest.after_write")
    describe = _Describe(run, parsed.dimensions, path, partitioning)
    segments = [] if version is None else describe.overwrite(written, version)
    tombstones = sum(s.is_tombstone for s in segments)
    results = {
        "segments": len(written) if version is None else len(segments) - tombstones,
        "tombstones": tombstones,
        "bytes": sum(w.size for w in written.values()),
        "files": sum(w.files for w in written.values()),
        "version": version,
        "largest_segment_rows": max((w.num_rows for w in written.values()), default=0),
    }

    # The ledger row goes in the publish commit: a report exists iff the segments do.
    def ledger(copies: list[DataSegment]) -> list[dict[str, Any]]:
        report = run.report("SUCCESS", upgraded=len(copies), **results)
        return [
            task_row(
                run.datasource,
                run.task_id,
                report.to_json(),
                interval=run.interval,
                now_ms=now_ms(),
            )
        ]

    with run.phase("publish"):
        if version is None:
            upgraded = describe.publish_append(written, joined, priority, lock_timeout_s, ledger)
        else:
            beat.finish(renew=True)  # a whole lease for the publish, with no renewal racing it
            published = publish(
                run.target.lockbox,
                run.datasource,
                segments,
                group_id=run.task_id,
                extra_rows=ledger,
                replaced=None if run.replacing is None else run.replacing.replaced,
                requirements=[_not_published_before(run.task_id)],
                reads=row_of(TASK, run.task_id),
                extra_scope=_ledger_scope(run.task_id),
            )
            upgraded = len(published.upgraded)
    report = run.report("SUCCESS", upgraded=upgraded, **results)
    logger.info(
        "%s: SUCCESS, %d segment(s), %d rows out, %.1fs",
        run.task_id,
        report.segments,
        report.rows.rows_out,
        report.seconds,
    )
    return report


def _write(
    run: _RunningTask, parsed: ParsedInput, path: str, joined: JoinedChunks
) -> tuple[dict[str, WrittenSegment], tuple[int, int], Partitioning | None]:
    """Write one segment per chunk (per bucket, for perfect rollup; per existing chunk of
    ``joined`` where one holds the rows) in one Spark job,
    counting every input row by fate in that same job (Spark's observed metrics); what
    landed per write key, the table versions around the write and, for perfect rollup, the
    partitioning the job determined. Too many unparseable rows fail the task here: what was
    written is never published."""
    # Named afresh for each write: a task whose chunks changed writes again.
    observation = Observation(f"segmentlake-{run.task_id}-{uuid.uuid4().hex[:8]}")
    tagged = None
    if run.spec.partitions_spec.perfect_rollup:
        assert run.interval is not None  # perfect rollup only overwrites (_check_request)
        tagged = perfect_rollup_rows(
            parsed,
            run.spec,
            key_token=run.key_token,
            observation=observation,
            interval=run.interval,
        )
        rows = tagged.frame
    else:
        counted = parsed.frame.observe(observation, *fate_counts(parsed.reasons))
        rows = segment_rows(
            counted, run.spec, parsed.dimensions, key_token=run.key_token, joined=joined
        )
    logger.info("%s: writing to %s", run.task_id, path)
    log = TableLog(path, storage_options=run.target.lockbox.store.table.storage_options)
    # Files never outgrow a segment: an oversized segment becomes several by moving whole
    # files to new keys (metadata only, see _split), never by writing its rows again.
    limit = None if tagged is not None else _segment_row_limit(run)
    versions = write_rows(log, rows, max_records_per_file=None if limit is None else _fill(limit))
    _count(run, parsed, observed_metrics(observation))
    parts = 1 if tagged is None else 2
    written = written_segments(log, versions, _key_filter(run.key_token, parts))
    partitioning = None if tagged is None else tagged.partitioning(wrote_rows=bool(written))
    return written, versions, partitioning


def _ledger_scope(task_id: str) -> Scope:
    return Scope.of(keys=[f"{TASK}:{task_id}"])


def _key_filter(token: str, parts: int) -> Callable[[str], bool]:
    """Recognises this task's write keys with ``parts`` numbers before its token."""
    suffix = f".{token}"

    def mine(key: str) -> bool:
        return key.endswith(suffix) and key.count(".") == parts

    return mine


def _fill(limit: int) -> int:
    """Rows a split segment is filled to: 80% of ``maxRowsPerSegment``, the headroom the
    hash-bucket split this replaced aimed at (its segments stay the same size)."""
    return max(1, int(limit * _FILL))


def _segment_row_limit(run: _RunningTask) -> int | None:
    return run.spec.partitions_spec.segment_row_limit


def _split(
    run: _RunningTask,
    path: str,
    written: dict[str, WrittenSegment],
    versions: tuple[int, int],
    limit: int,
) -> dict[str, WrittenSegment]:
    """Each segment above ``limit`` rows becomes several of at most 80% of it (:func:`_fill`):
    its files (none larger, the write saw to it) are packed into groups and moved to keys
    ``<chunk ms>.<group>.<token>`` in one Delta commit of the datasource table that rewrites
    no row (:func:`rekey_files`)."""
    log = TableLog(path, storage_options=run.target.lockbox.store.table.storage_options)
    files: dict[str, list[tuple[str, int, int]]] = {}
    for added in log.added_files(versions[0] + 1, versions[1]):
        key = added.partition_values.get(SEGMENT_KEY_COLUMN)
        if key in written and written[key].num_rows > limit:
            files.setdefault(key, []).append(
                (added.path, int(added.stats["numRecords"]), added.size)
            )
    moves: dict[str, str] = {}
    again: dict[str, WrittenSegment] = {}
    for key, found in files.items():
        sizes = {p: (rows, size) for p, rows, size in found}
        groups = pack_files([(p, rows) for p, rows, _ in found], _fill(limit))
        for group_number, group in enumerate(groups):
            new_key = f"{key_order(key)[0]}.{group_number}.{run.key_token}"
            moves.update(dict.fromkeys(group, new_key))
            again[new_key] = WrittenSegment(
                new_key,
                sum(sizes[p][0] for p in group),
                sum(sizes[p][1] for p in group),
                len(group),
            )
    logger.info(
        "%s: %d oversized segment(s) become %d, moving %d file(s)",
        run.task_id, len(files), len(again), len(moves),
    )  # fmt: skip
    rekey_files(log, versions, moves)
    checkpoint_if_due(log, versions[1], log.version())
    return {k: w for k, w in written.items() if k not in files} | again


def _check_request(
    datasource: str, spec: IngestionSpec, mode: IngestMode, interval: Interval | None
) -> None:
    check_datasource_name(datasource)
    if not isinstance(spec, IngestionSpec):
        raise SpecError(f"spec must be an IngestionSpec or a dict, got {type(spec).__name__}")
    if mode not in _INGEST_MODES:
        raise SpecError(f"an ingestion is an 'append' or an 'overwrite', not {mode!r}")
    if mode == "append" and spec.partitions_spec.perfect_rollup:
        raise SpecError(
            f"partitionsSpec {spec.partitions_spec.type_name!r} means perfect rollup, which "
            "needs every row of a chunk in one task under a time-chunk lock: use "
            "overwrite(df, datasource, spec, interval=...) for it, or a 'dynamic' "
            "partitionsSpec to append"
        )
    if mode in ("overwrite", "compact"):
        if interval is None:
            raise SpecError(
                "overwrite needs the interval it replaces, e.g. interval='2024-01-01/P1D'"
            )
        granularity = spec.granularity_spec.segment_granularity
        if interval.is_empty() or not granularity.is_aligned(interval):
            raise SpecError(
                f"overwrite interval {interval} must be non-empty and aligned to the segment "
                f"granularity {granularity.name}: whole chunks are replaced, so a partial one "
                f"would lose rows outside the interval; e.g. {_aligned(interval, granularity)}"
            )


def _aligned(interval: Interval, granularity: Granularity) -> Interval:
    chunks = list(granularity.iterate(interval)) or [granularity.bucket(interval.start_millis)]
    return Interval.of_millis(chunks[0].start_millis, chunks[-1].end_millis)


def new_key_token() -> str:
    """A random token naming one write's storage partitions (see _RunningTask)."""
    return uuid.uuid4().hex[:16]


def new_task_id(kind: str, datasource: str) -> str:
    """A fresh task id: ``<kind>_<datasource, made safe>_<random>``."""
    safe = "".join(c if c.isascii() and c.isalnum() else "_" for c in datasource)[:40]
    return f"{kind}_{safe}_{uuid.uuid4().hex[:12]}"


def _lock_chunks(run: _RunningTask, priority: int, timeout_s: float) -> str:
    """One exclusive time-chunk lock per chunk of the interval, in one commit, one version."""
    assert run.interval is not None
    chunks = list(run.spec.granularity_spec.segment_granularity.iterate(run.interval))
    requests = [
        LockRequest(
            run.task_id,
            run.task_id,
            run.datasource,
            chunk,
            LockType.EXCLUSIVE,
            LockGranularity.TIME_CHUNK,
            priority,
        )
        for chunk in chunks
    ]
    locks = run.target.lockbox.lock_all(requests, timeout_s=timeout_s)
    logger.info("%s: locked %d chunk(s), version %s", run.task_id, len(locks), locks[0].version)
    return locks[0].version


def _count(run: _RunningTask, parsed: ParsedInput, observed: Mapping[str, Any] | None) -> None:
    """Fill ``run.rows`` from the write job's observed counts; fail on too many
    unparseable rows. Without them (Spark drops an observation when no row reached the
    write: :mod:`segmentlake.spark.observed`), one aggregation over the parsed rows counts
    them instead."""
    if observed is None:
        logger.info("%s: no row reached the write; counting the input rows by fate", run.task_id)
        observed = _counted_by_reason(parsed)
    by_reason = {r: int(observed[f"reason{i}"]) for i, r in enumerate(parsed.reasons)}
    unparseable = {r: n for r, n in by_reason.items() if n and is_parse_exception(r)}
    rows_in = int(observed["rows_in"])
    run.rows = RowStats(
        rows_in=rows_in,
        processed=rows_in - sum(by_reason.values()),
        unparseable=sum(unparseable.values()),
        filtered=by_reason.get(FILTERED, 0),
        outside_interval=by_reason.get(OUTSIDE_INTERVAL, 0),
        unparseable_by_reason=unparseable,
    )
    logger.info(
        "%s: %d rows in, %d kept, %d unparseable, %d filtered, %d outside the interval",
        run.task_id,
        run.rows.rows_in,
        run.rows.processed,
        run.rows.unparseable,
        run.rows.filtered,
        run.rows.outside_interval,
    )
    if run.rows.unparseable > run.spec.max_parse_exceptions:
        raise BadRowsError(_bad_rows_message(run, parsed))


def _counted_by_reason(parsed: ParsedInput) -> dict[str, Any]:
    """What the write job's observation holds, by a job of its own."""
    return parsed.frame.agg(*fate_counts(parsed.reasons)).first().asDict()  # type: ignore[union-attr]


def _bad_rows_message(run: _RunningTask, parsed: ParsedInput) -> str:
    shown_columns = [c for c in parsed.frame.columns if not c.startswith("__")][:8]
    bad = (
        parsed.frame.where(
            F.col(REASON).isNotNull() & ~F.col(REASON).isin(FILTERED, OUTSIDE_INTERVAL)
        )
        .select(REASON, *shown_columns)
        .limit(_SHOWN_BAD_ROWS)
        .collect()
    )
    examples = "\n".join(
        f"  {r[REASON]}: " + ", ".join(f"{c}={r[c]!r}" for c in shown_columns) for r in bad
    )
    reasons = ", ".join(f"{n} {r}" for r, n in sorted(run.rows.unparseable_by_reason.items()))
    return (
        f"{run.task_id}: {run.rows.unparseable} unparseable row(s) ({reasons}) exceed "
        f"maxParseExceptions={run.spec.max_parse_exceptions}; nothing was published. First "
        f"offending rows:\n{examples}\nFix the rows or the timestampSpec/metricsSpec, or raise "
        "max_parse_exceptions to skip them (they are counted in the task report)."
    )


@dataclass(frozen=True, slots=True)
class _Describe:
    """Segment records for what a task wrote."""

    run: _RunningTask
    dimensions: tuple[str, ...]
    path: str
    partitioning: Partitioning | None

    def segment(
        self, sid_interval: Interval, version: str, spec: Any, w: WrittenSegment
    ) -> DataSegment:
        replacing = self.run.replacing
        return DataSegment(
            self.run.datasource,
            sid_interval,
            version,
            spec,
            load_spec=delta_load_spec(self.path, w.key),
            dimensions=self.dimensions,
            metrics=tuple(m.name for m in self.run.spec.metrics),
            size=w.size,
            num_rows=w.num_rows,
            schema=SegmentSchema.of(self.run.spec) if replacing is None else replacing.schema,
            last_compaction_state=None if replacing is None else replacing.compaction_state,
        )

    def overwrite(self, written: Mapping[str, WrittenSegment], version: str) -> list[DataSegment]:
        """Each chunk's written segments numbered 0..n-1 of n core partitions (split buckets
        that got no rows are skipped); a tombstone for every chunk of the interval left
        empty."""
        assert self.run.interval is not None
        granularity = self.run.spec.granularity_spec.segment_granularity
        by_chunk: dict[int, list[WrittenSegment]] = {}
        for key in sorted(written, key=key_order):
            by_chunk.setdefault(key_order(key)[0], []).append(written[key])
        segments = []
        for chunk in granularity.iterate(self.run.interval):
            found = by_chunk.get(chunk.start_millis, [])
            if not found and self.run.replacing is None:
                segments.append(
                    DataSegment(
                        self.run.datasource,
                        chunk,
                        version,
                        TombstoneShardSpec(),
                        load_spec={"type": "tombstone"},
                    )
                )
            for i, w in enumerate(found):
                spec = self._shard_spec(chunk.start_millis, key_order(w.key), i, len(found))
                segments.append(self.segment(chunk, version, spec, w))
        return segments

    def _shard_spec(self, chunk_ms: int, order: tuple[int, ...], i: int, n: int) -> ShardSpec:
        if self.partitioning is None:
            return NumberedShardSpec(i, n)
        return self.partitioning.shard_spec(chunk_ms, order[1], i, n)

    def publish_append(
        self,
        written: Mapping[str, WrittenSegment],
        joined: JoinedChunks,
        priority: int,
        lock_timeout_s: float,
        ledger: Callable[[list[DataSegment]], list[dict[str, Any]]],
    ) -> int:
        """Give each written segment an id in its chunk's current version and publish them
        with the task's report, in one metadata commit (:mod:`~segmentlake.metadata.
        append_publish`), waiting up to ``lock_timeout_s`` while an overwrite holds a chunk;
        the number of upgraded copies it added. Raises :class:`ChunkLayoutChanged` when no
        chunk holds a chunk of ``joined`` it wrote for any more."""
        granularity = self.run.spec.granularity_spec.segment_granularity
        keys = sorted(written, key=key_order)
        requests = [
            _request(granularity, joined, key_order(k)[0], f"{self.run.task_id}|{k}") for k in keys
        ]
        by_sequence = {r.sequence_name: written[k] for r, k in zip(requests, keys, strict=True)}

        def make(request: AllocateRequest, sid: SegmentId, core_partitions: int) -> DataSegment:
            written_segment = by_sequence[request.sequence_name]
            spec = NumberedShardSpec(sid.partition_num, core_partitions)
            return self.segment(sid.interval, sid.version, spec, written_segment)

        deadline = time.monotonic() + lock_timeout_s
        while True:
            try:
                result = publish_append(
                    self.run.target.lockbox,
                    self.run.datasource,
                    requests,
                    make,
                    group_id=self.run.task_id,
                    priority=priority,
                    extra_rows=ledger,
                    requirements=[_not_published_before(self.run.task_id)],
                    reads=row_of(TASK, self.run.task_id),
                    extra_scope=_ledger_scope(self.run.task_id),
                )
                return len(result.upgraded)
            except LockRefused:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)


def _request(
    granularity: Granularity, joined: JoinedChunks, chunk_ms: int, sequence: str
) -> AllocateRequest:
    chunk = joined.starting_at(chunk_ms)
    if chunk is None:
        return AllocateRequest(granularity.bucket(chunk_ms), sequence)
    return AllocateRequest(chunk, sequence, joins_chunk=True)


class _NoHeartbeat:
    """An append holds no lock until its publish: nothing to renew."""

    def finish(self, *, renew: bool) -> None:
        pass


@contextmanager
def _heartbeat(run: _RunningTask, *, enabled: bool) -> Iterator[LeaseKeeper | _NoHeartbeat]:
    """The task's lease keeper: a compaction's own (started when it locked), a new one for an
    overwrite, none for an append."""
    if run.replacing is not None and run.replacing.keeper is not None:
        beat: LeaseKeeper | _NoHeartbeat = run.replacing.keeper
    elif enabled:
        beat = LeaseKeeper(run.target.lockbox, run.datasource, run.task_id)
    else:
        beat = _NoHeartbeat()
    try:
        yield beat
    finally:
        beat.finish(renew=False)


def _fail(run: _RunningTask, err: BaseException) -> None:
    """Release the task's locks and record its failure; never mask ``err``."""
    lockbox = run.target.lockbox
    if isinstance(err, TaskAlreadyPublished):  # its ledger row is the successful run's
        lockbox.release(run.datasource, run.task_id)
        return
    message = f"{type(err).__name__}: {first_line(err)}"
    report = run.report("FAILED", error=message)
    if isinstance(err, BadRowsError):
        err.report = report
    try:
        lockbox.release(run.datasource, run.task_id)
        row = task_row(
            run.datasource, run.task_id, report.to_json(), interval=run.interval, now_ms=now_ms()
        )
        if not record_task(lockbox.store, row, policy=lockbox.retry):
            logger.warning(
                "%s: another run of this task id succeeded; its record stays", run.task_id
            )
    except Exception:
        logger.warning(
            "%s: could not release locks or record the failure", run.task_id, exc_info=True
        )
    logger.error("%s", report.summary())
