"""Example-based tests of the versioned interval timeline (DESIGN.md §3 "Visibility rules")."""

from __future__ import annotations

import random

import pytest

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import (
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    ShardSpec,
    TombstoneShardSpec,
)
from segmentlake.core.timeline import TimelineObjectHolder, VersionedIntervalTimeline
from segmentlake.errors import SpecError

from . import timeline_reference as ref

DS = "wiki"
DAY = "2024-01-01/2024-01-02"


def iv(text: str) -> Interval:
    return Interval.parse(text)


def seg(interval: str, version: str, spec: ShardSpec, datasource: str = DS) -> DataSegment:
    return DataSegment(datasource, iv(interval), version, spec)


def num(partition: int, core: int = 0) -> NumberedShardSpec:
    return NumberedShardSpec(partition, core)


def ow(partition: int, root_start: int, root_end: int, minor: int, size: int):
    return NumberedOverwriteShardSpec(partition, root_start, root_end, minor, size)


def timeline(*segments: DataSegment) -> VersionedIntervalTimeline:
    tl = VersionedIntervalTimeline()
    for s in segments:
        tl.add(s)
    return tl


def view(holders: list[TimelineObjectHolder]) -> list[tuple[str, str, list[int]]]:
    """Holders as (interval, version, partition numbers) for readable assertions."""
    return [
        (str(h.interval), h.version, [s.shard_spec.partition_num for s in h.segments])
        for h in holders
    ]


def visible(tl: VersionedIntervalTimeline, interval: str = DAY) -> list[DataSegment]:
    return [s for h in tl.lookup(iv(interval)) for s in h.segments]


def check_against_reference(tl: VersionedIntervalTimeline, interval: Interval) -> None:
    expected = ref.lookup(list(tl), interval.start_millis, interval.end_millis)
    got = [
        ref.RefHolder(
            h.interval.key, h.version, tuple(str(s.id) for s in h.segments), h.chunk_interval.key
        )
        for h in tl.lookup(interval)
    ]
    assert got == expected


# -- the seed scenario ------------------------------------------------------------------------


class TestSeedScenario:
    """Segment locking's example: minor compaction racing appends inside one chunk."""

    def setup_method(self) -> None:
        v = "2024-01-01T00:00:00.000Z"
        self.s = {
            1: seg(DAY, v, num(0, 3)),
            2: seg(DAY, v, num(1, 3)),
            3: seg(DAY, v, num(2, 3)),
            # compaction merges 2+3 (root [1,3)) while an append creates 5
            4: seg(DAY, v, ow(32768, 1, 3, 1, 1)),
            5: seg(DAY, v, num(3, 3)),
            # compaction merges 4+5 (root [1,4)) into two segments while an append creates 8
            6: seg(DAY, v, ow(32769, 1, 4, 2, 2)),
            7: seg(DAY, v, ow(32770, 1, 4, 2, 2)),
            8: seg(DAY, v, num(4, 3)),
        }
        self.by_partition = {s.shard_spec.partition_num: n for n, s in self.s.items()}

    def names(self, tl: VersionedIntervalTimeline) -> set[int]:
        return {self.by_partition[s.shard_spec.partition_num] for s in visible(tl)}

    def test_step_by_step(self) -> None:
        tl = timeline(self.s[1], self.s[2], self.s[3])
        assert self.names(tl) == {1, 2, 3}
        tl.add(self.s[4])
        assert self.names(tl) == {1, 4}
        tl.add(self.s[5])
        assert self.names(tl) == {1, 4, 5}
        tl.add(self.s[6])  # half of an atomic update group: not visible yet
        assert self.names(tl) == {1, 4, 5}
        tl.add(self.s[7])
        assert self.names(tl) == {1, 6, 7}
        tl.add(self.s[8])
        assert self.names(tl) == {1, 6, 7, 8}

    def test_all_then_fall_back(self) -> None:
        tl = timeline(*self.s.values())
        assert self.names(tl) == {1, 6, 7, 8}
        [holder] = tl.lookup(iv(DAY))
        assert holder.interval == iv(DAY) == holder.chunk_interval
        assert [s.shard_spec.partition_num for s in holder.segments] == [0, 4, 32769, 32770]

        assert tl.remove(self.s[6]) == self.s[6]
        assert self.names(tl) == {1, 4, 5, 8}  # the previous generation is whole: fall back
        assert tl.remove(self.s[4]) == self.s[4]
        assert self.names(tl) == {1, 2, 3, 5, 8}

    def test_no_fallback_when_previous_generation_is_not_whole(self) -> None:
        tl = timeline(*self.s.values())
        tl.remove(self.s[2])  # overshadowed anyway: nothing changes
        assert self.names(tl) == {1, 6, 7, 8}
        tl.remove(self.s[6])  # 4 and 5 are whole: fall back to them
        assert self.names(tl) == {1, 4, 5, 8}
        tl.remove(self.s[4])  # 2 is gone, so [1,4) has nothing whole: the incomplete 7 stays
        assert self.names(tl) == {1, 7, 8}  # ... and hides 3 and 5, which it overshadows
        [holder] = tl.lookup(iv(DAY))
        assert holder.version == self.s[1].version

    def test_overshadowed(self) -> None:
        tl = timeline(*self.s.values())
        assert {
            self.by_partition[s.shard_spec.partition_num] for s in tl if tl.is_overshadowed(s)
        } == {2, 3, 4, 5}
        # in the order of iteration: interval, version, partition number
        found = [
            self.by_partition[s.shard_spec.partition_num] for s in tl.find_fully_overshadowed()
        ]
        assert found == [2, 3, 5, 4]
        before = tl.lookup(ETERNITY)
        for s in tl.find_fully_overshadowed():
            tl.remove(s)
        assert tl.lookup(ETERNITY) == before
        assert tl.find_fully_overshadowed() == []

    def test_matches_reference_at_every_step(self) -> None:
        tl = VersionedIntervalTimeline()
        for n in sorted(self.s):
            tl.add(self.s[n])
            check_against_reference(tl, iv(DAY))
        for n in (6, 4, 2, 7, 1):
            tl.remove(self.s[n])
            check_against_reference(tl, iv(DAY))


