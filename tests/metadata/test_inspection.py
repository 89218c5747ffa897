"""Inspection straight from the Arrow records (``Lake.segment_records``, ``segmentlake
segments``) agrees with the segments built one by one, including overshadowed ones."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from segmentlake.cli.inspect import format_table, print_segments
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from tests.metadata.support import day_after, pending_segment, segment


def _append(lake: Lake, ds: str, days: list[int], group: str) -> None:
    requests = [AllocateRequest(day_after(d), f"{group}-{d}") for d in days]
    pending = lake.allocate(ds, requests, group_id=group)
    lake.publish(ds, [pending_segment(p) for p in pending], group_id=group)


def _overwrite(lake: Lake, ds: str, day: int) -> None:
    granted = lake.try_lock(ds, day_after(day), group_id="overwrite")
    assert granted.granted
    version = lake.locks(ds)[0].version
    lake.publish(ds, [segment(ds, day_after(day), version)], group_id="overwrite")


def test_segment_records_and_listing_match_the_segments(tmp_path: Path) -> None:
    lake = Lake(None, str(tmp_path / "wh"), lease_seconds=600)
    ds = "inspected"
    _append(lake, ds, [0, 1, 2, 3], "first")
    _append(lake, ds, [0, 1], "second")  # a second partition in days 0 and 1
    _overwrite(lake, ds, 2)  # a newer version hides day 2's first segment

    segments = lake.used_segments(ds)
    records = lake.segment_records(ds)
    assert records.num_rows == len(segments) == 7
    assert sorted(records["id"].to_pylist()) == sorted(str(s.id) for s in segments)
    states = dict(zip(records["id"].to_pylist(), records["visibility"].to_pylist(), strict=True))
    hidden = next(
        s
        for s in segments
        if s.interval == day_after(2)
        and s.version < max(t.version for t in segments if t.interval == day_after(2))
    )
    assert [i for i, state in states.items() if state == "overshadowed"] == [str(hidden.id)]

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_segments(lake, ds, None)
    expected = format_table(
        ("interval", "version", "partition", "shard", "rows", "bytes"),
        [
            (s.interval, s.version, s.shard_spec.partition_num, s.shard_spec.type_name,
             s.num_rows, s.size)
            for s in segments
        ],
    )  # fmt: skip
    assert out.getvalue() == f"{expected}\n7 used segment(s) in {ds}\n"

    one_day = lake.segment_records(ds, day_after(1))
    assert sorted(one_day["id"].to_pylist()) == sorted(
        str(s.id) for s in segments if s.interval == day_after(1)
    )


def test_the_timeline_picture_draws_every_segment_in_its_state(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from segmentlake.plot import plot_timeline

    lake = Lake(None, str(tmp_path / "wh"), lease_seconds=600)
    ds = "pictured"
    _append(lake, ds, [0, 1, 2], "first")
    _overwrite(lake, ds, 1)
    ax = plot_timeline(lake, ds)
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(bars) == 4
    grey = [b for b in bars if to_hex(b.get_facecolor()) == "#d0d0d0"]
    assert len(grey) == 1  # the first version's day 1, overshadowed
    assert "4 used segment(s), 2 version(s)" in ax.get_title()
