"""Task lock rules (Druid's TaskLockbox), pure: what conflicts, what is revoked, which version.

Locks are leases: a lock whose ``expires_millis`` has passed is treated as released by every
rule here, so a crashed task blocks others for at most one lease.

* Time-chunk locks cover an interval; segment locks cover one segment (interval, version,
  partition id). Types are EXCLUSIVE, SHARED, APPEND and REPLACE (Druid's concurrent locks):
  SHARED coexists with SHARED; APPEND coexists with APPEND and REPLACE; nothing else
  coexists. An append's segment locks are APPEND; a compaction that replaces whole chunks
  while appends go on takes REPLACE locks and, when it commits, re-publishes what was
  appended meanwhile under its version (see metadata/publish.py).
* Segment locks conflict only on the same segment; a time-chunk lock conflicts with any lock
  of another group whose interval overlaps its own (unless both are SHARED).
* Locks of the same group never conflict (tasks of one group share locks), and a request is
  idempotent per (group id, interval, granularity[, partition]).
* A request whose conflicting holders all have strictly lower priority revokes them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from segmentlake.core.interval import Interval, format_timestamp, parse_timestamp, to_millis
from segmentlake.core.shard_spec import NON_ROOT_GENERATION_PARTITION_ID_MAX
from segmentlake.core.spec_reader import (
    INT32_MAX,
    StrictEnumType,
    check_flag,
    check_int,
    check_text,
    safe_repr,
)
from segmentlake.errors import SpecError

__all__ = [
    "LockDecision",
    "LockGranularity",
    "LockGranularityName",
    "LockRequest",
    "LockType",
    "LockTypeName",
    "TaskLock",
    "decide_lock",
    "lock_conflicts",
    "next_version",
]


class _Strict(enum.Enum, metaclass=StrictEnumType):
    """An enum whose lookup of an unknown value is a :class:`SpecError` naming the accepted
    values (a plain Enum raises a bare ValueError)."""

    @classmethod
    def _missing_(cls, value: object) -> None:
        accepted = ", ".join(str(m.value) for m in cls)
        raise SpecError(f"{cls.__name__} {safe_repr(value)} is not one of {accepted}")


class LockType(_Strict):
    EXCLUSIVE = "EXCLUSIVE"
    SHARED = "SHARED"
    APPEND = "APPEND"
    REPLACE = "REPLACE"


# Pairs of lock types (of different groups, overlapping) that do not conflict.
_COMPATIBLE = frozenset(
    {
        frozenset({LockType.SHARED}),
        frozenset({LockType.APPEND}),
        frozenset({LockType.APPEND, LockType.REPLACE}),
    }
)


class LockGranularity(_Strict):
    TIME_CHUNK = "TIME_CHUNK"
    SEGMENT = "SEGMENT"


# The enums' values as typed callers may pass them (the enums check what untyped callers pass);
# tests/core/test_literal_options.py keeps them equal to the members.
LockTypeName = Literal["EXCLUSIVE", "SHARED", "APPEND", "REPLACE"]
LockGranularityName = Literal["TIME_CHUNK", "SEGMENT"]


@dataclass(frozen=True, slots=True)
class LockRequest:
    """What a task asks for. ``version`` and ``partition_num`` are required for segment locks
    (the segment being locked); a time-chunk request leaves them unset."""

    group_id: str
    task_id: str
    datasource: str
    interval: Interval
    lock_type: LockType = LockType.EXCLUSIVE
    granularity: LockGranularity = LockGranularity.TIME_CHUNK
    priority: int = 0
    version: str | None = None
    partition_num: int | None = None

    def __post_init__(self) -> None:
        _check_lock_fields(self, "lock request")
        if self.interval.is_empty():
            raise SpecError(f"cannot lock the empty interval {self.interval}")
        if self.granularity is LockGranularity.SEGMENT and (
            self.version is None or self.partition_num is None
        ):
            raise SpecError("a SEGMENT lock request needs the segment's version and partition_num")

    @property
    def lock_id(self) -> str:
        """Stable id: a repeated request maps to the same lock (idempotence)."""
        base = f"{self.group_id}|{self.granularity.value}|{self.interval}"
        if self.granularity is LockGranularity.SEGMENT:
            return f"{base}|{self.version}|{self.partition_num}"
        return base


@dataclass(frozen=True, slots=True)
class TaskLock:
    """A granted lock (a lease until ``expires_millis``)."""

    lock_id: str
    group_id: str
    task_id: str
    datasource: str
    interval: Interval
    lock_type: LockType
    granularity: LockGranularity
    priority: int
    version: str
    expires_millis: int
    partition_num: int | None = None
    revoked: bool = False
    acquired_millis: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        _check_lock_fields(self, "lock")
        check_text(self.lock_id, "lock.lock_id")
        if not isinstance(self.version, str):
            raise SpecError(f"lock.version must be a string, got {safe_repr(self.version)}")
        check_int(self.expires_millis, "lock.expires_millis")
        check_int(self.acquired_millis, "lock.acquired_millis")
        check_flag(self.revoked, "lock.revoked")

    @classmethod
    def trusted(
        cls,
        *,
        lock_id: str,
        group_id: str,
        task_id: str,
        datasource: str,
        interval: Interval,
        lock_type: LockType,
        granularity: LockGranularity,
        priority: int,
        version: str,
        expires_millis: int,
        partition_num: int | None,
        revoked: bool,
        acquired_millis: int,
    ) -> TaskLock:
        """A lock from values checked when it was granted (its metadata record), built
        without checking them again: a decision reads every lock of the chunks it touches,
        and the checks cost twice the building."""
        lock = object.__new__(cls)
        for name, value in (
            ("lock_id", lock_id),
            ("group_id", group_id),
            ("task_id", task_id),
            ("datasource", datasource),
            ("interval", interval),
            ("lock_type", lock_type),
            ("granularity", granularity),
            ("priority", priority),
            ("version", version),
            ("expires_millis", expires_millis),
            ("partition_num", partition_num),
            ("revoked", revoked),
            ("acquired_millis", acquired_millis),
        ):
            object.__setattr__(lock, name, value)
        return lock

    def is_live(self, now_millis: int) -> bool:
        """Held: neither revoked nor expired."""
        return not self.revoked and now_millis < self.expires_millis

    def covers(self, interval: Interval, version: str, partition_num: int) -> bool:
        """True when this lock entitles its group to publish that segment."""
        if self.version != version:
            return False
        if self.granularity is LockGranularity.SEGMENT:
            return self.interval == interval and self.partition_num == partition_num
        return self.interval.contains(interval)


def _check_lock_fields(lock: LockRequest | TaskLock, what: str) -> None:
    """The fields requests and locks share: each of its type (a lock is compared, stored and
    keyed by them, so a string priority or lock type would break every rule silently)."""
    for name in ("group_id", "task_id", "datasource"):
        check_text(getattr(lock, name), f"{what} {name}", what="a non-empty name")
    if not isinstance(lock.interval, Interval):
        raise SpecError(f"{what} interval must be an Interval, got {safe_repr(lock.interval)}")
    if not isinstance(lock.lock_type, LockType):
        raise SpecError(
            f"{what} lock_type must be a LockType ({', '.join(t.value for t in LockType)}), "
            f"got {safe_repr(lock.lock_type)}"
        )
    if not isinstance(lock.granularity, LockGranularity):
        raise SpecError(
            f"{what} granularity must be a LockGranularity (TIME_CHUNK, SEGMENT), got "
            + safe_repr(lock.granularity)
        )
    # Druid's priority is a Java int; the lock table keeps it in an INT column.
    check_int(lock.priority, f"{what} priority", minimum=-INT32_MAX - 1, maximum=INT32_MAX)
    if lock.version is not None:
        check_text(lock.version, f"{what} version", what="a non-empty version string")
    if lock.partition_num is not None:
        check_int(
            lock.partition_num,
            f"{what} partition_num",
            minimum=0,
            maximum=NON_ROOT_GENERATION_PARTITION_ID_MAX,
        )


def lock_conflicts(held: TaskLock, request: LockRequest) -> bool:
    """Whether ``held`` (assumed live) stands in the way of ``request``."""
    if held.group_id == request.group_id or not held.interval.overlaps(request.interval):
        return False
    if frozenset({held.lock_type, request.lock_type}) in _COMPATIBLE:
        return False
    if (
        held.granularity is LockGranularity.SEGMENT
        and request.granularity is LockGranularity.SEGMENT
    ):
        return (held.interval, held.version, held.partition_num) == (
            request.interval,
            request.version,
            request.partition_num,
        )
    return True


@dataclass(frozen=True, slots=True)
class LockDecision:
    """Result of :func:`decide_lock`: the lock to grant (None if refused), the live locks it
    revokes, and on refusal the holders that stood in the way."""

    granted: TaskLock | None
    revoke: tuple[TaskLock, ...] = ()
    conflicting: tuple[TaskLock, ...] = ()
    existing: bool = False


def decide_lock(
    request: LockRequest,
    held: Iterable[TaskLock],
    *,
    existing_versions: Sequence[str],
    now_millis: int,
    lease_millis: int,
) -> LockDecision:
    """Apply the lockbox rules to one request against the datasource's current locks.

    ``existing_versions`` are the versions of used segments (and pending allocations)
    overlapping the request interval: an EXCLUSIVE time-chunk lock gets a version above all of
    them; other locks keep the chunk's version.
    """
    live = [lock for lock in held if lock.is_live(now_millis)]
    for lock in live:
        if lock.lock_id == request.lock_id:
            renewed = _renew(lock, request, now_millis + lease_millis)
            return LockDecision(granted=renewed, existing=True)
    conflicting = tuple(lock for lock in live if lock_conflicts(lock, request))
    if conflicting and any(lock.priority >= request.priority for lock in conflicting):
        return LockDecision(granted=None, conflicting=conflicting)
    version = _lock_version(request, live, existing_versions, now_millis)
    granted = TaskLock(
        lock_id=request.lock_id,
        group_id=request.group_id,
        task_id=request.task_id,
        datasource=request.datasource,
        interval=request.interval,
        lock_type=request.lock_type,
        granularity=request.granularity,
        priority=request.priority,
        version=version,
        expires_millis=now_millis + lease_millis,
        partition_num=request.partition_num,
        acquired_millis=now_millis,
    )
    return LockDecision(granted=granted, revoke=conflicting)


def _renew(lock: TaskLock, request: LockRequest, expires: int) -> TaskLock:
    from dataclasses import replace

    return replace(lock, task_id=request.task_id, expires_millis=max(expires, lock.expires_millis))


def _lock_version(
    request: LockRequest,
    live: Sequence[TaskLock],
    existing_versions: Sequence[str],
    now_millis: int,
) -> str:
    if request.granularity is LockGranularity.SEGMENT:
        assert request.version is not None
        return request.version
    same_group = [
        lock.version
        for lock in live
        if lock.group_id == request.group_id and lock.interval.overlaps(request.interval)
    ]
    if same_group:
        # Tasks of one group writing one interval must publish under one version.
        return max(same_group)
    if request.lock_type in (LockType.EXCLUSIVE, LockType.REPLACE):
        return next_version(existing_versions, now_millis)
    return max(existing_versions) if existing_versions else next_version((), now_millis)


def next_version(existing_versions: Iterable[str], now_millis: int) -> str:
    """A version above every existing one: the current time in Druid's ISO form, or, when an
    existing version is already at or past it (clock skew, same millisecond), one tick later.
    """
    candidate = format_timestamp(now_millis)
    highest = max(existing_versions, default="")
    if candidate > highest:
        return candidate
    try:
        bumped = format_timestamp(to_millis(parse_timestamp(highest)) + 1)
    except (SpecError, OverflowError):
        bumped = ""
    # Versions compare as strings: a timestamp that is not in Druid's form ("20990101",
    # "...+05:00", ".5Z") can re-format to a smaller string, and the last instant overflows.
    # Any suffix sorts after its prefix.
    return bumped if bumped > highest else highest + "0"
