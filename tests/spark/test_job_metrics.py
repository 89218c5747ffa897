"""Per-block Spark job metrics: what a block's jobs read, shuffled and wrote, counted from
Spark's status store with the UI disabled, without touching the caller's job group."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import cast

import pytest
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql import SparkSession

from segmentlake.spark.job_metrics import JobMetrics, MeasuredJobs, measure_jobs

ROWS = 1000
SMALL_STORE_WORKER = Path(__file__).with_name("small_status_store_worker.py")


def metrics_of(measured: MeasuredJobs) -> JobMetrics:
    assert measured.metrics is not None, "the metrics could not be read"
    return measured.metrics


def test_job_metrics_add_and_round_trip_through_json() -> None:
    a = JobMetrics(jobs=1, stages=2, tasks=3, input_bytes=10, shuffle_write_bytes=5)
    b = JobMetrics(jobs=2, stages=1, tasks=1, input_bytes=1, output_bytes=7)

    total = a + b

    assert total == JobMetrics(
        jobs=3, stages=3, tasks=4, input_bytes=11, shuffle_write_bytes=5, output_bytes=7
    )
    assert sum([a, b], JobMetrics()) == total
    assert JobMetrics.from_json(total.to_json()) == total
    assert JobMetrics.from_json({"jobs": 1, "future_metric": 9}) == JobMetrics(jobs=1)


@pytest.mark.spark
def test_a_shuffle_is_counted_on_both_sides(spark: SparkSession) -> None:
    with measure_jobs(spark, "groupby") as measured:
        spark.range(ROWS).selectExpr("id % 7 AS k").groupBy("k").count().collect()

    metrics = metrics_of(measured)
    assert metrics.jobs >= 1
    assert metrics.stages >= 2  # map side and reduce side
    assert metrics.tasks >= 2
    assert metrics.shuffle_write_bytes > 0
    assert metrics.shuffle_read_bytes > 0


@pytest.mark.spark
def test_a_file_scan_counts_its_bytes_and_rows(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "rows.parquet")
    spark.range(ROWS).write.parquet(path)

    with measure_jobs(spark, "scan") as measured:
        assert len(spark.read.parquet(path).collect()) == ROWS

    metrics = metrics_of(measured)
    assert metrics.input_bytes > 0
    assert metrics.input_records == ROWS


@pytest.mark.spark
def test_a_delta_write_counts_its_output(spark: SparkSession, tmp_path: Path) -> None:
    with measure_jobs(spark, "write") as measured:
        spark.range(ROWS).write.format("delta").save(str(tmp_path / "table"))

    metrics = metrics_of(measured)
    assert metrics.output_bytes > 0
    assert metrics.output_records == ROWS


@pytest.mark.spark
def test_a_block_without_jobs_measures_zero(spark: SparkSession) -> None:
    with measure_jobs(spark, "idle") as measured:
        spark.range(ROWS).selectExpr("id * 2")  # a plan, no job

    assert measured.metrics == JobMetrics()


@pytest.mark.spark
def test_the_callers_job_group_and_tags_are_left_alone(spark: SparkSession) -> None:
    sc = spark.sparkContext
    sc.setJobGroup("caller-group", "the caller's description")
    tags = set(sc.getJobTags())
    try:
        with measure_jobs(spark, "inside a group") as measured:
            spark.range(ROWS).collect()

        assert sc.getLocalProperty("spark.jobGroup.id") == "caller-group"
        assert sc.getLocalProperty("spark.job.description") == "the caller's description"
        assert set(sc.getJobTags()) == tags
        assert metrics_of(measured).jobs >= 1
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc._jsc.setLocalProperty(key, None)  # removes it: no job group any more


@pytest.mark.spark
def test_nested_blocks_each_count_their_own_jobs(spark: SparkSession) -> None:
    with measure_jobs(spark, "outer") as outer:
        spark.range(ROWS).collect()
        with measure_jobs(spark, "inner") as inner:
            spark.range(ROWS).selectExpr("id % 3 AS k").groupBy("k").count().collect()

    assert metrics_of(inner).shuffle_write_bytes > 0
    assert metrics_of(outer).jobs > metrics_of(inner).jobs  # the outer one sees both
    assert metrics_of(outer).shuffle_write_bytes == metrics_of(inner).shuffle_write_bytes


@pytest.mark.spark
def test_jobs_of_other_threads_are_not_counted(spark: SparkSession) -> None:
    def other() -> None:
        spark.range(ROWS).selectExpr("id % 3 AS k").groupBy("k").count().collect()

    with measure_jobs(spark, "waiting") as measured:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(timeout=120)

    assert measured.metrics == JobMetrics()


@pytest.mark.spark
def test_a_failing_block_raises_its_own_error_and_is_measured(spark: SparkSession) -> None:
    with (
        pytest.raises(Exception, match="boom"),
        measure_jobs(spark, "failing") as measured,
    ):
        spark.range(ROWS).selectExpr("raise_error('boom')").collect()

    assert metrics_of(measured).jobs >= 1
    assert set(spark.sparkContext.getJobTags()) == set()


@pytest.mark.spark
def test_a_block_is_measured_after_the_store_evicts_its_skipped_stages() -> None:
    # Past spark.ui.retainedStages the store drops skipped stages first (no completion time),
    # right after the block's jobs end: a long-lived session (this suite's, a notebook's) gets
    # there. The store's size is fixed at start, hence a Spark of its own with a tiny one: its
    # first block fits whole, the later ones each lose their skipped stage.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, str(SMALL_STORE_WORKER), "12", "12"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    ).stdout
    measured = [json.loads(line) for line in out.splitlines() if line.startswith(("{", "null"))]

    assert len(measured) == 12
    assert None not in measured
    first, *later = map(JobMetrics.from_json, measured)
    assert first.jobs >= 2  # the second collect is a job of its own, skipping the map stage
    for metrics in later:
        assert (metrics.jobs, metrics.stages, metrics.tasks) == (
            first.jobs,
            first.stages,
            first.tasks,
        )
        assert metrics.shuffle_write_bytes == first.shuffle_write_bytes


class _ConnectLike:
    """A session without a JVM, as under Spark Connect."""

    @property
    def sparkContext(self) -> None:
        raise PySparkNotImplementedError(
            errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "sparkContext()"}
        )


def test_without_a_jvm_the_block_runs_and_metrics_stay_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran = []
    with (
        caplog.at_level(logging.DEBUG, logger="segmentlake.spark.job_metrics"),
        measure_jobs(cast(SparkSession, _ConnectLike()), "connect") as measured,
    ):
        ran.append(True)

    assert ran == [True]
    assert measured.metrics is None
    assert "connect: no Spark job metrics" in caplog.text
