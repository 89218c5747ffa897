"""The lockbox on a real Delta metadata table: grant, refuse, revoke, renew, expire, release,
wait. Every test runs on its own datasource of a warehouse shared by the module."""

from __future__ import annotations

import threading
import time

import pytest

from segmentlake.core.locks import LockGranularity, LockType, TaskLock
from segmentlake.errors import LockRefused
from segmentlake.lake import Lake

from .support import DAY, NEXT_DAY, NOON, segment, sleep_until

pytestmark = pytest.mark.spark


def test_try_lock_grants_and_refusals_name_the_holders(lake: Lake, ds: str) -> None:
    first = lake.actions.try_lock(ds, DAY, group_id="overwrite-a", task_id="task-a1", priority=3)

    assert first.granted
    lock = first.lock
    assert lock is not None
    assert (lock.group_id, lock.task_id, lock.interval) == ("overwrite-a", "task-a1", DAY)
    assert (lock.lock_type, lock.granularity, lock.priority) == (
        LockType.EXCLUSIVE,
        LockGranularity.TIME_CHUNK,
        3,
    )
    assert lock.is_live(int(time.time() * 1000))

    # Inside the held day, exclusive at the same priority or shared: refused, naming A.
    for options in ({"priority": 3}, {"lock_type": "SHARED"}):
        refused = lake.actions.try_lock(ds, NOON, group_id="overwrite-b", **options)
        assert not refused.granted
        assert [(lk.group_id, lk.lock_id) for lk in refused.conflicting] == [
            ("overwrite-a", lock.lock_id)
        ]

    # The next day is free: shared locks of two groups coexist there, and keep out an
    # exclusive one. (Other datasources never conflict: test_allocation_publish.py.)
    assert lake.actions.try_lock(ds, NEXT_DAY, group_id="append-b", lock_type="SHARED").granted
    assert lake.actions.try_lock(ds, NEXT_DAY, group_id="append-c", lock_type="SHARED").granted
    exclusive = lake.actions.try_lock(ds, NEXT_DAY, group_id="overwrite-d")
    assert not exclusive.granted
    assert {lk.group_id for lk in exclusive.conflicting} == {"append-b", "append-c"}

    assert sorted((lk.group_id, lk.interval) for lk in lake.locks(ds)) == [
        ("append-b", NEXT_DAY),
        ("append-c", NEXT_DAY),
        ("overwrite-a", DAY),
    ]


def test_higher_priority_revokes_and_the_revoked_group_cannot_publish(lake: Lake, ds: str) -> None:
    low = lake.actions.try_lock(ds, DAY, group_id="low", priority=1).lock
    assert low is not None
    assert not lake.actions.try_lock(ds, NOON, group_id="equal", priority=1).granted

    high = lake.actions.try_lock(ds, NOON, group_id="high", priority=2)

    assert high.lock is not None
    assert [lk.lock_id for lk in high.revoked] == [low.lock_id]
    assert [lk.group_id for lk in lake.locks(ds)] == ["high"]
    revoked = [lk for lk in lake.locks(ds, include_expired=True) if lk.group_id == "low"]
    assert [lk.revoked for lk in revoked] == [True]
    # The revoked group can neither take its lock back nor publish under it.
    again = lake.actions.try_lock(ds, DAY, group_id="low", priority=1)
    assert [lk.group_id for lk in again.conflicting] == ["high"]
    with pytest.raises(LockRefused, match="revoked"):
        lake.actions.publish(ds, [segment(ds, NOON, low.version)], group_id="low")
    # The winner publishes under its own version.
    result = lake.actions.publish(ds, [segment(ds, NOON, high.lock.version)], group_id="high")
    assert (result.segments, result.locks_released) == (1, 1)
    assert [s.version for s in lake.used_segments(ds)] == [high.lock.version]


def test_re_request_renews_the_same_lock(lake: Lake, ds: str) -> None:
    first = lake.actions.try_lock(ds, DAY, group_id="g", task_id="t1").lock
    assert first is not None
    time.sleep(0.01)

    second = lake.actions.try_lock(ds, DAY, group_id="g", task_id="t2", lock_type="SHARED").lock

    assert second is not None
    assert second.lock_id == first.lock_id
    assert second.version == first.version
    assert second.lock_type is LockType.EXCLUSIVE
    assert second.task_id == "t2"
    assert second.expires_millis > first.expires_millis
    assert lake.locks(ds) == [second]


