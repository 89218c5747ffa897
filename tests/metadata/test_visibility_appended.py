"""An append's visibility decided without the timeline (partitions added after every one of
a complete, visible chunk) answers as the timeline of every used segment does. Pure: rows
and segments, no table, no Spark."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import (
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    ShardSpec,
    TombstoneShardSpec,
)
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.metadata.records import Row, segment_row
from segmentlake.metadata.scope import EVERYTHING
from segmentlake.metadata.visibility import visibility_changes

HOUR = 3_600_000
DAY = 24 * HOUR
NOBODY = ["not-a-segment-id"]  # removing it changes nothing and takes the timeline's way


def segment(span: tuple[int, int], version: str, spec: ShardSpec) -> DataSegment:
    return DataSegment("ds", Interval.of_millis(*span), version, spec)


def recorded(segments: list[DataSegment]) -> list[Row]:
    """Used records with the states the timeline gives them, as commits keep them."""
    states = VersionedIntervalTimeline(segments).visibility_states()
    return [segment_row(s, used=True, now_ms=0, visibility=states[s]) for s in segments]


def both_ways(rows: list[Row], added: list[DataSegment]) -> tuple[tuple, tuple]:
    changed = [s.interval for s in added]
    fast = visibility_changes(rows, added=added, changed=changed, scope=EVERYTHING, now_ms=1)
    full = visibility_changes(
        rows, added=added, removed=NOBODY, changed=changed, scope=EVERYTHING, now_ms=1
    )
    ids = {str(s.id) for s in added}

    def mine(result: tuple[dict[str, str], list]) -> tuple:
        states, updates = result
        return {i: v for i, v in states.items() if i in ids}, sorted(
            (u.row["id"], u.row["visibility"]) for u in updates
        )

    return mine(fast), mine(full)


SPANS = [(0, DAY), (DAY, 2 * DAY), *[(h * HOUR, (h + 1) * HOUR) for h in (0, 5, 23, 30)]]


@st.composite
def chunks(draw: st.DrawFn) -> list[DataSegment]:
    out = []
    for span in draw(st.lists(st.sampled_from(SPANS), max_size=5)):
        version = draw(st.sampled_from(["v1", "v2", "v3"]))
        core = draw(st.integers(0, 3))
        kind = draw(st.sampled_from(["numbered"] * 4 + ["tombstone", "overwrite"]))
        if kind == "tombstone":
            out.append(segment(span, version, TombstoneShardSpec()))
            continue
        present = draw(st.sets(st.integers(0, core + 2), max_size=core + 3))
        if draw(st.booleans()):  # complete, as most chunks are
            present |= set(range(core))
        out += [segment(span, version, NumberedShardSpec(p, core)) for p in sorted(present)]
        if kind == "overwrite":
            spec = NumberedOverwriteShardSpec(32768, 0, max(core, 1), 1, 1)
            out.append(segment(span, version, spec))
    unique = {s.id: s for s in out}
    return list(unique.values())


@settings(max_examples=600, deadline=None)
@given(chunks(), st.data())
def test_an_appended_partition_gets_the_state_the_timeline_gives_it(
    existing: list[DataSegment], data: st.DataObject
) -> None:
    rows = recorded(existing)
    chunks_there = sorted({(s.interval.key, s.version) for s in existing})
    added = []
    for _ in range(data.draw(st.integers(1, 3))):
        if chunks_there and data.draw(st.integers(0, 3)):
            span, version = data.draw(st.sampled_from(chunks_there))
        else:
            span, version = data.draw(st.sampled_from(SPANS)), "v2"
        taken = [
            s.shard_spec.partition_num
            for s in [*existing, *added]
            if (s.interval.key, s.version) == (span, version) and s.shard_spec.partition_num < 32768
        ]
        next_free = max(taken, default=-1) + 1
        partition = data.draw(st.sampled_from([next_free, next_free, 1, 4]))
        core = data.draw(st.integers(0, 3))
        new = segment(span, version, NumberedShardSpec(partition, core))
        if all(new.id != s.id for s in [*existing, *added]):
            added.append(new)
    fast, full = both_ways(rows, added)
    assert fast == full


def test_an_append_to_a_visible_chunk_is_decided_without_the_timeline() -> None:
    day = (0, DAY)
    existing = [segment(day, "v2", NumberedShardSpec(p, 2)) for p in range(3)]
    existing.append(segment(day, "v1", NumberedShardSpec(0, 1)))  # overshadowed
    rows = recorded(existing)
    added = [segment(day, "v2", NumberedShardSpec(3, 2))]
    fast, full = both_ways(rows, added)
    assert fast == full == ({str(added[0].id): "visible"}, [])
    # Without a visible chunk under it (v2 incomplete: partition 1 of 2 missing) the
    # timeline decides, and says standby.
    partial = recorded([existing[0], existing[2]])
    fast, full = both_ways(partial, added)
    assert fast == full
    assert fast[0] == {str(added[0].id): "standby"}
