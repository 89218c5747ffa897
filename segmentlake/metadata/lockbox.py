"""The lockbox on Delta: grant, renew, revoke and release task locks with conditional commits.

The rules are the pure ones of :mod:`segmentlake.core.locks`; this module reads the locks,
used segments and pending allocations overlapping the requested intervals (the scope of the
transaction: requests on other time chunks never conflict with it), applies the rules and
commits the outcome — the new locks, the revocations and the group's lease — in one commit.
Expired locks found on the way are deleted in that same commit.

A group's locks live as long as its *lease* row (:func:`~segmentlake.metadata.records.
lease_row`): a heartbeat renews every lock of the group with a one-row commit, however many
locks the group holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.interval import Interval
from segmentlake.core.locks import LockRequest, TaskLock, decide_lock
from segmentlake.core.shard_spec import NON_ROOT_GENERATION_PARTITION_ID_MIN
from segmentlake.errors import LockRefused
from segmentlake.metadata.records import (
    LEASE,
    LOCK,
    PENDING,
    SEGMENT,
    Row,
    lease_key,
    lease_row,
    lock_from_row,
    lock_row,
)
from segmentlake.metadata.scope import NOTHING, Scope
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, Requirement, RetryPolicy, transact

__all__ = ["LockResult", "Lockbox", "now_ms"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LockResult:
    """``try_lock``'s answer: the lock, or the live holders that refused it."""

    lock: TaskLock | None
    conflicting: tuple[TaskLock, ...] = ()
    revoked: tuple[TaskLock, ...] = ()
    locks: tuple[TaskLock, ...] = ()

    def __post_init__(self) -> None:
        if self.lock is not None and not self.locks:
            object.__setattr__(self, "locks", (self.lock,))

    @property
    def granted(self) -> bool:
        return self.lock is not None


def overlapping(interval: Interval) -> pc.Expression:
    """Rows whose ``[start_ms, end_ms)`` overlaps ``interval``."""
    return (pc.field("start_ms") < interval.end_millis) & (
        pc.field("end_ms") > interval.start_millis
    )


def _overlaps(row: dict[str, object], interval: Interval) -> bool:
    start, end = row["start_ms"], row["end_ms"]
    return (
        isinstance(start, int)
        and isinstance(end, int)
        and start < interval.end_millis
        and end > interval.start_millis
    )


def in_use() -> pc.Expression:
    """Rows that are not unused segments (locks and pending rows have no used flag)."""
    return pc.field("used").is_null() | pc.field("used")


@dataclass(frozen=True)
class UnusedIds:
    """The ids the unused segments of the chunks a decision touches keep taken (as in
    Druid, allocation looks at unused segments too): per chunk ``(start ms, end ms,
    version)``, the first root partition past them and the root ranges of their overwrite
    segments, and their highest overwrite partition. A new segment under an unused one's id
    was dropped by the insert-if-absent (its append reported success), and marking the old
    one used again brought back other rows under that id. Aggregated in Arrow: a
    compaction's cleanup leaves thousands of unused records in the days a stream appends to."""

    datasource: str
    next_root: Mapping[tuple[int, int, str], int]
    last_overwrite: Mapping[tuple[int, int, str], int]
    records: pa.Table

    def rows_of(self, ids: Collection[str]) -> list[Row]:
        """The unused records among ``ids``, as row dicts."""
        if not self.records.num_rows or not ids:
            return []
        named = pc.is_in(self.records["id"], value_set=pa.array(list(ids), pa.string()))
        rows = self.records.filter(named).to_pylist()
        return [{**row, "datasource": self.datasource} for row in rows]


def unused_ids(store: MetadataStore, datasource: str, intervals: Sequence[Interval]) -> UnusedIds:
    """The :class:`UnusedIds` of the unused segment records overlapping ``intervals``, as
    this process last read them: call it inside a decision whose read covered
    ``intervals`` (no I/O; the transaction's conflict check covers what it returns)."""
    table = store.unused_last_read(datasource, SEGMENT, span_scope(intervals))
    if not table.num_rows:
        return UnusedIds(datasource, {}, {}, table)
    part = table["partition_num"]
    root = pc.less(part, NON_ROOT_GENERATION_PARTITION_ID_MIN)
    no_partition = pa.scalar(None, pa.int32())
    ids = pa.table(
        {
            "start_ms": table["start_ms"],
            "end_ms": table["end_ms"],
            "version": table["version"],
            "next_root": pc.if_else(root, pc.add(part, 1), pc.fill_null(table["root_end"], 0)),
            "overwrite": pc.if_else(root, no_partition, part),
        }
    )
    grouped = ids.group_by(["start_ms", "end_ms", "version"]).aggregate(
        [("next_root", "max"), ("overwrite", "max")]
    )
    keys = list(
        zip(
            grouped["start_ms"].to_pylist(),
            grouped["end_ms"].to_pylist(),
            grouped["version"].to_pylist(),
            strict=True,
        )
    )
    next_root = dict(zip(keys, grouped["next_root_max"].to_pylist(), strict=True))
    overwrites = zip(keys, grouped["overwrite_max"].to_pylist(), strict=True)
    last_overwrite = {k: p for k, p in overwrites if p is not None}
    return UnusedIds(datasource, next_root, last_overwrite, table)