def test_expired_lease_no_longer_blocks_and_its_publish_fails(
    lake: Lake, short_lake: Lake, ds: str
) -> None:
    crashed = short_lake.actions.try_lock(ds, DAY, group_id="crashed").lock
    assert crashed is not None
    assert crashed.expires_millis - crashed.acquired_millis == 1000

    sleep_until(crashed.expires_millis)

    assert short_lake.actions.heartbeat(ds, "crashed") == []  # a lost lease is not renewed
    taken = lake.actions.try_lock(ds, NOON, group_id="next")
    assert taken.granted
    assert taken.revoked == ()  # nothing live was in the way
    with pytest.raises(LockRefused, match=r"no lock|expired"):
        short_lake.actions.publish(ds, [segment(ds, DAY, crashed.version)], group_id="crashed")
    # The expired row was cleaned up by the grant that found it.
    assert [lk.group_id for lk in lake.locks(ds, include_expired=True)] == ["next"]


def test_expired_lock_of_the_same_group_can_be_requested_again(
    lake: Lake, short_lake: Lake, ds: str
) -> None:
    # Regression: the re-grant and the cleanup of the expired row touch the same row; they
    # must go in as one change of the commit (a MERGE rejects two source rows per target).
    old = short_lake.actions.try_lock(ds, DAY, group_id="g").lock
    assert old is not None
    sleep_until(old.expires_millis)

    new = lake.actions.try_lock(ds, DAY, group_id="g").lock

    assert new is not None
    assert new.lock_id == old.lock_id
    assert new.expires_millis - new.acquired_millis == lake.lockbox.lease_ms
    assert lake.locks(ds) == [new]


def test_heartbeat_extends_the_group_leases_only(lake: Lake, ds: str) -> None:
    mine = lake.actions.try_lock(ds, DAY, group_id="g").lock
    theirs = lake.actions.try_lock(ds, NEXT_DAY, group_id="other").lock
    assert mine is not None
    assert theirs is not None
    before = int(time.time() * 1000)

    renewed = lake.actions.heartbeat(ds, "g")

    assert [lk.lock_id for lk in renewed] == [mine.lock_id]
    assert renewed[0].expires_millis >= before + lake.lockbox.lease_ms > mine.expires_millis
    by_group = {lk.group_id: lk for lk in lake.locks(ds)}
    assert by_group["g"].expires_millis == renewed[0].expires_millis
    assert by_group["other"].expires_millis == theirs.expires_millis
    assert lake.actions.heartbeat(ds, "nobody") == []


def test_release_by_interval_and_all(lake: Lake, ds: str) -> None:
    assert lake.actions.try_lock(ds, DAY, group_id="g").granted
    assert lake.actions.try_lock(ds, NEXT_DAY, group_id="g").granted

    assert lake.actions.release_locks(ds, "g", interval=NOON) == 1

    assert [lk.interval for lk in lake.locks(ds, include_expired=True)] == [NEXT_DAY]
    assert lake.actions.release_locks(ds, "g") == 1
    assert lake.actions.release_locks(ds, "g") == 0  # nothing left: no commit
    assert lake.locks(ds, include_expired=True) == []


@pytest.mark.slow
def test_lock_times_out_naming_holders_or_waits_for_release(lake: Lake, ds: str) -> None:
    holder = lake.actions.try_lock(ds, DAY, group_id="holder").lock
    assert holder is not None

    started = time.monotonic()
    with pytest.raises(LockRefused, match="holder") as refused:
        lake.actions.lock(ds, NOON, group_id="waiter", timeout_s=0.5)
    assert time.monotonic() - started >= 0.5
    assert [lk.lock_id for lk in refused.value.conflicting] == [holder.lock_id]

    got: list[TaskLock] = []
    errors: list[BaseException] = []

    def wait_for_lock() -> None:
        try:
            got.append(lake.actions.lock(ds, NOON, group_id="waiter", timeout_s=120))
        except BaseException as e:  # handed to the main thread
            errors.append(e)

    waiter = threading.Thread(target=wait_for_lock)
    waiter.start()
    time.sleep(1.5)
    assert not got  # still waiting while the holder holds
    released_at = time.time()
    assert lake.actions.release_locks(ds, "holder") == 1
    waiter.join(timeout=150)

    assert not waiter.is_alive()
    assert errors == []
    assert [lk.group_id for lk in got] == ["waiter"]
    assert got[0].acquired_millis >= int(released_at * 1000)
    assert [lk.group_id for lk in lake.locks(ds)] == ["waiter"]
