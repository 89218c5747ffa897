"""Inspection straight from the Arrow records (``Lake.segment_records``, ``segmentlake
segments``) agrees with the segments built one by one, including overshadowed ones."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from segmentlake.cli.text_tables import format_table, print_segments, print_timeline
from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.shard_spec import NumberedShardSpec, ShardSpec, TombstoneShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from tests.metadata.support import day_after, pending_segment, segment


def _append(lake: Lake, ds: str, days: list[int], group: str) -> None:
    requests = [AllocateRequest(day_after(d), f"{group}-{d}") for d in days]
    pending = lake.actions.allocate(ds, requests, group_id=group)
    lake.actions.publish(ds, [pending_segment(p) for p in pending], group_id=group)


def _overwrite(lake: Lake, ds: str, day: int) -> None:
    granted = lake.actions.try_lock(ds, day_after(day), group_id="overwrite")
    assert granted.granted
    version = lake.locks(ds)[0].version
    lake.actions.publish(ds, [segment(ds, day_after(day), version)], group_id="overwrite")


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


def _replace(lake: Lake, ds: str, interval: Interval, specs: list[ShardSpec], group: str) -> None:
    """Publish ``specs`` under a new version of ``interval`` (an overwrite's lock)."""
    assert lake.actions.try_lock(ds, interval, group_id=group).granted
    version = next(lock.version for lock in lake.locks(ds) if lock.group_id == group)
    segments = [segment(ds, interval, version, shard_spec=spec) for spec in specs]
    lake.actions.publish(ds, segments, group_id=group)


def _as_lookup(lake: Lake, ds: str, query: Interval) -> list[tuple[object, ...]]:
    return [
        (h.interval, h.version, tuple(s.shard_spec.partition_num for s in h.segments),
         sum(s.num_rows for s in h.segments))
        for h in lake.timeline(ds).lookup(query)
    ]  # fmt: skip


def _as_pieces(lake: Lake, ds: str, query: Interval) -> list[tuple[object, ...]]:
    return [
        (p.interval, p.chunk.version, p.chunk.partitions, p.chunk.num_rows)
        for p in lake.visible_pieces(ds, None if query == ETERNITY else query)
    ]


def test_visible_pieces_from_records_are_the_timeline_lookup(tmp_path: Path) -> None:
    """``Lake.visible_pieces`` (and ``segmentlake timeline``) sweep the chunks of visible
    records only: after every kind of change they equal the built timeline's lookup."""
    lake = Lake(None, str(tmp_path / "wh"), lease_seconds=600)
    ds = "pieces"
    hour = Interval.parse("2024-01-02T05:00/PT1H")
    queries = [ETERNITY, day_after(1), Interval.parse("2024-01-02T04:30/PT2H"), day_after(9)]
    steps = [
        lambda: _append(lake, ds, [0, 1, 2, 3], "first"),
        lambda: _append(lake, ds, [0, 1], "second"),
        lambda: _overwrite(lake, ds, 2),  # a whole day replaced
        lambda: _replace(lake, ds, hour, [NumberedShardSpec(0, 1)], "hour"),  # part of a day
        lambda: _replace(lake, ds, day_after(3), [TombstoneShardSpec()], "tombstone"),
        # Incomplete (1 of 2 core partitions): standby, day 0 stays as it was.
        lambda: _replace(lake, ds, day_after(0), [NumberedShardSpec(0, 2)], "incomplete"),
        lambda: lake.mark_unused([s.id for s in lake.used_segments(ds) if s.interval == hour]),
    ]
    for step in steps:
        step()
        for query in queries:
            assert _as_pieces(lake, ds, query) == _as_lookup(lake, ds, query), (step, query)
    # The partly replaced day came back whole, the tombstone hides day 3.
    assert [p[0] for p in _as_pieces(lake, ds, ETERNITY)] == [
        day_after(0), day_after(1), day_after(2)
    ]  # fmt: skip

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_timeline(lake, ds, None)
    assert out.getvalue().splitlines()[-1] == f"3 visible piece(s) of {ds}"


def test_inspection_commands_import_neither_spark_nor_pandas(tmp_path: Path) -> None:
    """Each inspection command in its own process (as a user runs it) answers without
    importing pyspark or pandas: their imports alone cost more than the answer at 10^5
    segments."""
    lake = Lake(None, str(tmp_path / "wh"), lease_seconds=600)
    _append(lake, "wiki", [0, 1], "first")
    root = Path(__file__).resolve().parents[2]
    for command in ("segments", "timeline", "locks", "tasks", "compaction-status", "rules"):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "segmentlake.cli",
             "--warehouse", lake.warehouse, command, "wiki"],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)},
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr[-2000:])
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
        # pyarrow's one look for pandas, refused, is logged as a bare "pandas": a real
        # import brings its submodules.
        assert not {m for m in imported if m.startswith(("pyspark", "pandas."))}, command
        assert done.stdout.strip(), command