# -- versions across interval sizes -----------------------------------------------------------


def test_day_overwrite_overshadows_hours() -> None:
    hours = [seg(f"2024-01-01T{h:02d}/PT1H", "v1", num(0, 1)) for h in (0, 5, 23)]
    day = seg(DAY, "v2", num(0, 1))
    tl = timeline(*hours, day)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v2", [0])]
    assert all(tl.is_overshadowed(h) for h in hours)
    assert not tl.is_overshadowed(day)
    assert tl.find_fully_overshadowed() == hours


def test_lower_day_version_does_not_hide_higher_hours() -> None:
    day = seg(DAY, "v2", num(0, 1))
    hour = seg("2024-01-01T05/PT1H", "v3", num(0, 1))
    tl = timeline(day, hour)
    assert view(tl.lookup(iv(DAY))) == [
        (str(iv("2024-01-01T00/2024-01-01T05")), "v2", [0]),
        (str(iv("2024-01-01T05/2024-01-01T06")), "v3", [0]),
        (str(iv("2024-01-01T06/2024-01-02T00")), "v2", [0]),
    ]
    assert not tl.is_overshadowed(day)
    # an even older hour under the day is overshadowed; the day's own lower version is not
    old = seg("2024-01-01T10/PT1H", "v1", num(0, 1))
    tl.add(old)
    assert tl.is_overshadowed(old)
    assert tl.find_fully_overshadowed() == [old]


def test_hour_overwrite_under_day_clipped_to_query() -> None:
    day = seg(DAY, "v1", num(0, 1))
    hour = seg("2024-01-01T05/PT1H", "v2", num(0, 1))
    tl = timeline(day, hour)
    holders = tl.lookup(iv("2024-01-01T03:30/2024-01-01T07:15"))
    assert [(str(h.interval), h.version, str(h.chunk_interval)) for h in holders] == [
        (str(iv("2024-01-01T03:30/2024-01-01T05:00")), "v1", str(iv(DAY))),
        (str(iv("2024-01-01T05:00/2024-01-01T06:00")), "v2", str(iv("2024-01-01T05/PT1H"))),
        (str(iv("2024-01-01T06:00/2024-01-01T07:15")), "v1", str(iv(DAY))),
    ]
    assert holders[0].segments == holders[2].segments == (day,)
    assert holders[1].segments == (hour,)
    # inside one piece: the clipped interval is the query, the chunk interval the chunk's
    [inner] = tl.lookup(iv("2024-01-01T05:10/2024-01-01T05:20"))
    assert inner.interval == iv("2024-01-01T05:10/2024-01-01T05:20")
    assert inner.chunk_interval == iv("2024-01-01T05/PT1H")
    assert tl.visible_segments(iv("2024-01-01T03:30/2024-01-01T07:15")) == [day, hour]