def live_locks(state: PartitionState, at_ms: int) -> list[TaskLock]:
    return [lk for lk in map(lock_from_row, state.of(LOCK)) if lk.is_live(at_ms)]


def expired_lock_deletes(state: PartitionState, at_ms: int) -> list[Change]:
    """Deletes for locks past their lease or revoked (they are released by definition)."""
    return [
        Change("delete", row) for row in state.of(LOCK) if not lock_from_row(row).is_live(at_ms)
    ]


def span_scope(intervals: Sequence[Interval]) -> Scope:
    """The time ranges of ``intervals``: what a lock, allocate or publish decision reads."""
    return Scope.of((i.start_millis, i.end_millis) for i in intervals)


def group_scope(store: MetadataStore, datasource: str, group_id: str) -> Scope:
    """The time ranges of the group's locks and its lease: what a decision about the group's
    own locks reads. (The group does not take locks while it decides about them.)"""
    locks = store.arrow(
        datasource,
        pc.field("group_id") == group_id,
        kinds=[LOCK],
        columns=("start_ms", "end_ms"),
        fresh=False,
    )
    ranges = zip(locks["start_ms"].to_pylist(), locks["end_ms"].to_pylist(), strict=True)
    return Scope.of(list(ranges), keys=[lease_key(group_id)])


