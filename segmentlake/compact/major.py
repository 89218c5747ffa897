"""Major compaction: whole chunks re-ingested, each chunk's rows rolled up together, under a new
version, while appends go on (Druid's concurrent append and replace). The partitionsSpec cuts
each chunk: hashed (the default), range or single_dim, or dynamic (a Druid compaction task's
default): the rolled-up chunk cut to ``maxRowsPerSegment``.

1. **plan** (no lock): the visible segments of the interval, the target segment granularity,
   the merged schema and the compaction state; chunks already compacted as wanted are
   skipped.
2. **lock**: one REPLACE time-chunk lock per chunk to compact, in one commit, with a version
   above every existing one. REPLACE locks conflict with overwrites, minor compactions and
   other replaces, never with appends, which keep allocating and publishing meanwhile.
3. **read** (after the lock): the used segments again. Their ids are what this compaction
   replaces; the visible ones' rows are its input.
4. the ingestion engine rolls the rows up (combining aggregators), partitions, writes and
   publishes them in ONE commit that also upgrades every segment appended since step 3
   (metadata only, see :mod:`segmentlake.metadata.upgrade`), so nothing appended is lost.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from segmentlake.compact.source import chunk_granularity, used_segments
from segmentlake.core.compaction import (
    MAJOR,
    compacted_as_wanted,
    compaction_spec,
    compaction_state,
    merged_schema,
)
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.locks import LockGranularity, LockRequest, LockType
from segmentlake.core.names import TIME_COLUMN, datasource_table_path
from segmentlake.core.partitions_spec import HashedPartitionsSpec, PartitionsSpec
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.spec_reader import check_flag, safe_repr
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import SpecError
from segmentlake.faults import crash_point
from segmentlake.ingest.report import RowStats, TaskReport
from segmentlake.ingest.task import IngestTarget, Replacing, new_task_id, run_ingestion
from segmentlake.metadata.heartbeat import LeaseKeeper
from segmentlake.storage.visible_rows import output_columns, visible_rows

__all__ = ["MajorCompaction", "compact_major"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MajorCompaction:
    """Options of one major compaction (see :meth:`segmentlake.Lake.compact`)."""

    segment_granularity: Granularity | None = None
    partitions_spec: PartitionsSpec | None = None
    query_granularity: Granularity | None = None
    rollup: bool | None = None

    def __post_init__(self) -> None:
        spec = self.partitions_spec
        if spec is not None and not isinstance(spec, PartitionsSpec):
            raise SpecError(
                "partitions_spec must be a partitions spec (a dict such as {'type': 'hashed', "
                f"'numShards': 4}} or a PartitionsSpec object), got {safe_repr(spec)}"
            )
        if self.rollup is not None:
            check_flag(self.rollup, "rollup")


def compact_major(
    target: IngestTarget,
    datasource: str,
    interval: Interval | None,
    options: MajorCompaction,
    *,
    task_id: str | None,
    priority: int,
    lock_timeout_s: float,
) -> TaskReport:
    """Run one major compaction of ``interval`` (default: everything) to the end."""
    task_id = task_id or new_task_id("compact", datasource)
    store = target.lockbox.store
    clock = time.monotonic()
    plan = _plan(used_segments(store, datasource, interval or ETERNITY), interval, options)
    phases = {"plan": time.monotonic() - clock}
    if not plan.chunks:
        logger.info("%s: nothing to compact (%d chunk(s) already compacted)", task_id, plan.skipped)
        return TaskReport(
            task_id,
            "compact",
            datasource,
            "SKIPPED",
            str(plan.span),
            RowStats(),
            skipped_chunks=plan.skipped,
        )
    requests = [
        LockRequest(
            task_id,
            task_id,
            datasource,
            chunk,
            LockType.REPLACE,
            LockGranularity.TIME_CHUNK,
            priority,
        )
        for chunk in plan.chunks
    ]
    clock = time.monotonic()
    locks = target.lockbox.lock_all(requests, timeout_s=lock_timeout_s)
    keeper = LeaseKeeper(target.lockbox, datasource, task_id)
    phases["lock"] = time.monotonic() - clock
    clock = time.monotonic()
    logger.info("%s: REPLACE-locked %d chunk(s), version %s", task_id, len(locks), locks[0].version)
    try:
        span = Interval.of_millis(plan.chunks[0].start_millis, plan.chunks[-1].end_millis)
        used = used_segments(store, datasource, span)
        timeline = VersionedIntervalTimeline(used)
        inputs = [
            s
            for chunk in plan.chunks
            for s in timeline.visible_segments(chunk)
            if not s.is_tombstone
        ]
        rows = _rows(target, datasource, timeline, span, plan.chunks)
        crash_point("compact.after_read")
        replacing = Replacing(
            version=locks[0].version,
            replaced=frozenset(str(s.id) for s in used),
            schema=plan.schema,
            compaction_state=plan.state,
            input_segments=len(set(inputs)),
            input_bytes=sum(s.size for s in set(inputs)),
            skipped_chunks=plan.skipped,
            keeper=keeper,
            phases={**phases, "read": time.monotonic() - clock},
        )
        return run_ingestion(
            target,
            rows,
            datasource,
            plan.spec,
            mode="compact",
            interval=span,
            task_id=task_id,
            lock_timeout_s=lock_timeout_s,
            priority=priority,
            replacing=replacing,
        )
    except BaseException:
        keeper.finish(renew=False)
        target.lockbox.release(datasource, task_id)
        raise


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a major compaction will do: its span, the chunks to compact (others are
    compacted as wanted already), the spec it re-ingests with, what its segments record."""

    span: Interval
    chunks: list[Interval]
    skipped: int
    spec: IngestionSpec
    schema: SegmentSchema
    state: dict[str, Any]