def test_partial_overlaps_of_multi_day_and_day_chunks() -> None:
    two_days = seg("2024-01-01/2024-01-03", "v1", num(0, 1))
    day2 = seg("2024-01-02/P1D", "v2", num(0, 1))
    span = seg("2024-01-02T12/2024-01-04", "v3", num(0, 1))
    tl = timeline(two_days, day2, span)
    holders = tl.lookup(iv("2023-12-31/2024-01-05"))
    assert [(str(h.interval), h.version, str(h.chunk_interval)) for h in holders] == [
        (str(iv("2024-01-01/2024-01-02")), "v1", str(iv("2024-01-01/2024-01-03"))),
        (str(iv("2024-01-02/2024-01-02T12")), "v2", str(iv("2024-01-02/2024-01-03"))),
        (str(iv("2024-01-02T12/2024-01-04")), "v3", str(iv("2024-01-02T12/2024-01-04"))),
    ]
    assert not tl.is_overshadowed(day2)  # it still serves the first half of its day
    assert not tl.is_overshadowed(two_days)
    assert tl.find_fully_overshadowed() == []
    tl.add(seg("2024-01-02/2024-01-02T12", "v4", num(0, 1)))
    assert tl.is_overshadowed(day2)
    assert not tl.is_overshadowed(two_days)
    check_against_reference(tl, iv("2023-12-31/2024-01-05"))


def test_day_fully_covered_by_higher_hours_is_overshadowed_but_not_with_a_gap() -> None:
    day = seg(DAY, "v1", num(0, 1))
    hours = [seg(f"2024-01-01T{h:02d}/PT1H", "v2", num(0, 1)) for h in range(24)]
    tl = timeline(day, *hours)
    assert tl.is_overshadowed(day)
    assert [h.version for h in tl.lookup(iv(DAY))] == ["v2"] * 24
    tl.remove(hours[7])
    assert not tl.is_overshadowed(day)
    pieces = view(tl.lookup(iv(DAY)))
    assert pieces[7] == (str(iv("2024-01-01T07/PT1H")), "v1", [0])
    assert len(pieces) == 24


# -- incomplete chunks ------------------------------------------------------------------------


def test_incomplete_chunk_is_skipped_older_version_keeps_serving() -> None:
    old = seg(DAY, "v1", num(0, 1))
    new = [seg(DAY, "v2", num(p, 3)) for p in (0, 1)]
    tl = timeline(old, *new)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [0])]
    assert not tl.is_overshadowed(old)
    assert not any(tl.is_overshadowed(s) for s in new)
    assert tl.find_fully_overshadowed() == []
    last = seg(DAY, "v2", num(2, 3))
    tl.add(last)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v2", [0, 1, 2])]
    assert tl.is_overshadowed(old)
    tl.remove(new[0])
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [0])]


def test_incomplete_chunk_with_nothing_older_serves_nothing() -> None:
    tl = timeline(seg(DAY, "v2", num(0, 3)), seg(DAY, "v2", num(2, 3)))
    assert tl.lookup(iv(DAY)) == []
    assert tl.visible_segments() == []
    assert len(tl) == 2


def test_appends_without_core_partitions_never_make_a_chunk_incomplete() -> None:
    old = seg(DAY, "v1", num(0, 1))
    core = [seg(DAY, "v2", num(p, 2)) for p in (0, 1)]
    appended = seg(DAY, "v2", num(2, 0))
    tl = timeline(old, *core, appended)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v2", [0, 1, 2])]
    tl.remove(appended)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v2", [0, 1])]
    tl.add(appended)
    tl.remove(core[1])  # a core partition is missing: back to v1
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [0])]


