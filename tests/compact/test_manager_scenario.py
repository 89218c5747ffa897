"""Accumulo's fifteen-step compaction-coordination scenario, enacted on one chunk with real
segments on Spark and Delta; the metadata state is asserted after every step."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.sql import SparkSession

from segmentlake.compact.manager import CompactionManager, JobOutcome
from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_jobs import CompactionJob, CompactionKind, SelectionState
from segmentlake.core.compaction_planning import RatioPlanner
from segmentlake.core.shard_spec import NumberedOverwriteShardSpec
from segmentlake.lake import Lake
from tests.compact.conftest import events, per_key

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY = "2024-03-01"


def spec(max_rows: int) -> dict[str, Any]:
    return {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "user"]},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "longMin", "name": "smallest", "fieldName": "added"},
            {"type": "longMax", "name": "largest", "fieldName": "added"},
        ],
        "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": max_rows},
    }


def rows(first: int, n: int) -> list[tuple]:
    # Distinct users: no two rows roll up.
    return [
        (f"{DAY}T{i % 24:02d}:00:00Z", f"#c{i % 3}", f"u{i}", i) for i in range(first, first + n)
    ]


def visible(lake: Lake, ds: str) -> list:
    return sorted(lake.timeline(ds).visible_segments(), key=lambda s: _root(s))


def _root(segment: Any) -> tuple[int, int]:
    spec_ = segment.shard_spec
    return (spec_.start_root_partition_id, spec_.end_root_partition_id)


def queued(manager: CompactionManager) -> list[CompactionJob]:
    return manager.queue("default").jobs()


def run(manager: CompactionManager, job: CompactionJob) -> JobOutcome:
    outcome = manager.run_job(job, compactor="test-compactor")
    assert outcome.status == "committed", outcome.error
    return outcome


def test_fifteen_steps(spark: SparkSession, lake: Lake, ds: str) -> None:
    written: list[tuple] = []
    # 1. 200 first-generation segments in one chunk (an append splits 8,000 rows with
    # maxRowsPerSegment 50 into ceil(8000 / (0.8 * 50)) hash buckets).
    written += rows(0, 8000)
    assert lake.append(events(spark, written), ds, spec(50)).status == "SUCCESS"
    first = visible(lake, ds)
    assert len(first) == 200
    assert {s.shard_spec.partition_num for s in first} == set(range(200))
    lake.set_compaction_config(
        ds, CompactionConfig(planner=RatioPlanner(ratio=1.0, max_segments_per_job=30))
    )
    manager = lake.compaction_manager(datasources=[ds])

    # 2. A pass plans system jobs of 30 consecutive segments; nothing is selected or held.
    report = manager.run_pass()
    jobs = queued(manager)
    assert report.planned == len(jobs) == 7  # 6 x 30 + 20
    assert {j.kind for j in jobs} == {CompactionKind.SYSTEM}
    status = lake.compaction_status(ds)
    assert status.selections == ()
    assert status.running == ()

    # 3. A compactor reserves the best system job (30 segments) and keeps running it.
    system_job = manager.take()
    assert system_job is not None
    assert len(system_job.segments) == 30
    reserved, release = threading.Event(), threading.Event()
    outcomes: list[JobOutcome] = []

    def hold_open(job: CompactionJob) -> None:
        reserved.set()
        assert release.wait(300)

    worker = threading.Thread(
        target=lambda: outcomes.append(
            manager.run_job(system_job, compactor="c-system", on_started=hold_open)
        )
    )
    worker.start()
    assert reserved.wait(300)
    status = lake.compaction_status(ds)
    assert [r.job.job_id for r in status.running] == [system_job.job_id]
    assert status.running[0].compactor == "c-system"

    # 4. A user compaction of the day arrives: recorded with its one chunk, nothing done.
    user = lake.start_user_compaction(ds, f"{DAY}/P1D", max_segments_per_job=34)
    assert user.status == "RUNNING"
    assert len(user.chunks) == 1
    assert user.done == ()

    # 5. The pass holds the chunk (a compaction runs there): no selection, no system jobs.
    manager.run_pass()
    status = lake.compaction_status(ds)
    assert [(s.state, s.owner, s.segments) for s in status.selections] == [
        (SelectionState.HELD, user.compaction_id, ())
    ]
    assert queued(manager) == []
    with pytest.raises(Exception, match="held"):
        _reserve_refused(manager, jobs[1])

    # 6. The system job commits: 30 segments become one overwrite segment [0, 30) minor 1.
    release.set()
    worker.join()
    assert outcomes[0].status == "committed", outcomes[0].error
    after_system = visible(lake, ds)
    assert len(after_system) == 171
    merged = [s for s in after_system if isinstance(s.shard_spec, NumberedOverwriteShardSpec)]
    assert [(_root(s), s.shard_spec.minor_version) for s in merged] == [((0, 30), 1)]
    assert lake.compaction_status(ds).running == ()

    # 7. The next pass selects the chunk's 171 visible segments for the user compaction.
    manager.run_pass()
    (selection,) = lake.compaction_status(ds).selections
    assert selection.state is SelectionState.SELECTED
    assert set(selection.segments) == {str(s.id) for s in after_system}

    # 8. 40 segments are appended meanwhile (partitions 200-239), outside the selection.
    written += rows(10_000, 1600)
    assert lake.append(events(spark, rows(10_000, 1600)), ds, spec(50)).status == "SUCCESS"
    appended = [s for s in visible(lake, ds) if 200 <= s.shard_spec.partition_num < 32768]
    assert sorted(s.shard_spec.partition_num for s in appended) == list(range(200, 240))

    # 9. The pass plans five intermediate user jobs of 34 and system jobs for the appended 40.
    manager.run_pass()
    jobs = queued(manager)
    user_jobs = [j for j in jobs if j.kind is CompactionKind.USER]
    system_jobs = [j for j in jobs if j.kind is CompactionKind.SYSTEM]
    assert [len(j.segments) for j in user_jobs] == [34] * 5
    assert not any(j.final for j in user_jobs)
    assert jobs[: len(user_jobs)] == user_jobs  # user jobs rank above system ones
    appended_ids = {str(s.id) for s in appended}
    assert [len(j.segments) for j in system_jobs] == [30, 10]
    assert set().union(*(set(j.segments) for j in system_jobs)) == appended_ids

    # 10. The intermediate jobs run; each output replaces its 34 inputs in the selection.
    for n, job in enumerate(user_jobs, start=1):
        assert manager.take() == job
        run(manager, job)
        (selection,) = lake.compaction_status(ds).selections
        assert len(selection.segments) == 171 - 33 * n
        assert not set(job.segments) & set(selection.segments)

    # 11. The system jobs compact the appended segments; the selection does not change.
    for job in system_jobs:
        assert manager.take() == job
        run(manager, job)
    (selection,) = lake.compaction_status(ds).selections
    assert len(selection.segments) == 6
    assert not set(selection.segments) & appended_ids

    # 12. The pass plans the final job over the six segments left.
    manager.run_pass()
    (final,) = [j for j in queued(manager) if j.kind is CompactionKind.USER]
    assert final.final
    assert len(final.segments) == 6

    # 13. The final job commits: the selection is cleared and the user compaction is done.
    assert manager.take() == final
    run(manager, final)
    status = lake.compaction_status(ds)
    assert status.selections == ()
    done = lake.user_compaction(ds, user.compaction_id)
    assert done.status == "SUCCESS"
    assert done.done == user.chunks
    compacted = visible(lake, ds)
    assert [(_root(s), s.shard_spec.minor_version) for s in compacted[:1]] == [((0, 200), 3)]
    assert len(compacted) == 3  # [0,200) + the appended 40 in two system outputs

    # 14. With the selection gone, system compaction may take anything, the user's output too.
    manager.run_pass()
    (job,) = queued(manager)
    assert job.kind is CompactionKind.SYSTEM
    assert str(compacted[0].id) in job.segments
    run(manager, manager.take())
    assert len(visible(lake, ds)) == 1

    # 15. Reads equal the appended rows: nothing lost, nothing twice.
    assert per_key(lake.read(ds)) == per_key(events(spark, written).selectExpr(*_as_rolled()))
    assert lake.compaction_status(ds).running == ()


def _reserve_refused(manager: CompactionManager, job: CompactionJob) -> None:
    outcome = manager.run_job(job, compactor="c-other")
    if outcome.status == "refused":
        raise RuntimeError(outcome.error)


def _as_rolled() -> list[str]:
    return [
        "date_trunc('hour', to_timestamp(ts)) AS __time",
        "channel",
        "user",
        "1 AS edits",
        "added",
        "added AS smallest",
        "added AS largest",
    ]
