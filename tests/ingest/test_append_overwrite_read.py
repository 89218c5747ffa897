"""Appends, overwrites and reads on real Spark and Delta: ``lake.read`` returns exactly the rows
of the visible timeline after appends, overwrites, tombstones and granularity changes, and the
SQL view returns the same rows."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.core.interval import Interval
from segmentlake.errors import LockRefused, SpecError
from segmentlake.lake import Lake
from segmentlake.metadata.table_log import TableLog
from tests.ingest.conftest import EXPECTED_SCHEMA, edits, spec, ts

pytestmark = [pytest.mark.spark]

DAY1 = [
    ("2024-01-01T01:00:00Z", "#en", "alice", 10),
    ("2024-01-01T01:00:00Z", "#en", "alice", 5),  # rolls up with the row above
    ("2024-01-01T02:30:00Z", "#de", "bob", 7),
]
DAY2 = [("2024-01-02T10:00:00Z", "#en", "carol", 1)]
# DAY1 as read back: (time, channel, user, edits, added), alice's two rows rolled up.
DAY1_ROLLED_UP = [
    ("2024-01-01T01:00:00Z", "#en", "alice", 2, 15),
    ("2024-01-01T02:30:00Z", "#de", "bob", 1, 7),
]


def expected(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    return spark.createDataFrame([(ts(t), *rest) for t, *rest in rows], EXPECTED_SCHEMA)


def assert_rows(actual: DataFrame, wanted: DataFrame) -> None:
    assert_df_equality(
        actual.select(*wanted.columns), wanted, ignore_row_order=True, ignore_nullable=True
    )


def test_append_rolls_up_and_reads_back(spark: SparkSession, lake: Lake, ds: str) -> None:
    report = lake.append(edits(spark, DAY1 + DAY2), ds, spec())
    assert report.status == "SUCCESS"
    assert (report.rows.rows_in, report.rows.processed, report.rows.rows_out) == (4, 4, 3)
    assert report.segments == 2
    assert report.tombstones == 0
    assert report.bytes > 0
    assert set(report.phases) >= {"parse", "write", "publish"}
    # Ids and records in one metadata commit: no allocate commit, nothing to release.
    assert report.commits == {"publish": 1}
    assert_rows(
        lake.read(ds),
        expected(
            spark,
            [*DAY1_ROLLED_UP, ("2024-01-02T10:00:00Z", "#en", "carol", 1, 1)],
        ),
    )
    assert lake.read(ds).schema["__time"].dataType.simpleString() == "timestamp"


def test_appends_add_first_generation_segments_without_hiding_data(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1), ds, spec())
    lake.append(edits(spark, [("2024-01-01T05:00:00Z", "#fr", "dan", 3)]), ds, spec())
    segments = lake.used_segments(ds)
    assert [s.shard_spec.partition_num for s in segments] == [0, 1]
    assert len({s.version for s in segments}) == 1  # the chunk's version, not a new one
    assert lake.read(ds).count() == 3
    assert lake.read(ds).agg(F.sum("edits")).first()[0] == 4


def test_an_append_after_a_segment_was_marked_unused_is_read(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1), ds, spec())
    lake.append(edits(spark, [("2024-01-01T05:00:00Z", "#fr", "dan", 3)]), ds, spec())
    dan = max(lake.used_segments(ds), key=lambda s: s.shard_spec.partition_num)
    assert lake.mark_unused([dan]) == 1

    report = lake.append(edits(spark, [("2024-01-01T06:00:00Z", "#fr", "eve", 4)]), ds, spec())

    # Under dan's id, eve's segment was dropped by the publish that reported it.
    assert report.status == "SUCCESS"
    assert sorted(r.user for r in lake.read(ds).collect()) == ["alice", "bob", "eve"]
    assert lake.mark_used([dan]) == 1
    assert sorted(r.user for r in lake.read(ds).collect()) == ["alice", "bob", "dan", "eve"]
    assert [s.shard_spec.partition_num for s in lake.used_segments(ds)] == [0, 1, 2]


def test_overwrite_replaces_the_interval_and_tombstones_empty_chunks(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1 + DAY2 + [("2024-01-03T00:00:00Z", "#en", "eve", 2)]), ds, spec())
    new = [("2024-01-01T12:00:00Z", "#ja", "frank", 9)]
    report = lake.overwrite(edits(spark, new), ds, spec(), interval="2024-01-01/2024-01-03")
    assert (report.segments, report.tombstones) == (1, 1)  # Jan 2 got no rows
    assert_rows(
        lake.read(ds),
        expected(
            spark,
            [
                ("2024-01-01T12:00:00Z", "#ja", "frank", 1, 9),
                ("2024-01-03T00:00:00Z", "#en", "eve", 1, 2),  # outside the interval: kept
            ],
        ),
    )
    tombstone = [s for s in lake.used_segments(ds) if s.is_tombstone]
    assert [str(s.interval) for s in tombstone] == [
        "2024-01-02T00:00:00.000Z/2024-01-03T00:00:00.000Z"
    ]
    assert lake.locks(ds) == []  # released by the publish


def test_append_after_overwrite_joins_the_new_version(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1), ds, spec())
    report = lake.overwrite(
        edits(spark, DAY2[:0] + DAY1[2:]), ds, spec(), interval="2024-01-01/P1D"
    )
    lake.append(edits(spark, [("2024-01-01T23:00:00Z", "#en", "gus", 4)]), ds, spec())
    versions = {s.version for s in lake.timeline(ds).visible_segments()}
    assert versions == {report.version}
    assert sorted(r.user for r in lake.read(ds).collect()) == ["bob", "gus"]


def test_finer_overwrite_clips_a_coarser_segment(spark: SparkSession, lake: Lake, ds: str) -> None:
    month = spec(segmentGranularity="month")
    lake.append(edits(spark, DAY1 + DAY2), ds, month)
    day = spec(segmentGranularity="day")
    lake.overwrite(
        edits(spark, [("2024-01-02T08:00:00Z", "#es", "hal", 6)]),
        ds,
        day,
        interval="2024-01-02/P1D",
    )
    assert_rows(
        lake.read(ds),
        expected(
            spark,
            # carol's day is overwritten
            [*DAY1_ROLLED_UP, ("2024-01-02T08:00:00Z", "#es", "hal", 1, 6)],
        ),
    )
    # ... and back: a coarser overwrite with a newer version covers the day segment again.
    lake.overwrite(edits(spark, DAY2), ds, month, interval="2024-01-01/P1M")
    assert_rows(lake.read(ds), expected(spark, [("2024-01-02T10:00:00Z", "#en", "carol", 1, 1)]))


def test_marking_the_overwrite_unused_falls_back_to_the_older_generation(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1), ds, spec())
    lake.overwrite(edits(spark, DAY2), ds, spec(), interval="2024-01-01/P2D")
    assert sorted(r.user for r in lake.read(ds).collect()) == ["carol"]
    newest = max(s.version for s in lake.used_segments(ds))
    lake.mark_unused([s for s in lake.used_segments(ds) if s.version == newest])
    assert sorted(r.user for r in lake.read(ds).collect()) == ["alice", "bob"]


def test_read_interval_columns_and_filter(spark: SparkSession, lake: Lake, ds: str) -> None:
    lake.append(edits(spark, DAY1 + DAY2), ds, spec())
    day1 = lake.read(ds, "2024-01-01T02:00:00Z/2024-01-02T00:00:00Z", columns=["user"])
    assert day1.columns == ["__time", "user"]
    assert [r.user for r in day1.collect()] == ["bob"]
    assert lake.read(ds, filter="channel = '#en'").count() == 2
    assert lake.read(ds, filter=F.col("added") > 9).count() == 1
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the datasource"):
        lake.read(ds, columns=["nope"])


def test_view_equals_read_and_follows_new_publishes(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1), ds, spec())
    view = lake.register_view(ds, f"v_{ds}")
    assert_df_equality(spark.table(view), lake.read(ds), ignore_row_order=True)
    lake.append(edits(spark, DAY2), ds, spec())
    assert spark.table(view).count() == 3  # live: no re-registration
    assert_df_equality(spark.table(view), lake.read(ds), ignore_row_order=True)
    assert spark.sql(f"SELECT sum(edits) FROM {view}").first()[0] == 4


def test_scan_reads_only_visible_segments_files(spark: SparkSession, lake: Lake, ds: str) -> None:
    lake.append(edits(spark, DAY1 + DAY2), ds, spec())
    lake.overwrite(edits(spark, DAY2), ds, spec(), interval="2024-01-02/P1D")
    files = lake.read(ds).inputFiles()
    visible = {s.load_spec["segment"] for s in lake.timeline(ds).visible_segments()}
    assert len(files) == len(visible) == 2
    assert all(any(f"__segment={key}" in f for key in visible) for f in files)


def test_max_rows_per_segment_splits_a_chunk(spark: SparkSession, lake: Lake, ds: str) -> None:
    rows = [(f"2024-01-01T00:00:{i % 60:02d}Z", "#en", f"u{i}", i) for i in range(1000)]
    tight = {
        **spec(),
        "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 400}},
    }
    report = lake.overwrite(edits(spark, rows), ds, tight, interval="2024-01-01/P1D")
    segments = lake.used_segments(ds)
    assert report.segments == len(segments) >= 3
    assert all(s.num_rows <= 400 for s in segments)
    assert sum(s.num_rows for s in segments) == 1000
    assert [s.shard_spec.partition_num for s in segments] == list(range(len(segments)))
    assert {s.shard_spec.num_core_partitions for s in segments} == {len(segments)}
    assert lake.read(ds).count() == 1000
    # Split by moving whole files to new keys: the table holds every row once.
    live = TableLog(f"{lake.warehouse}/{ds}").live_files()
    assert sum(f.num_records or 0 for f in live) == 1000
    assert set(report.phases) >= {"write", "split"}


def test_an_oversized_append_is_split_without_writing_rows_twice(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rows = [(f"2024-01-01T{i % 24:02d}:00:{i % 60:02d}Z", "#en", f"u{i}", i) for i in range(900)]
    tight = {
        **spec(rollup=False),
        "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 250}},
    }
    lake.append(edits(spark, DAY2), ds, tight)
    report = lake.append(edits(spark, rows).repartition(3), ds, tight)
    day = [s for s in lake.used_segments(ds) if str(s.interval).startswith("2024-01-01")]
    assert report.segments == len(day) >= 4
    assert all(s.num_rows <= 250 for s in day)
    assert sum(s.num_rows for s in day) == 900
    assert lake.read(ds).count() == 901
    assert sorted(r.added for r in lake.read(ds).where("user != 'carol'").collect()) == list(
        range(900)
    )
    live = TableLog(f"{lake.warehouse}/{ds}").live_files()
    assert sum(f.num_records or 0 for f in live) == 901


def test_rollup_off_keeps_every_row_and_hll_sketches_merge(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    raw = {
        **spec(rollup=False),
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longMax", "name": "added", "fieldName": "added"},
            {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"},
        ],
    }
    lake.append(edits(spark, DAY1), ds, raw)
    lake.append(edits(spark, [*DAY2, ("2024-01-02T11:00:00Z", "#en", "alice", 2)]), ds, raw)
    assert lake.read(ds).count() == 5  # no rollup: the two identical alice rows stay two
    estimate = lake.read(ds).agg(F.hll_sketch_estimate(F.hll_union_agg("users"))).first()[0]
    assert estimate == 3  # alice, bob, carol: merged across segments, not re-counted


def test_theta_sketches_without_rollup_and_sketches_as_input(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """With rollup off each row still gets a sketch of its own; a second datasource unions
    those sketches as its input (isInputThetaSketch), and a raw column there is refused."""
    raw = {
        **spec(rollup=False),
        "metricsSpec": [{"type": "thetaSketch", "name": "users", "fieldName": "user"}],
    }
    lake.append(edits(spark, [*DAY1, *DAY2]), ds, raw)
    assert lake.read(ds).count() == 4
    merged = {
        **spec(),
        "dimensionsSpec": {"dimensions": ["channel"]},
        "metricsSpec": [
            {"type": "thetaSketch", "name": "u", "fieldName": "users", "isInputThetaSketch": True}
        ],
    }
    sketches = lake.read(ds).withColumnRenamed("__time", "ts")
    lake.append(sketches, f"{ds}_merged", merged)
    estimate = lake.read(f"{ds}_merged").agg(F.theta_sketch_estimate(F.theta_union_agg("u")))
    assert estimate.first()[0] == 3  # alice, bob, carol
    with pytest.raises(SpecError, match=r"must be a BINARY column of sketches .* not string"):
        lake.append(
            edits(spark, DAY1),
            f"{ds}_bad",
            {
                **merged,
                "metricsSpec": [
                    {
                        "type": "thetaSketch",
                        "name": "u",
                        "fieldName": "user",
                        "isInputThetaSketch": True,
                    }
                ],
            },
        )


def test_query_granularity_truncates_before_rollup(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1), ds, spec(queryGranularity="day"))
    rows = lake.read(ds).orderBy("channel").collect()
    assert [(r.channel, r.edits, r.added) for r in rows] == [("#de", 1, 7), ("#en", 2, 15)]
    assert {r["__time"] for r in rows} == {r["__time"] for r in rows[:1]}


def test_tasks_are_recorded_and_shown_in_the_view(spark: SparkSession, lake: Lake, ds: str) -> None:
    report = lake.append(edits(spark, DAY1), ds, spec())
    (stored,) = lake.tasks(ds)
    assert stored.task_id == report.task_id
    assert stored.rows == report.rows
    assert stored.segments == 1
    assert stored.status == "SUCCESS"
    lake.register_system_views()
    row = spark.sql(f"SELECT * FROM segmentlake_tasks WHERE datasource = '{ds}'").first()
    assert (row.type, row.status) == ("append", "SUCCESS")
    # The Spark totals of the stored report (null where its phases were not measured).
    assert (row.task_seconds, row.bytes_processed, row.shuffle_bytes) == (
        stored.task_seconds,
        stored.bytes_processed,
        stored.shuffle_bytes,
    )


def test_timeline_after_overwrite_has_one_version_per_chunk(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, DAY1 + DAY2), ds, spec())
    report = lake.overwrite(edits(spark, DAY1 + DAY2), ds, spec(), interval="2024-01-01/P2D")
    holders = lake.timeline(ds).lookup(Interval.parse("2024-01-01/P2D"))
    assert [h.version for h in holders] == [report.version, report.version]


def test_rollup_without_metrics_keeps_one_row_per_time_and_dimensions(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    bare = {**spec(), "metricsSpec": []}
    report = lake.append(edits(spark, DAY1 + DAY2), ds, bare)
    assert report.rows.rows_out == 3  # alice's two identical (time, dims) rows are one
    assert lake.read(ds).columns == ["__time", "channel", "user"]


def test_an_overwrite_lock_refuses_an_append_until_released_or_outranked(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    """The append's one commit makes allocation's lock check: another group's exclusive lock
    on the chunk refuses it (nothing published, the report says FAILED), a higher-priority
    append revokes that lock, and the day's ids stay unique."""
    lake.append(edits(spark, DAY1), ds, spec())
    day = Interval.parse("2024-01-01/P1D")
    held = lake.actions.try_lock(ds, day, group_id="overwriter", priority=50).lock
    assert held is not None
    late = edits(spark, [("2024-01-01T23:00:00Z", "#en", "gus", 4)])

    with pytest.raises(LockRefused, match="overwriter"):
        lake.append(late, ds, spec(), lock_timeout_s=0.6)
    assert sorted(r.user for r in lake.read(ds).collect()) == ["alice", "bob"]
    assert [lk.group_id for lk in lake.locks(ds)] == ["overwriter"]

    report = lake.append(late, ds, spec(), priority=100)
    assert report.status == "SUCCESS"
    assert sorted(r.user for r in lake.read(ds).collect()) == ["alice", "bob", "gus"]
    assert [lk.revoked for lk in lake.locks(ds, include_expired=True)] == [True]
    ids = [s.shard_spec.partition_num for s in lake.timeline(ds).visible_segments()]
    assert sorted(ids) == [0, 1]
