"""Centralized segment id allocation (Druid's SegmentAllocateAction, segment-lock mode).

Allocating ids and the segment locks that go with them is one conditional commit, so ids are
unique per chunk across every concurrent writer. A request is idempotent per (sequence name,
previous segment id): asking again returns the id already allocated.

* Appends get first-generation ids (0..32767) in the chunk's current version: the highest
  version among the interval's used segments and pending allocations, or a new version for a
  chunk nobody has written yet.
* Minor compaction gets overwrite ids (32768..65535) in a given chunk and version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import pyarrow.compute as pc

from segmentlake.core.interval import Interval
from segmentlake.core.interval_index import IntervalIndex
from segmentlake.core.locks import (
    LockGranularity,
    LockRequest,
    LockType,
    TaskLock,
    decide_lock,
    next_version,
)
from segmentlake.core.segment import SegmentId
from segmentlake.core.shard_spec import (
    FIRST_GENERATION_PARTITION_ID_MAX,
    NON_ROOT_GENERATION_PARTITION_ID_MAX,
    NON_ROOT_GENERATION_PARTITION_ID_MIN,
)
from segmentlake.errors import CommitConflict, LockRefused, SpecError
from segmentlake.metadata.lockbox import (
    Lockbox,
    UnusedIds,
    expired_lock_deletes,
    in_use,
    span_scope,
    unused_ids,
)
from segmentlake.metadata.records import (
    LOCK,
    PENDING,
    SEGMENT,
    PendingSegment,
    Row,
    first_free_root_partition,
    lease_key,
    lease_row,
    lock_from_row,
    lock_row,
    pending_from_row,
    pending_row,
)
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, PartitionState, ScopeTooNarrow, now_ms
from segmentlake.metadata.transaction import Decision, transact

__all__ = [
    "AllocateRequest",
    "ChunkLayoutChanged",
    "ChunkRows",
    "ChunkSlot",
    "allocate",
    "check_space",
    "chunk_for",
    "refused",
]


class ChunkLayoutChanged(CommitConflict):
    """An append's rows were written for an existing chunk (``AllocateRequest.
    joins_chunk``) that no chunk holds any more (a compaction changed the segment
    granularity and the older chunks were marked unused meanwhile): nothing was published;
    write them again by bucket."""


@dataclass(frozen=True, slots=True)
class AllocateRequest:
    """One segment wanted in ``interval`` (a segment-granularity bucket) by the sequence
    ``sequence_name``; ``previous_id`` is the id this sequence got last ("" at its start).
    With ``joins_chunk`` the interval is an existing coarser chunk whose buckets the rows
    were written for together (:mod:`~segmentlake.metadata.chunk_layout`)."""

    interval: Interval
    sequence_name: str
    previous_id: str = ""
    joins_chunk: bool = False

    def __post_init__(self) -> None:
        if not self.sequence_name:
            raise SpecError("an allocation request needs a non-empty sequence_name")
        if self.interval.is_empty():
            raise SpecError(f"cannot allocate a segment in the empty interval {self.interval}")

    @property
    def key(self) -> str:
        return f"{self.sequence_name}|{self.previous_id}"


@dataclass
class ChunkSlot:
    """Where a new segment goes: its chunk, version, next free partition id and the chunk's
    core partitions."""

    interval: Interval
    version: str
    next_partition: int
    num_core_partitions: int


def allocate(
    lockbox: Lockbox,
    datasource: str,
    requests: Sequence[AllocateRequest],
    *,
    group_id: str,
    task_id: str,
    priority: int = 0,
    overwrite_version: str | None = None,
) -> list[PendingSegment]:
    """Allocate one segment id (with its segment lock) per request, all in one commit.

    With ``overwrite_version`` the ids come from the overwrite space 32768..65535 of the
    chunks of that version (minor compaction); otherwise first-generation ids for appends.
    Raises :class:`LockRefused` when a conflicting lock of another group (e.g. an overwrite's
    exclusive time-chunk lock) of equal or higher priority holds an interval.
    """
    if not requests:
        return []
    keys = sorted({r.key for r in requests})
    requested = span_scope([r.interval for r in requests]) | Scope.of(
        keys=[lease_key(group_id), *(f"{PENDING}:{key}" for key in keys)]
    )

    def scope() -> Scope:
        # Earlier allocations of these keys, wherever they are: a key names one allocation,
        # and its interval must be read too (a request is never answered with another
        # interval). A hint from what this process last read; the decision checks it.
        earlier = lockbox.store.rows(
            datasource,
            pc.field("id").isin(keys),
            kinds=[PENDING],
            columns=("start_ms", "end_ms"),
            fresh=False,
        )
        return requested | Scope.of((r["start_ms"], r["end_ms"]) for r in earlier)

    condition = (pc.field("kind") == LOCK) | (pc.field("kind").isin([SEGMENT, PENDING]) & in_use())

    def decide(state: PartitionState) -> Decision[list[PendingSegment]]:
        at = now_ms()
        pending = {r["id"]: pending_from_row(r) for r in state.of(PENDING)}
        unseen = set(keys) - set(pending)
        if unseen and lockbox.store.present(datasource, PENDING, unseen):
            raise ScopeTooNarrow(f"allocations of {sorted(unseen)} lie outside what was read")
        locks = IntervalIndex(
            (lk.interval.start_millis, lk.interval.end_millis, lk)
            for lk in map(lock_from_row, state.of(LOCK))
        )
        rows = ChunkRows(
            state.of(SEGMENT) + state.of(PENDING),
            unused=unused_ids(lockbox.store, datasource, [r.interval for r in requests]),
        )
        chunks: dict[tuple[tuple[int, int], str], ChunkSlot] = {}
        changes = expired_lock_deletes(state, at)
        results = []
        for req in requests:
            known = pending.get(req.key)
            if known is not None:
                if not known.segment_id.interval.contains(req.interval):
                    # As Druid: a (sequence, previous id) pair allocates in one interval only;
                    # handing back the id of another interval would misplace the rows.
                    raise SpecError(
                        f"sequence {req.sequence_name!r} after {req.previous_id or 'its start'}"
                        f" already allocated {known.segment_id}, not in {req.interval}; a "
                        "sequence's next request must name its previous id"
                    )
                results.append(known)
                continue
            found = chunk_for(rows, req.interval, overwrite_version, at, joins=req.joins_chunk)
            # Requests of finer intervals can land in one coarser chunk (an append by HOUR
            # into a DAY chunk): they share its partition counter.
            chunk = chunks.setdefault((found.interval.key, found.version), found)
            sid = SegmentId(datasource, chunk.interval, chunk.version, chunk.next_partition)
            check_space(sid.partition_num, overwrite_version is not None)
            chunk.next_partition += 1
            lock_request = LockRequest(
                group_id,
                task_id,
                datasource,
                chunk.interval,
                # An append's lock lets a concurrent REPLACE (compaction) go on; a minor
                # compaction's output ids are its own, exclusively.
                LockType.EXCLUSIVE if overwrite_version is not None else LockType.APPEND,
                LockGranularity.SEGMENT,
                priority,
                chunk.version,
                sid.partition_num,
            )
            verdict = decide_lock(
                lock_request,
                locks.overlapping(chunk.interval.start_millis, chunk.interval.end_millis),
                existing_versions=(),
                now_millis=at,
                lease_millis=lockbox.lease_ms,
            )
            if verdict.granted is None:
                raise refused("allocate in", datasource, chunk.interval, verdict.conflicting)
            granted = verdict.granted
            locks.add(granted.interval.start_millis, granted.interval.end_millis, granted)
            entry = PendingSegment(
                sid, req.sequence_name, req.previous_id, group_id, chunk.num_core_partitions
            )
            pending[req.key] = entry
            results.append(entry)
            changes.append(Change("insert", pending_row(entry, now_ms=at)))
            changes.append(Change("upsert", lock_row(granted, now_ms=at)))
            for revoked in verdict.revoke:
                changes.append(
                    Change("upsert", lock_row(replace(revoked, revoked=True), now_ms=at))
                )
        if any(ch.row["kind"] == PENDING for ch in changes):  # new ids: their locks' lease
            lease = lease_row(datasource, group_id, expires_ms=at + lockbox.lease_ms, now_ms=at)
            changes.append(Change("upsert", lease))
        return Decision(changes, results)

    return transact(
        lockbox.store,
        datasource,
        decide,
        operation="allocate",
        condition=condition,
        scope=scope,
        policy=lockbox.retry,
    )


def refused(
    what: str, datasource: str, interval: Interval, conflicting: Sequence[TaskLock]
) -> LockRefused:
    """The refusal of a new segment id in ``interval``, naming the locks that hold it."""
    holders = ", ".join(
        f"{lk.group_id} ({lk.lock_type.value} {lk.granularity.value}, priority {lk.priority})"
        for lk in conflicting
    )
    return LockRefused(
        f"cannot {what} {datasource} {interval}: held by {holders}", conflicting=tuple(conflicting)
    )


def check_space(partition_num: int, overwrite: bool) -> None:
    high = NON_ROOT_GENERATION_PARTITION_ID_MAX if overwrite else FIRST_GENERATION_PARTITION_ID_MAX
    if partition_num > high:
        raise SpecError(f"chunk is out of partition ids: {partition_num} > {high}")


class ChunkRows:
    """The segment and pending rows a decision read, by chunk (interval, then version), to
    answer :func:`chunk_for` without scanning them: HOUR appends into a DAY chunk of
    thousands of segments asked the same question of every row once per hour (an append's
    publish spent more time there than in its commit while compaction ran). ``unused`` is
    what :func:`~segmentlake.metadata.lockbox.unused_ids` found in the decision's intervals,
    required so that no caller forgets the ids unused segments keep (None: there are none)."""

    __slots__ = ("_by_interval", "_index", "_slots", "_unused")

    def __init__(self, rows: Iterable[Row], *, unused: UnusedIds | None) -> None:
        by_interval: dict[tuple[int, int], dict[str, list[Row]]] = {}
        for row in rows:
            versions = by_interval.setdefault((row["start_ms"], row["end_ms"]), {})
            versions.setdefault(row["version"], []).append(row)
        self._by_interval = by_interval
        # Unused segments choose no chunk and no core partitions, but their ids stay taken.
        self._unused = unused
        # In the order rows first named each interval: ties between chunks resolve as they
        # would over the rows themselves.
        self._index = IntervalIndex((s, e, (s, e)) for s, e in by_interval)
        self._slots: dict[tuple[tuple[int, int], str, bool], tuple[int, int]] = {}

    def overlapping(self, interval: Interval) -> list[tuple[int, int]]:
        """The distinct chunk intervals that share an instant with ``interval``."""
        return self._index.overlapping(interval.start_millis, interval.end_millis)

    def newest_version(self, span: tuple[int, int]) -> str:
        """The highest version among the rows of chunk interval ``span``."""
        return max(self._by_interval[span])

    def slot(self, interval: Interval, version: str, overwrite: bool) -> ChunkSlot:
        """The chunk ``(interval, version)`` with its next free id and core partitions."""
        key = (interval.key, version, overwrite)
        found = self._slots.get(key)
        if found is None:
            rows = self._by_interval.get(interval.key, {}).get(version, [])
            chunk = (*interval.key, version)
            unused = self._unused
            if overwrite:
                low, high = (
                    NON_ROOT_GENERATION_PARTITION_ID_MIN,
                    NON_ROOT_GENERATION_PARTITION_ID_MAX,
                )
                taken = [r["partition_num"] for r in rows if low <= r["partition_num"] <= high]
                if unused is not None and chunk in unused.last_overwrite:
                    taken.append(unused.last_overwrite[chunk])
                first = max(taken, default=low - 1) + 1
            else:
                first = first_free_root_partition(rows)
                if unused is not None:
                    first = max(first, unused.next_root.get(chunk, 0))
            found = self._slots[key] = (first, _core_partitions(rows))
        return ChunkSlot(interval, version, *found)


def chunk_for(
    chunks: ChunkRows,
    interval: Interval,
    overwrite_version: str | None,
    at: int,
    *,
    joins: bool = False,
) -> ChunkSlot:
    """The chunk a new segment of ``interval`` goes into, and its next free partition id.

    A request that ``joins`` an existing chunk it was written for gets
    :class:`ChunkLayoutChanged` when no chunk holds its interval any more (the append then
    writes by bucket): a new chunk there would be coarser than the spec's, or, where finer
    chunks took its place, a newer version over all of them. A chunk that still holds it but
    that newer, finer chunks overshadow is joined as any bucket joins it: the publish copies
    the segment into them (:mod:`~segmentlake.metadata.upgrade`)."""
    if overwrite_version is not None:
        return chunks.slot(interval, overwrite_version, True)
    spans = chunks.overlapping(interval)
    containing = [s for s in spans if s[0] <= interval.start_millis and s[1] >= interval.end_millis]
    if containing:
        # Appends join the existing chunk that holds this interval, in its highest version.
        best = max(containing, key=chunks.newest_version)
        return chunks.slot(Interval.of_millis(*best), chunks.newest_version(best), False)
    if joins:
        raise ChunkLayoutChanged(f"no chunk holds {interval} any more")
    if spans:
        raise SpecError(
            f"cannot append into {interval}: it overlaps existing chunks "
            f"{sorted({str(Interval.of_millis(*s)) for s in spans})} "
            "of another segment granularity; append with the existing granularity or overwrite"
        )
    return chunks.slot(interval, next_version((), at), False)


def _core_partitions(rows: list[Row]) -> int:
    core = 0
    for r in rows:
        if r["kind"] == SEGMENT and r["partition_num"] < NON_ROOT_GENERATION_PARTITION_ID_MIN:
            core = max(core, int(r["core_partitions"] or 0))
        elif r["kind"] == PENDING:
            core = max(core, int(r["seq"] or 0))
    return core
