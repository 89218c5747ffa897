"""The one place where Delta's concurrency exceptions are recognised.

Delta's Python exceptions share no common base class (each subclasses ``PySparkException``
directly), and calls through py4j may surface them as ``Py4JJavaError`` wrapping the Java
class, so both forms are checked here and nowhere else.
"""

from __future__ import annotations

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

__all__ = ["CONFLICT_EXCEPTIONS", "is_commit_conflict"]

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