def test_chunk_of_appends_only_is_complete() -> None:
    tl = timeline(seg(DAY, "v1", num(3)), seg(DAY, "v1", num(7)))
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [3, 7])]


def test_incomplete_chunk_hour_under_complete_day() -> None:
    day = seg(DAY, "v1", num(0, 1))
    hour = seg("2024-01-01T05/PT1H", "v2", num(1, 2))  # partition 0 of 2 is missing
    tl = timeline(day, hour)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [0])]


# -- atomic update groups ---------------------------------------------------------------------


def test_incomplete_aug_without_anything_whole_stays_visible_and_hides() -> None:
    # first generation 0..2, then a compaction of all three into two segments (minor 1)
    first = [seg(DAY, "v1", num(p, 3)) for p in range(3)]
    comp = [seg(DAY, "v1", ow(32768 + i, 0, 3, 1, 2)) for i in range(2)]
    tl = timeline(*first, *comp)
    assert [s.shard_spec.partition_num for s in visible(tl)] == [32768, 32769]
    tl.remove(first[1])  # previous generation no longer whole; nothing changes
    assert [s.shard_spec.partition_num for s in visible(tl)] == [32768, 32769]
    tl.remove(comp[0])  # the incomplete group has nothing whole to fall back to
    assert [s.shard_spec.partition_num for s in visible(tl)] == [32769]
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [32769])]
    # hidden, but by an incomplete group only: not "whole data replaces it", so not for cleanup
    assert not tl.is_overshadowed(first[0])
    assert not tl.is_overshadowed(first[2])
    assert not tl.is_overshadowed(comp[1])
    assert tl.find_fully_overshadowed() == []
    check_against_reference(tl, iv(DAY))


def test_segment_hidden_only_by_incomplete_group_is_not_overshadowed() -> None:
    """Found by the crowded-chunk property: the complete S (root [0,1), minor 1) is hidden by
    the incomplete fallback V ([0,2), minor 2), and S's coverage of [0,1) is what keeps the
    incomplete W ([0,1), minor 3, not overshadowed by V) from becoming a fallback. Marking S
    unused would make W's partial data visible next to V's."""
    s = seg(DAY, "v1", ow(32768, 0, 1, 1, 1))
    v = seg(DAY, "v1", ow(32769, 0, 2, 2, 2))  # 1 of 2 members
    w = seg(DAY, "v1", ow(32771, 0, 1, 3, 2))  # 1 of 2 members
    tl = timeline(s, v, w)
    assert [p.shard_spec.partition_num for p in visible(tl)] == [32769]
    assert not tl.is_overshadowed(s)
    assert tl.find_fully_overshadowed() == []
    tl.remove(s)  # what cleanup must not do: it changes what readers see
    assert [p.shard_spec.partition_num for p in visible(tl)] == [32769, 32771]


def test_first_generation_hidden_only_by_incomplete_group_is_not_overshadowed() -> None:
    """The 4-segment shrink hypothesis found: removing p0 (hidden by the incomplete A) would
    uncover the incomplete C, which p0's coverage kept out of sight."""
    p0 = seg(DAY, "v1", num(0))
    a = seg(DAY, "v1", ow(32768, 0, 2, 1, 2))  # 1 of 2 members, [0,2) not covered: fallback
    b = seg(DAY, "v1", ow(32769, 2, 3, 1, 1))
    c = seg(DAY, "v1", ow(32770, 0, 1, 1, 2))  # 1 of 2 members, [0,1) covered by p0
    tl = timeline(p0, a, b, c)
    before = tl.lookup(iv(DAY))
    assert [p.shard_spec.partition_num for p in visible(tl)] == [32768, 32769]
    assert not tl.is_overshadowed(p0)
    assert tl.find_fully_overshadowed() == []
    assert ref.is_overshadowed(list(tl), p0) is False
    tl.remove(p0)
    assert tl.lookup(iv(DAY)) != before


