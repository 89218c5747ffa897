"""The compaction manager's pure rules: the ratio planner, the jobs that drain a selection,
the two shipped selectors, job identity and priority, and the config's JSON."""

from __future__ import annotations

import pytest

from segmentlake.core.compaction_config import (
    CompactionConfig,
    planner_from_json,
    register_selector,
)
from segmentlake.core.compaction_jobs import (
    ChunkKey,
    ChunkView,
    CompactionJob,
    CompactionKind,
    RunningCompaction,
    Selection,
    SelectionState,
    job_priority,
    segment_set_hash,
)
from segmentlake.core.compaction_planning import (
    FingerprintSelector,
    MaskedRowsSelector,
    RatioPlanner,
    consecutive_groups,
    selection_jobs,
    whole_groups,
)
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import MetricSpec
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import NumberedOverwriteShardSpec, NumberedShardSpec
from segmentlake.errors import SpecError

DAY = Interval.parse("2024-01-01/P1D")
CHUNK = ChunkKey(DAY, "v1")
SCHEMA = SegmentSchema((MetricSpec("count", "n"),), Granularity.HOUR, rollup=True)


def first(p: int, size: int = 100, rows: int = 10, **more) -> DataSegment:
    return DataSegment(
        "wiki", DAY, "v1", NumberedShardSpec(p, 0), size=size, num_rows=rows, schema=SCHEMA, **more
    )


def over(p: int, start: int, end: int, minor: int, group: int, size: int = 100) -> DataSegment:
    spec = NumberedOverwriteShardSpec(32768 + p, start, end, minor, group)
    return DataSegment("wiki", DAY, "v1", spec, size=size, num_rows=10, schema=SCHEMA)


def ids(segments: list[DataSegment]) -> tuple[str, ...]:
    return tuple(str(s.id) for s in segments)


def view(segments: list[DataSegment], **more) -> ChunkView:
    return ChunkView(CHUNK, tuple(segments), **more)


def selection(segments: list[DataSegment], state=SelectionState.SELECTED, limit=4) -> Selection:
    chosen = ids(segments) if state is SelectionState.SELECTED else ()
    return Selection(CHUNK, "user_1", CompactionKind.USER, state, chosen, 1000, limit)


def running(segments: list[DataSegment]) -> RunningCompaction:
    job = CompactionJob(CHUNK, CompactionKind.SYSTEM, ids(segments), 0)
    return RunningCompaction(job, "c1", 0, 10**15)


def test_ratio_planner_takes_windows_of_consecutive_small_segments() -> None:
    segments = [first(p) for p in range(10)]
    jobs = RatioPlanner(ratio=3.0, max_segments_per_job=4).plan(view(segments))
    assert [len(j.segments) for j in jobs] == [4, 4]  # two more wait: 200 < 3 x 100
    assert jobs[0].segments == ids(segments[:4])
    assert jobs[0].score == 10


def test_ratio_planner_leaves_a_large_segment_until_enough_gathers_next_to_it() -> None:
    big, small = first(0, size=1000), [first(p, size=100) for p in range(1, 4)]
    planner = RatioPlanner(ratio=2.0, max_segments_per_job=12)
    (job,) = planner.plan(view([big, *small]))
    assert job.segments == ids(small)  # 1300 < 2 x 1000: the big one waits
    more = [first(p, size=100) for p in range(1, 11)]
    (job,) = planner.plan(view([big, *more]))
    assert job.segments == ids([big, *more])  # 2000 >= 2 x 1000


def test_ratio_planner_skips_busy_selected_and_held_segments_and_cuts_runs() -> None:
    segments = [first(p) for p in range(8)]
    planner = RatioPlanner(ratio=1.0, max_segments_per_job=10)
    jobs = planner.plan(view(segments, running=(running(segments[3:4]),)))
    assert [j.segments for j in jobs] == [ids(segments[:3]), ids(segments[4:])]
    jobs = planner.plan(view(segments, selection=selection(segments[:6])))
    assert [j.segments for j in jobs] == [ids(segments[6:])]
    held = selection([], SelectionState.HELD)
    assert planner.plan(view(segments, selection=held)) == []


def test_ratio_planner_never_plans_a_useless_job_and_routes_by_size() -> None:
    full = [first(p, rows=1000) for p in range(3)]
    assert RatioPlanner(ratio=1.0, max_rows_per_segment=1000).plan(view(full)) == []
    planner = RatioPlanner(ratio=1.0, groups=(("small", 250), ("large", None)))
    (job,) = planner.plan(view([first(0), first(1), first(2)]))
    assert job.group == "large"
    (job,) = planner.plan(view([first(0), first(1)]))
    assert job.group == "small"
    with pytest.raises(SpecError, match="without a size limit"):
        RatioPlanner(groups=(("small", 10),))
    with pytest.raises(SpecError, match="ratio"):
        RatioPlanner(ratio=0.5)


def test_groups_are_whole_and_incomplete_groups_end_runs() -> None:
    aug = [over(0, 1, 3, 1, 2), over(1, 1, 3, 1, 2)]
    runs = consecutive_groups([first(0), *aug, first(3)])
    assert [[len(g) for g in run] for run in runs] == [[1, 2, 1]]
    assert whole_groups([first(0), *aug], [str(aug[0].id)]) == ids(aug)
    incomplete = [over(2, 1, 3, 1, 2)]
    runs = consecutive_groups([first(0), *incomplete, first(3)])
    assert [[len(g) for g in run] for run in runs] == [[1], [1]]


