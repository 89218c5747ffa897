"""The chunks an append joins whole, as arrays: checked on the way in, found by start,
grouped by granularity."""

from __future__ import annotations

import numpy as np
import pytest

from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.joined_chunks import JoinedChunks

HOUR = 3_600_000
DAY = 24 * HOUR
JAN_2024 = 1_704_067_200_000
FEB_2024 = JAN_2024 + 31 * DAY


def test_chunks_are_found_by_their_start_and_grouped_by_granularity() -> None:
    month = Interval.of_millis(JAN_2024, FEB_2024)
    days = [Interval.of_millis(FEB_2024 + d * DAY, FEB_2024 + (d + 1) * DAY) for d in (0, 1, 5)]
    joined = JoinedChunks.of([days[2], month, days[0], days[1]])

    assert joined.intervals() == (month, *days)
    assert len(joined) == 4
    assert joined
    assert not JoinedChunks.empty()
    assert joined.starting_at(FEB_2024 + DAY) == days[1]
    assert joined.starting_at(FEB_2024 + 2 * DAY) is None  # inside no chunk's start
    assert joined.starting_at(JAN_2024 + HOUR) is None  # inside the month, not its start
    groups = joined.by_granularity()
    assert set(groups) == {Granularity.MONTH, Granularity.DAY}
    assert groups[Granularity.DAY][0].tolist() == [d.start_millis for d in days]
    assert groups[Granularity.MONTH][1].tolist() == [FEB_2024]


@pytest.mark.parametrize(
    ("starts", "ends", "says"),
    [
        ([JAN_2024, JAN_2024 + HOUR], [JAN_2024 + DAY, JAN_2024 + DAY + HOUR], "disjoint"),
        ([JAN_2024 + DAY, JAN_2024], [JAN_2024 + 2 * DAY, JAN_2024 + DAY], "sorted"),
        ([JAN_2024], [JAN_2024], "non-empty"),
        ([JAN_2024], [JAN_2024 + 2 * HOUR], "no granularity's bucket"),
        ([JAN_2024 + HOUR], [JAN_2024 + HOUR + DAY], "no granularity's bucket"),
        ([JAN_2024], [JAN_2024 + DAY, JAN_2024 + 2 * DAY], "one length"),
    ],
)
def test_overlapping_unsorted_or_odd_chunks_are_refused_by_name(
    starts: list[int], ends: list[int], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        JoinedChunks(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