def test_incomplete_aug_overshadowed_by_complete_aug_is_hidden() -> None:
    first = [seg(DAY, "v1", num(p, 2)) for p in range(2)]
    minor1 = [seg(DAY, "v1", ow(32768 + i, 0, 2, 1, 2)) for i in range(2)]
    minor2 = seg(DAY, "v1", ow(32770, 0, 2, 2, 1))
    tl = timeline(*first, minor1[0], minor2)  # minor1 lacks one member; minor2 is whole
    assert [s.shard_spec.partition_num for s in visible(tl)] == [32770]
    tl.remove(minor2)  # now minor1 is incomplete but the first generation is whole
    assert [s.shard_spec.partition_num for s in visible(tl)] == [0, 1]
    tl.remove(first[0])  # nothing whole for [0, 2): the incomplete minor1 member shows
    assert [s.shard_spec.partition_num for s in visible(tl)] == [32768]
    check_against_reference(tl, iv(DAY))


def test_overshadowing_needs_containment() -> None:
    # two complete groups with overlapping, non-nested root ranges: neither hides the other
    first = [seg(DAY, "v1", num(p, 3)) for p in range(3)]
    a = seg(DAY, "v1", ow(32768, 0, 2, 1, 1))
    b = seg(DAY, "v1", ow(32769, 1, 3, 2, 1))
    tl = timeline(*first, a, b)
    assert [s.shard_spec.partition_num for s in visible(tl)] == [32768, 32769]
    assert [s.shard_spec.partition_num for s in tl.find_fully_overshadowed()] == [0, 1, 2]
    check_against_reference(tl, iv(DAY))


def test_incomplete_chunk_when_compaction_group_is_partial_and_nothing_to_fall_back() -> None:
    old = seg(DAY, "v1", num(0, 1))
    first = [seg(DAY, "v2", num(p, 2)) for p in range(2)]
    comp = [seg(DAY, "v2", ow(32768 + i, 0, 1, 1, 2)) for i in range(2)]
    tl = timeline(old, *first, *comp)
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v2", [1, 32768, 32769])]
    tl.remove(first[1])  # core root partition 1 gone: v2 incomplete, v1 serves
    assert view(tl.lookup(iv(DAY))) == [(str(iv(DAY)), "v1", [0])]


# -- tombstones -------------------------------------------------------------------------------


def test_tombstone_hides_older_versions_and_yields_no_holder() -> None:
    hours = [seg(f"2024-01-01T{h:02d}/PT1H", "v1", num(0, 1)) for h in (1, 2)]
    tomb = seg(DAY, "v2", TombstoneShardSpec())
    tl = timeline(*hours, tomb)
    assert tl.lookup(iv(DAY)) == []
    assert tl.visible_segments() == []
    assert tl.find_fully_overshadowed() == hours
    assert not tl.is_overshadowed(tomb)
    tl.remove(tomb)
    assert [h.version for h in tl.lookup(iv(DAY))] == ["v1", "v1"]


def test_tombstone_hour_splits_a_day() -> None:
    day = seg(DAY, "v1", num(0, 1))
    tomb = seg("2024-01-01T03/PT1H", "v2", TombstoneShardSpec())
    tl = timeline(day, tomb)
    assert view(tl.lookup(iv(DAY))) == [
        (str(iv("2024-01-01T00/2024-01-01T03")), "v1", [0]),
        (str(iv("2024-01-01T04/2024-01-02T00")), "v1", [0]),
    ]
    assert tl.visible_segments() == [day]  # once, though it serves two pieces
    assert not tl.is_overshadowed(day)
    assert tl.lookup(iv("2024-01-01T03:15/2024-01-01T03:45")) == []


def test_older_tombstone_does_not_hide_newer_data() -> None:
    day = seg(DAY, "v2", num(0, 1))
    tomb = seg("2024-01-01/2024-01-03", "v1", TombstoneShardSpec())
    tl = timeline(day, tomb)
    assert view(tl.lookup(iv("2024-01-01/2024-01-03"))) == [(str(iv(DAY)), "v2", [0])]
    assert not tl.is_overshadowed(tomb)


# -- determinism, identity, errors ------------------------------------------------------------


