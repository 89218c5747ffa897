"""The task-action API: what an ingestion or compaction task asks the metadata for.

Druid's tasks talk to the overlord through *task actions* — lock, allocate a segment id,
publish segments, renew leases. segmentlake's engines use them internally; custom writers (a
streaming sink, a job of your own that writes its rows and publishes them) use them through
``lake.actions``. Users who append, overwrite, read or compact do not need them: they use the
datasource handle (``lake.table("wiki")``).

>>> actions = lake.actions                                        # doctest: +SKIP
>>> lock = actions.lock("wiki", "2024-01-01/P1D", group_id="my-job")  # doctest: +SKIP
>>> actions.publish("wiki", segments, group_id="my-job")         # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from segmentlake.core.interval import Interval
from segmentlake.core.locks import (
    LockGranularity,
    LockGranularityName,
    LockRequest,
    LockType,
    LockTypeName,
    TaskLock,
)
from segmentlake.core.names import check_datasource_name
from segmentlake.core.segment import DataSegment
from segmentlake.core.spec_reader import check_flag, check_list, check_number, check_text, safe_repr
from segmentlake.errors import SpecError
from segmentlake.metadata.allocation import AllocateRequest, allocate
from segmentlake.metadata.lockbox import Lockbox, LockResult
from segmentlake.metadata.publish import PublishResult, publish
from segmentlake.metadata.records import PendingSegment

__all__ = ["AllocateRequest", "TaskActions"]

T = TypeVar("T")


class TaskActions:
    """The task actions of one warehouse (``lake.actions``): time-chunk and segment locks with
    leases (:meth:`try_lock`, :meth:`lock`, :meth:`heartbeat`, :meth:`release_locks`), segment
    id allocation (:meth:`allocate`) and the all-or-nothing publish (:meth:`publish`). Every
    call is one metadata commit (or none); a write creates the warehouse and the datasource.
    Locks are held by a *group* (``group_id``); options are keyword-only.

    >>> granted = lake.actions.try_lock("wiki", "2024-01-01/P1D", group_id="job-1")
    ... # doctest: +SKIP
    >>> granted.lock.version if granted.lock else granted.conflicting  # doctest: +SKIP
    """

    def __init__(self, lockbox: Lockbox) -> None:
        self.lockbox = lockbox

    def lock_request(
        self,
        datasource: str,
        interval: Interval | str,
        *,
        group_id: str,
        task_id: str | None = None,
        lock_type: LockType | LockTypeName = LockType.EXCLUSIVE,
        granularity: LockGranularity | LockGranularityName = LockGranularity.TIME_CHUNK,
        priority: int = 0,
        version: str | None = None,
        partition_num: int | None = None,
    ) -> LockRequest:
        """Build (and validate) a lock request; ``task_id`` defaults to ``group_id``.

        Args:
            datasource: The datasource locked.
            interval: The span locked (a time-chunk lock covers whole chunks of it).
            group_id: The holder: locks of one group never conflict with each other.
            task_id: The task asking, within its group (default: ``group_id``).
            lock_type: ``EXCLUSIVE``, ``SHARED``, ``APPEND`` or ``REPLACE`` (Druid's rules of
                which pairs conflict).
            granularity: ``TIME_CHUNK`` or ``SEGMENT`` (one segment: give ``version`` and
                ``partition_num``).
            priority: A request whose conflicting holders all have strictly lower priority
                revokes them.
            version: A segment lock's segment version (time-chunk requests leave it unset).
            partition_num: A segment lock's partition number.

        Returns:
            The request, for :meth:`try_lock` or :meth:`lock` to ask with the same options.

        >>> lake.actions.lock_request("wiki", "2024-01-01/P1D", group_id="g", lock_type="SHARED")
        ... # doctest: +SKIP
        """
        return LockRequest(
            group_id,
            task_id or group_id,
            check_datasource_name(datasource),
            _interval(interval),
            LockType(lock_type),
            LockGranularity(granularity),
            priority,
            version,
            partition_num,
        )

    def try_lock(
        self,
        datasource: str,
        interval: Interval | str,
        *,
        group_id: str,
        task_id: str | None = None,
        lock_type: LockType | LockTypeName = LockType.EXCLUSIVE,
        granularity: LockGranularity | LockGranularityName = LockGranularity.TIME_CHUNK,
        priority: int = 0,
        version: str | None = None,
        partition_num: int | None = None,
    ) -> LockResult:
        """Try to lock now: the granted lock, or the live holders that refused it (options as
        in :meth:`lock_request`).

        >>> lake.actions.try_lock("wiki", "2024-01-01/P1D", group_id="overwrite-1")
        ... # doctest: +SKIP
        """
        request = self.lock_request(
            datasource,
            interval,
            group_id=group_id,
            task_id=task_id,
            lock_type=lock_type,
            granularity=granularity,
            priority=priority,
            version=version,
            partition_num=partition_num,
        )
        return self.lockbox.try_lock(request)

    def lock(
        self,
        datasource: str,
        interval: Interval | str,
        *,
        group_id: str,
        timeout_s: float = 30.0,
        task_id: str | None = None,
        lock_type: LockType | LockTypeName = LockType.EXCLUSIVE,
        granularity: LockGranularity | LockGranularityName = LockGranularity.TIME_CHUNK,
        priority: int = 0,
        version: str | None = None,
        partition_num: int | None = None,
    ) -> TaskLock:
        """Lock, waiting up to ``timeout_s`` for conflicting holders (or their leases) to go;
        raises :class:`~segmentlake.errors.LockRefused` naming them after that.

        >>> lake.actions.lock("wiki", "2024-01-01/P1D", group_id="job-1", timeout_s=5)
        ... # doctest: +SKIP
        """
        request = self.lock_request(
            datasource,
            interval,
            group_id=group_id,
            task_id=task_id,
            lock_type=lock_type,
            granularity=granularity,
            priority=priority,
            version=version,
            partition_num=partition_num,
        )
        check_number(timeout_s, "timeout_s", minimum=0)
        return self.lockbox.lock(request, timeout_s=timeout_s)

    def heartbeat(self, datasource: str, group_id: str) -> list[TaskLock]:
        """Renew the group's leases; returns the locks still held (``[]``: the lease was lost).

        >>> held = lake.actions.heartbeat("wiki", "job-1")  # doctest: +SKIP
        """
        return self.lockbox.heartbeat(check_datasource_name(datasource), _group(group_id))

    def release_locks(
        self, datasource: str, group_id: str, *, interval: Interval | str | None = None
    ) -> int:
        """Release the group's locks (those overlapping ``interval`` only, if given); returns
        how many were released.

        >>> lake.actions.release_locks("wiki", "job-1")  # doctest: +SKIP
        """
        return self.lockbox.release(
            check_datasource_name(datasource),
            _group(group_id),
            interval=None if interval is None else _interval(interval),
        )

    def locks(self, datasource: str, *, include_expired: bool = False) -> list[TaskLock]:
        """The datasource's live locks (and expired ones with ``include_expired``); ``[]`` for
        a datasource nobody locked yet.

        >>> [lk.group_id for lk in lake.actions.locks("wiki")]  # doctest: +SKIP
        """
        return self.lockbox.locks(
            check_datasource_name(datasource), include_expired=include_expired
        )

    def allocate(
        self,
        datasource: str,
        requests: Sequence[AllocateRequest],
        *,
        group_id: str,
        task_id: str | None = None,
        priority: int = 0,
        overwrite_version: str | None = None,
    ) -> list[PendingSegment]:
        """Allocate segment ids with their segment locks in one commit, idempotent per
        (sequence name, previous id) (Druid's ``SegmentAllocateAction``).

        Args:
            datasource: The datasource the segments are of.
            requests: One per segment wanted: its interval, sequence name and previous id.
            group_id: The group that holds the segment locks (publish with the same one).
            task_id: The task asking (default: ``group_id``).
            priority: Lock priority; a conflicting lock of another group of equal or higher
                priority (an overwrite's) refuses the allocation with
                :class:`~segmentlake.errors.LockRefused`.
            overwrite_version: Allocate in the overwrite space of the chunks of that version
                (minor compaction) instead of first-generation ids for appends.

        Returns:
            One pending segment (the allocated id) per request, in their order.

        >>> day = Interval.parse("2024-01-01/P1D")  # doctest: +SKIP
        >>> (pending,) = lake.actions.allocate("wiki", [AllocateRequest(day, "seq-0")],
        ...     group_id="job-1")  # doctest: +SKIP
        """
        wanted = _all_of(
            AllocateRequest, requests, "allocate requests", "AllocateRequest(interval, name)"
        )
        return allocate(
            self.lockbox,
            check_datasource_name(datasource),
            wanted,
            group_id=group_id,
            task_id=task_id or group_id,
            priority=priority,
            overwrite_version=overwrite_version,
        )

    def publish(
        self,
        datasource: str,
        segments: Sequence[DataSegment],
        *,
        group_id: str,
        release_locks: bool = True,
    ) -> PublishResult:
        """Publish segments under the group's locks in one commit (all or nothing; a lost or
        revoked lock fails it), releasing the locks unless ``release_locks=False``.

        Returns:
            How many segments were published and locks released.

        >>> lake.actions.publish("wiki", segments, group_id="job-1")  # doctest: +SKIP
        """
        published = _all_of(
            DataSegment, segments, "publish segments", "DataSegment.from_json reads a descriptor"
        )
        return publish(
            self.lockbox,
            check_datasource_name(datasource),
            published,
            group_id=_group(group_id),
            release_locks=check_flag(release_locks, "release_locks"),
        )

    def __repr__(self) -> str:
        return f"TaskActions({self.lockbox.store.warehouse!r})"


def _all_of(kind: type[T], value: object, where: str, hint: str) -> list[T]:
    """``value``'s items, each a ``kind``, else a SpecError naming the first that is not."""
    items = check_list(value, where, what=kind.__name__)
    wrong = [item for item in items if not isinstance(item, kind)]
    if wrong:
        raise SpecError(
            f"{where} must be {kind.__name__} objects ({hint}), got {safe_repr(wrong[0])}"
        )
    return items


def _group(group_id: object) -> str:
    return check_text(group_id, "group_id", what="a non-empty group id")


def _interval(value: Interval | str) -> Interval:
    return value if isinstance(value, Interval) else Interval.parse(value)
