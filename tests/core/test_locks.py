"""The pure lock rules of :mod:`segmentlake.core.locks` (Druid's TaskLockbox), no Spark.

The conflict matrix is checked case by case and against an oracle written from the rules as
stated in DESIGN.md §4 and the module docstring; ``decide_lock`` is property-tested for
revocation, idempotence, lease expiry and its version rules; ``next_version`` for staying above
every existing version, also when the clock is behind them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.interval import Interval, format_timestamp, to_millis
from segmentlake.core.locks import (
    LockDecision,
    LockGranularity,
    LockRequest,
    LockType,
    TaskLock,
    decide_lock,
    lock_conflicts,
    next_version,
)
from segmentlake.errors import SpecError

EX, SH = LockType.EXCLUSIVE, LockType.SHARED
TC, SEG = LockGranularity.TIME_CHUNK, LockGranularity.SEGMENT
DS = "wiki"
HOUR = 3_600_000
BASE = Interval.parse("2024-01-01/P1D").start_millis
NOW = Interval.parse("2026-06-01/P1D").start_millis
LEASE = 60_000
DAY = Interval.parse("2024-01-01/P1D")
NEXT_DAY = Interval.parse("2024-01-02/P1D")  # abuts DAY: disjoint
NOON = Interval.parse("2024-01-01T12:00/PT1H")  # inside DAY
V0 = "2024-05-01T00:00:00.000Z"


def hours(a: int, b: int) -> Interval:
    return Interval.of_millis(BASE + a * HOUR, BASE + b * HOUR)


def request(
    group: str = "g1",
    interval: Interval = DAY,
    lock_type: LockType = EX,
    granularity: LockGranularity = TC,
    *,
    priority: int = 0,
    version: str | None = None,
    partition: int | None = None,
    task: str | None = None,
) -> LockRequest:
    if granularity is SEG:
        version = V0 if version is None else version
        partition = 0 if partition is None else partition
    return LockRequest(
        group, task or group, DS, interval, lock_type, granularity, priority, version, partition
    )


def held(
    group: str = "g0",
    interval: Interval = DAY,
    lock_type: LockType = EX,
    granularity: LockGranularity = TC,
    *,
    priority: int = 0,
    version: str = V0,
    partition: int | None = None,
    expires: int = NOW + LEASE,
    revoked: bool = False,
) -> TaskLock:
    if granularity is SEG and partition is None:
        partition = 0
    req = request(
        group,
        interval,
        lock_type,
        granularity,
        priority=priority,
        version=version,
        partition=partition,
    )
    return TaskLock(
        lock_id=req.lock_id,
        group_id=group,
        task_id=group,
        datasource=DS,
        interval=interval,
        lock_type=lock_type,
        granularity=granularity,
        priority=priority,
        version=version,
        expires_millis=expires,
        partition_num=partition,
        revoked=revoked,
        acquired_millis=NOW - 1000,
    )


def decide(req: LockRequest, locks: list[TaskLock], versions: tuple[str, ...] = ()) -> LockDecision:
    return decide_lock(req, locks, existing_versions=versions, now_millis=NOW, lease_millis=LEASE)


# -- the conflict matrix -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held_type", "req_type", "expected"),
    [(EX, EX, True), (EX, SH, True), (SH, EX, True), (SH, SH, False)],
)
@pytest.mark.parametrize(
    ("held_gran", "req_gran"),
    [(TC, TC), (TC, SEG), (SEG, TC)],
)
def test_overlapping_locks_of_other_groups_conflict_unless_both_shared(
    held_type: LockType,
    req_type: LockType,
    expected: bool,
    held_gran: LockGranularity,
    req_gran: LockGranularity,
) -> None:
    # A time-chunk lock over the day against anything inside it, and a segment lock against a
    # time-chunk lock over it: only SHARED+SHARED coexist.
    lock = held("g0", DAY if held_gran is TC else NOON, held_type, held_gran)
    req = request("g1", NOON if req_gran is SEG else DAY, req_type, req_gran)

    assert lock_conflicts(lock, req) is expected


@pytest.mark.parametrize("held_gran", [TC, SEG])
@pytest.mark.parametrize("req_gran", [TC, SEG])
@pytest.mark.parametrize("held_type", [EX, SH])
@pytest.mark.parametrize("req_type", [EX, SH])
def test_disjoint_or_same_group_never_conflict(
    held_gran: LockGranularity,
    req_gran: LockGranularity,
    held_type: LockType,
    req_type: LockType,
) -> None:
    # Abutting intervals share no instant.
    assert not lock_conflicts(
        held("g0", DAY, held_type, held_gran), request("g1", NEXT_DAY, req_type, req_gran)
    )
    # Tasks of one group share their locks, whatever the types.
    assert not lock_conflicts(
        held("g1", DAY, held_type, held_gran), request("g1", DAY, req_type, req_gran)
    )


@pytest.mark.parametrize(
    ("req_type", "version", "partition", "interval", "expected"),
    [
        (EX, V0, 0, DAY, True),  # the same segment
        (SH, V0, 0, DAY, True),  # the same segment, one side exclusive
        (EX, V0, 1, DAY, False),  # another partition of the chunk (an append's fresh id)
        (EX, "2024-06-01T00:00:00.000Z", 0, DAY, False),  # another version
        (EX, V0, 0, NOON, False),  # another interval, overlapping
    ],
)
def test_segment_locks_conflict_only_on_the_same_segment(
    req_type: LockType, version: str, partition: int, interval: Interval, expected: bool
) -> None:
    lock = held("g0", DAY, EX, SEG, version=V0, partition=0)
    req = request("g1", interval, req_type, SEG, version=version, partition=partition)

    assert lock_conflicts(lock, req) is expected


def test_shared_segment_locks_on_the_same_segment_coexist() -> None:
    assert not lock_conflicts(held("g0", DAY, SH, SEG), request("g1", DAY, SH, SEG))


def test_segment_request_needs_version_and_partition() -> None:
    with pytest.raises(SpecError, match="SEGMENT"):
        LockRequest("g", "t", DS, DAY, EX, SEG, 0, None, 3)
    with pytest.raises(SpecError, match="SEGMENT"):
        LockRequest("g", "t", DS, DAY, EX, SEG, 0, V0, None)


def test_lock_id_is_per_group_interval_granularity_and_segment() -> None:
    assert request("g1").lock_id == request("g1", lock_type=SH, priority=9, task="t2").lock_id
    assert request("g1").lock_id != request("g2").lock_id
    assert request("g1").lock_id != request("g1", NOON).lock_id
    assert request("g1", granularity=SEG).lock_id != request("g1").lock_id
    assert (
        request("g1", granularity=SEG, partition=1).lock_id
        != request("g1", granularity=SEG, partition=2).lock_id
    )


# -- decide_lock: grants, refusals, revocation ------------------------------------------------


def test_refusal_names_the_holders_in_the_way() -> None:
    blocking = held("g0", DAY, EX, priority=5)
    elsewhere = held("g2", NEXT_DAY, EX, priority=9)

    decision = decide(request("g1", NOON, priority=5), [blocking, elsewhere])

    assert decision.granted is None
    assert decision.conflicting == (blocking,)
    assert decision.revoke == ()


def test_only_strictly_lower_priority_holders_are_revoked() -> None:
    low = held("g0", hours(0, 6), EX, priority=1)
    mid = held("g2", hours(6, 12), EX, priority=5)
    unrelated = held("g3", NEXT_DAY, EX, priority=0)

    refused = decide(request("g1", DAY, priority=5), [low, mid, unrelated])
    granted = decide(request("g1", DAY, priority=6), [low, mid, unrelated])

    assert refused.granted is None
    assert set(refused.conflicting) == {low, mid}
    assert granted.granted is not None
    assert set(granted.revoke) == {low, mid}  # never the non-conflicting lower one
    assert granted.conflicting == ()


def test_re_request_of_a_held_lock_renews_it() -> None:
    lock = held("g1", DAY, EX, expires=NOW + 10, version="2025-01-01T00:00:00.000Z")
    other = held("g0", DAY, EX, priority=99)  # would refuse a new request

    decision = decide(request("g1", DAY, SH, task="task-2", priority=0), [lock, other])

    assert decision.existing
    assert decision.granted is not None
    assert decision.granted.lock_id == lock.lock_id
    assert decision.granted.version == lock.version
    assert decision.granted.lock_type is EX  # the held lock, not the new request's type
    assert decision.granted.expires_millis == NOW + LEASE
    assert decision.granted.task_id == "task-2"
    assert decision.revoke == ()


def test_renewal_never_shortens_a_lease() -> None:
    lock = held("g1", DAY, expires=NOW + 10 * LEASE)

    decision = decide(request("g1", DAY), [lock])

    assert decision.existing
    assert decision.granted is not None
    assert decision.granted.expires_millis == NOW + 10 * LEASE


@pytest.mark.parametrize(
    "dead",
    [
        held("g0", DAY, EX, priority=99, expires=NOW),  # lease ran out at exactly now
        held("g0", DAY, EX, priority=99, expires=NOW - 1),
        held("g0", DAY, EX, priority=99, revoked=True),
    ],
    ids=["expires-now", "expired", "revoked"],
)
def test_expired_and_revoked_locks_are_ignored(dead: TaskLock) -> None:
    decision = decide(request("g1", DAY, priority=0), [dead])

    assert decision.granted is not None
    assert decision.revoke == ()
    assert not decision.existing


def test_own_expired_lock_is_granted_anew_not_renewed() -> None:
    mine = held("g1", DAY, expires=NOW - 1, version="2099-01-01T00:00:00.000Z")

    decision = decide(request("g1", DAY), [mine])

    assert decision.granted is not None
    assert not decision.existing
    assert decision.granted.version == format_timestamp(NOW)  # its old version is gone with it
    assert decision.granted.expires_millis == NOW + LEASE


# -- versions ------------------------------------------------------------------------------


def test_exclusive_time_chunk_version_is_above_existing_versions() -> None:
    decision = decide(request("g1"), [], ("2024-01-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"))

    assert decision.granted is not None
    assert decision.granted.version == format_timestamp(NOW)


def test_exclusive_time_chunk_version_when_the_clock_is_behind() -> None:
    future = "2030-01-01T00:00:00.000Z"

    decision = decide(request("g1"), [], ("2024-01-01T00:00:00.000Z", future))

    assert decision.granted is not None
    assert decision.granted.version == "2030-01-01T00:00:00.001Z"


def test_shared_time_chunk_lock_keeps_the_chunk_version() -> None:
    old, new = "2024-01-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z"

    joined = decide(request("g1", lock_type=SH), [], (old, new))
    fresh = decide(request("g1", lock_type=SH), [], ())

    assert joined.granted is not None
    assert joined.granted.version == new
    assert fresh.granted is not None
    assert fresh.granted.version == format_timestamp(NOW)


def test_segment_lock_keeps_the_segment_version() -> None:
    decision = decide(
        request("g1", granularity=SEG, version="v1", partition=7), [], ("2099-01-01",)
    )

    assert decision.granted is not None
    assert decision.granted.version == "v1"
    assert decision.granted.partition_num == 7


def test_same_group_shares_its_version() -> None:
    group_lock = held("g1", hours(0, 6), EX, version="2025-03-03T00:00:00.000Z")

    decision = decide(request("g1", hours(3, 9)), [group_lock], ("2025-09-09T00:00:00.000Z",))

    assert decision.granted is not None
    assert not decision.existing
    assert decision.granted.version == group_lock.version


# -- properties ----------------------------------------------------------------------------

GROUPS = ("g0", "g1", "g2", "g3")
VERSIONS = ("2024-01-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z", "2030-01-01T00:00:00.000Z")
druid_versions = st.builds(
    format_timestamp, st.integers(BASE - 1000 * 24 * HOUR, NOW + 5000 * 24 * HOUR)
)


@st.composite
def intervals(draw: st.DrawFn) -> Interval:
    a = draw(st.integers(0, 11))
    return hours(a, draw(st.integers(a + 1, 12)))


@st.composite
def task_locks(draw: st.DrawFn) -> TaskLock:
    granularity = draw(st.sampled_from([TC, SEG]))
    return held(
        draw(st.sampled_from(GROUPS)),
        draw(intervals()),
        draw(st.sampled_from([EX, SH])),
        granularity,
        priority=draw(st.integers(0, 3)),
        version=draw(st.sampled_from(VERSIONS)),
        partition=draw(st.integers(0, 2)) if granularity is SEG else None,
        expires=NOW + draw(st.sampled_from([-LEASE, -1, 0, 1, LEASE])),
        revoked=draw(st.booleans()),
    )


@st.composite
def lock_requests(draw: st.DrawFn) -> LockRequest:
    granularity = draw(st.sampled_from([TC, SEG]))
    return request(
        draw(st.sampled_from(GROUPS)),
        draw(intervals()),
        draw(st.sampled_from([EX, SH])),
        granularity,
        priority=draw(st.integers(0, 3)),
        version=draw(st.sampled_from(VERSIONS)) if granularity is SEG else None,
        partition=draw(st.integers(0, 2)) if granularity is SEG else None,
    )


def oracle_conflicts(lock: TaskLock, req: LockRequest) -> bool:
    """The rules as stated, independently of the implementation."""
    if lock.group_id == req.group_id:
        return False
    if lock.interval.end_millis <= req.interval.start_millis:
        return False
    if req.interval.end_millis <= lock.interval.start_millis:
        return False
    if lock.lock_type is SH and req.lock_type is SH:
        return False
    if lock.granularity is SEG and req.granularity is SEG:
        return (lock.interval, lock.version, lock.partition_num) == (
            req.interval,
            req.version,
            req.partition_num,
        )
    return True


def live(lock: TaskLock) -> bool:
    return not lock.revoked and lock.expires_millis > NOW


PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)


@PROPERTY_SETTINGS
@given(task_locks(), lock_requests())
def test_conflicts_match_the_oracle(lock: TaskLock, req: LockRequest) -> None:
    assert lock_conflicts(lock, req) is oracle_conflicts(lock, req)


@PROPERTY_SETTINGS
@given(
    st.lists(task_locks(), max_size=8, unique_by=lambda lk: lk.lock_id),
    lock_requests(),
    st.lists(druid_versions, max_size=4),
)
def test_decide_lock_follows_the_lockbox_rules(
    locks: list[TaskLock], req: LockRequest, versions: list[str]
) -> None:
    decision = decide(req, locks, tuple(versions))
    alive = [lk for lk in locks if live(lk)]
    same = [lk for lk in alive if lk.lock_id == req.lock_id]
    in_the_way = [lk for lk in alive if oracle_conflicts(lk, req)]

    if same:
        # Idempotent: the held lock, renewed; nothing else changes.
        assert decision.existing
        assert decision.granted is not None
        assert replace(decision.granted, expires_millis=0, task_id="any") == replace(
            same[0], expires_millis=0, task_id="any"
        )
        assert decision.granted.expires_millis == max(NOW + LEASE, same[0].expires_millis)
        assert decision.revoke == ()
        return
    assert not decision.existing
    if any(lk.priority >= req.priority for lk in in_the_way):
        assert decision.granted is None
        assert set(decision.conflicting) == set(in_the_way)
        assert decision.revoke == ()
        return
    granted = decision.granted
    assert granted is not None
    assert set(decision.revoke) == set(in_the_way)
    assert all(lk.priority < req.priority and lk.group_id != req.group_id for lk in decision.revoke)
    assert (granted.lock_id, granted.group_id, granted.interval) == (
        req.lock_id,
        req.group_id,
        req.interval,
    )
    assert (granted.lock_type, granted.granularity, granted.priority) == (
        req.lock_type,
        req.granularity,
        req.priority,
    )
    assert granted.expires_millis == NOW + LEASE
    assert granted.is_live(NOW)
    # Versions.
    group_versions = [
        lk.version
        for lk in alive
        if lk.group_id == req.group_id and lk.interval.overlaps(req.interval)
    ]
    if req.granularity is SEG:
        assert granted.version == req.version
    elif group_versions:
        assert granted.version == max(group_versions)
    elif req.lock_type is EX:
        assert all(granted.version > v for v in versions)
    else:
        assert granted.version == (max(versions) if versions else format_timestamp(NOW))


@PROPERTY_SETTINGS
@given(
    st.lists(task_locks(), max_size=6, unique_by=lambda lk: lk.lock_id),
    st.lists(task_locks(), max_size=4),
    lock_requests(),
)
def test_dead_locks_never_change_a_decision(
    locks: list[TaskLock], extra: list[TaskLock], req: LockRequest
) -> None:
    alive = [lk for lk in locks if live(lk)]
    dead = [replace(lk, revoked=True) for lk in extra] + [
        replace(lk, expires_millis=NOW - 1) for lk in extra
    ]

    assert decide(req, alive + dead) == decide(req, alive)


@PROPERTY_SETTINGS
@given(st.lists(druid_versions, min_size=1, max_size=5), st.integers(BASE, NOW + 1000 * 24 * HOUR))
def test_next_version_is_above_every_druid_version(versions: list[str], now: int) -> None:
    version = next_version(versions, now)

    assert all(version > v for v in versions)
    if format_timestamp(now) > max(versions):
        assert version == format_timestamp(now)
    else:  # the clock is behind: one millisecond past the highest
        assert to_millis_of(version) == to_millis_of(max(versions)) + 1


def to_millis_of(version: str) -> int:
    from segmentlake.core.interval import parse_timestamp

    return to_millis(parse_timestamp(version))


@PROPERTY_SETTINGS
@given(
    st.lists(
        st.one_of(
            druid_versions,
            st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
            st.dates().map(lambda d: d.strftime("%Y%m%d")),
            st.text(min_size=1, max_size=12),
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(BASE, NOW),
)
def test_next_version_is_above_any_version_string(versions: list[str], now: int) -> None:
    version = next_version(versions, now)

    assert all(version > v for v in versions)


@pytest.mark.parametrize(
    "highest",
    [
        "2099-01-01T00:00:00+05:00",  # re-formats to the previous day in UTC
        "20990101",  # basic ISO form: "2099-" < "20990"
        "2099-01-01T00:00:00.5Z",  # ".501Z" < ".5Z"
        "9999-12-31T23:59:59.999Z",  # the last instant: one more overflows
        "v2",  # not a timestamp
    ],
)
def test_next_version_regressions(highest: str) -> None:
    assert next_version([highest], NOW) > highest


def test_next_version_without_existing_versions_is_now() -> None:
    assert next_version([], NOW) == format_timestamp(NOW)