def test_holders_are_time_ordered_and_segments_by_partition_number() -> None:
    segments = [
        seg("2024-01-01/P1D", "v1", num(p, 3)) for p in (2, 0, 1)
    ] + [
        seg("2024-01-02/P1D", "v1", num(p)) for p in (5, 1, 3)
    ] + [
        seg("2024-01-01T06/PT1H", "v2", num(p, 2)) for p in (1, 0)
    ]  # fmt: skip
    expected = [
        (str(iv("2024-01-01T00/2024-01-01T06")), "v1", [0, 1, 2]),
        (str(iv("2024-01-01T06/2024-01-01T07")), "v2", [0, 1]),
        (str(iv("2024-01-01T07/2024-01-02T00")), "v1", [0, 1, 2]),
        (str(iv("2024-01-02/2024-01-03")), "v1", [1, 3, 5]),
    ]
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(segments)
        tl = VersionedIntervalTimeline(segments)
        assert view(tl.lookup(iv("2024-01-01/2024-01-03"))) == expected
        assert view(tl.lookup(iv("2024-01-01/2024-01-03"))) == expected  # cached: same
        assert list(tl) == sorted(
            segments,
            key=lambda s: (s.interval.key, s.version, s.shard_spec.partition_num),
        )


def test_add_is_idempotent_for_the_same_id() -> None:
    a = seg(DAY, "v1", num(0, 1))
    tl = timeline(a, a)
    assert len(tl) == 1
    assert list(tl) == [a]
    again = DataSegment(DS, iv(DAY), "v1", num(0, 1), size=42)  # same id, new record
    tl.add(again)
    assert len(tl) == 1
    [holder] = tl.lookup(iv(DAY))
    assert holder.segments[0].size == 42
    assert tl.remove(a) is not None
    assert len(tl) == 0
    assert tl.lookup(iv(DAY)) == []


def test_remove_of_absent_segment_returns_none() -> None:
    a = seg(DAY, "v1", num(0, 1))
    tl = timeline(a)
    assert tl.remove(seg(DAY, "v1", num(1, 1))) is None  # other partition
    assert tl.remove(seg(DAY, "v2", num(0, 1))) is None  # other version
    assert tl.remove(seg("2024-01-02/P1D", "v1", num(0, 1))) is None  # other interval
    assert len(tl) == 1
    assert tl.remove(a) == a
    assert tl.remove(a) is None
    assert VersionedIntervalTimeline().remove(a) is None
    assert len(tl) == 0
    assert list(tl) == []


def test_mixing_datasources_raises() -> None:
    tl = timeline(seg(DAY, "v1", num(0, 1)))
    with pytest.raises(SpecError):
        tl.add(seg(DAY, "v1", num(1, 1), datasource="other"))
    with pytest.raises(SpecError):
        VersionedIntervalTimeline([seg(DAY, "v1", num(0)), seg(DAY, "v1", num(1), "other")])
    assert len(tl) == 1


def test_lookup_of_empty_interval_or_empty_timeline() -> None:
    tl = timeline(seg(DAY, "v1", num(0, 1)))
    assert tl.lookup(iv("2024-01-01T05/2024-01-01T05")) == []
    assert tl.lookup(iv("2024-01-05/P1D")) == []  # nothing there
    assert tl.lookup(iv("2023-12-31/2024-01-01")) == []  # abuts, shares no instant
    assert VersionedIntervalTimeline().lookup(ETERNITY) == []
    assert VersionedIntervalTimeline().find_fully_overshadowed() == []


def test_removing_a_whole_chunk_and_re_adding() -> None:
    a = [seg(DAY, "v1", num(p, 2)) for p in range(2)]
    b = seg("2024-01-01T00/PT1H", "v2", num(0, 1))
    tl = timeline(*a, b)
    for s in a:
        tl.remove(s)
    assert view(tl.lookup(iv(DAY))) == [(str(iv("2024-01-01T00/PT1H")), "v2", [0])]
    tl.remove(b)
    assert tl.lookup(ETERNITY) == []
    tl.add(b)
    tl.add(a[1])
    assert view(tl.lookup(iv(DAY))) == [(str(iv("2024-01-01T00/PT1H")), "v2", [0])]
    tl.add(a[0])
    assert [h.version for h in tl.lookup(iv(DAY))] == ["v2", "v1"]
