"""The compaction manager on real Spark and Delta: selector compactions re-run only when a
chunk changed, dead reservations re-planned, the status, the SQL view, the CLI, bad input."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pyspark.sql import SparkSession

from segmentlake.cli.main import main
from segmentlake.compact.manager import CompactionManager
from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_jobs import (
    ChunkKey,
    CompactionJob,
    CompactionKind,
    RunningCompaction,
    SelectionState,
)
from segmentlake.core.compaction_planning import FingerprintSelector, RatioPlanner
from segmentlake.core.interval import Interval
from segmentlake.errors import NotFound, SpecError
from segmentlake.ingest.task import IngestTarget
from segmentlake.lake import Lake
from segmentlake.metadata.compaction_records import (
    SELECTOR_RUN,
    job_from_json,
    job_to_json,
    running_row,
)
from segmentlake.metadata.store import Change, now_ms
from tests.compact.conftest import events, per_key
from tests.compact.test_manager_scenario import DAY, _as_rolled, rows, spec

pytestmark = [pytest.mark.spark]


def _append(spark: SparkSession, lake: Lake, ds: str, first: int, n: int) -> list[tuple]:
    batch = rows(first, n)
    assert lake.append(events(spark, batch), ds, spec(50)).status == "SUCCESS"
    return batch


def _selector_runs(lake: Lake, ds: str) -> dict[str, str]:
    import pyarrow.compute as pc

    found = lake.metadata.rows(ds, pc.field("kind") == SELECTOR_RUN)
    return {r["id"]: r["payload"] for r in found}


def test_selector_compaction_runs_again_only_when_the_chunk_changed(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    written = _append(spark, lake, ds, 0, 400)  # >= 8 segments of <= 50 rows, never compacted
    appended = len(lake.used_segments(ds))
    assert appended >= 8
    selector = FingerprintSelector(max_rows_per_segment=1_000_000)
    config = CompactionConfig(planner=RatioPlanner(ratio=100.0), selectors=(selector,))
    lake.set_compaction_config(ds, config)
    manager = lake.compaction_manager(datasources=[ds])
    report = manager.run_pass()
    assert (report.duties.selector_runs, report.duties.selected) == (1, 1)
    (selection,) = lake.compaction_status(ds).selections
    assert selection.owner == "selector:fingerprint"
    assert selection.kind is CompactionKind.SELECTOR
    assert len(selection.segments) == appended
    runs = _selector_runs(lake, ds)
    assert len(runs) == 1
    # Nothing changed: the selector is not run again (its hash matches).
    assert manager.run_pass().duties.selector_runs == 0
    (job,) = manager.queue("default").jobs()
    assert (job.kind, job.final, len(job.segments)) == (CompactionKind.SELECTOR, True, appended)
    manager.run(compactors=1, once=True)
    assert manager.outcomes["committed"] == 1
    assert lake.compaction_status(ds).selections == ()
    (compacted,) = lake.timeline(ds).visible_segments()
    assert compacted.last_compaction_state["partitionsSpec"]["maxRowsPerSegment"] == 1_000_000
    # The chunk changed: the selector runs again, and finds it compacted as wanted.
    report = manager.run_pass()
    assert (report.duties.selector_runs, report.duties.selected) == (1, 0)
    assert _selector_runs(lake, ds) != runs
    assert manager.run_pass().duties.selector_runs == 0
    assert per_key(lake.read(ds)) == per_key(events(spark, written).selectExpr(*_as_rolled()))


def test_a_dead_compactors_reservation_expires_and_its_job_is_planned_again(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    _append(spark, lake, ds, 0, 200)
    lake.set_compaction_config(ds, CompactionConfig(planner=RatioPlanner(ratio=1.0)))
    manager = lake.compaction_manager(datasources=[ds])
    manager.run_pass()
    (job,) = manager.queue("default").jobs()
    # A compactor reserved it and died: its record's lease ran out, its locks are gone.
    dead = RunningCompaction(job, "dead-compactor", now_ms() - 120_000, now_ms() - 60_000)
    state = lake.metadata.read(ds)
    row = running_row(ds, dead, task_id="dead_task", now_ms=now_ms())
    lake.metadata.commit(state, [Change("upsert", row)], commit_id="test:dead", operation="test")
    assert [r.compactor for r in lake.compaction_status(ds).running] == []  # expired
    report = manager.run_pass()
    assert report.duties.expired == 1
    assert [j.job_id for j in manager.queue("default").jobs()] == [job.job_id]
    assert manager.run_job(manager.take(), compactor="c1").status == "committed"  # type: ignore[arg-type]


def test_a_pass_that_queues_jobs_does_not_start_the_next_at_once(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """The next pass waits for the interval (or a commit): jobs reach compactors through the
    queue. A pass woken by the jobs it queued ran again at once for as long as the backlog
    lasted (1,232 passes, each a metadata commit, in 10 s with one job queued). ``stop`` still
    ends the loop promptly mid-interval."""
    _append(spark, lake, ds, 0, 200)
    lake.set_compaction_config(ds, CompactionConfig(planner=RatioPlanner(ratio=1.0)))
    manager = lake.compaction_manager(datasources=[ds])
    stop = threading.Event()
    planned: list[int] = []
    thread = threading.Thread(
        target=manager.run,
        kwargs={
            "compactors": 0,  # nothing commits: only the interval could start a pass
            "interval_s": 600.0,
            "stop": stop,
            "on_pass": lambda _, report: planned.append(report.planned),
        },
    )
    thread.start()
    time.sleep(3.0)
    stopped = time.monotonic()
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert time.monotonic() - stopped < 2.0
    assert planned == [1]  # one pass, which queued the one job
    assert len(manager.queue("default").jobs()) == 1


def test_status_view_and_cli(spark: SparkSession, lake: Lake, ds: str, capsys) -> None:
    _append(spark, lake, ds, 0, 400)
    appended = len(lake.used_segments(ds))
    assert (
        main(
            [
                "--warehouse",
                lake.warehouse,
                "compaction-config",
                ds,
                "--set",
                '{"planner": {"type": "ratio", "ratio": 1.0, "maxSegmentsPerJob": 4}}',
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["planner"]["maxSegmentsPerJob"] == 4
    assert (
        main(
            [
                "--warehouse",
                lake.warehouse,
                "compact",
                ds,
                "--user",
                "--interval",
                f"{DAY}/P1D",
                "--max-segments-per-job",
                "3",
                "--no-wait",
            ]
        )
        == 0
    )
    compaction_id = capsys.readouterr().out.strip()
    assert lake.user_compaction(ds, compaction_id).status == "RUNNING"
    target = IngestTarget(spark, lake.warehouse, lake.lockbox)
    manager = CompactionManager(target, datasources=[ds])
    manager.run_pass()  # selects the chunk, queues the user's jobs, reports its queue
    lake.register_system_views(prefix="m_")
    entries = {
        r["entry"]: r
        for r in spark.sql(f"SELECT * FROM m_compaction WHERE datasource = '{ds}'").collect()
    }
    assert entries["selection"]["status"] == SelectionState.SELECTED.value
    assert entries["selection"]["segments"] == appended
    assert entries["user"]["owner"] == compaction_id
    assert entries["queued"]["type"] == "user"
    assert main(["--warehouse", lake.warehouse, "compaction-status", ds]) == 0
    out = capsys.readouterr().out
    assert "selected" in out
    assert compaction_id in out
    assert "queued" in out
    assert (
        main(
            [
                "--warehouse",
                lake.warehouse,
                "manager",
                "--datasource",
                ds,
                "--once",
                "--compactors",
                "2",
            ]
        )
        == 0
    )
    # One pass's jobs were drained; the CLI waits for the rest.
    assert (
        main(["--warehouse", lake.warehouse, "compact", ds, "--user", "--interval", f"{DAY}/P1D"])
        == 0
    )
    assert "SUCCESS" in capsys.readouterr().out
    status = lake.compaction_status(ds)
    assert all(u.status == "SUCCESS" for u in status.users)
    assert status.selections == ()


def test_bad_requests_are_refused_with_the_reason(lake: Lake, ds: str) -> None:
    with pytest.raises(SpecError, match="unknown compaction planner type 'sizes'"):
        lake.set_compaction_config(ds, {"planner": {"type": "sizes"}})
    with pytest.raises(NotFound):  # no such datasource (or no warehouse yet, run alone)
        lake.start_user_compaction(ds, f"{DAY}/P1D")
    lake.set_compaction_config(ds, {"planner": {"type": "ratio", "ratio": 2}})  # ds exists now
    with pytest.raises(SpecError, match="max_segments_per_job must be an integer >= 2"):
        lake.start_user_compaction(ds, f"{DAY}/P1D", max_segments_per_job=1)
    with pytest.raises(SpecError, match="no user compaction 'nope'"):
        lake.user_compaction(ds, "nope")
    with pytest.raises(SpecError):
        lake.start_user_compaction(ds, "2024-13-01/P1D")
    assert main(["--warehouse", lake.warehouse, "compact", ds, "--user"]) == 2
    done = lake.start_user_compaction(ds, "1999-01-01/P1D")  # nothing there: done at once
    assert (done.status, done.chunks) == ("SUCCESS", ())
    with pytest.raises(SpecError, match="at least one segment"):
        CompactionJob(ChunkKey(Interval.parse(f"{DAY}/P1D"), "v1"), CompactionKind.SYSTEM, (), 0)


def test_manager_schedules_majors_where_granularity_or_partitioning_differs(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """HOUR chunks under a DAY target: one major job for the day, which re-chunks it. Then a
    new target partitioning: one major again. A small append after it: no major (most rows
    are made as wanted), and the rows stay exactly once throughout."""
    hourly = {
        **spec(50),
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
    }
    written = []
    for first in (0, 100):  # two segments in each of 24 hour chunks
        batch = rows(first, 100)
        written += batch
        assert lake.append(events(spark, batch), ds, hourly).status == "SUCCESS"
    expected = per_key(events(spark, written).selectExpr(*_as_rolled()))
    lake.set_compaction_config(
        ds, CompactionConfig(planner=RatioPlanner(ratio=100.0), segment_granularity="DAY")
    )
    manager = lake.compaction_manager(datasources=[ds])
    manager.run_pass()
    (job,) = manager.queue("default").jobs()
    assert job.major
    assert job.kind is CompactionKind.SYSTEM
    manager.run(compactors=1, once=True)
    assert manager.outcomes == {"committed": 1, "refused": 0, "failed": 0}
    day = Interval.parse(f"{DAY}/P1D")
    compacted = lake.timeline(ds).visible_segments()
    assert {s.interval for s in compacted} == {day}
    assert {s.last_compaction_state["type"] for s in compacted} == {"major"}
    assert per_key(lake.read(ds)) == expected
    assert manager.run_pass().planned == 0  # compacted as wanted

    target = {"type": "hashed", "numShards": 2}
    lake.set_compaction_config(
        ds,
        {
            "planner": {"type": "ratio", "ratio": 100},
            "segmentGranularity": "DAY",
            "partitionsSpec": target,
        },
    )
    manager.run_pass()
    (job,) = manager.queue("default").jobs()
    assert job.major
    manager.run(compactors=1, once=True)
    assert manager.outcomes["committed"] == 2
    compacted = lake.timeline(ds).visible_segments()
    assert len(compacted) == 2
    assert {s.last_compaction_state["partitionsSpec"]["numShards"] for s in compacted} == {2}
    assert per_key(lake.read(ds)) == expected

    small = rows(1000, 5)
    assert lake.append(events(spark, small), ds, spec(50)).status == "SUCCESS"
    assert manager.run_pass().planned == 0  # minor jobs may merge appends; no rewrite
    expected = per_key(events(spark, written + small).selectExpr(*_as_rolled()))
    assert per_key(lake.read(ds)) == expected


def _days_rows(first: int, days: int, per_day: int) -> list[tuple]:
    return [
        (f"2024-04-0{1 + d}T{i % 24:02d}:00:00Z", f"#c{i % 3}", f"u{first + i}", i)
        for d in range(days)
        for i in range(per_day)
    ]


def test_small_jobs_of_a_datasource_run_as_one_batch_and_one_publish(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """Four chunks needing a minor job each: one compactor runs them as ONE compaction task
    (one Spark write, one publish), each chunk's outputs in that chunk. A batch with a stale
    job (its chunk compacted meanwhile) is refused as a whole and its jobs run one by one."""
    written = []
    for first in (0, 100, 200):  # three segments in each of four DAY chunks
        batch = _days_rows(first, 4, 6)
        written += batch
        assert lake.append(events(spark, batch), ds, spec(50)).status == "SUCCESS"
    lake.set_compaction_config(ds, CompactionConfig(planner=RatioPlanner(ratio=1.0)))
    tasks_before = {t.task_id for t in lake.tasks(ds)}
    manager = lake.compaction_manager(datasources=[ds])
    manager.run_pass()
    assert len(manager.queue("default")) == 4
    manager.run(compactors=1, once=True)
    assert manager.outcomes == {"committed": 4, "refused": 0, "failed": 0}
    (task,) = [t for t in lake.tasks(ds) if t.task_id not in tasks_before]
    assert task.input_segments == 12
    visible = lake.timeline(ds).visible_segments()
    assert len(visible) == 4
    assert len({s.interval for s in visible}) == 4  # one output per chunk, in its chunk
    assert lake.compaction_status(ds).running == ()
    expected = per_key(events(spark, written).selectExpr(*_as_rolled()))
    assert per_key(lake.read(ds)) == expected

    for first in (300, 400):  # two more segments per chunk: four jobs again
        batch = _days_rows(first, 4, 6)
        written += batch
        lake.append(events(spark, batch), ds, spec(50))
    manager.run_pass()
    jobs = manager.take_batch()
    assert len(jobs) == 4
    stale = jobs[1]
    assert lake.compact(ds, mode="minor", segments=list(stale.segments)).status == "SUCCESS"
    outcomes = manager.run_batch(jobs, compactor="test")
    assert sorted(o.status for o in outcomes) == ["committed"] * 3 + ["refused"]
    assert next(o for o in outcomes if o.job == stale).status == "refused"
    assert len(lake.timeline(ds).visible_segments()) == 4
    expected = per_key(events(spark, written).selectExpr(*_as_rolled()))
    assert per_key(lake.read(ds)) == expected


def test_batches_are_bounded_by_input_rows_and_a_larger_job_runs_alone(lake: Lake) -> None:
    """A batch stops growing at ``batch_rows`` input rows (the rows its chunks' locks are held
    for); a single job above the bound is still taken, alone. The rows travel with the job."""
    manager = lake.compaction_manager(datasources=["rows"], batch_rows=250)
    queue = manager.queue("default")

    def job(day: int, rows: int) -> CompactionJob:
        chunk = ChunkKey(Interval.of_millis(day * 86_400_000, (day + 1) * 86_400_000), "v1")
        segments = (f"s{day}a", f"s{day}b")
        return CompactionJob(
            chunk, CompactionKind.SYSTEM, segments, 10, datasource="rows", input_rows=rows
        )

    for j in (job(0, 1_000), job(1, 100), job(2, 100), job(3, 100)):
        assert queue.offer(j)
    batches = []
    while batch := manager.take_batch():
        batches.append(sorted(j.input_rows for j in batch))
    assert sorted(batches) == [[100], [100, 100], [1_000]]
    with pytest.raises(SpecError, match="batch_rows"):
        lake.compaction_manager(datasources=["rows"], batch_rows=0)
    with pytest.raises(SpecError, match="input_rows"):
        job(4, -1)
    again = job_from_json(json.loads(json.dumps(job_to_json(job(5, 123)))))
    assert again.input_rows == 123


def test_druids_auto_compaction_config_leaves_the_latest_day_to_the_appends(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """Druid's automatic compaction tutorial's config, as written for Druid: HOUR chunks
    become DAY segments (dynamic partitioning, Druid's default), except within the default
    ``skipOffsetFromLatest`` of P1D of the latest data; with ``P0D`` the last day goes too."""
    hourly = {
        **spec(50),
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
    }
    written = [
        (f"2024-03-0{1 + d}T{h:02d}:00:00Z", f"#c{h % 3}", f"u{first + h}", h)
        for first in (0, 100)
        for d in range(2)
        for h in range(24)
    ]
    for half in (written[:48], written[48:]):  # two segments in each of 48 hour chunks
        assert lake.append(events(spark, half), ds, hourly).status == "SUCCESS"
    expected = per_key(events(spark, written).selectExpr(*_as_rolled()))
    druid = {"dataSource": ds, "granularitySpec": {"segmentGranularity": "DAY"}}
    assert (
        main(["--warehouse", lake.warehouse, "compaction-config", ds, "--set", json.dumps(druid)])
        == 0
    )
    config = lake.compaction_config(ds)
    assert config.skip_offset_from_latest is not None
    assert config.skip_offset_from_latest.to_iso() == "P1D"
    assert config.partitions_spec is not None
    assert config.partitions_spec.type_name == "dynamic"

    manager = lake.compaction_manager(datasources=[ds])
    report = manager.run_pass()
    assert (report.chunks, report.recent) == (48, 24)
    assert "(24 recent, left to appends)" in report.summary()
    manager.run(compactors=1, once=True)
    assert manager.outcomes == {"committed": 1, "refused": 0, "failed": 0}
    first_day = Interval.parse("2024-03-01/P1D")
    by_interval: dict[Interval, int] = {}
    for s in lake.timeline(ds).visible_segments():
        by_interval[s.interval] = by_interval.get(s.interval, 0) + 1
    assert by_interval.pop(first_day) == 1  # the first day: one DAY segment
    assert len(by_interval) == 24  # the latest day: left to the appends, still hourly
    assert set(by_interval.values()) == {2}
    assert per_key(lake.read(ds)) == expected

    lake.set_compaction_config(ds, {**druid, "skipOffsetFromLatest": "P0D"})
    manager.run(compactors=1, once=True)
    visible = lake.timeline(ds).visible_segments()
    assert sorted(str(s.interval.start.date()) for s in visible) == ["2024-03-01", "2024-03-02"]
    assert {s.last_compaction_state["partitionsSpec"]["type"] for s in visible} == {"dynamic"}
    assert per_key(lake.read(ds)) == expected
