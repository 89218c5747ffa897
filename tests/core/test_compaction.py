"""The pure compaction rules: which runs a minor compaction takes, the merged schema, the
combining aggregators and the compaction state."""

from __future__ import annotations

import pytest

from segmentlake.core.compaction import (
    compacted_as_wanted,
    compaction_state,
    merged_schema,
    minor_runs,
)
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import MetricSpec
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema, combining_metric
from segmentlake.core.shard_spec import NumberedOverwriteShardSpec, NumberedShardSpec
from segmentlake.errors import SpecError

DAY = Interval.parse("2024-01-01/P1D")
SCHEMA = SegmentSchema((MetricSpec("count", "n"),), Granularity.HOUR, rollup=True)


def seg(spec, rows: int = 10, **more) -> DataSegment:
    return DataSegment("wiki", DAY, "v1", spec, num_rows=rows, schema=SCHEMA, **more)


def first(p: int, rows: int = 10) -> DataSegment:
    return seg(NumberedShardSpec(p, 3), rows)


def over(p: int, start: int, end: int, minor: int, size: int, rows: int = 10) -> DataSegment:
    return seg(NumberedOverwriteShardSpec(32768 + p, start, end, minor, size), rows)


def test_adjacent_root_ranges_form_one_run_with_the_next_minor_version() -> None:
    (run,) = minor_runs([first(0), first(1), first(2)], max_rows_per_segment=100)
    assert len(run.inputs) == 3
    assert (run.root_range, run.minor_version, run.outputs) == ((0, 3), 1, 1)


def test_a_gap_in_root_ranges_splits_runs_and_single_groups_are_left_alone() -> None:
    runs = minor_runs([first(0), first(1), first(3)], max_rows_per_segment=100)
    assert [r.root_range for r in runs] == [(0, 2)]


def test_atomic_update_groups_are_taken_whole_and_incomplete_ones_never() -> None:
    aug = [over(0, 1, 3, 1, 2), over(1, 1, 3, 1, 2)]  # complete group of two over [1, 3)
    (run,) = minor_runs([first(0), *aug, first(3)], max_rows_per_segment=100)
    assert set(run.inputs) == {first(0), *aug, first(3)}
    assert run.minor_version == 2
    incomplete = [over(2, 1, 3, 1, 2)]  # one of two: a fallback, ends the run
    runs = minor_runs([first(0), *incomplete, first(3), first(4)], max_rows_per_segment=100)
    assert [r.root_range for r in runs] == [(3, 5)]


def test_runs_are_taken_only_when_useful_unless_chosen() -> None:
    full = [first(0, rows=100), first(1, rows=100)]
    assert minor_runs(full, max_rows_per_segment=100) == []  # two stay two
    (forced,) = minor_runs(full, max_rows_per_segment=100, only_if_useful=False)
    assert forced.outputs == 2
    (split,) = minor_runs([first(0, rows=250)], max_rows_per_segment=100)
    assert split.outputs == 3
    with pytest.raises(SpecError, match=">= 1"):
        minor_runs(full, max_rows_per_segment=0)


def test_merged_schema_and_combining_aggregators() -> None:
    other = SegmentSchema(
        (MetricSpec("count", "n"), MetricSpec("HLLSketchBuild", "u", "user")),
        Granularity.MINUTE,
        rollup=False,
    )
    a = seg(NumberedShardSpec(0, 1), dimensions=("channel",))
    b = DataSegment("wiki", DAY, "v2", dimensions=("channel", "page"), schema=other)
    dims, schema = merged_schema([a, b])
    assert dims == ("channel", "page")
    assert [m.name for m in schema.aggregators] == ["n", "u"]
    assert (schema.query_granularity, schema.rollup) == (Granularity.MINUTE, False)
    assert [m.type for m in schema.combining()] == ["longSum", "HLLSketchMerge"]
    assert combining_metric(MetricSpec("doubleMin", "lo", "x")) == MetricSpec(
        "doubleMin", "lo", "lo"
    )
    clash = DataSegment("wiki", DAY, "v3", schema=SegmentSchema((MetricSpec("longSum", "n", "x"),)))
    with pytest.raises(SpecError, match="'n' is count in some segments and longSum"):
        merged_schema([a, clash])
    with pytest.raises(SpecError, match="records no schema"):
        merged_schema([DataSegment("wiki", DAY, "v1")])


def test_compaction_state_round_trip_and_comparison() -> None:
    state = compaction_state(
        "major",
        ("channel",),
        SCHEMA,
        segment_granularity=Granularity.DAY,
        partitions_spec={"type": "hashed", "targetRowsPerSegment": 5},
    )
    done = seg(NumberedShardSpec(0, 1), last_compaction_state=state)
    assert compacted_as_wanted([done], DAY, state)
    assert not compacted_as_wanted([done], DAY, {**state, "type": "minor"})
    assert not compacted_as_wanted([first(0)], DAY, state)
    assert SegmentSchema.from_json(SCHEMA.to_json()) == SCHEMA