def _plan(used: list[DataSegment], interval: Interval | None, options: MajorCompaction) -> _Plan:
    timeline = VersionedIntervalTimeline(used)
    visible = [s for s in timeline.visible_segments(interval or ETERNITY) if not s.is_tombstone]
    if not visible:
        raise SpecError(f"nothing to compact: no visible data in {interval or 'the datasource'}")
    granularity = options.segment_granularity or chunk_granularity(visible)
    span = _span(visible, interval, granularity)
    dimensions, schema = merged_schema(
        visible, query_granularity=options.query_granularity, rollup=options.rollup
    )
    # Dynamic partitioning (Druid's compaction default) rolls each chunk up whole too: its
    # rows go through one task per chunk, and are then cut to maxRowsPerSegment.
    partitions = options.partitions_spec or HashedPartitionsSpec()
    spec = compaction_spec(
        dimensions,
        schema,
        segment_granularity=granularity,
        partitions_spec=_known_shards(partitions, visible, granularity),
    )
    state = compaction_state(
        MAJOR,
        dimensions,
        schema,
        segment_granularity=granularity,
        partitions_spec=partitions.to_json(),
    )
    chunks, skipped = [], 0
    for chunk in granularity.iterate(span):
        inside = [s for s in visible if s.interval.overlaps(chunk)]
        if not inside:
            continue
        if compacted_as_wanted(inside, chunk, state):
            skipped += 1
        else:
            chunks.append(chunk)
    return _Plan(span, chunks, skipped, spec, schema, state)


def _known_shards(
    partitions: PartitionsSpec, visible: list[DataSegment], granularity: Granularity
) -> PartitionsSpec:
    """A hashed spec by target rows, as ``numShards: 1`` when no chunk can exceed the target:
    the segment records bound the rows (rollup only lowers them), so the pass that counts
    them (a second scan of the input) would only find one bucket."""
    if not isinstance(partitions, HashedPartitionsSpec):
        return partitions
    target = partitions.target_rows_per_segment
    if target is None:
        return partitions
    rows: dict[int, int] = {}
    for seg in visible:
        start = granularity.bucket(seg.interval.start_millis).start_millis
        for chunk in granularity.iterate(Interval.of_millis(start, seg.interval.end_millis)):
            rows[chunk.start_millis] = rows.get(chunk.start_millis, 0) + seg.num_rows
    if any(n > target for n in rows.values()):
        return partitions
    return dataclasses.replace(partitions, num_shards=1, target_rows_per_segment=None)


def _span(
    visible: list[DataSegment], interval: Interval | None, granularity: Granularity
) -> Interval:
    """The interval compacted: ``interval`` (which must hold whole chunks of both the
    existing segments and the target granularity) or the umbrella of the visible data."""
    lo = min(s.interval.start_millis for s in visible)
    hi = max(s.interval.end_millis for s in visible)
    if interval is None:
        start = granularity.bucket(lo).start_millis
        end = granularity.bucket(hi - 1).end_millis
        return Interval.of_millis(start, end)
    outside = [s for s in visible if not interval.contains(s.interval)]
    if outside or not granularity.is_aligned(interval):
        first = granularity.bucket(min(lo, interval.start_millis)).start_millis
        last = granularity.bucket(max(hi, interval.end_millis) - 1).end_millis
        raise SpecError(
            f"compaction interval {interval} must hold whole chunks of the existing segments "
            f"(e.g. {outside[0].interval if outside else 'all'}) and of {granularity.name}; "
            f"e.g. {Interval.of_millis(first, last)}"
        )
    return interval


def _rows(
    target: IngestTarget,
    datasource: str,
    timeline: VersionedIntervalTimeline,
    span: Interval,
    chunks: list[Interval],
) -> DataFrame:
    """The visible rows of ``chunks`` (a compaction may skip chunks inside its span)."""
    path = datasource_table_path(target.warehouse, datasource)
    rows, _ = visible_rows(target.spark, path, timeline, interval=span)
    rows = rows.select(*output_columns(rows, None))
    if len(chunks) == len(list(_merge(chunks))) == 1:
        return rows
    t = F.col(TIME_COLUMN)
    keep = F.lit(False)
    for start, end in _merge(chunks):
        keep = keep | (
            (t >= F.timestamp_millis(F.lit(start))) & (t < F.timestamp_millis(F.lit(end)))
        )
    return rows.where(keep)


def _merge(chunks: list[Interval]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for chunk in chunks:
        if merged and merged[-1][1] == chunk.start_millis:
            merged[-1][1] = chunk.end_millis
        else:
            merged.append([chunk.start_millis, chunk.end_millis])
    return [(a, b) for a, b in merged]
