"""Which existing chunks an append joins whole (``joinable_chunks``): coarser than the
append's buckets, made of whole ones, and newest over all of their interval. Pure: Arrow
tables, no Spark."""

from __future__ import annotations

import pyarrow as pa

from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.metadata.chunk_layout import joinable_chunks

HOUR = 3_600_000
DAY = 24 * HOUR
JAN_2024 = 1_704_067_200_000  # a Monday, the first of a month


def chunks_joined(table: pa.Table, granularity: Granularity) -> tuple[Interval, ...]:
    return joinable_chunks(table, granularity).intervals()


def segments(*rows: tuple[int, int, str, bool | None]) -> pa.Table:
    starts, ends, versions, used = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table(
        {
            "start_ms": pa.array(starts, pa.int64()),
            "end_ms": pa.array(ends, pa.int64()),
            "version": pa.array(versions, pa.string()),
            "used": pa.array(used, pa.bool_()),
        }
    )


def day(n: int) -> tuple[int, int]:
    return JAN_2024 + n * DAY, JAN_2024 + (n + 1) * DAY


def hour(n: int) -> tuple[int, int]:
    return JAN_2024 + n * HOUR, JAN_2024 + (n + 1) * HOUR


def test_chunks_of_the_appends_own_granularity_are_no_coarser_chunks() -> None:
    table = segments((*hour(0), "v1", True), (*hour(1), "v1", True))
    assert chunks_joined(table, Granularity.HOUR) == ()
    assert chunks_joined(segments(), Granularity.HOUR) == ()


def test_day_chunks_newer_than_the_hours_they_replaced_are_joined() -> None:
    table = segments(
        *[(*hour(h), "v1", True) for h in range(48)],
        (*day(0), "v2", True),
        (*day(0), "v3", True),
        (*day(1), "v2", None),
    )
    assert chunks_joined(table, Granularity.HOUR) == (
        Interval.of_millis(*day(0)),
        Interval.of_millis(*day(1)),
    )


def test_a_day_overshadowed_anywhere_by_a_newer_chunk_is_not_joined() -> None:
    table = segments(
        (*day(0), "v2", True),
        (*hour(5), "v3", True),  # an hour compacted again, finer, after the day
        (*day(1), "v2", True),
        (*day(2), "v2", False),  # unused: no chunk at all
    )
    assert chunks_joined(table, Granularity.HOUR) == (Interval.of_millis(*day(1)),)


def test_of_overlapping_coarse_chunks_only_the_newest_is_joined() -> None:
    month = (JAN_2024, JAN_2024 + 31 * DAY)
    table = segments((*day(0), "v2", True), (*month, "v3", True), (*day(40), "v1", True))
    assert chunks_joined(table, Granularity.HOUR) == (
        Interval.of_millis(*month),
        Interval.of_millis(*day(40)),
    )


def test_a_chunk_not_made_of_whole_buckets_is_not_joined() -> None:
    month = (JAN_2024, JAN_2024 + 31 * DAY)  # ends on a Thursday: no whole weeks
    assert chunks_joined(segments((*month, "v1", True)), Granularity.WEEK) == ()
    assert chunks_joined(segments((*month, "v1", True)), Granularity.ALL) == ()
    odd = (JAN_2024 + HOUR, JAN_2024 + 3 * HOUR)  # two hours: no granularity's bucket
    assert chunks_joined(segments((*odd, "v1", True)), Granularity.HOUR) == ()


def test_each_change_to_the_chunks_is_seen_by_the_next_call() -> None:
    # A stream calls this before every append: a joined day, a day compacted again finer,
    # one marked unused and one in a newer version each change the answer, or do not.
    days = [(*day(d), "v2", True) for d in range(3)]
    assert len(chunks_joined(segments(*days), Granularity.HOUR)) == 3
    joined_again = segments(*days, (*day(1), "v2", True))  # a segment joined day 1
    assert len(chunks_joined(joined_again, Granularity.HOUR)) == 3
    finer = segments(*days, (*hour(30), "v3", True))  # day 1 compacted again, finer
    assert chunks_joined(finer, Granularity.HOUR) == (
        Interval.of_millis(*day(0)),
        Interval.of_millis(*day(2)),
    )
    fewer = segments(*days[:2], (*day(2), "v1", False))
    assert len(chunks_joined(fewer, Granularity.HOUR)) == 2
    newer = segments(days[0], days[1], (*day(2), "v4", True))
    assert len(chunks_joined(newer, Granularity.HOUR)) == 3
    assert chunks_joined(segments(*days), Granularity.SIX_HOUR) == tuple(
        Interval.of_millis(*day(d)) for d in range(3)
    )
    assert chunks_joined(segments(*days), Granularity.DAY) == ()


def test_overlapping_chunks_of_one_version_are_not_joined() -> None:
    # Publishes never make them; if a hand-made state has them, a row there has no one
    # chunk to join, and the append writes it by bucket.
    quarter_day = (JAN_2024, JAN_2024 + 6 * HOUR)
    table = segments((*day(0), "v2", True), (*quarter_day, "v2", True), (*day(1), "v2", True))
    assert chunks_joined(table, Granularity.HOUR) == (Interval.of_millis(*day(1)),)
