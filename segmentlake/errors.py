"""The one exception hierarchy of segmentlake.

Every error segmentlake raises on purpose is a :class:`SegmentLakeError`. Bad input is a
:class:`SpecError` (also a :class:`ValueError`, so generic callers still catch it). The commit
errors follow pyiceberg's split between "surely did not land" (:class:`CommitConflict`) and
"may or may not have landed" (:class:`CommitStateUnknown`): only the first allows cleaning up
staged files.
"""

from __future__ import annotations

__all__ = [
    "BadRowsError",
    "ClassicSessionRequired",
    "CommitConflict",
    "CommitStateUnknown",
    "DatasourceNotFound",
    "EnvironmentSetupError",
    "LockRefused",
    "MetadataVersionError",
    "NotFound",
    "SegmentLakeError",
    "SpecError",
    "TaskAlreadyPublished",
    "WarehouseNotFound",
    "first_line",
]


class SegmentLakeError(Exception):
    """Root of every error segmentlake raises on purpose."""


class SpecError(SegmentLakeError, ValueError):
    """Malformed input: a spec, interval, segment id, shard spec, row or request.

    The message names what is wrong and what would be right.
    """


class BadRowsError(SpecError):
    """An ingestion met more unparseable rows than its ``max_parse_exceptions`` allows; the
    message shows the first offending rows and ``report`` the task's row counts."""

    def __init__(self, message: str, *, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class TaskAlreadyPublished(SpecError):
    """An ingestion was given the id of a task that already succeeded: its segments are
    published, so running it again would ingest its rows twice. ``report`` is that task's
    report (a replayed streaming batch is skipped on it)."""

    def __init__(self, message: str, *, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class NotFound(SegmentLakeError, LookupError):
    """What was asked for does not exist (the message names it and how to create it)."""


class WarehouseNotFound(NotFound):
    """A path holds no segmentlake warehouse (``Lake.create`` or a first write makes one)."""


class DatasourceNotFound(NotFound):
    """A warehouse holds no datasource of that name (an ingestion creates it)."""


class LockRefused(SegmentLakeError):
    """A lock request conflicts with locks held by others (named in the message)."""

    def __init__(self, message: str, *, conflicting: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.conflicting = conflicting


class CommitConflict(SegmentLakeError):
    """A metadata commit lost its race (after bounded retries) and surely did not land."""


class CommitStateUnknown(SegmentLakeError):
    """A commit may or may not have landed; staged data must not be cleaned up."""


class MetadataVersionError(SegmentLakeError):
    """The warehouse was written by a newer, unknown metadata schema version."""


class EnvironmentSetupError(SegmentLakeError):
    """The local environment cannot run segmentlake (missing JDK, unresolvable jars, ...)."""


class ClassicSessionRequired(SegmentLakeError):
    """An operation needs a classic SparkSession (a driver JVM in this process) and was given
    a Spark Connect session. ``operation`` names it and ``reason`` says what it needs from the
    JVM; everything else segmentlake does works over Connect."""

    def __init__(self, operation: str, reason: str) -> None:
        super().__init__(
            f"{operation} needs a classic SparkSession (a driver JVM in this process), not "
            f"Spark Connect: {reason}"
        )
        self.operation = operation
        self.reason = reason


def first_line(err: BaseException) -> str:
    """The first line of an error's message (Spark's run to pages), or its type's name."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
