"""Segment id allocation, transactional publish, used flags, the conditional commit and the system
views on a real Delta metadata table. Every test runs on its own datasource of a warehouse
shared by the module (the schema-version test makes its own)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from segmentlake.core.interval import Interval, format_timestamp
from segmentlake.core.shard_spec import NumberedOverwriteShardSpec, NumberedShardSpec
from segmentlake.errors import LockRefused, MetadataVersionError, SegmentLakeError, SpecError
from segmentlake.ingest.report import RowStats, TaskReport
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.metadata_table import DESCRIPTION_PREFIX
from segmentlake.metadata.records import TABLE_SCHEMA, lock_row
from segmentlake.metadata.store import Change, Conflict, now_ms
from segmentlake.metadata.tasks import record_task, task_row
from segmentlake.spark.job_metrics import JobMetrics

from .support import (
    DAY,
    NEXT_DAY,
    NOON,
    history,
    latest_version,
    pending_segment,
    segment,
)

pytestmark = pytest.mark.spark

MONTH = Interval.parse("2024-02-01/P1M")


def test_allocation_ids_versions_and_idempotence(lake: Lake, ds: str) -> None:
    before_ms = int(time.time() * 1000)
    lake.metadata.create()
    before = latest_version(lake)

    first = lake.actions.allocate(
        ds,
        [
            AllocateRequest(DAY, "seq-a"),
            AllocateRequest(DAY, "seq-b"),
            AllocateRequest(NEXT_DAY, "seq-c"),
        ],
        group_id="append-1",
    )

    after_ms = int(time.time() * 1000)
    assert latest_version(lake) == before + 1  # ids and their locks: one commit
    a, b, c = (p.segment_id for p in first)
    assert [(s.interval, s.partition_num) for s in (a, b, c)] == [(DAY, 0), (DAY, 1), (NEXT_DAY, 0)]
    assert a.version == b.version  # one chunk, one version
    for sid in (a, c):  # a fresh chunk gets a fresh version: the allocation's time
        assert format_timestamp(before_ms) <= sid.version <= format_timestamp(after_ms)
    assert {p.num_core_partitions for p in first} == {0}
    locks = lake.locks(ds)
    assert sorted((lk.interval, lk.partition_num, lk.version) for lk in locks) == sorted(
        (s.interval, s.partition_num, s.version) for s in (a, b, c)
    )
    assert {(lk.granularity.value, lk.lock_type.value) for lk in locks} == {("SEGMENT", "APPEND")}

    # The same (sequence name, previous id) again: the same ids, and no commit.
    again = lake.actions.allocate(
        ds,
        [
            AllocateRequest(NEXT_DAY, "seq-c"),
            AllocateRequest(DAY, "seq-b"),
            AllocateRequest(NOON, "seq-a"),  # inside the day its id is in
        ],
        group_id="x",
    )
    assert [p.segment_id for p in again] == [c, b, a]
    # Regression: a pair that allocated in the day is no id for the next day (it was handed
    # back, misplacing the rows; or, outside the read span, re-allocated unrecorded).
    with pytest.raises(SpecError, match="seq-b"):
        lake.actions.allocate(ds, [AllocateRequest(NEXT_DAY, "seq-b")], group_id="append-1")
    assert latest_version(lake) == before + 1

    # The sequence goes on from its previous id; another group appends to the same chunk
    # (segment locks on fresh ids never conflict).
    (chained,) = lake.actions.allocate(
        ds, [AllocateRequest(DAY, "seq-a", str(a))], group_id="append-1"
    )
    (other,) = lake.actions.allocate(ds, [AllocateRequest(NOON, "seq-z")], group_id="append-2")
    assert (chained.segment_id.version, chained.segment_id.partition_num) == (a.version, 2)
    # An hour inside the day joins the day's chunk.
    assert (other.segment_id.interval, other.segment_id.version) == (DAY, a.version)
    assert other.segment_id.partition_num == 3
    assert chained.previous_id == str(a)


def test_appends_join_the_chunk_and_overwrites_take_ids_from_32768(lake: Lake, ds: str) -> None:
    writer = lake.actions.try_lock(ds, DAY, group_id="ingest").lock
    assert writer is not None
    version = writer.version
    core = [segment(ds, DAY, version, p, core=3) for p in range(3)]
    assert lake.actions.publish(ds, core, group_id="ingest").segments == 3

    (append,) = lake.actions.allocate(ds, [AllocateRequest(DAY, "append")], group_id="append")
    compaction = lake.actions.allocate(
        ds,
        [AllocateRequest(DAY, "compact-0"), AllocateRequest(DAY, "compact-1")],
        group_id="compact",
        overwrite_version=version,
    )

    assert (append.segment_id.version, append.segment_id.partition_num) == (version, 3)
    assert append.num_core_partitions == 3
    assert [(p.segment_id.version, p.segment_id.partition_num) for p in compaction] == [
        (version, 32768),
        (version, 32769),
    ]
    # An overwrite's exclusive time-chunk lock (equal priority) must wait for both groups.
    refused = lake.actions.try_lock(ds, DAY, group_id="overwrite")
    assert {lk.group_id for lk in refused.conflicting} == {"append", "compact"}


def test_allocation_refused_by_an_exclusive_time_chunk_lock_unless_higher_priority(
    lake: Lake, ds: str
) -> None:
    overwrite = lake.actions.try_lock(ds, DAY, group_id="overwrite", priority=5).lock
    assert overwrite is not None

    for priority in (0, 5):
        with pytest.raises(LockRefused, match="overwrite") as refused:
            lake.actions.allocate(
                ds, [AllocateRequest(NOON, "s")], group_id="append", priority=priority
            )
        assert [lk.group_id for lk in refused.value.conflicting] == ["overwrite"]

    # Strictly higher priority: both allocations of the batch revoke the same lock (one row
    # change, or the MERGE would reject two source rows for one target row).
    urgent = lake.actions.allocate(
        ds,
        [AllocateRequest(DAY, "s1"), AllocateRequest(DAY, "s2")],
        group_id="urgent",
        priority=9,
    )

    assert [p.segment_id.partition_num for p in urgent] == [0, 1]
    assert {lk.group_id for lk in lake.locks(ds)} == {"urgent"}
    with pytest.raises(LockRefused, match="revoked"):
        lake.actions.publish(ds, [segment(ds, DAY, overwrite.version)], group_id="overwrite")


def test_tasks_view_sums_the_phase_metrics_of_each_report(lake: Lake, ds: str) -> None:
    write = JobMetrics(jobs=2, executor_run_ms=3250, input_bytes=700, shuffle_write_bytes=90)
    measured = TaskReport(
        "measured",
        "append",
        ds,
        "SUCCESS",
        None,
        RowStats(),
        phases={"write": 2.0, "publish": 0.5},
        # A phase without a job, and one stored with fewer keys than JobMetrics has now.
        phase_metrics={"write": write.to_json(), "publish": {"jobs": 0}, "split": {"jobs": 1}},
    )
    old = replace(measured, task_id="old").to_json()
    del old["phase_metrics"]  # as stored before the metrics existed
    for report in (measured.to_json(), old):
        row = task_row(ds, report["task_id"], report, interval=None, now_ms=now_ms())
        record_task(lake.metadata, row, policy=lake.lockbox.retry)
    lake.register_system_views(prefix="t_")

    rows = lake.spark.sql(
        f"SELECT task_id, task_seconds, bytes_processed, shuffle_bytes FROM t_tasks "
        f"WHERE datasource = '{ds}'"
    ).collect()

    assert {r.task_id: tuple(r)[1:] for r in rows} == {
        "measured": (3.25, 700, 90),
        "old": (None, None, None),
    }
    stored = {r.task_id: r for r in lake.tasks(ds)}
    assert stored["measured"] == measured
    assert (stored["measured"].task_seconds, stored["old"].task_seconds) == (3.25, None)


def test_publish_is_all_or_nothing_and_views_show_it(lake: Lake, ds: str) -> None:
    allocated = lake.actions.allocate(
        ds, [AllocateRequest(DAY, f"seq-{i}") for i in range(3)], group_id="task"
    )
    segments = [pending_segment(p) for p in allocated]
    version = segments[0].version
    names = lake.register_system_views(prefix="t_")
    assert names == [
        "t_segments",
        "t_locks",
        "t_pending_segments",
        "t_tasks",
        "t_compaction",
        "t_rules",
        "t_rule_history",
        "t_volumes",
        "t_segment_copies",
    ]

    def view(name: str) -> list[dict]:
        rows = lake.spark.sql(f"SELECT * FROM t_{name} WHERE datasource = '{ds}'").collect()
        return [r.asDict() for r in rows]

    uncovered = [
        segment(ds, DAY, version, partition=7),  # an id nobody allocated
        segment(ds, DAY, "2000-01-01T00:00:00.000Z", partition=0),  # another version
    ]
    for bad in uncovered:
        with pytest.raises(LockRefused) as refused:
            lake.actions.publish(ds, [*segments, bad], group_id="task")
        assert str(bad.id) in str(refused.value)
    with pytest.raises(LockRefused):  # another group cannot use the task's locks
        lake.actions.publish(ds, segments, group_id="intruder")
    with pytest.raises(SpecError):
        lake.actions.publish(ds, [segment(ds + "x", DAY, version)], group_id="task")

    # Nothing was published; the allocations and their locks stand.
    assert lake.used_segments(ds) == []
    assert view("segments") == []
    pending = view("pending_segments")
    assert sorted(r["segment_id"] for r in pending) == sorted(str(s.id) for s in segments)
    assert {r["group_id"] for r in pending} == {"task"}
    assert sorted(r["sequence_name"] for r in pending) == ["seq-0", "seq-1", "seq-2"]
    locks = view("locks")
    assert len(locks) == 3
    assert {(r["group_id"], r["granularity"], r["live"]) for r in locks} == {
        ("task", "SEGMENT", True)
    }

    result = lake.actions.publish(ds, segments, group_id="task")

    assert (result.segments, result.locks_released) == (3, 3)
    assert lake.used_segments(ds) == segments
    (holder,) = lake.timeline(ds).lookup(DAY)
    assert (holder.version, len(holder.segments)) == (version, 3)
    assert view("pending_segments") == []
    assert view("locks") == []  # the view shows expired and revoked rows too
    published = sorted(view("segments"), key=lambda r: r["partition_num"])
    assert [r["segment_id"] for r in published] == [str(s.id) for s in segments]
    assert {(r["version"], r["used"], r["num_rows"], r["size"]) for r in published} == {
        (version, True, 10, 100)
    }
    assert json.loads(published[1]["shard_spec"]) == NumberedShardSpec(1, 0).to_json()
    assert json.loads(published[1]["load_spec"])["type"] == "delta"


@pytest.mark.slow
def test_publishing_2000_segments_is_one_commit(lake: Lake, ds: str) -> None:
    lock = lake.actions.try_lock(ds, MONTH, group_id="bulk").lock
    assert lock is not None
    segments = [segment(ds, MONTH, lock.version, p, core=2000) for p in range(2000)]
    before = latest_version(lake)

    result = lake.actions.publish(ds, segments, group_id="bulk")

    assert (result.segments, result.locks_released) == (2000, 1)
    new = [r for r in history(lake) if r["version"] > before]
    assert [r["operation"] for r in new] == ["publish"]
    assert str(new[0]["commit_id"]).startswith("publish:")
    used = lake.used_segments(ds)
    assert len(used) == 2000
    assert used == sorted(segments, key=lambda s: s.shard_spec.partition_num)
    (holder,) = lake.timeline(ds).lookup(MONTH)
    assert len(holder.segments) == 2000


def test_mark_unused_and_used_change_the_timeline(lake: Lake, ds: str) -> None:
    first = lake.actions.try_lock(ds, DAY, group_id="v1").lock
    assert first is not None
    old = [segment(ds, DAY, first.version, p, core=2) for p in range(2)]
    lake.actions.publish(ds, old, group_id="v1")
    # An overwrite's exclusive time-chunk lock gets a version above the chunk's.
    second = lake.actions.try_lock(ds, DAY, group_id="v2").lock
    assert second is not None
    assert second.version > first.version
    new = segment(ds, DAY, second.version, 0, core=1)
    lake.actions.publish(ds, [new], group_id="v2")

    def visible() -> list[str]:
        return sorted(str(s.id) for h in lake.timeline(ds).lookup(DAY) for s in h.segments)

    assert visible() == [str(new.id)]

    assert lake.mark_unused([new.id]) == 1

    assert visible() == sorted(str(s.id) for s in old)
    assert lake.mark_unused([str(new.id)]) == 0  # already unused

    assert lake.mark_used([new]) == 1

    assert visible() == [str(new.id)]
    assert lake.used_segments(ds) == [*old, new]


def test_metadata_schema_version_check(spark: SparkSession, warehouse: str) -> None:
    lake = Lake(spark, warehouse)
    # A warehouse a newer segmentlake wrote: its table says schema version 99.
    write_deltalake(
        lake.metadata.path,
        TABLE_SCHEMA.empty_table(),
        partition_by=["datasource"],
        description=f"{DESCRIPTION_PREFIX}99",
    )

    with pytest.raises(MetadataVersionError, match="99"):
        Lake(spark, warehouse)


def test_commit_on_a_stale_read_conflicts_and_other_datasources_do_not(lake: Lake, ds: str) -> None:
    other = ds + "_other"
    lock = lake.actions.try_lock(ds, DAY, group_id="a").lock
    assert lock is not None
    stale = lake.metadata.read(ds)
    stale_other = lake.metadata.read(other)
    assert lake.actions.release_locks(ds, "a") == 1  # a commit on ds after the stale read
    version = latest_version(lake)
    change = Change("upsert", lock_row(lock, now_ms=int(time.time() * 1000)))

    with pytest.raises(Conflict, match="unlock"):
        lake.metadata.commit(stale, [change], commit_id="stale-commit", operation="t")

    assert latest_version(lake) == version  # nothing committed
    assert lake.locks(ds) == []
    # A commit on another datasource read before that same commit is not in conflict.
    other_lock = replace(lock, datasource=other)
    other_change = Change("upsert", lock_row(other_lock, now_ms=int(time.time() * 1000)))
    assert lake.metadata.commit(stale_other, [other_change], commit_id="other", operation="t")
    assert [lk.lock_id for lk in lake.locks(other)] == [lock.lock_id]
    # Read again, the same change lands.
    fresh = lake.metadata.read(ds)
    assert lake.metadata.commit(fresh, [change], commit_id="fresh-commit", operation="t")
    assert [lk.lock_id for lk in lake.locks(ds)] == [lock.lock_id]
    assert history(lake)[-1]["commit_id"] == "fresh-commit"
    # A commit that only inserted a row where the read looked conflicts too.
    before_insert = lake.metadata.read(ds)
    assert lake.actions.try_lock(ds, NEXT_DAY, group_id="b").granted
    late = [Change("delete", change.row)]
    with pytest.raises(Conflict):
        lake.metadata.commit(before_insert, late, commit_id="late", operation="t")
    assert len(lake.locks(ds)) == 2
    # Into an empty partition: the first writer wins, the second decides again.
    empty = ds + "_empty"
    before_first = lake.metadata.read(empty)
    assert lake.actions.try_lock(empty, DAY, group_id="c").granted
    first = Change("upsert", lock_row(replace(lock, datasource=empty), now_ms=0))
    with pytest.raises(Conflict):
        lake.metadata.commit(before_first, [first], commit_id="second-first", operation="t")
    assert [lk.group_id for lk in lake.locks(empty)] == ["c"]


def test_ids_of_unused_segments_stay_taken(lake: Lake, ds: str) -> None:
    # As Druid's allocation: a new id is past the chunk's unused segments too. The insert of
    # a new segment under an unused one's id was dropped, its append reported a success,
    # and marking the old one used again brought the old rows back under that id.
    owner = lake.actions.try_lock(ds, DAY, group_id="v1").lock
    assert owner is not None
    version = owner.version
    core = [segment(ds, DAY, version, p, core=3) for p in range(3)]
    lake.actions.publish(ds, core, group_id="v1", release_locks=False)
    assert lake.mark_unused([core[2].id]) == 1
    other_rows = replace(core[2], load_spec={"type": "delta", "segment": "other rows"})
    with pytest.raises(SegmentLakeError, match="an unused segment's other rows"):
        lake.actions.publish(ds, [other_rows], group_id="v1", release_locks=False)
    lake.actions.release_locks(ds, "v1")
    (compacting,) = lake.actions.allocate(
        ds, [AllocateRequest(DAY, "minor")], group_id="minor", overwrite_version=version
    )
    minor = segment(ds, DAY, version, shard_spec=NumberedOverwriteShardSpec(32768, 1, 2, 1, 1))
    assert compacting.segment_id == minor.id
    lake.actions.publish(ds, [minor], group_id="minor")
    assert lake.mark_unused([minor.id]) == 1

    (append,) = lake.actions.allocate(ds, [AllocateRequest(DAY, "append")], group_id="append")
    (again,) = lake.actions.allocate(
        ds, [AllocateRequest(DAY, "minor-2")], group_id="minor-2", overwrite_version=version
    )

    assert append.segment_id.partition_num == 3
    assert again.segment_id.partition_num == 32769
    lake.actions.publish(ds, [pending_segment(append)], group_id="append")
    assert lake.mark_used([core[2].id]) == 1
    assert [s.shard_spec.partition_num for s in lake.used_segments(ds)] == [0, 1, 2, 3]
