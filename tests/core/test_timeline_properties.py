"""Property tests: the timeline against the brute-force reference of DESIGN.md §3.

Histories are random but realistic sequences over three days: bulk overwrites (a new version
over an HOUR, 6-hour, DAY, 2-DAY or free hour-aligned interval; sometimes only part of the core
partitions published), appends into existing chunks, minor compactions that merge or split
adjacent visible atomic update groups of a chunk, tombstones and removals of random segments.
"""

from __future__ import annotations

import itertools
import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import (
    NON_ROOT_GENERATION_PARTITION_ID_MIN,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    TombstoneShardSpec,
)
from segmentlake.core.timeline import TimelineObjectHolder, VersionedIntervalTimeline

from . import timeline_reference as ref

DS = "wiki"
HOUR = 3_600_000
MINUTE = 60_000
BASE = Interval.parse("2024-01-01/P1D").start_millis
HOURS = 72  # the time domain: three days

# TIMELINE_EXAMPLES=5000 for a deeper search than the default (~20 s for the file).
EXAMPLES = int(os.environ.get("TIMELINE_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def hours(a: int, b: int) -> Interval:
    return Interval.of_millis(BASE + a * HOUR, BASE + b * HOUR)


intervals = st.one_of(
    st.integers(0, HOURS - 1).map(lambda h: hours(h, h + 1)),
    st.integers(0, HOURS // 6 - 1).map(lambda k: hours(6 * k, 6 * k + 6)),
    st.integers(0, HOURS // 24 - 1).map(lambda d: hours(24 * d, 24 * d + 24)),
    st.integers(0, HOURS // 24 - 2).map(lambda d: hours(24 * d, 24 * d + 48)),
    st.tuples(st.integers(0, HOURS - 1), st.integers(1, 30)).map(
        lambda t: hours(t[0], min(HOURS, t[0] + t[1]))
    ),
)

# Queries reach a little outside the domain and have minute precision, so clipping shows.
queries = st.one_of(
    st.tuples(st.integers(-2, HOURS + 2), st.integers(0, HOURS + 4)).map(
        lambda t: Interval.of_millis(BASE + t[0] * HOUR, BASE + (t[0] + t[1]) * HOUR)
    ),
    st.tuples(st.integers(-90, HOURS * 60 + 90), st.integers(0, 40 * 60)).map(
        lambda t: Interval.of_millis(BASE + t[0] * MINUTE, BASE + (t[0] + t[1]) * MINUTE)
    ),
)

Step = tuple[str, DataSegment]  # ("add" | "remove", segment)


class History:
    """A replayable list of single-segment adds and removes, and the used set they leave."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.used: dict[DataSegment, None] = {}
        self.versions: set[str] = set()
        self.next_first: dict[tuple, int] = {}
        self.next_overwrite: dict[tuple, int] = {}
        self.minors: dict[tuple, set[int]] = {}

    def add(self, segment: DataSegment) -> None:
        self.steps.append(("add", segment))
        self.used[segment] = None

    def remove(self, segment: DataSegment) -> None:
        self.steps.append(("remove", segment))
        del self.used[segment]

    def chunks(self) -> dict[tuple, list[DataSegment]]:
        return ref.chunks_of(self.used)

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        lines = [f"  {op} {s.id} {s.shard_spec}" for op, s in self.steps]
        return "History(\n" + "\n".join(lines) + "\n)"


def _new_version(draw: st.DrawFn, h: History) -> str:
    n = draw(st.integers(1, 40))
    while f"v{n:03d}" in h.versions:  # unique per chunk: equal versions never overlap
        n += 1
    version = f"v{n:03d}"
    h.versions.add(version)
    return version


def _overwrite(draw: st.DrawFn, h: History) -> None:
    interval = draw(intervals)
    version = _new_version(draw, h)
    core = draw(st.integers(1, 3))
    partitions = list(range(core))
    if draw(st.integers(0, 3)) == 0:  # a publish that is (or became) partial
        partitions = sorted(draw(st.sets(st.integers(0, core - 1), min_size=1, max_size=core)))
    key = (interval.key, version)
    h.next_first[key] = core
    for p in partitions:
        h.add(DataSegment(DS, interval, version, NumberedShardSpec(p, core)))


def _tombstone(draw: st.DrawFn, h: History) -> None:
    interval = draw(intervals)
    version = _new_version(draw, h)
    h.next_first[(interval.key, version)] = 1
    h.add(DataSegment(DS, interval, version, TombstoneShardSpec()))


def _recent_index(draw: st.DrawFn, n: int) -> int:
    """An index into ``n`` items ordered most recent first, biased towards recent ones (work
    piles up on a few chunks, so atomic update groups get stacked and broken)."""
    return min(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))


def _pick_chunk(draw: st.DrawFn, h: History) -> tuple[tuple, list[DataSegment]] | None:
    chunks = h.chunks()
    if not chunks:
        return None
    recent_first = list(dict.fromkeys((s.interval.key, s.version) for s in reversed(h.used)))
    key = recent_first[_recent_index(draw, len(recent_first))]
    return key, chunks[key]


def _append(draw: st.DrawFn, h: History) -> None:
    picked = _pick_chunk(draw, h)
    if picked is None:
        return
    (span, version), chunk = picked
    core = max(s.shard_spec.num_core_partitions for s in chunk)
    key = (span, version)
    p = h.next_first.get(key, 0)
    h.next_first[key] = p + 1
    spec = NumberedShardSpec(p, draw(st.sampled_from([0, core])))
    h.add(DataSegment(DS, chunk[0].interval, version, spec))


def _compact(draw: st.DrawFn, h: History) -> None:
    """Merge or split a run of adjacent visible AUGs of one chunk into one overwrite AUG."""
    picked = _pick_chunk(draw, h)
    if picked is None:
        return
    (span, version), chunk = picked
    augs = [a for a in ref.visible_augs(chunk) if not any(s.is_tombstone for s in a.members)]
    if not augs:
        return
    augs.sort(key=lambda a: (a.root_start, a.root_end, a.minor))
    i = draw(st.integers(0, len(augs) - 1))
    j = draw(st.integers(i, min(len(augs) - 1, i + 3)))
    run = augs[i : j + 1]
    root_start = min(a.root_start for a in run)
    root_end = max(a.root_end for a in run)
    minor = max(a.minor for a in run) + 1
    # A new compaction never reuses the (root range, minor) of an earlier one in the chunk,
    # even a removed one: that would glue two unrelated groups into one AUG.
    taken = h.minors.setdefault((span, version, root_start, root_end), set())
    while minor in taken:
        minor += 1
    taken.add(minor)
    outputs = draw(st.integers(1, 3))
    key = (span, version)
    first_id = h.next_overwrite.get(key, NON_ROOT_GENERATION_PARTITION_ID_MIN)
    h.next_overwrite[key] = first_id + outputs
    for n in range(outputs):
        spec = NumberedOverwriteShardSpec(first_id + n, root_start, root_end, minor, outputs)
        h.add(DataSegment(DS, chunk[0].interval, version, spec))
    if draw(st.integers(0, 2)) == 0:  # the coordinator marks the replaced inputs unused
        for aug in run:
            for s in aug.members:
                h.remove(s)


def _remove(draw: st.DrawFn, h: History) -> None:
    if h.used:
        recent_first = list(reversed(h.used))
        h.remove(recent_first[_recent_index(draw, len(recent_first))])


def _cleanup(draw: st.DrawFn, h: History) -> None:
    """Remove some of the overshadowed segments (what the coordinator marks unused); later
    removals of newer segments then find no whole older generation to fall back to."""
    used = list(h.used)
    overshadowed = [s for s in used if ref.is_overshadowed(used, s)]
    if overshadowed:
        picked = draw(st.sets(st.integers(0, len(overshadowed) - 1), min_size=1))
        for i in sorted(picked):
            h.remove(overshadowed[i])


OPERATIONS = {
    "overwrite": _overwrite,
    "compact": _compact,
    "append": _append,
    "remove": _remove,
    "cleanup": _cleanup,
    "tombstone": _tombstone,
}


@st.composite
def histories(draw: st.DrawFn, max_ops: int = 24) -> History:
    h = History()
    n_ops = draw(st.integers(1, max_ops))
    # compactions, appends and removals inside existing chunks are what make atomic update
    # groups interesting, so they come more often than new chunks
    names = ["compact", "append", "remove", "cleanup", "overwrite", "compact", "remove"]
    names += ["overwrite", "compact", "tombstone"]
    for _ in range(n_ops):
        name = draw(st.sampled_from(names))
        OPERATIONS[name](draw, h)
    return h


def replay(steps: list[Step]) -> VersionedIntervalTimeline:
    tl = VersionedIntervalTimeline()
    for op, segment in steps:
        if op == "add":
            tl.add(segment)
        else:
            assert tl.remove(segment) == segment
    return tl


def as_ref(holders: list[TimelineObjectHolder]) -> list[ref.RefHolder]:
    return [
        ref.RefHolder(
            h.interval.key, h.version, tuple(str(s.id) for s in h.segments), h.chunk_interval.key
        )
        for h in holders
    ]


def whole_domain() -> Interval:
    return hours(-1, HOURS + 1)


# -- properties -------------------------------------------------------------------------------


@SETTINGS
@given(histories(), st.lists(queries, min_size=1, max_size=3), st.data())
def test_lookup_matches_reference(history: History, qs: list[Interval], data) -> None:
    """After every step, lookups of the incrementally changed timeline equal the reference."""
    tl = VersionedIntervalTimeline()
    used: dict[DataSegment, None] = {}
    for op, segment in history.steps:
        if op == "add":
            tl.add(segment)
            used[segment] = None
        else:
            assert tl.remove(segment) == segment
            del used[segment]
        q = data.draw(queries, label="query after step")
        assert as_ref(tl.lookup(q)) == ref.lookup(used, q.start_millis, q.end_millis)
    for q in [*qs, whole_domain(), ETERNITY]:
        assert as_ref(tl.lookup(q)) == ref.lookup(used, q.start_millis, q.end_millis)


@SETTINGS
@given(histories(), st.lists(queries, min_size=1, max_size=4), st.randoms())
def test_incremental_equals_rebuilt(
    history: History, qs: list[Interval], rnd: random.Random
) -> None:
    """Adding and removing (with lookups in between, so cached visibility is exercised) ends
    in exactly the timeline that loading the remaining segments in any order builds."""
    tl = VersionedIntervalTimeline()
    for n, (op, segment) in enumerate(history.steps):
        if op == "add":
            tl.add(segment)
        else:
            tl.remove(segment)
        if n % 2:
            tl.lookup(qs[n % len(qs)])
            tl.find_fully_overshadowed()
    remaining = list(history.used)
    rebuilt = VersionedIntervalTimeline(remaining)
    rnd.shuffle(remaining)
    shuffled = VersionedIntervalTimeline(remaining)
    assert len(tl) == len(rebuilt) == len(shuffled) == len(history.used)
    assert list(tl) == list(rebuilt) == list(shuffled)
    for q in [*qs, whole_domain(), ETERNITY]:
        assert tl.lookup(q) == rebuilt.lookup(q) == shuffled.lookup(q)
        assert as_ref(tl.lookup(q)) == as_ref(shuffled.lookup(q))
    assert tl.find_fully_overshadowed() == rebuilt.find_fully_overshadowed()
    assert tl.find_fully_overshadowed() == shuffled.find_fully_overshadowed()


@SETTINGS
@given(histories(), st.lists(queries, min_size=1, max_size=4))
def test_lookup_is_deterministic_and_ordered(history: History, qs: list[Interval]) -> None:
    tl = replay(history.steps)
    for q in [*qs, whole_domain()]:
        holders = tl.lookup(q)
        assert holders == tl.lookup(q)
        for h in holders:
            assert h.segments, "a holder always serves data"
            assert q.contains(h.interval)
            assert not h.interval.is_empty()
            assert h.chunk_interval.contains(h.interval)
            assert [s.shard_spec.partition_num for s in h.segments] == sorted(
                {s.shard_spec.partition_num for s in h.segments}
            )
            assert all(s.version == h.version for s in h.segments)
            assert all(s.interval == h.chunk_interval for s in h.segments)
            assert not any(s.is_tombstone for s in h.segments)
        for a, b in itertools.pairwise(holders):
            assert a.interval.end_millis <= b.interval.start_millis
            if a.interval.end_millis == b.interval.start_millis:
                # abutting pieces of one chunk are one piece
                assert (a.version, a.chunk_interval) != (b.version, b.chunk_interval)


@SETTINGS
@given(histories(), st.lists(queries, min_size=1, max_size=3))
def test_removing_fully_overshadowed_changes_no_lookup(
    history: History, qs: list[Interval]
) -> None:
    tl = replay(history.steps)
    segments = list(tl)
    found = tl.find_fully_overshadowed()
    assert found == [s for s in segments if tl.is_overshadowed(s)]
    assert found == [s for s in segments if ref.is_overshadowed(segments, s)]
    checks = [*qs, whole_domain()]
    before = [tl.lookup(q) for q in checks]
    for s in found:
        assert tl.remove(s) == s
    assert [tl.lookup(q) for q in checks] == before
    # the result is stable: nothing that remains is overshadowed any more... or if something
    # is, removing it still changes nothing
    again = tl.find_fully_overshadowed()
    for s in again:
        tl.remove(s)
    assert [tl.lookup(q) for q in checks] == before


@SETTINGS
@given(histories(), st.lists(queries, min_size=1, max_size=3))
def test_visible_segments_dedups(history: History, qs: list[Interval]) -> None:
    tl = replay(history.steps)
    for q in [*qs, ETERNITY]:
        found = tl.visible_segments(q)
        assert len(found) == len(set(found))
        assert found == list(dict.fromkeys(s for h in tl.lookup(q) for s in h.segments))
        expected = {
            i for h in ref.lookup(history.used, q.start_millis, q.end_millis) for i in h.segment_ids
        }
        assert {str(s.id) for s in found} == expected
    assert tl.visible_segments() == tl.visible_segments(ETERNITY)


@SETTINGS
@given(histories())
def test_visibility_states_match_reference(history: History) -> None:
    """Chunks alone in their interval take a shortcut; the rest the whole sweep: both agree
    with the reference's rules."""
    tl = replay(history.steps)
    states = {str(s.id): state for s, state in tl.visibility_states().items()}
    assert states == ref.visibility_states(history.used)


# -- rule 1 under stress: arbitrary atomic update groups in one chunk ---------------------------


@st.composite
def crowded_chunks(draw: st.DrawFn) -> list[DataSegment]:
    """One DAY chunk (v2) with arbitrary first-generation partitions and overwrite groups of
    any root range, minor version and size, each group holding any number of its members;
    optionally a complete older DAY (v1) underneath and a newer HOUR (v3) on top."""
    day = hours(0, 24)
    core = draw(st.integers(0, 4))
    segments = [
        DataSegment(DS, day, "v2", NumberedShardSpec(p, draw(st.sampled_from([0, core]))))
        for p in sorted(draw(st.sets(st.integers(0, 5), max_size=6)))
    ]
    if core and not any(s.shard_spec.num_core_partitions for s in segments):
        segments.append(DataSegment(DS, day, "v2", NumberedShardSpec(6, core)))
    keys = draw(
        st.lists(
            st.tuples(st.integers(0, 5), st.integers(1, 6), st.integers(1, 4)).filter(
                lambda k: k[0] < k[1]
            ),
            unique=True,
            max_size=6,
        )
    )
    pid = NON_ROOT_GENERATION_PARTITION_ID_MIN
    for start, end, minor in keys:
        size = draw(st.integers(1, 3))
        for _ in range(draw(st.integers(1, size))):
            spec = NumberedOverwriteShardSpec(pid, start, end, minor, size)
            segments.append(DataSegment(DS, day, "v2", spec))
            pid += 1
    if not segments:
        segments.append(DataSegment(DS, day, "v2", NumberedShardSpec(0, 0)))
    if draw(st.booleans()):
        segments.append(DataSegment(DS, day, "v1", NumberedShardSpec(0, 1)))
    if draw(st.booleans()):
        h = draw(st.integers(0, 23))
        segments.append(DataSegment(DS, hours(h, h + 1), "v3", NumberedShardSpec(0, 1)))
    return segments


@settings(SETTINGS, max_examples=3 * EXAMPLES)  # cheap examples, and rule 1's hardest cases
@given(crowded_chunks(), st.randoms())
def test_crowded_chunk_matches_reference(segments: list[DataSegment], rnd: random.Random) -> None:
    rnd.shuffle(segments)
    tl = VersionedIntervalTimeline(segments)
    q = hours(-1, 25)
    before = tl.lookup(q)
    assert as_ref(before) == ref.lookup(segments, q.start_millis, q.end_millis)
    found = tl.find_fully_overshadowed()
    assert found == [s for s in tl if ref.is_overshadowed(segments, s)]
    states = {str(s.id): state for s, state in tl.visibility_states().items()}
    assert states == ref.visibility_states(segments)
    for s in found:
        tl.remove(s)
    assert tl.lookup(q) == before
