"""Streaming appends: each micro-batch one append, exactly once, across replays and killed
drivers (``segmentlake.streaming``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from segmentlake.errors import SpecError, TaskAlreadyPublished
from segmentlake.faults import CRASH_ENV
from segmentlake.lake import Lake
from segmentlake.metadata.records import TASK
from segmentlake.metadata.store import now_ms
from segmentlake.metadata.tasks import record_task, task_row
from segmentlake.streaming import append_stream, batch_task_id, batch_writer
from tests.streaming.support import LEASE_SECONDS, SCHEMA, SPEC, write_files

WORKER = Path(__file__).with_name("stream_worker.py")


def users(lake: Lake) -> Counter[str]:
    """Every visible row's user, counted (a row seen twice counts twice)."""
    return Counter(r["user"] for r in lake.read("events").select("user").collect())


def test_a_task_id_runs_once(spark: SparkSession, warehouse: str) -> None:
    lake = Lake(spark, warehouse)
    df = spark.createDataFrame([("2024-01-01T00:00:00Z", "a", 1)], SCHEMA)
    first = lake.append(df, "events", SPEC, task_id="load_1")
    with pytest.raises(TaskAlreadyPublished, match="load_1") as refused:
        lake.append(df, "events", SPEC, task_id="load_1")
    assert refused.value.report["status"] == "SUCCESS"
    # The ledger keeps the successful run's report; the data is there once.
    (task,) = [t for t in lake.tasks("events") if t.task_id == "load_1"]
    assert task.status == "SUCCESS"
    assert task.segments == first.segments
    assert users(lake) == Counter({"a": 1})


def test_a_racing_run_of_one_task_id_is_refused_once_the_other_publishes(
    spark: SparkSession, warehouse: str
) -> None:
    """Two runs of one task id at once (a job retried while the first still ran): the second
    passes the published check before the first publishes, then waits for a lock; once the
    first has published, its next lock attempt finds that and it stops, recording nothing."""
    lake = Lake(spark, warehouse)
    day_one = spark.createDataFrame([("2024-01-01T00:00:00Z", "a", 1)], SCHEMA)
    day_two = spark.createDataFrame([("2024-01-02T00:00:00Z", "b", 1)], SCHEMA)
    lake.append(day_one, "events", SPEC)  # the datasource exists
    holder = lake.actions.try_lock("events", "2024-01-01/P1D", group_id="holder", priority=100)
    assert holder.granted
    failed: list[tuple[BaseException, float]] = []

    def second_run() -> None:
        try:
            lake.append(day_one, "events", SPEC, task_id="load_1", lock_timeout_s=30.0)
        except Exception as e:
            failed.append((e, time.time()))

    racing = threading.Thread(target=second_run)
    racing.start()
    time.sleep(1.0)  # it has passed the published check and waits for the holder's lock
    first = lake.append(day_two, "events", SPEC, task_id="load_1")
    racing.join(timeout=60)
    [(error, failed_at)] = failed
    assert isinstance(error, TaskAlreadyPublished), error
    # Ordered against the first run's publish (its ledger row's decision time), not against
    # `lake.append` returning: the refusal may land while the first still syncs its reads.
    [published] = lake.metadata.rows(
        "events", pc.field("id") == "load_1", kinds=[TASK], columns=("updated_ms",)
    )
    assert failed_at * 1000 >= published["updated_ms"]
    (task,) = [t for t in lake.tasks("events") if t.task_id == "load_1"]
    assert (task.status, task.segments) == ("SUCCESS", first.segments)
    assert users(lake) == Counter({"a": 1, "b": 1})


