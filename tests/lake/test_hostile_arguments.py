"""Arguments of the wrong type or out of range to the Lake's metadata methods and its task
actions are a SpecError naming the argument and what it takes, raised before anything is
written; never a TypeError, AttributeError or Arrow error from deep inside a commit. These
calls need no Spark (the warehouse's metadata is read and written by delta-rs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.actions import AllocateRequest
from segmentlake.compact.manager import CompactionManager
from segmentlake.core.interval import Interval
from segmentlake.errors import SpecError
from segmentlake.lake import Lake

DAY = "2024-01-01/2024-01-02"
HUGE = 10**30

Call = Callable[[Lake, Any], object]

CASES: list[tuple[str, Call, Any, str]] = [
    ("mark_unused of a number", lambda lk, a: lk.mark_unused(a), 5, "segment_ids must be a list"),
    ("mark_used of None", lambda lk, a: lk.mark_used(a), None, "segment_ids must be a list"),
    (
        "mark_unused of one id string",
        lambda lk, a: lk.mark_unused(a),
        "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1",
        "segment_ids must be a list",
    ),
    (
        "coordinator of one datasource name",
        lambda lk, a: lk.coordinator(datasources=a),
        "wiki",
        "datasources must be a list of names",
    ),
    (
        "compaction manager of a number of datasources",
        lambda lk, a: lk.compaction_manager(datasources=a),
        3,
        "datasources must be a list of names",
    ),
    (
        "compaction manager batch of text",
        lambda lk, a: lk.compaction_manager(batch_jobs=a),
        "8",
        "batch_jobs must be an integer >= 1",
    ),
    (
        "compaction manager queue of zero",
        lambda lk, a: lk.compaction_manager(queue_size=a),
        0,
        "queue_size must be an integer >= 1",
    ),
    (
        "compaction manager rows as a float",
        lambda lk, a: lk.compaction_manager(batch_rows=a),
        1.5,
        "batch_rows must be an integer >= 1",
    ),
    (
        "user compaction id of a number",
        lambda lk, a: lk.start_user_compaction("wiki", DAY, compaction_id=a),
        5,
        "compaction_id must be a non-empty id",
    ),
    (
        "user compaction rows past int64",
        lambda lk, a: lk.start_user_compaction("wiki", DAY, max_rows_per_segment=a),
        HUGE,
        "max_rows_per_segment must be an integer >= 1",
    ),
    (
        "rules author of bytes",
        lambda lk, a: lk.set_rules("wiki", [], author=a),
        b"ops",
        "author must be a string",
    ),
    (
        "rules comment past int64",
        lambda lk, a: lk.set_rules("wiki", [], comment=a),
        HUGE,
        "comment must be a string",
    ),
    (
        "volume path with a NUL",
        lambda lk, a: lk.add_volume("v1", tier="hot", path=a, capacity_bytes=10),
        "/tmp/a\x00b",
        "without NUL characters",
    ),
    (
        "heartbeat of a number group",
        lambda lk, a: lk.actions.heartbeat("wiki", a),
        HUGE,
        "group_id must be a non-empty group id",
    ),
    (
        "release of an object group",
        lambda lk, a: lk.actions.release_locks("wiki", a),
        object(),
        "group_id must be a non-empty group id",
    ),
    (
        "lock timeout of text",
        lambda lk, a: lk.actions.lock("wiki", DAY, group_id="g", timeout_s=a),
        "5",
        "timeout_s must be a number",
    ),
    (
        "lock timeout of NaN",
        lambda lk, a: lk.actions.lock("wiki", DAY, group_id="g", timeout_s=a),
        math.nan,
        "timeout_s must be a finite number",
    ),
    (
        "publish of one segment not in a list",
        lambda lk, a: lk.actions.publish("wiki", a, group_id="g"),
        7,
        "publish segments must be a list of DataSegment",
    ),
    (
        "publish of a descriptor dict",
        lambda lk, a: lk.actions.publish("wiki", [a], group_id="g"),
        {"dataSource": "wiki"},
        "publish segments must be DataSegment objects",
    ),
    (
        "publish release flag of text",
        lambda lk, a: lk.actions.publish("wiki", [], group_id="g", release_locks=a),
        "no",
        "release_locks must be true or false",
    ),
    (
        "allocate of interval strings",
        lambda lk, a: lk.actions.allocate("wiki", [a], group_id="g"),
        DAY,
        "allocate requests must be AllocateRequest objects",
    ),
    (
        "allocate of a number",
        lambda lk, a: lk.actions.allocate("wiki", a, group_id="g"),
        5,
        "allocate requests must be a list of AllocateRequest",
    ),
    ("lake lease of True", lambda lk, a: Lake(None, lk.warehouse, lease_seconds=a), True, "lease"),
    (
        "lake lease past an int64 of milliseconds (it failed at the first lock)",
        lambda lk, a: Lake(None, lk.warehouse, lease_seconds=a),
        9e18,
        "lease_seconds must be a number >= 0.001 and <= 1000000000",
    ),
    ("warehouse with a NUL", lambda lk, a: Lake(None, a), "/tmp/wh\x00x", "without NUL"),
    (
        "warehouse with a 300-byte directory name (it failed in delta-rs at the first commit)",
        lambda lk, a: Lake(None, a),
        "/tmp/" + "w" * 300 + "/wh",
        "has a directory name of 300 bytes; file systems allow 255",
    ),
    (
        "warehouse path of 4000 bytes",
        lambda lk, a: Lake(None, a),
        "/tmp" + "/wh" * 1333,
        "warehouse path of 4003 bytes is too long",
    ),
    (
        "lake storage options of a list",
        lambda lk, a: Lake(None, lk.warehouse, storage_options=a),
        ["AWS_REGION=eu-west-1"],
        "storage_options must be a mapping of strings",
    ),
    (
        "lake storage option of a number",
        lambda lk, a: Lake(None, lk.warehouse, storage_options=a),
        {"timeout": 30},
        "storage_options must map option names to string values",
    ),
    ("lake retry of a number", lambda lk, a: Lake(None, lk.warehouse, retry=a), 3, "RetryPolicy"),
    (
        "lake create flag of text",
        lambda lk, a: Lake(None, lk.warehouse, create=a),
        "no",
        "create must be true or false",
    ),
    (
        "table create flag of text",
        lambda lk, a: lk.table("wiki", create=a),
        "yes",
        "create must be true or false",
    ),
    (
        "handle mark_unused of one id string (it was read one letter at a time)",
        lambda lk, a: lk.table("wiki", create=True).maintenance.mark_unused(a),
        "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1",
        "segment_ids must be a list",
    ),
    (
        "handle mark_used of None",
        lambda lk, a: lk.table("wiki", create=True).maintenance.mark_used(a),
        None,
        "segment_ids must be a list",
    ),
    (
        "kill vacuum flag of text (any text used to run VACUUM)",
        lambda lk, a: lk.kill("wiki", vacuum=a),
        "no",
        "vacuum must be true or false",
    ),
    (
        "locks flag of text",
        lambda lk, a: lk.locks("wiki", include_expired=a),
        "no",
        "include_expired must be true or false",
    ),
    (
        "coordinator loads per batch of zero",
        lambda lk, a: lk.coordinator(loads_per_batch=a),
        0,
        "loads_per_batch must be an integer >= 1",
    ),
    (
        "history limit of a float",
        lambda lk, a: lk.table("wiki", create=True).inspect.history(limit=a),
        1.5,
        "limit",
    ),
    (
        "inspect segments flag of text",
        lambda lk, a: lk.table("wiki", create=True).inspect.segments(include_unused=a),
        "no",
        "include_unused must be true or false",
    ),
    (
        "inspect locks flag of a number",
        lambda lk, a: lk.table("wiki", create=True).inspect.locks(include_expired=a),
        2,
        "include_expired must be true or false",
    ),
    ("view name with a NUL", lambda lk, a: lk.view_sql("wiki", a), "wi\x00ki", "control"),
    ("blank view name", lambda lk, a: lk.view_sql("wiki", a), "  ", "a view name must be"),
    (
        "view temporary flag of text",
        lambda lk, a: lk.view_sql("wiki", "edits", temporary=a),
        "yes",
        "temporary must be true or false",
    ),
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return Lake.create(None, str(tmp_path_factory.mktemp("hostile-arguments") / "warehouse"))


@pytest.mark.parametrize(
    ("call", "value", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_argument_is_a_spec_error_naming_it(
    lake: Lake, call: Call, value: Any, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        call(lake, value)


def test_refused_arguments_commit_nothing(lake: Lake, tmp_path: Path) -> None:
    """A refused publish, rule change or user compaction leaves the metadata as it was."""
    before = lake.metadata.version()
    for _, call, value, _ in CASES:
        with pytest.raises(SpecError):
            call(lake, value)
    after = lake.metadata.version()
    assert before == after
    assert lake.rules("wiki") == ()


@pytest.mark.spark  # the compaction manager's target is made with the shared session
def test_the_good_arguments_still_work(lake: Lake, spark: SparkSession) -> None:
    """The same calls with arguments of the right kind go through (controls for the cases)."""
    lake.set_rules("wiki", [], author="ops", comment="none")
    assert lake.actions.heartbeat("wiki", "g") == []
    assert lake.actions.release_locks("wiki", "g") == 0
    assert lake.actions.publish("wiki", [], group_id="g").segments == 0
    day = Interval.parse(DAY)
    (pending,) = lake.actions.allocate("wiki", (AllocateRequest(day, "seq-0"),), group_id="g")
    assert pending.segment_id.interval == day
    assert lake.mark_unused(iter([])) == 0
    manager = lake.compaction_manager(datasources=("wiki",), batch_jobs=2, queue_size=4)
    assert manager.datasources == ["wiki"]
    assert lake.table("wiki", create=True).maintenance.mark_unused(()) == 0
    assert lake.view_sql("wiki", "wiki edits", temporary=True).startswith(
        "CREATE OR REPLACE TEMPORARY VIEW `wiki edits` AS"
    )
    coordinator = lake.coordinator(datasources=[], loads_per_batch=1)
    assert (coordinator.datasources, coordinator.loads_per_batch) == ([], 1)
    assert Lake(None, lake.warehouse, storage_options={}, lease_seconds=2).warehouse
    assert Lake(None, "/tmp/" + "w" * 255).warehouse.endswith("/" + "w" * 255)  # writes nothing


# -- the Spark surfaces: ingestion, compaction and reads -------------------------------------

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "count", "name": "edits"}],
    "granularitySpec": {"segmentGranularity": "day", "rollup": False},
}

SPARK_CASES: list[tuple[str, Callable[[Lake, DataFrame, Any], object], Any, str]] = [
    (
        "append task id of a number",
        lambda lk, df, a: lk.append(df, "wiki", SPEC, task_id=a),
        5,
        "task_id must be 1-200 letters",
    ),
    (
        "overwrite priority past a Java int",
        lambda lk, df, a: lk.overwrite(df, "wiki", SPEC, interval=DAY, priority=a),
        2**40,
        "priority",
    ),
    (
        "minor compaction task id of a number (nothing to compact: it used to be skipped)",
        lambda lk, df, a: lk.compact("wiki", task_id=a),
        5,
        "task_id must be 1-200 letters",
    ),
    (
        "compaction lock timeout of None",
        lambda lk, df, a: lk.compact("wiki", lock_timeout_s=a),
        None,
        "lock_timeout_s",
    ),
    (
        "compaction of one segment id, not a list",
        lambda lk, df, a: lk.compact("wiki", segments=a),
        7,
        "segments must be a list",
    ),
    (
        "major compaction partitions spec of text",
        lambda lk, df, a: lk.compact("wiki", mode="major", partitions_spec=a),
        "hashed",
        "partitions_spec must be a partitions spec",
    ),
    (
        "major compaction rollup of text",
        lambda lk, df, a: lk.compact("wiki", mode="major", rollup=a),
        "false",
        "rollup must be true or false",
    ),
    (
        "read columns of a number",
        lambda lk, df, a: lk.read("wiki", columns=a),
        5,
        "columns must be a list of column names",
    ),
    (
        "read columns of one name",
        lambda lk, df, a: lk.read("wiki", columns=a),
        "user",
        "columns must be a list of column names",
    ),
    (
        "read filter of a number",
        lambda lk, df, a: lk.read("wiki", filter=a),
        5,
        "filter must be a Spark SQL boolean expression or a Column",
    ),
    (
        "read filter of an empty string",
        lambda lk, df, a: lk.read("wiki", filter=a),
        " ",
        "filter must be a Spark SQL boolean expression",
    ),
    (
        "read filter that does not parse",
        lambda lk, df, a: lk.read("wiki", filter=a),
        "user = ",
        r"filter 'user = ' is not a boolean Spark SQL condition over the columns "
        r"\['__time', 'user', 'edits'\]: \[PARSE_SYNTAX_ERROR\] "
        r"Syntax error at or near end of input",
    ),
    (
        # Spark's expr() alone would read the trailing AND as an alias: all of user = 'a'.
        "read filter cut off after AND",
        lambda lk, df, a: lk.read("wiki", filter=a),
        "user = 'a' AND",
        r"filter \"user = 'a' AND\" is not a boolean Spark SQL condition.*column alias",
    ),
    (
        "read filter of an unknown column",
        lambda lk, df, a: lk.read("wiki", filter=a),
        "page = 'x'",
        r"filter \"page = 'x'\" is not .*UNRESOLVED_COLUMN",
    ),
    (
        "read filter that is not a condition",
        lambda lk, df, a: lk.read("wiki", filter=a),
        "user",
        r"filter 'user' is not a boolean .*FILTER_NOT_BOOLEAN",
    ),
    (
        "read filter with an aggregate",
        lambda lk, df, a: lk.read("wiki", filter=a),
        "count(user) > 1",
        r"filter 'count\(user\) > 1' is not a boolean .*INVALID_WHERE_CONDITION",
    ),
    (
        "read filter Column of an unknown column",
        lambda lk, df, a: lk.read("wiki", filter=F.col(a) == "x"),
        "page",
        r"is not a boolean Spark SQL condition .*UNRESOLVED_COLUMN",
    ),
    (
        "read columns naming one twice",
        lambda lk, df, a: lk.read("wiki", columns=a),
        ["user", "user"],
        r"columns lists \['user'\] more than once",
    ),
    ("read tier of an empty name", lambda lk, df, a: lk.read("wiki", tier=a), "", "tier name"),
    (
        # Spark refused it inside the task, after its ledger row and its lock were written.
        "append of a streaming DataFrame",
        lambda lk, df, a: lk.append(lk.spark.readStream.format(a).load(), "wiki", SPEC),
        "rate",
        r"rows is a streaming DataFrame, and lake.append reads a batch DataFrame once\. "
        r"Ingest a stream with segmentlake.streaming.append_stream",
    ),
    (
        "overwrite of a streaming DataFrame",
        lambda lk, df, a: lk.overwrite(
            lk.spark.readStream.format(a).load(), "wiki", SPEC, interval="2024-01-01/P1D"
        ),
        "rate",
        r"rows is a streaming DataFrame, and lake.overwrite reads",
    ),
    (
        "handle view temporary flag of a number",
        lambda lk, df, a: lk.table("wiki").register_view("edits", temporary=a),
        1,
        "temporary must be true or false",
    ),
    (
        "coordinator run of a text execute flag",
        lambda lk, df, a: lk.coordinator().run_once(execute=a),
        "false",
        "execute must be true or false",
    ),
    (
        "manager status lease of zero",
        lambda lk, df, a: CompactionManager(lk.compaction_manager().target, status_lease_s=a),
        0,
        "status_lease_s must be a number >= 0.001",
    ),
    (
        "manager outcome callback of a list",
        lambda lk, df, a: CompactionManager(lk.compaction_manager().target, on_outcome=a),
        [],
        "on_outcome must be a function",
    ),
]


@pytest.fixture(scope="module")
def rows(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [("2024-01-01T01:00:00Z", "a"), ("2024-01-01T02:00:00Z", "b")], ["ts", "user"]
    )


@pytest.fixture(scope="module")
def spark_lake(
    spark: SparkSession, rows: DataFrame, tmp_path_factory: pytest.TempPathFactory
) -> Lake:
    lake = Lake.create(spark, str(tmp_path_factory.mktemp("hostile-spark") / "warehouse"))
    lake.append(rows, "wiki", SPEC)
    return lake


@pytest.mark.spark
@pytest.mark.parametrize(
    ("call", "value", "message"),
    [c[1:] for c in SPARK_CASES],
    ids=[c[0] for c in SPARK_CASES],
)
def test_a_bad_task_or_read_argument_is_a_spec_error_naming_it(
    spark_lake: Lake, rows: DataFrame, call: Callable[..., object], value: Any, message: str
) -> None:
    before = spark_lake.metadata.version()
    with pytest.raises(SpecError, match=message):
        call(spark_lake, rows, value)
    assert spark_lake.metadata.version() == before
    assert spark_lake.read("wiki").count() == 2


@pytest.mark.spark
def test_the_same_surfaces_take_good_arguments(spark_lake: Lake) -> None:
    """Controls: the arguments of the right kind are read as before."""
    assert spark_lake.read("wiki", columns=["user"], filter="user = 'a'").count() == 1
    assert spark_lake.read("wiki", filter=F.col("user") == "b").count() == 1
    assert spark_lake.read("wiki", filter="user = 'a' -- the first user").count() == 1
    assert spark_lake.read("wiki", filter="user = (SELECT 'b')").count() == 1
    report = spark_lake.compact("wiki", task_id="compact-1", lock_timeout_s=5, segments=[])
    assert report.task_id == "compact-1"
    wiki = spark_lake.table("wiki")
    assert wiki.inspect.history(limit=0).count() == 0
    assert wiki.inspect.segments(include_unused=True).count() >= 1
    assert wiki.register_view("wiki edits", temporary=True) == "wiki edits"
    assert spark_lake.spark.table("`wiki edits`").count() == 2


@pytest.mark.spark
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"compactors": -1}, "compactors must be an integer in 0..1024"),
        ({"compactors": 0, "once": True}, "once=True needs at least one compactor"),
        ({"once": "yes"}, "once must be true or false"),
        ({"interval_s": "10"}, "interval_s must be a number"),
        ({"group": ""}, "group must be a non-empty compaction group name"),
    ],
)
def test_a_bad_manager_loop_option_fails_before_the_first_pass(
    spark_lake: Lake, arguments: dict[str, Any], message: str
) -> None:
    """Refused before the first pass (zero compactors with ``once`` used to wait forever)."""
    manager = spark_lake.compaction_manager(datasources=["wiki"])
    with pytest.raises(SpecError, match=message):
        manager.run(**arguments)
    assert manager.last_pass is None


@pytest.mark.spark
@pytest.mark.parametrize(
    ("arguments", "message"),
    [({"interval_s": "60", "runs": 1}, "interval_s must be a number"), ({"runs": 1.5}, "runs")],
)
def test_a_bad_coordinator_loop_option_fails_before_the_first_run(
    spark_lake: Lake, arguments: dict[str, Any], message: str
) -> None:
    """Refused before the first run (a text interval used to fail after it)."""
    reports: list[object] = []
    with pytest.raises(SpecError, match=message):
        spark_lake.coordinator().run(on_run=reports.append, **arguments)
    assert reports == []
