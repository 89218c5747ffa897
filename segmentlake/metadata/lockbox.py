"""The lockbox on Delta: grant, renew, revoke and release task locks with conditional commits.

The rules are the pure ones of :mod:`segmentlake.core.locks`; this module reads the
datasource's locks (and the versions of used segments and pending allocations in the
requested interval), applies the rules and commits the outcome — the new lock plus the
revocations — in one commit. Expired locks found on the way are deleted in that same commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow.compute as pc

from segmentlake.core.interval import Interval
from segmentlake.core.locks import LockRequest, TaskLock, decide_lock
from segmentlake.errors import LockRefused
from segmentlake.metadata.records import LOCK, PENDING, SEGMENT, lock_from_row, lock_row
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


def in_use() -> pc.Expression:
    """Rows that are not unused segments (locks and pending rows have no used flag)."""
    return pc.field("used").is_null() | pc.field("used")


def live_locks(state: PartitionState, at_ms: int) -> list[TaskLock]:
    return [lk for lk in map(lock_from_row, state.of(LOCK)) if lk.is_live(at_ms)]


def expired_lock_deletes(state: PartitionState, at_ms: int) -> list[Change]:
    """Deletes for locks past their lease or revoked (they are released by definition)."""
    return [
        Change("delete", row) for row in state.of(LOCK) if not lock_from_row(row).is_live(at_ms)
    ]


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
        lo = min(r.interval.start_millis for r in requests)
        hi = max(r.interval.end_millis for r in requests)
        span = Interval.of_millis(lo, hi)
        condition = (pc.field("kind") == LOCK) | (
            pc.field("kind").isin([SEGMENT, PENDING]) & overlapping(span) & in_use()
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
        """Extend the leases of the group's live locks, and of its other leased rows (a
        compaction's reservation record) with them; return the locks (empty: all lost)."""

        def decide(state: PartitionState) -> Decision[list[TaskLock]]:
            at = now_ms()
            mine = [lk for lk in live_locks(state, at) if lk.group_id == group_id]
            renewed = [replace(lk, expires_millis=at + self.lease_ms) for lk in mine]
            changes = [Change("upsert", lock_row(lk, now_ms=at)) for lk in renewed]
            if mine:  # a lost group's records stay expired: their holder is presumed dead
                changes += [
                    Change("upsert", {**row, "expires_ms": at + self.lease_ms, "updated_ms": at})
                    for row in state.rows
                    if row["kind"] != LOCK
                    and row["expires_ms"] is not None
                    and row["expires_ms"] > at
                ]
            return Decision(changes, renewed)

        return transact(
            self.store,
            datasource,
            decide,
            operation="heartbeat",
            condition=(pc.field("group_id") == group_id)
            & ((pc.field("kind") == LOCK) | pc.field("expires_ms").is_valid()),
            policy=self.retry,
        )

    def release(self, datasource: str, group_id: str, *, interval: Interval | None = None) -> int:
        """Release the group's locks (those overlapping ``interval`` if given); return how
        many were released."""
        condition = (pc.field("kind") == LOCK) & (pc.field("group_id") == group_id)
        if interval is not None:
            condition = condition & overlapping(interval)

        def decide(state: PartitionState) -> Decision[int]:
            rows = state.of(LOCK)
            return Decision([Change("delete", r) for r in rows], len(rows))

        return transact(
            self.store,
            datasource,
            decide,
            operation="unlock",
            condition=condition,
            policy=self.retry,
        )

    def locks(self, datasource: str, *, include_expired: bool = False) -> list[TaskLock]:
        """The datasource's locks (live ones only unless ``include_expired``)."""
        rows = self.store.rows(datasource, pc.field("kind") == LOCK)
        at = now_ms()
        found = sorted(map(lock_from_row, rows), key=lambda lk: (lk.interval, lk.lock_id))
        return found if include_expired else [lk for lk in found if lk.is_live(at)]