def test_a_failure_of_a_task_id_that_succeeded_does_not_replace_its_record(
    spark: SparkSession, warehouse: str
) -> None:
    """A second run of a task id can fail after the first published (it passed the published
    checks before that; then its write failed): its failure record must not replace the
    success, which is what keeps a third run from ingesting the rows again. The record was an
    upsert: the id then looked unpublished and a retry appended the rows a second time."""
    lake = Lake(spark, warehouse)
    day_one = spark.createDataFrame([("2024-01-01T00:00:00Z", "a", 1)], SCHEMA)
    first = lake.append(day_one, "events", SPEC, task_id="load_1")
    failure = {**first.to_json(), "status": "FAILED", "error": "Py4JJavaError: lost executor"}
    row = task_row("events", "load_1", failure, interval=None, now_ms=now_ms())
    assert record_task(lake.metadata, row, policy=lake.lockbox.retry) is False
    (task,) = [t for t in lake.tasks("events") if t.task_id == "load_1"]
    assert (task.status, task.segments) == ("SUCCESS", first.segments)
    with pytest.raises(TaskAlreadyPublished, match="load_1"):
        lake.append(day_one, "events", SPEC, task_id="load_1")
    assert users(lake) == Counter({"a": 1})
    # A task that failed may be recorded again, as it is when it fails once more.
    other = task_row("events", "load_2", failure, interval=None, now_ms=now_ms())
    assert record_task(lake.metadata, other, policy=lake.lockbox.retry) is True
    assert record_task(lake.metadata, other, policy=lake.lockbox.retry) is True


def test_a_replayed_batch_is_skipped(spark: SparkSession, warehouse: str) -> None:
    lake = Lake(spark, warehouse)
    write = batch_writer(lake, "events", SPEC, stream_id="s1")
    batch = spark.createDataFrame([("2024-01-01T00:00:00Z", "a", 1)], SCHEMA)
    write(batch, 0)
    write(batch, 0)  # Spark replays the batch after a restart
    write(spark.createDataFrame([("2024-01-02T00:00:00Z", "b", 1)], SCHEMA), 1)
    write(spark.createDataFrame([], SCHEMA), 2)  # an empty batch appends nothing
    assert users(lake) == Counter({"a": 1, "b": 1})
    ids = {t.task_id for t in lake.tasks("events")}
    assert ids == {batch_task_id("s1", 0), batch_task_id("s1", 1)}