class Lockbox:
    """Task locks of one warehouse (Druid's TaskLockbox, persisted in the metadata table)."""

    def __init__(
        self, store: MetadataStore, *, lease_ms: int = 60_000, retry: RetryPolicy | None = None
    ) -> None:
        self.store = store
        self.lease_ms = lease_ms
        self.retry = retry or RetryPolicy()

    def try_lock(self, request: LockRequest) -> LockResult:
        """Grant ``request`` now (revoking strictly lower-priority conflicting locks) or refuse
        it, naming the holders in the way. Re-requesting a held lock renews it."""
        return self.try_lock_all([request])

    def try_lock_all(
        self,
        requests: Sequence[LockRequest],
        *,
        requirements: Sequence[Requirement] = (),
        reads: pc.Expression | None = None,
        extra_scope: Scope = NOTHING,
        extra_changes: Callable[[PartitionState], Sequence[Change]] | None = None,
    ) -> LockResult:
        """Grant every request of one group or none, in one commit; the time-chunk locks among
        them share one version, above every version in their intervals (an overwrite's one
        lock per chunk). ``LockResult.lock`` is the first lock, ``locks`` all of them. Each
        of ``requirements`` checks the state the grant is decided on (it sees the used
        segments and pending allocations overlapping the requests, and the rows ``reads``
        matches) and raises to refuse; ``extra_changes`` of that state join the grant's
        commit (e.g. the compaction manager's reservation record)."""
        if not requests:
            raise LockRefused("no lock requested")
        groups = {(r.datasource, r.group_id) for r in requests}
        if len(groups) != 1:
            raise LockRefused(f"locks taken together must be of one datasource and group: {groups}")
        datasource = requests[0].datasource
        group_id = requests[0].group_id
        scope = span_scope([r.interval for r in requests])
        condition = (pc.field("kind") == LOCK) | (
            pc.field("kind").isin([SEGMENT, PENDING]) & in_use()
        )
        if reads is not None:
            condition = condition | reads

        def decide(state: PartitionState) -> Decision[LockResult]:
            for requirement in requirements:
                requirement(state)
            at = now_ms()
            # Same versions and same instant for every request: one shared next version.
            versions = [r["version"] for r in state.of(SEGMENT) + state.of(PENDING)]
            locks = [lock_from_row(r) for r in state.of(LOCK)]
            granted: list[TaskLock] = []
            revoked: list[TaskLock] = []
            for request in requests:
                decision = decide_lock(
                    request,
                    locks,
                    existing_versions=versions,
                    now_millis=at,
                    lease_millis=self.lease_ms,
                )
                if decision.granted is None:
                    return Decision((), LockResult(None, conflicting=decision.conflicting))
                granted.append(decision.granted)
                revoked += decision.revoke
            changes = expired_lock_deletes(state, at)
            changes += [Change("upsert", lock_row(lk, now_ms=at)) for lk in granted]
            lease = lease_row(datasource, group_id, expires_ms=at + self.lease_ms, now_ms=at)
            changes.append(Change("upsert", lease))
            changes += [
                Change("upsert", lock_row(replace(lk, revoked=True), now_ms=at)) for lk in revoked
            ]
            if extra_changes is not None:
                changes += extra_changes(state)
            for lk in revoked:
                logger.warning(
                    "lock %s of group %s revoked by %s (priority %d > %d)",
                    lk.lock_id,
                    lk.group_id,
                    requests[0].group_id,
                    requests[0].priority,
                    lk.priority,
                )
            return Decision(
                changes, LockResult(granted[0], revoked=tuple(revoked), locks=tuple(granted))
            )

        return transact(
            self.store,
            datasource,
            decide,
            operation="lock",
            condition=condition,
            scope=scope | extra_scope | Scope.of(keys=[lease_key(group_id)]),
            policy=self.retry,
        )

    def lock(
        self, request: LockRequest, *, timeout_s: float = 30.0, poll_s: float = 0.5
    ) -> TaskLock:
        """Like :meth:`try_lock`, but wait up to ``timeout_s`` for conflicting holders to
        release (or their leases to run out); raise :class:`LockRefused` after that."""
        return self.lock_all([request], timeout_s=timeout_s, poll_s=poll_s)[0]

    def lock_all(
        self, requests: Sequence[LockRequest], *, timeout_s: float = 30.0, poll_s: float = 0.5
    ) -> tuple[TaskLock, ...]:
        """:meth:`try_lock_all`, waiting up to ``timeout_s`` for conflicting holders."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.try_lock_all(requests)
            if result.lock is not None:
                return result.locks
            if time.monotonic() >= deadline:
                first = requests[0]
                raise LockRefused(
                    f"lock on {first.datasource} {first.interval}"
                    + (f" (and {len(requests) - 1} more intervals)" if len(requests) > 1 else "")
                    + f" for group {first.group_id!r} refused after {timeout_s:.0f}s; held by "
                    + ", ".join(
                        f"{lk.group_id} ({lk.lock_type.value}, priority "
                        f"{lk.priority}, until {lk.expires_millis})"
                        for lk in result.conflicting
                    ),
                    conflicting=result.conflicting,
                )
            time.sleep(poll_s)

    def heartbeat(self, datasource: str, group_id: str) -> list[TaskLock]:
        """Extend the group's lease — and so every lock and reservation it holds — with one
        one-row commit; return its live locks (empty: all lost). A lease that has run out
        stays out: its holder is presumed dead and others may have taken over."""

        def decide(state: PartitionState) -> Decision[bool]:
            at = now_ms()
            leases = [r for r in state.of(LEASE) if r["id"] == group_id]
            if not leases or (leases[0]["expires_ms"] or 0) <= at:
                return Decision((), False)
            renewed = lease_row(datasource, group_id, expires_ms=at + self.lease_ms, now_ms=at)
            return Decision([Change("upsert", renewed)], True)

        alive = transact(
            self.store,
            datasource,
            decide,
            operation="heartbeat",
            condition=(pc.field("kind") == LEASE) & (pc.field("id") == group_id),
            scope=Scope.of(keys=[lease_key(group_id)]),
            policy=self.retry,
        )
        if not alive:
            return []
        at = now_ms()
        return [lk for lk in self.locks(datasource) if lk.group_id == group_id and lk.is_live(at)]

    def release(self, datasource: str, group_id: str, *, interval: Interval | None = None) -> int:
        """Release the group's locks (those overlapping ``interval`` if given; with its lease
        when all go); return how many were released."""
        condition = ((pc.field("kind") == LOCK) & (pc.field("group_id") == group_id)) | (
            (pc.field("kind") == LEASE) & (pc.field("id") == group_id)
        )

        def decide(state: PartitionState) -> Decision[int]:
            locks = state.of(LOCK)
            gone = [r for r in locks if interval is None or _overlaps(r, interval)]
            changes = [Change("delete", r) for r in gone]
            if len(gone) == len(locks):
                changes += [Change("delete", r) for r in state.of(LEASE)]
            return Decision(changes, len(gone))

        return transact(
            self.store,
            datasource,
            decide,
            operation="unlock",
            condition=condition,
            scope=group_scope(self.store, datasource, group_id),
            policy=self.retry,
        )

    def locks(self, datasource: str, *, include_expired: bool = False) -> list[TaskLock]:
        """The datasource's locks (live ones only unless ``include_expired``)."""
        rows = self.store.rows(datasource, kinds=[LOCK])
        at = now_ms()
        found = sorted(map(lock_from_row, rows), key=lambda lk: (lk.interval, lk.lock_id))
        return found if include_expired else [lk for lk in found if lk.is_live(at)]