def test_selection_drains_in_full_windows_then_one_final_job() -> None:
    segments = [first(p) for p in range(11)]
    sel = selection(segments, limit=4)
    jobs = selection_jobs(view(segments, selection=sel))
    assert [len(j.segments) for j in jobs] == [4, 4]  # 3 left for the final job
    assert not any(j.final for j in jobs)
    assert {j.max_rows_per_segment for j in jobs} == {1000}
    busy = view(segments, selection=sel, running=(running(segments[:4]),))
    assert [j.segments for j in selection_jobs(busy)] == [ids(segments[4:8])]
    small = selection(segments[:4], limit=4)
    (final,) = selection_jobs(view(segments, selection=small))
    assert final.final
    assert final.segments == ids(segments[:4])
    # The final job waits for the selection's running jobs.
    assert selection_jobs(view(segments, selection=small, running=(running(segments[:2]),))) == []
    held = selection([], SelectionState.HELD)
    assert selection_jobs(view(segments, selection=held)) == []


def test_fingerprint_selector_picks_segments_not_compacted_as_wanted() -> None:
    wanted = {"type": "minor", "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 500}}
    other = {"type": "minor", "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 9}}
    done = first(0, last_compaction_state=wanted)
    stale = first(1, last_compaction_state=other)
    fresh = first(2)
    selector = FingerprintSelector(max_rows_per_segment=500)
    assert selector.select(view([done, stale, fresh])) == ids([stale, fresh])
    assert selector.select(view([done])) == ()


def test_masked_rows_selector_picks_copies_whose_rows_lie_mostly_outside() -> None:
    hour = Interval.parse("2024-01-01T00/PT1H")
    copy = DataSegment(
        "wiki",
        hour,
        "v2",
        NumberedShardSpec(0, 0),
        num_rows=240,
        load_spec={"type": "delta", "segment": "k", "interval": str(DAY)},
    )
    own = DataSegment("wiki", hour, "v2", NumberedShardSpec(1, 0), num_rows=10)
    chunk = ChunkView(ChunkKey(hour, "v2"), (copy, own))
    assert MaskedRowsSelector(threshold=0.5).select(chunk) == ids([copy])
    assert MaskedRowsSelector(threshold=0.5).select(ChunkView(ChunkKey(hour, "v2"), (own,))) == ()
    with pytest.raises(SpecError, match="threshold"):
        MaskedRowsSelector(threshold=0)


def test_job_identity_priority_and_validation() -> None:
    a = CompactionJob(CHUNK, CompactionKind.SYSTEM, ("s1", "s2"), 5)
    b = CompactionJob(CHUNK, CompactionKind.SYSTEM, ("s2", "s1"), 7)
    assert a.job_id == b.job_id  # the same segments of the same chunk: one job
    user = CompactionJob(CHUNK, CompactionKind.USER, ("s1", "s2"), 5, owner="u")
    assert user.job_id != a.job_id
    assert job_priority(CompactionKind.USER, 0) > job_priority(CompactionKind.SELECTOR, 10**9)
    assert job_priority(CompactionKind.SELECTOR, 0) > job_priority(CompactionKind.SYSTEM, 10**12)
    assert job_priority(CompactionKind.SYSTEM, 3) > job_priority(CompactionKind.SYSTEM, 2)
    with pytest.raises(SpecError, match="owner"):
        CompactionJob(CHUNK, CompactionKind.USER, ("s1",), 0)
    with pytest.raises(SpecError, match="twice"):
        CompactionJob(CHUNK, CompactionKind.SYSTEM, ("s1", "s1"), 0)
    with pytest.raises(SpecError, match="no selections"):
        Selection(CHUNK, "x", CompactionKind.SYSTEM, SelectionState.HELD)


def test_segment_set_hash_changes_with_the_set_or_the_config_only() -> None:
    h = segment_set_hash(["a", "b"], {"type": "x"})
    assert h == segment_set_hash(["b", "a"], {"type": "x"})
    assert h != segment_set_hash(["a", "b", "c"], {"type": "x"})
    assert h != segment_set_hash(["a", "b"], {"type": "y"})


def test_config_json_round_trip_and_plugins() -> None:
    config = CompactionConfig(
        planner=RatioPlanner(ratio=2.0, max_segments_per_job=8),
        selectors=(FingerprintSelector(1000), MaskedRowsSelector(0.25)),
        max_segments_per_job=16,
    )
    assert CompactionConfig.from_json(config.to_json()) == config
    with pytest.raises(SpecError, match="unknown compaction planner type 'nope'"):
        planner_from_json({"type": "nope"})

    class Everything:
        name = "everything"

        def config(self) -> dict:
            return {"type": "everything"}

        def select(self, chunk: ChunkView) -> tuple[str, ...]:
            return tuple(str(s.id) for s in chunk.visible)

    register_selector("everything", lambda data: Everything())
    loaded = CompactionConfig.from_json({"selectors": [{"type": "everything"}]})
    assert loaded.selectors[0].select(view([first(0)])) == ids([first(0)])
    with pytest.raises(SpecError, match="unique"):
        CompactionConfig(selectors=(FingerprintSelector(), FingerprintSelector()))
