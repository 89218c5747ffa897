"""Run a conditional metadata change as one Delta commit, with bounded, jittered retries.

The shape follows pyiceberg's transaction retry: read the current state, decide (pure), commit
guarded by the state's version; on a lost race re-read and decide again. A decision function
raising (e.g. :class:`~segmentlake.errors.LockRefused`) aborts without committing.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from segmentlake.errors import CommitConflict, CommitStateUnknown
from segmentlake.metadata.conflicts import is_commit_conflict
from segmentlake.metadata.store import Change, MetadataStore, PartitionState

__all__ = ["Decision", "RetryPolicy", "transact"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


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


@dataclass(frozen=True, slots=True)
class TransactionStats:
    attempts: int
    elapsed_s: float


def transact(
    store: MetadataStore,
    datasource: str,
    decide: Callable[[PartitionState], Decision[T]],
    *,
    operation: str,
    condition: Any = None,
    policy: RetryPolicy | None = None,
) -> T:
    """Read ``datasource``'s state (rows matching ``condition``), ``decide``, commit; retry on
    a lost race. Raises :class:`CommitConflict` once the retries are spent."""
    policy = policy or RetryPolicy()
    started = time.monotonic()
    commit_id = f"{operation}:{uuid.uuid4()}"
    for attempt in range(policy.max_attempts):
        state = store.read(datasource, condition)
        decision = decide(state)
        if not decision.changes:
            return decision.result
        try:
            landed = store.commit(datasource, state.guard, decision.changes, commit_id=commit_id)
        except Exception as e:
            if not is_commit_conflict(e):
                landed = _landed_despite(store, commit_id, operation, datasource, e)
                if landed:
                    return decision.result
            logger.warning(
                "%s on %s lost a commit race (attempt %d): %s",
                operation,
                datasource,
                attempt + 1,
                type(e).__name__,
            )
            landed = False
        if landed:
            logger.debug(
                "%s on %s committed after %d attempt(s)", operation, datasource, attempt + 1
            )
            return decision.result
        if time.monotonic() - started > policy.timeout_s:
            break
        time.sleep(policy.delay(attempt))
    raise CommitConflict(
        f"{operation} on datasource {datasource!r} lost the commit race "
        f"{policy.max_attempts} times in {time.monotonic() - started:.1f}s; "
        "too many concurrent metadata changes on this datasource — retry later"
    )


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
