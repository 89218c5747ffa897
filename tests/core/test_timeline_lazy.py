"""A timeline loaded lazily from records answers exactly as one built from its segments.

Random histories (the same generator as the property tests) leave a used set; the lazy
timeline (:meth:`VersionedIntervalTimeline.from_records`) and the eager one are compared on
lookups, the whole-timeline questions, and after further adds and removes (which must first
build the chunk they touch).
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.core.timeline_records import ListSource, SegmentRecords

from .test_timeline_properties import DS, SETTINGS, History, histories, queries, whole_domain


def lazy(segments: list[DataSegment]) -> VersionedIntervalTimeline:
    return VersionedIntervalTimeline.from_records(SegmentRecords.of_segments(DS, segments))


def same_answers(a: VersionedIntervalTimeline, b: VersionedIntervalTimeline) -> None:
    assert len(a) == len(b)
    assert list(a) == list(b)
    assert a.find_fully_overshadowed() == b.find_fully_overshadowed()
    assert a.visibility_states() == b.visibility_states()


def shuffled(history: History, seed: int) -> list[DataSegment]:
    """The used set in some order (records come unordered from the table)."""
    used = list(history.used)
    random.Random(seed).shuffle(used)
    return used


@SETTINGS
@given(histories(), st.lists(queries, min_size=1, max_size=4), st.integers(0, 2**16))
def test_lookups_match_eager(history: History, qs: list[Interval], seed: int) -> None:
    used = shuffled(history, seed)
    eager = VersionedIntervalTimeline(used)
    loaded = lazy(used)
    assert len(loaded) == len(eager)  # before anything is built
    for query in [*qs, whole_domain(), ETERNITY]:
        assert loaded.lookup(query) == eager.lookup(query)
    same_answers(loaded, eager)


@SETTINGS
@given(histories(), queries, st.integers(0, 2**16))
def test_overshadowed_questions_match_before_any_lookup(
    history: History, query: Interval, seed: int
) -> None:
    used = shuffled(history, seed)
    eager, loaded = VersionedIntervalTimeline(used), lazy(used)
    assert [loaded.is_overshadowed(s) for s in used] == [eager.is_overshadowed(s) for s in used]
    assert loaded.visible_segments(query) == eager.visible_segments(query)
    same_answers(lazy(used), eager)  # whole-timeline questions on a fresh lazy timeline


@SETTINGS
@given(histories(), histories(), queries, st.integers(0, 2**16))
def test_changes_on_a_lazy_timeline_match_eager(
    history: History, more: History, query: Interval, seed: int
) -> None:
    used = shuffled(history, seed)
    eager, loaded = VersionedIntervalTimeline(used), lazy(used)
    rnd = random.Random(seed)
    if rnd.random() < 0.5:  # sometimes build part of it first
        assert loaded.lookup(query) == eager.lookup(query)
    gone = rnd.sample(used, k=min(len(used), rnd.randint(0, 4)))
    for segment in gone:
        assert loaded.remove(segment) == eager.remove(segment)
        assert loaded.remove(segment) is None
    for op, segment in more.steps:  # new chunks, and new segments of loaded chunks
        if op == "add":
            loaded.add(segment)
            eager.add(segment)
        else:
            assert loaded.remove(segment) == eager.remove(segment)
    loaded.add_all(gone[:2])
    eager.add_all(gone[:2])
    for q in (query, whole_domain()):
        assert loaded.lookup(q) == eager.lookup(q)
    same_answers(loaded, eager)


def numbered(day: int, partition: int, version: str = "v1", core: int = 2) -> DataSegment:
    interval = Interval.of_millis(day * 86_400_000, (day + 1) * 86_400_000)
    return DataSegment(DS, interval, version, NumberedShardSpec(partition, core))


def test_only_the_chunks_a_lookup_touches_are_built() -> None:
    segments = [numbered(d, p) for d in range(100) for p in range(2)]
    built: list[int] = []

    class Counting(ListSource):
        def segments(self, rows: np.ndarray) -> list[DataSegment]:  # type: ignore[override]
            built.extend(rows.tolist())
            return [self.held[i] for i in rows.tolist()]

    records = SegmentRecords.of_segments(DS, segments)
    timeline = VersionedIntervalTimeline.from_records(
        SegmentRecords(
            records.datasource,
            records.start,
            records.end,
            records.version,
            records.versions,
            records.partition,
            Counting(tuple(segments)),
        )
    )
    day = Interval.of_millis(10 * 86_400_000, 11 * 86_400_000)
    assert [h.segments for h in timeline.lookup(day)] == [tuple(segments[20:22])]
    assert sorted(built) == [20, 21]
    assert len(timeline) == 200
    timeline.add(numbered(10, 2, core=2))  # joins a built chunk: nothing more built
    timeline.remove(numbered(50, 0))  # builds day 50 only
    assert sorted(built) == [20, 21, 100, 101]
    assert len(timeline) == 200


def test_a_repeated_record_counts_once_and_the_last_wins() -> None:
    first = numbered(0, 0)
    again = DataSegment(DS, first.interval, "v1", NumberedShardSpec(0, 2), num_rows=7)
    loaded = lazy([first, numbered(0, 1), again])
    assert len(loaded) == 2
    (holder,) = loaded.lookup(ETERNITY)
    assert holder.segments[0].num_rows == 7


def test_an_empty_record_set_is_an_empty_timeline() -> None:
    loaded = lazy([])
    assert len(loaded) == 0
    assert loaded.lookup(ETERNITY) == []
    assert list(loaded) == []
    loaded.add(numbered(0, 0, core=1))
    assert len(loaded.lookup(ETERNITY)) == 1
