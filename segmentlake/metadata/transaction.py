"""Run a conditional metadata change as one commit, with bounded, jittered retries.

The shape follows pyiceberg's transaction retry: read the current state within a scope,
decide (pure), commit on top of the version the state was read at. The store rebases a commit
over winners that wrote nothing the transaction read (:mod:`segmentlake.metadata.store`);
only a real conflict comes back here, and the transaction reads and decides again after a
jittered backoff. A decision function raising (e.g. :class:`~segmentlake.errors.LockRefused`)
aborts without committing.
"""

from __future__ import annotations

import contextvars
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow.compute as pc

from segmentlake.core.collection import collection_paused
from segmentlake.errors import CommitConflict, CommitStateUnknown, SegmentLakeError
from segmentlake.metadata.records import SEGMENT
from segmentlake.metadata.scope import EVERYTHING, Scope
from segmentlake.metadata.store import (
    ANNOUNCE_AFTER_LOSSES,
    Change,
    ChangeBatch,
    Conflict,
    MetadataStore,
    PartitionState,
    ScopeTooNarrow,
)
from segmentlake.metadata.visible_table import sync_visible_table, syncs_are_deferred

__all__ = ["CommitLog", "Decision", "Requirement", "RetryPolicy", "recording_commits", "transact"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

# A precondition a decision checks on the state it is made on: raises (e.g. LockRefused) when
# the state does not allow the change (pyiceberg's commit requirements).
Requirement = Callable[[PartitionState], None]


@dataclass
class CommitLog:
    """The metadata commits a block made (see :func:`recording_commits`): per operation, how
    many landed and how many conflicts made it decide again."""

    commits: dict[str, int]
    retries: dict[str, int]

    def record(self, operation: str, *, committed: bool, losses: int) -> None:
        if committed:
            self.commits[operation] = self.commits.get(operation, 0) + 1
        if losses:
            self.retries[operation] = self.retries.get(operation, 0) + losses


_recording: contextvars.ContextVar[CommitLog | None] = contextvars.ContextVar(
    "segmentlake_commit_log", default=None
)


@contextmanager
def recording_commits() -> Iterator[CommitLog]:
    """Count the commits and retries of every :func:`transact` in the block (this thread)."""
    log = CommitLog({}, {})
    token = _recording.set(log)
    try:
        yield log
    finally:
        _recording.reset(token)


def _record(operation: str, *, committed: bool, losses: int) -> None:
    log = _recording.get()
    if log is not None:
        log.record(operation, committed=committed, losses=losses)


@dataclass(frozen=True, slots=True)
class Decision(Generic[T]):
    """What a decision function returns: the row changes to commit (none: commit nothing) and
    the result handed back to the caller once they landed."""

    changes: Sequence[Change | ChangeBatch]
    result: T


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Jittered backoff between decisions a conflict undid, growing for the first
    ``growth_attempts`` attempts only. A backoff that keeps growing starves the writer that
    keeps losing: the winner comes back at once while the loser sleeps longer each time
    (docs/decisions.md, "Measurements behind the code"). With the same
    bounded window for everybody, each round's winner is a fair draw."""

    max_attempts: int = 60
    base_delay_s: float = 0.01
    max_delay_s: float = 1.0
    timeout_s: float = 120.0
    growth_attempts: int = 3

    def delay(self, attempt: int) -> float:
        window = self.base_delay_s * 2 ** min(attempt, self.growth_attempts)
        return random.uniform(0, min(self.max_delay_s, window))


def transact(
    store: MetadataStore,
    datasource: str,
    decide: Callable[[PartitionState], Decision[T]],
    *,
    operation: str,
    condition: pc.Expression | None = None,
    scope: Scope | Callable[[], Scope] = EVERYTHING,
    policy: RetryPolicy | None = None,
) -> T:
    """Read ``datasource``'s rows within ``scope`` (matching ``condition``), ``decide``,
    commit; decide again when a concurrent commit changed what was read. ``scope`` may be a
    function (called again when a decision raises :class:`ScopeTooNarrow`; a fixed scope
    then widens to everything). Raises
    :class:`CommitConflict` once the retries are spent, :class:`CommitStateUnknown` when a
    commit failed in a way that leaves its outcome unknown and the log cannot tell."""
    # A bulk decision (10^5 segments) makes many objects and no cyclic garbage.
    with collection_paused():
        return _transact(store, datasource, decide, operation, condition, scope, policy)


def _transact(
    store: MetadataStore,
    datasource: str,
    decide: Callable[[PartitionState], Decision[T]],
    operation: str,
    condition: pc.Expression | None,
    scope: Scope | Callable[[], Scope],
    policy: RetryPolicy | None,
) -> T:
    policy = policy or RetryPolicy()
    store.create()  # the first write creates the warehouse's metadata table
    started = time.monotonic()
    commit_id = f"{operation}:{uuid.uuid4()}"
    losses = 0
    current = scope() if callable(scope) else scope
    pause = store.courtesy(datasource, current, _typical_s.get(operation, 0.02))
    if pause:
        time.sleep(pause)
    for attempt in range(policy.max_attempts):
        attempt_started = time.monotonic()
        state = store.read(datasource, condition, scope=current)
        try:
            decision = decide(state)
        except ScopeTooNarrow as e:
            logger.debug("%s on %s: %s; reading wider", operation, datasource, e)
            current = scope() if callable(scope) and attempt < 2 else EVERYTHING
            continue
        if not decision.changes:
            _record(operation, committed=False, losses=losses)
            return decision.result
        try:
            version = store.commit(
                state, decision.changes, commit_id=commit_id, operation=operation
            )
        except Conflict as e:
            losses += 1
            if losses == ANNOUNCE_AFTER_LOSSES:
                store.announce_waiting(datasource, current, commit_id)
            logger.info("%s on %s: %s; deciding again", operation, datasource, e)
            if time.monotonic() - started > policy.timeout_s:
                break
            time.sleep(policy.delay(attempt))
            continue
        except SegmentLakeError:
            raise
        except Exception as e:
            if not _landed_despite(store, commit_id, operation, datasource, state, e):
                raise
            version = None
        elapsed = time.monotonic() - attempt_started
        _typical_s[operation] = 0.8 * _typical_s.get(operation, elapsed) + 0.2 * elapsed
        logger.debug("%s on %s committed (version %s)", operation, datasource, version)
        _record(operation, committed=version is not None, losses=losses)
        if _changes_segments(decision.changes) and not syncs_are_deferred():
            _sync_visible(store, datasource, operation)
        return decision.result
    raise CommitConflict(
        f"{operation} on datasource {datasource!r} had to decide again {losses} times in "
        f"{time.monotonic() - started:.1f}s: too many concurrent changes of what it reads; "
        "retry later"
    )


def _changes_segments(changes: Sequence[Change | ChangeBatch]) -> bool:
    for change in changes:
        if isinstance(change, Change):
            if change.row.get("kind") == SEGMENT:
                return True
        elif pc.any(pc.equal(change.table.column("kind"), SEGMENT)).as_py():
            return True
    return False


def _sync_visible(store: MetadataStore, datasource: str, operation: str) -> None:
    """Bring the visible table along (DESIGN: SQL readers see the timeline). The commit has
    landed whatever happens here: a failure is logged and the next sync catches up."""
    try:
        sync_visible_table(store, datasource)
    except Exception as e:  # the operation succeeded: say so, and why this did not
        logger.warning(
            "%s on %s committed, but its visible table was not brought along (%s: %s); "
            "the next sync of %s catches up",
            operation, datasource, type(e).__name__, e, datasource,
        )  # fmt: skip


# How long one decide-and-commit of each operation takes in this process (a moving average):
# the scale of the courtesy pause.
_typical_s: dict[str, float] = {}


def _landed_despite(
    store: MetadataStore,
    commit_id: str,
    operation: str,
    datasource: str,
    state: PartitionState,
    error: Exception,
) -> bool:
    """A failure that is no conflict (storage, network): True if the commit landed anyway,
    False if it surely did not; CommitStateUnknown if the log cannot tell."""
    try:
        landed = store.table.landed(commit_id, after=state.version)
    except CommitStateUnknown as unknown:
        raise CommitStateUnknown(
            f"{operation} on {datasource!r} failed ({error}) and {unknown}"
        ) from error
    if landed:
        logger.warning(
            "%s on %r raised %s but commit %s landed", operation, datasource, error, commit_id
        )
    return landed
