"""Which chunk a new segment id goes into (``chunk_for`` over :class:`ChunkRows`), checked
against the question asked of every row read, as allocation asked it before the rows were
grouped by chunk. Pure: no table, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.interval import Interval
from segmentlake.core.interval_index import IntervalIndex
from segmentlake.core.shard_spec import (
    FIRST_GENERATION_PARTITION_ID_MAX,
    NON_ROOT_GENERATION_PARTITION_ID_MAX,
    NON_ROOT_GENERATION_PARTITION_ID_MIN,
)
from segmentlake.errors import SpecError
from segmentlake.metadata.allocation import ChunkRows, ChunkSlot, chunk_for
from segmentlake.metadata.records import PENDING, SEGMENT, Row

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
AT = 1_700_000_000_000


def reference(rows: list[Row], interval: Interval, overwrite: str | None) -> ChunkSlot:
    """The row-by-row answer: the rows overlapping ``interval`` (in the order an index of
    the rows lists them, which breaks ties between chunks of one version), the highest
    version among those containing it, and that chunk's ids and core partitions."""
    start, end = interval.start_millis, interval.end_millis
    index = IntervalIndex((r["start_ms"], r["end_ms"], r) for r in rows)
    near = index.overlapping(start, end)
    holding = [r for r in near if r["start_ms"] <= start and r["end_ms"] >= end]
    if overwrite is not None:
        version = overwrite
    elif holding:
        best = max(holding, key=lambda r: r["version"])
        interval = Interval.of_millis(best["start_ms"], best["end_ms"])
        version = best["version"]
    elif near:
        raise SpecError("overlaps existing chunks")
    else:
        version = "new"
    mine = [r for r in near if (r["start_ms"], r["end_ms"]) == interval.key]
    mine = [r for r in mine if r["version"] == version]
    low = 0 if overwrite is None else NON_ROOT_GENERATION_PARTITION_ID_MIN
    high = (
        FIRST_GENERATION_PARTITION_ID_MAX
        if overwrite is None
        else NON_ROOT_GENERATION_PARTITION_ID_MAX
    )
    taken = [r["partition_num"] for r in mine if low <= r["partition_num"] <= high]
    if overwrite is None:  # the root partitions an overwrite covers are taken too
        taken += [r["root_end"] - 1 for r in mine if r.get("root_end") is not None]
    core = 0
    for r in mine:
        if r["kind"] == SEGMENT and r["partition_num"] < NON_ROOT_GENERATION_PARTITION_ID_MIN:
            core = max(core, r["core_partitions"])
        elif r["kind"] == PENDING:
            core = max(core, r["seq"])
    return ChunkSlot(interval, version, max(taken, default=low - 1) + 1, core)


def row(
    kind: str,
    start: int,
    length: int,
    version: str,
    partition: int,
    core: int,
    root_end: int | None = None,
) -> Row:
    return {
        "root_end": root_end,
        "kind": kind,
        "start_ms": start,
        "end_ms": start + length,
        "version": version,
        "partition_num": partition,
        "core_partitions": core if kind == SEGMENT else None,
        "seq": core if kind == PENDING else None,
    }


def _rows(draw: st.DrawFn) -> list[Row]:
    out = []
    for _ in range(draw(st.integers(0, 40))):
        day = draw(st.booleans())
        start = draw(st.integers(0, 1)) * DAY_MS if day else draw(st.integers(0, 47)) * HOUR_MS
        kind = draw(st.sampled_from([SEGMENT, SEGMENT, PENDING]))
        partition = draw(st.sampled_from(PARTITIONS))
        # A minor compaction's overwrite segment covers root partitions [0, root_end).
        overwrites = kind == SEGMENT and partition >= NON_ROOT_GENERATION_PARTITION_ID_MIN
        out.append(
            row(
                kind,
                start,
                DAY_MS if day else HOUR_MS,
                draw(st.sampled_from(["v1", "v2", "v3"])),
                partition,
                draw(st.integers(0, 4)),
                draw(st.integers(1, 9)) if overwrites else None,
            )
        )
    return out


# Ids at both ends of both ranges: first generation 0..32767, overwrites 32768..65535.
PARTITIONS = [
    0,
    1,
    5,
    FIRST_GENERATION_PARTITION_ID_MAX,
    NON_ROOT_GENERATION_PARTITION_ID_MIN,
    40_000,
    NON_ROOT_GENERATION_PARTITION_ID_MAX,
]
rows_strategy = st.composite(_rows)()


@settings(max_examples=300, deadline=None)
@given(
    rows_strategy,
    st.lists(st.integers(0, 47), min_size=1, max_size=12),
    st.sampled_from([None, "v1", "v2", "v9"]),
)
def test_chunk_for_answers_as_the_row_by_row_question(
    rows: list[Row], hours: list[int], overwrite: str | None
) -> None:
    chunks = ChunkRows(rows, unused=None)
    for hour in hours:  # one ChunkRows answers many requests, as a decision asks them
        interval = Interval.of_millis(hour * HOUR_MS, (hour + 1) * HOUR_MS)
        try:
            expected = reference(rows, interval, overwrite)
        except SpecError:
            with pytest.raises(SpecError, match="another segment granularity"):
                chunk_for(chunks, interval, overwrite, AT)
            continue
        got = chunk_for(chunks, interval, overwrite, AT)
        if expected.version == "new":  # a fresh chunk's version is made from the clock
            expected = ChunkSlot(expected.interval, got.version, 0, 0)
        assert got == expected


def test_an_hour_append_joins_the_newest_day_chunk_and_its_ids() -> None:
    rows = [
        row(SEGMENT, 0, DAY_MS, "v1", 0, 1),
        row(SEGMENT, 0, DAY_MS, "v2", 0, 2),
        row(SEGMENT, 0, DAY_MS, "v2", 1, 2),
        row(SEGMENT, 0, DAY_MS, "v2", 4, 2),
        row(PENDING, 0, DAY_MS, "v2", 7, 3),
        row(SEGMENT, 0, HOUR_MS, "v1", 0, 1),
    ]
    slot = chunk_for(
        ChunkRows(rows, unused=None), Interval.of_millis(5 * HOUR_MS, 6 * HOUR_MS), None, AT
    )
    assert slot == ChunkSlot(Interval.of_millis(0, DAY_MS), "v2", 8, 3)


def test_an_append_after_a_minor_compaction_is_numbered_past_the_roots_it_covers() -> None:
    # Partitions 0..3 were merged into one overwrite segment and marked unused: root id 0
    # would be overshadowed by it, so the append gets 4.
    rows = [row(SEGMENT, 0, DAY_MS, "v1", NON_ROOT_GENERATION_PARTITION_ID_MIN, 4, root_end=4)]
    slot = chunk_for(ChunkRows(rows, unused=None), Interval.of_millis(0, DAY_MS), None, AT)
    assert (slot.version, slot.next_partition) == ("v1", 4)


def test_a_day_append_over_hour_chunks_is_refused_naming_them() -> None:
    rows = [row(SEGMENT, 2 * HOUR_MS, HOUR_MS, "v1", 0, 1)]
    with pytest.raises(SpecError, match=r"overlaps existing chunks .*T02:00:00.000Z"):
        chunk_for(ChunkRows(rows, unused=None), Interval.of_millis(0, DAY_MS), None, AT)
