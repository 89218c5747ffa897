"""The one place where Delta's concurrency exceptions are recognised.

Delta's Python exceptions share no common base class (each subclasses ``PySparkException``
directly), and calls through py4j may surface them as ``Py4JJavaError`` wrapping the Java
class, so both forms are checked here and nowhere else.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)

__all__ = ["CONFLICT_EXCEPTIONS", "is_commit_conflict", "retrying_table_commit"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
TABLE_COMMIT_ATTEMPTS = 5

CONFLICT_EXCEPTIONS: tuple[type[BaseException], ...] = (
    DeltaConcurrentModificationException,
    ConcurrentWriteException,
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    ConcurrentDeleteDeleteException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
_JAVA_MARKERS = (
    "ConcurrentModificationException",
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DELTA_CONCURRENT",
    "java.nio.file.FileAlreadyExistsException",
)


def is_commit_conflict(error: BaseException) -> bool:
    """True when ``error`` means "a concurrent commit won; re-read and retry"."""
    if isinstance(error, CONFLICT_EXCEPTIONS):
        return True
    text = f"{type(error).__name__}: {error}"
    return any(marker in text for marker in _JAVA_MARKERS)


def retrying_table_commit(
    action: Callable[[], T],
    *,
    what: str,
    also: Sequence[str] = (),
    attempts: int = TABLE_COMMIT_ATTEMPTS,
) -> T:
    """Run ``action`` (a Spark write or DELETE on a datasource table, which plans on the
    latest snapshot at each call) again after a jittered backoff while it loses a commit race
    (:func:`is_commit_conflict`, or an error whose text holds one of ``also``); re-raise
    anything else, or the last conflict after ``attempts``."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as e:
            retryable = is_commit_conflict(e) or any(marker in str(e) for marker in also)
            if attempt == attempts or not retryable:
                raise
            logger.info("%s lost a commit race (%s); retrying", what, type(e).__name__)
            time.sleep(random.uniform(0.1, 0.3) * attempt)
    raise AssertionError("unreachable")
