"""Concurrent append and replace in the metadata: whichever of the two publishes comes second
re-publishes the appended segment under the replacing version (same rows, new id), so the
replacing chunk never hides an append; other publishes add no copies."""

from __future__ import annotations

import pytest

from segmentlake.core.interval import Interval
from segmentlake.core.locks import LockGranularity, LockRequest, LockType
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.publish import publish
from tests.metadata.support import DAY, pending_segment, segment

pytestmark = [pytest.mark.spark]

HOUR = Interval.parse("2024-01-01T05:00/PT1H")


def _setup(lake: Lake, ds: str):
    """An hour segment S0 (version v1), a REPLACE lock over the day (version vr > v1), then
    an append allocated into S0's chunk (v1): returns (S0, the replacing segment, the
    append's segment)."""
    lake.actions.lock(ds, HOUR, group_id="seed")
    s0 = segment(ds, HOUR, lake.locks(ds)[0].version)
    lake.actions.publish(ds, [s0], group_id="seed")
    replace_lock = lake.lockbox.try_lock(
        LockRequest("R", "R", ds, DAY, LockType.REPLACE, LockGranularity.TIME_CHUNK)
    ).lock
    assert replace_lock is not None
    assert replace_lock.version > s0.version
    (pending,) = lake.actions.allocate(ds, [AllocateRequest(HOUR, "A|0")], group_id="A")
    assert pending.segment_id.version == s0.version  # the append joins the old chunk
    appended = pending_segment(pending)
    replacing = segment(ds, DAY, replace_lock.version, 0, 1)
    return s0, replacing, appended


def _visible(lake: Lake, ds: str):
    return lake.timeline(ds).visible_segments()


def test_append_published_first_is_upgraded_by_the_replace(lake: Lake, ds: str) -> None:
    s0, replacing, appended = _setup(lake, ds)
    first = publish(lake.lockbox, ds, [appended], group_id="A", appended=True)
    assert first.upgraded == ()  # nothing newer yet
    result = publish(lake.lockbox, ds, [replacing], group_id="R", replaced=frozenset({str(s0.id)}))
    (copy,) = result.upgraded
    assert (copy.interval, copy.version) == (DAY, replacing.version)
    assert copy.shard_spec == NumberedShardSpec(1, 1)
    assert copy.load_spec["segment"] == appended.load_spec["segment"]
    assert copy.load_spec["interval"] == str(HOUR)
    assert copy.rows_interval == HOUR
    assert set(_visible(lake, ds)) == {replacing, copy}


def test_replace_published_first_then_the_append_upgrades_itself(lake: Lake, ds: str) -> None:
    s0, replacing, appended = _setup(lake, ds)
    publish(lake.lockbox, ds, [replacing], group_id="R", replaced=frozenset({str(s0.id)}))
    assert set(_visible(lake, ds)) == {replacing}
    result = publish(lake.lockbox, ds, [appended], group_id="A", appended=True)
    (copy,) = result.upgraded
    assert (copy.interval, copy.version, copy.shard_spec.partition_num) == (
        DAY,
        replacing.version,
        1,
    )
    assert copy.load_spec["segment"] == appended.load_spec["segment"]
    assert set(_visible(lake, ds)) == {replacing, copy}


def test_an_upgraded_copy_is_numbered_past_the_unused_segments_of_its_chunk(
    lake: Lake, ds: str
) -> None:
    s0, replacing, appended = _setup(lake, ds)
    second = segment(ds, DAY, replacing.version, 1, 2)
    whole = [segment(ds, DAY, replacing.version, 0, 2), second]
    publish(lake.lockbox, ds, whole, group_id="R", replaced=frozenset({str(s0.id)}))
    assert lake.mark_unused([second.id]) == 1
    result = publish(lake.lockbox, ds, [appended], group_id="A", appended=True)
    (copy,) = result.upgraded
    # Numbered 1, it was dropped as the unused segment's id: the append was lost from the
    # newer version once that segment was used again.
    assert (copy.version, copy.shard_spec.partition_num) == (replacing.version, 2)
    assert lake.mark_used([second.id]) == 1
    assert set(_visible(lake, ds)) == {*whole, copy}


def test_segments_read_by_the_replace_are_not_upgraded(lake: Lake, ds: str) -> None:
    s0, replacing, _ = _setup(lake, ds)
    result = publish(lake.lockbox, ds, [replacing], group_id="R", replaced=frozenset({str(s0.id)}))
    assert result.upgraded == ()
    lake.actions.release_locks(ds, "A")


def test_an_exclusive_overwrite_hides_what_it_replaces(lake: Lake, ds: str) -> None:
    """No copies without REPLACE semantics: an overwrite replaces data on purpose."""
    lake.actions.lock(ds, HOUR, group_id="seed")
    s0 = segment(ds, HOUR, lake.locks(ds)[0].version)
    lake.actions.publish(ds, [s0], group_id="seed")
    lock = lake.actions.lock(ds, DAY, group_id="O")
    result = publish(lake.lockbox, ds, [segment(ds, DAY, lock.version, 0, 1)], group_id="O")
    assert result.upgraded == ()
    assert [s.interval for s in _visible(lake, ds)] == [DAY]


def test_finer_requests_landing_in_one_coarser_chunk_get_distinct_ids(lake: Lake, ds: str) -> None:
    """Appends by HOUR into a day that a DAY chunk holds (after a major compaction HOUR ->
    DAY) all join the DAY chunk, each with its own partition id."""
    lock = lake.actions.lock(ds, DAY, group_id="day")
    lake.actions.publish(ds, [segment(ds, DAY, lock.version, 0, 1)], group_id="day")
    hours = [Interval.parse(f"2024-01-01T{h:02d}:00/PT1H") for h in (3, 4, 5)]
    pending = lake.actions.allocate(ds, [AllocateRequest(h, f"A|{h}") for h in hours], group_id="A")
    assert {p.segment_id.interval for p in pending} == {DAY}
    assert sorted(p.segment_id.partition_num for p in pending) == [1, 2, 3]
    published = publish(
        lake.lockbox, ds, [pending_segment(p) for p in pending], group_id="A", appended=True
    )
    assert published.segments == 3
    assert len(lake.used_segments(ds)) == 4


@pytest.mark.parametrize("seed", range(5))
def test_the_chunk_index_finds_what_comparing_every_chunk_finds(seed: int) -> None:
    # Mixed granularities (hours, days, a year) and versions: the index must find exactly
    # the newer chunks overlapping a span that a comparison with every chunk finds.
    import random

    from segmentlake.metadata.upgrade import _ChunkIndex

    rng = random.Random(seed)
    hour = 3_600_000
    chunks = set()
    for _ in range(300):
        length = rng.choice([hour, 24 * hour, 365 * 24 * hour])
        start = rng.randrange(0, 400 * 24) * hour // length * length
        chunks.add((start, start + length, f"v{rng.randrange(6)}"))
    index = _ChunkIndex(chunks)
    for _ in range(300):
        start = rng.randrange(0, 400 * 24 * hour)
        span = Interval.of_millis(start, start + rng.choice([1, hour, 5 * 24 * hour]))
        version = f"v{rng.randrange(7)}"
        expected = {
            c
            for c in chunks
            if c[2] > version and c[0] < span.end_millis and c[1] > span.start_millis
        }
        assert index.newer_overlapping(version, span.start_millis, span.end_millis) == expected
    assert _ChunkIndex(set()).newer_overlapping("v0", 0, 1) == set()
