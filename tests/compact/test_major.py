"""Major compaction on real Spark and Delta: HOUR -> DAY with perfect rollup, metrics kept
(sums, mins, maxes, HLL sketches), the compaction state recorded and honoured, bad requests
refused with a message saying what would be right."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from segmentlake.core.shard_spec import HashBasedNumberedShardSpec, NumberedShardSpec
from segmentlake.errors import SpecError
from segmentlake.lake import Lake
from tests.compact.conftest import events, per_key, spec, totals

pytestmark = [pytest.mark.spark]


def hourly(day: str, n: int, salt: int) -> list[tuple]:
    return [
        (f"{day}T{h % 24:02d}:{h % 60:02d}:00Z", f"#{h % 3}", f"u{h % 7}", h + salt)
        for h in range(n)
    ]


def test_major_hour_to_day_keeps_every_metric(spark: SparkSession, lake: Lake, ds: str) -> None:
    for salt in range(3):  # three appends: 3 segments per hour
        for day in ("2024-01-01", "2024-01-02"):
            lake.append(events(spark, hourly(day, 48, salt)), ds, spec(segment="hour"))
    before = lake.read(ds)
    keys_before, totals_before = per_key(before), totals(before)
    inputs = lake.timeline(ds).visible_segments()
    assert len(inputs) == 2 * 24 * 3

    report = lake.compact(ds, mode="major", segment_granularity="DAY")
    assert report.status == "SUCCESS", report.summary()
    assert report.type == "compact"
    assert report.input_segments == 2 * 24 * 3
    # The compaction read exactly the rows of the segments it replaced: every visible hourly
    # row once (the segment records and a read of the visible rows agree on how many).
    rows_before = before.count()
    assert sum(s.num_rows for s in inputs) == rows_before
    assert report.rows.rows_in == rows_before, report.summary()
    assert report.rows.processed == rows_before, report.summary()
    visible = lake.timeline(ds).visible_segments()
    assert {str(s.interval) for s in visible} == {
        "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z",
        "2024-01-02T00:00:00.000Z/2024-01-03T00:00:00.000Z",
    }
    assert all(isinstance(s.shard_spec, HashBasedNumberedShardSpec) for s in visible)
    state = visible[0].last_compaction_state
    assert state["type"] == "major"
    assert state["granularitySpec"]["segmentGranularity"] == "DAY"
    assert [m["type"] for m in state["metricsSpec"]] == [
        "count",
        "longSum",
        "longMin",
        "longMax",
        "HLLSketchBuild",
    ]
    after = lake.read(ds)
    assert per_key(after) == keys_before
    assert totals(after) == totals_before
    assert report.commits.get("publish") == 1

    again = lake.compact(ds, mode="major", segment_granularity="DAY")
    assert (again.status, again.skipped_chunks, again.segments) == ("SKIPPED", 2, 0)
    assert lake.compact(ds, mode="minor").status == "SKIPPED"


def test_major_with_dynamic_partitioning_cuts_each_rolled_up_chunk(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """A Druid compaction task's default: each chunk rolled up whole, then cut to
    maxRowsPerSegment in numbered segments."""
    for _ in range(2):  # the same keys twice: rollup halves the rows
        for day in ("2024-01-01", "2024-01-02"):
            lake.append(events(spark, hourly(day, 48, 0)), ds, spec(segment="hour"))
    before = lake.read(ds)
    keys_before, totals_before, rows_before = per_key(before), totals(before), before.count()
    dynamic = {"type": "dynamic", "maxRowsPerSegment": 10}
    report = lake.compact(ds, mode="major", segment_granularity="DAY", partitions_spec=dynamic)
    assert report.status == "SUCCESS", report.summary()
    visible = lake.timeline(ds).visible_segments()
    per_day: dict[str, list[int]] = {}
    for s in visible:
        assert isinstance(s.shard_spec, NumberedShardSpec)
        per_day.setdefault(str(s.interval.start), []).append(s.num_rows)
    rows_after = lake.read(ds).count()
    assert rows_after == rows_before // 2  # every key was appended twice
    for sizes in per_day.values():
        assert max(sizes) <= 10  # cut to the limit (into pieces of at most 80% of it)
        assert sum(sizes) == 48
        assert len(sizes) >= 5
    assert len(per_day) == 2
    assert per_key(lake.read(ds)) == keys_before
    assert totals(lake.read(ds)) == totals_before
    assert visible[0].last_compaction_state["partitionsSpec"]["type"] == "dynamic"
    again = lake.compact(ds, mode="major", segment_granularity="DAY", partitions_spec=dynamic)
    assert again.status == "SKIPPED"


def after_rows(lake: Lake, ds: str) -> int:
    return lake.read(ds).count()


def test_major_compaction_refuses_a_misaligned_interval(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(events(spark, hourly("2024-01-01", 5, 0)), ds, spec(segment="day"))
    with pytest.raises(SpecError, match=r"whole chunks.*e\.g\. 2024-01-01"):
        lake.compact(ds, "2024-01-01T00:00/PT12H", mode="major")
    with pytest.raises(SpecError, match="partitionsSpec type 'hashd'"):
        lake.compact(ds, mode="major", partitions_spec={"type": "hashd"})
    with pytest.raises(SpecError, match="'minor' or 'major'"):
        lake.compact(ds, mode="full")
    with pytest.raises(SpecError, match="nothing to compact"):
        lake.compact(ds, "2030-01-01/P1D", mode="major")


def test_cli_compact_and_the_state_in_the_segments_view(
    spark: SparkSession, lake: Lake, ds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from segmentlake.cli.main import main

    lake.append(events(spark, hourly("2024-01-01", 6, 0)), ds, spec(segment="hour"))
    args = ["--warehouse", lake.warehouse, "compact", ds, "--interval", "2024-01-01/P1D"]
    assert main([*args, "--mode", "major", "--segment-granularity", "DAY"]) == 0
    assert "compaction: 6 input segment(s)" in capsys.readouterr().out
    assert main([*args, "--mode", "minor", "--segment-granularity", "DAY"]) == 2
    assert "need mode='major'" in capsys.readouterr().err
    assert main([*args, "--mode", "major", "--partitions-spec", "{oops"]) == 2
    lake.register_system_views()
    states = spark.sql(
        f"SELECT get_json_object(last_compaction_state, '$.type') AS type "
        f"FROM segmentlake_segments WHERE datasource = '{ds}' AND used"
    ).collect()
    assert sorted(r.type or "none" for r in states) == ["major"] + ["none"] * 6
