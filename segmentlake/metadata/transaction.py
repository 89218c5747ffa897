"""Run a conditional metadata change as one Delta commit, with bounded, jittered retries.

The shape follows pyiceberg's transaction retry: read the current state, decide (pure), commit
on top of the version the state was read at; on a lost race re-read and decide again. A
decision function raising (e.g. :class:`~segmentlake.errors.LockRefused`) aborts without committing.
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
from typing import Any, Generic, TypeVar

import pyarrow.compute as pc

from segmentlake.errors import CommitConflict, CommitStateUnknown
from segmentlake.metadata.conflicts import is_commit_conflict
from segmentlake.metadata.store import Change, MetadataStore, PartitionState

__all__ = ["CommitLog", "Decision", "Requirement", "RetryPolicy", "recording_commits", "transact"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

# A precondition a decision checks on the state it is made on: raises (e.g. LockRefused) when
# the state does not allow the change (pyiceberg's commit requirements).
Requirement = Callable[[PartitionState], None]


@dataclass
class CommitLog:
    """The metadata commits a block made (see :func:`recording_commits`): per operation, how
    many landed and how many lost races were retried."""

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

    changes: Sequence[Change]
    result: T


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter."""

    max_attempts: int = 40
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0
    timeout_s: float = 120.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


def transact(
    store: MetadataStore,
    datasource: str,
    decide: Callable[[PartitionState], Decision[T]],
    *,
    operation: str,
    condition: pc.Expression | None = None,
    policy: RetryPolicy | None = None,
) -> T:
    """Read ``datasource``'s state (rows matching ``condition``), ``decide``, commit; retry on
    a lost race. Raises :class:`CommitConflict` once the retries are spent."""
    policy = policy or RetryPolicy()
    store.create()  # the first write creates the warehouse's metadata table
    started = time.monotonic()
    commit_id = f"{operation}:{uuid.uuid4()}"
    losses = 0
    turns = store.turns
    claimed = False
    try:
        for attempt in range(policy.max_attempts):
            if turns.contended(datasource):
                turns.acquire(datasource)
                claimed = True
            else:
                turns.wait(datasource)
            state = store.read(datasource, condition)
            decision = decide(state)
            if not decision.changes:
                _record(operation, committed=False, losses=losses)
                return decision.result
            if _committed(store, state, decision, commit_id, operation):
                logger.debug(
                    "%s on %s committed after %d attempt(s)", operation, datasource, attempt + 1
                )
                _record(operation, committed=True, losses=losses)
                return decision.result
            losses += 1
            turns.lost(datasource)
            if time.monotonic() - started > policy.timeout_s:
                break
            if not claimed:
                time.sleep(policy.delay(attempt))
    finally:
        if claimed:
            turns.release(datasource)
    raise CommitConflict(
        f"{operation} on datasource {datasource!r} lost the commit race "
        f"{losses} times in {time.monotonic() - started:.1f}s; "
        "too many concurrent metadata changes on this datasource — retry later"
    )


def _committed(
    store: MetadataStore,
    state: PartitionState,
    decision: Decision[Any],
    commit_id: str,
    operation: str,
) -> bool:
    """Commit ``decision`` on ``state``: True if it landed, False if a concurrent commit won."""
    try:
        return store.commit(state, decision.changes, commit_id=commit_id)
    except Exception as e:
        if not is_commit_conflict(e) and _landed_despite(
            store, commit_id, operation, state.datasource, e
        ):
            return True
        logger.warning(
            "%s on %s lost a commit race: %s", operation, state.datasource, type(e).__name__
        )
        return False


def _landed_despite(
    store: MetadataStore, commit_id: str, operation: str, datasource: str, error: Exception
) -> bool:
    """A non-conflict failure: True if the commit landed anyway; re-raise if it surely did not;
    CommitStateUnknown if that cannot be told."""
    try:
        landed = store.landed(commit_id)
    except Exception as check_error:
        raise CommitStateUnknown(
            f"{operation} on {datasource!r} failed ({error}) and whether it committed could "
            f"not be checked ({check_error}); commit id {commit_id}"
        ) from error
    if landed:
        logger.warning(
            "%s on %r raised %s but its commit %s landed", operation, datasource, error, commit_id
        )
        return True
    raise error
