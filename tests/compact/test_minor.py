"""Minor compaction on real Spark and Delta: the seed's scenario with real rows, refusal of a
second compaction of the same segments, and rollup metrics preserved."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from segmentlake.core.shard_spec import NumberedOverwriteShardSpec
from segmentlake.lake import Lake
from tests.compact.conftest import events, per_key, spec, totals

pytestmark = [pytest.mark.spark]


def batch(day: str, n: int, channel: str) -> list[tuple]:
    return [(f"{day}T{h % 24:02d}:10:00Z", channel, f"u{h % 5}", h) for h in range(n)]


def visible_partitions(lake: Lake, ds: str) -> list[int]:
    return sorted(s.shard_spec.partition_num for s in lake.timeline(ds).visible_segments())


def test_seed_scenario_every_appended_row_exactly_once(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    written: list[tuple] = []

    def append(rows: list[tuple]) -> None:
        written.extend(rows)
        assert lake.append(events(spark, rows), ds, spec()).status == "SUCCESS"

    def check() -> None:
        assert per_key(lake.read(ds)) == per_key(_rolled(spark, lake, written))

    for channel in ("#a", "#b", "#c"):  # segments 1-3 (partitions 0, 1, 2)
        append(batch("2024-01-01", 30, channel))
    check()
    segs = lake.used_segments(ds)
    # Minor compaction of 2+3 (partitions 1, 2) into 4 while an append writes 5.
    two_three = [s for s in segs if s.shard_spec.partition_num in (1, 2)]
    report = _compact_only(lake, ds, two_three)
    append(batch("2024-01-01", 20, "#d"))  # 5: partition 3
    assert (report.status, report.input_segments, report.segments) == ("SUCCESS", 2, 1)
    check()
    four = [s for s in lake.timeline(ds).visible_segments() if s.shard_spec.partition_num >= 32768]
    assert len(four) == 1
    spec4 = four[0].shard_spec
    assert isinstance(spec4, NumberedOverwriteShardSpec)
    assert (spec4.start_root_partition_id, spec4.end_root_partition_id) == (1, 3)
    assert (spec4.minor_version, spec4.atomic_update_group_size) == (1, 1)
    assert four[0].last_compaction_state["type"] == "minor"
    # 6+7 compact 4+5 (root ranges [1,3) and [3,4): adjacent) while an append writes 8.
    five = [s for s in lake.timeline(ds).visible_segments() if s.shard_spec.partition_num == 3]
    report = _compact_only(lake, ds, [four[0], five[0]], max_rows=60)
    append(batch("2024-01-01", 10, "#e"))  # 8: partition 4
    check()
    assert report.segments == 2
    six_seven = [s for s in lake.timeline(ds).visible_segments() if s.shard_spec.minor_version == 2]
    assert len(six_seven) == 2
    assert {
        (s.shard_spec.start_root_partition_id, s.shard_spec.end_root_partition_id)
        for s in six_seven
    } == {(1, 4)}
    assert {s.shard_spec.atomic_update_group_size for s in six_seven} == {2}
    assert {0, 4} <= set(visible_partitions(lake, ds))
    assert totals(lake.read(ds)) == totals(_rolled(spark, lake, written))


def _compact_only(lake: Lake, ds: str, inputs: list, max_rows: int = 1000):
    return lake.compact(ds, mode="minor", segments=inputs, max_rows_per_segment=max_rows)


def _rolled(spark: SparkSession, lake: Lake, rows: list[tuple]):
    """What a fresh datasource holding ``rows`` reads back (the reference)."""
    import uuid

    ref = f"ref_{uuid.uuid4().hex[:8]}"
    lake.append(events(spark, rows), ref, spec())
    return lake.read(ref)


def test_minor_leaves_a_large_segment_alone_and_merges_the_small_ones(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """Three small appends next to a large segment: only the small ones are rewritten (the
    manager's ratio rule), so compacting a day does not cost its whole size each time."""
    big = [(f"2024-01-01T{h % 24:02d}:10:00Z", "#big", f"u{h}", h) for h in range(3000)]
    written = list(big)
    lake.append(events(spark, big), ds, spec())
    (large,) = lake.used_segments(ds)
    for channel in ("#a", "#b", "#c"):
        rows = batch("2024-01-01", 3, channel)
        written += rows
        lake.append(events(spark, rows), ds, spec())
    before = per_key(lake.read(ds))

    report = lake.compact(ds, mode="minor")

    assert (report.status, report.input_segments, report.segments) == ("SUCCESS", 3, 1)
    visible = lake.timeline(ds).visible_segments()
    assert large in visible  # same id, same file: not rewritten
    (merged,) = [s for s in visible if s != large]
    spec_out = merged.shard_spec
    assert isinstance(spec_out, NumberedOverwriteShardSpec)
    assert (spec_out.start_root_partition_id, spec_out.end_root_partition_id) == (1, 4)
    assert per_key(lake.read(ds)) == before == per_key(_rolled(spark, lake, written))
    # Compacted as wanted: a second call finds nothing worth doing.
    assert lake.compact(ds, mode="minor").status == "SKIPPED"


def test_an_append_after_a_minor_compaction_and_its_cleanup_is_read(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    for channel in ("#a", "#b", "#c", "#d"):  # partitions 0..3
        lake.append(events(spark, batch("2024-01-01", 5, channel)), ds, spec())
    assert lake.compact(ds, mode="minor").status == "SUCCESS"
    assert len(lake.mark_overshadowed_unused(ds)) == 4  # 0..3, under the overwrite's range
    edits = totals(lake.read(ds))["edits"]

    report = lake.append(events(spark, batch("2024-01-01", 5, "#e")), ds, spec())

    # Numbered inside the overwrite's root range [0, 4), it was published and never read.
    assert report.status == "SUCCESS"
    assert totals(lake.read(ds))["edits"] == edits + 5
    assert visible_partitions(lake, ds) == [4, 32768]