def test_bad_stream_ids_and_batch_sources_are_refused(spark: SparkSession, warehouse: str) -> None:
    lake = Lake(spark, warehouse)
    with pytest.raises(SpecError, match="stream_id"):
        batch_writer(lake, "events", SPEC, stream_id="a/b")
    with pytest.raises(SpecError, match="streaming DataFrame"):
        append_stream(lake, spark.range(1), "events", SPEC, checkpoint_location="/tmp/x")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"stream_id": 5}, "stream_id 5 must be 1-100 letters"),
        ({"lock_timeout_s": "10"}, "lock_timeout_s"),
        ({"lock_timeout_s": float("inf")}, "lock_timeout_s"),
    ],
)
def test_bad_batch_writer_options_fail_the_call(
    spark: SparkSession, warehouse: str, arguments: dict[str, object], message: str
) -> None:
    """Refused when the writer is made, not in the query's first micro-batch."""
    options = {"stream_id": "events", **arguments}
    with pytest.raises(SpecError, match=message):
        batch_writer(Lake(spark, warehouse), "events", SPEC, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"stream": None}, "streaming DataFrame"),
        ({"checkpoint_location": " "}, "checkpoint_location"),
        ({"trigger": {"processingtime": "1 second"}}, "trigger must be one of processingTime"),
        ({"trigger": "10 seconds"}, "trigger must be one of"),
        ({"query_name": 7}, "query_name"),
    ],
)
def test_bad_stream_options_fail_before_the_query_starts(
    spark: SparkSession, warehouse: str, tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    options: dict[str, Any] = {
        "stream": stream,
        "checkpoint_location": str(tmp_path / "chk"),
        **arguments,
    }
    lake = Lake(spark, warehouse)
    with pytest.raises(SpecError, match=message):
        append_stream(
            lake,
            options.pop("stream"),
            "events",
            SPEC,
            **options,
        )
    assert not spark.streams.active


def test_a_stream_appends_every_row_once_and_resumes(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    lake = Lake(spark, warehouse)
    source, checkpoint = tmp_path / "in", str(tmp_path / "chk")
    total = write_files(source, 3, 20)
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    run = {"checkpoint_location": checkpoint, "trigger": {"availableNow": True}}
    append_stream(lake, stream, "events", SPEC, **run).awaitTermination()
    counted = users(lake)
    assert sum(counted.values()) == total
    assert set(counted.values()) == {1}
    total += write_files(source, 2, 20, start=3)
    append_stream(lake, stream, "events", SPEC, **run).awaitTermination()
    counted = users(lake)
    assert sum(counted.values()) == total
    assert set(counted.values()) == {1}
    assert len(lake.tasks("events")) == 5  # one append per file (micro-batch)


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "point",
    [
        "ingest.after_write#2",  # rows written, batch 1 not published: it runs again
        "commit.publish.after_log#2",  # batch 1 published, not checkpointed: it is skipped
    ],
)
def test_a_killed_stream_resumes_exactly_once(
    spark: SparkSession, warehouse: str, tmp_path: Path, point: str
) -> None:
    source, checkpoint = tmp_path / "in", str(tmp_path / "chk")
    total = write_files(source, 4, 25)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    argv = [sys.executable, str(WORKER), warehouse, str(source), checkpoint]
    killed = subprocess.run(
        argv, env={**env, CRASH_ENV: point}, capture_output=True, text=True,
        start_new_session=True, timeout=600,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stdout + killed.stderr  # SIGKILL at the point
    assert "drained" not in killed.stdout
    lake = Lake(spark, warehouse)
    before = users(lake)
    assert 0 < sum(before.values()) < total  # it died mid-stream
    time.sleep(LEASE_SECONDS)  # the dead driver's locks expire
    # Another driver (this session's, which never ran the stream) resumes from what the killed
    # one left on disk: the checkpoint and the metadata.
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    resumed = append_stream(
        Lake(spark, warehouse, lease_seconds=LEASE_SECONDS), stream, "events", SPEC,
        checkpoint_location=checkpoint, trigger={"availableNow": True},
    )  # fmt: skip
    resumed.awaitTermination()  # raises if a batch failed
    assert resumed.exception() is None
    counted = users(lake)
    assert sum(counted.values()) == total  # every row...
    assert set(counted.values()) == {1}  # ...exactly once
    succeeded = [t for t in lake.tasks("events") if t.status == "SUCCESS"]
    assert len(succeeded) == 4  # one published append per micro-batch


@pytest.mark.slow
def test_compaction_meanwhile_never_fails_a_batch(
    spark: SparkSession, warehouse: str, tmp_path: Path
) -> None:
    lake = Lake(spark, warehouse)
    source, checkpoint = tmp_path / "in", str(tmp_path / "chk")
    seed = tmp_path / "seed"
    total = write_files(seed, 1, 20)
    lake.append(spark.read.schema(SCHEMA).json(str(seed)), "events", SPEC)  # the days exist
    total += write_files(source, 6, 20, start=1)
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = append_stream(
        lake, stream, "events", SPEC, checkpoint_location=checkpoint,
        trigger={"availableNow": True},
    )  # fmt: skip
    compactions, overlapped = [], False
    while query.isActive:
        report = lake.compact("events", "2024-01-01/P2D", mode="major", lock_timeout_s=120)
        compactions.append(report.status)
        overlapped = overlapped or query.isActive  # a batch ran after this compaction began
    query.awaitTermination()
    assert query.exception() is None
    assert compactions
    assert set(compactions) <= {"SUCCESS", "SKIPPED"}
    assert overlapped
    counted = users(lake)
    assert sum(counted.values()) == total
    assert set(counted.values()) == {1}
