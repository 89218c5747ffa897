"""Bad specs fail before any work with a message naming the field; bad rows are counted, never
dropped silently, and beyond ``max_parse_exceptions`` fail the task with the first offenders;
a failed task publishes nothing and leaves its locks released."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from segmentlake.errors import BadRowsError, NotFound, SpecError
from segmentlake.lake import Lake
from tests.ingest.conftest import edits, spec

pytestmark = [pytest.mark.spark]

GOOD = ("2024-01-01T01:00:00Z", "#en", "alice", 10)
BAD = [
    ("yesterday", "#en", "bob", 1),
    (None, "#de", "carol", 2),
    ("2024-01-01T03:00:00Z", "#de", "dan", None),  # a null metric input is fine (Druid: 0)
]


def with_tuning(base: dict[str, Any], **tuning: Any) -> dict[str, Any]:
    return {**base, "tuningConfig": tuning}


def test_unparseable_rows_fail_the_task_showing_them(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    with pytest.raises(BadRowsError) as caught:
        lake.append(edits(spark, [GOOD, *BAD]), ds, spec())
    message = str(caught.value)
    assert "2 unparseable row(s)" in message
    assert "maxParseExceptions=0" in message
    assert "ts='yesterday'" in message
    assert "null timestamp" in message
    assert caught.value.report.status == "FAILED"
    assert lake.used_segments(ds) == []
    (task,) = lake.tasks(ds)
    assert task.status == "FAILED"
    assert task.rows.unparseable == 2
    assert "BadRowsError" in (task.error or "")


def test_allowed_unparseable_rows_are_counted_by_reason(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    report = lake.append(edits(spark, [GOOD, *BAD]), ds, with_tuning(spec(), maxParseExceptions=2))
    rows = report.rows
    assert (rows.rows_in, rows.processed, rows.unparseable) == (4, 2, 2)
    assert rows.unparseable_by_reason == {"null timestamp": 1, "unparseable timestamp (iso)": 1}
    assert lake.read(ds).count() == 2


def test_filtered_and_outside_interval_rows_are_counted(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rows = [
        GOOD,
        ("2024-01-01T02:00:00Z", "#de", "bob", 1),
        ("2024-02-01T00:00:00Z", "#en", "x", 1),
    ]
    filtered = {**spec(), "transformSpec": {"filter": "channel = '#en'"}}
    report = lake.overwrite(edits(spark, rows), ds, filtered, interval="2024-01-01/P1D")
    assert (report.rows.filtered, report.rows.outside_interval, report.rows.processed) == (1, 1, 1)
    assert [r.user for r in lake.read(ds).collect()] == ["alice"]
    appended = lake.append(edits(spark, rows), ds, spec(), interval="2024-01-01/P1D")
    assert appended.rows.outside_interval == 1
    assert appended.rows.processed == 2


def test_unparseable_metric_input_is_a_parse_exception(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    df = edits(
        spark,
        [("2024-01-01T00:00:00Z", "#en", "a", "12"), ("2024-01-01T00:00:00Z", "#en", "b", "lots")],
        "ts STRING, channel STRING, user STRING, added STRING",
    )
    with pytest.raises(BadRowsError, match=r"unparseable 'added' for longSum metric 'added'"):
        lake.append(df, ds, spec())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"timestampSpec": {"column": "when"}}, r"timestampSpec.column names \['when'\]"),
        ({"dimensionsSpec": {"dimensions": ["chan"]}}, r"dimensionsSpec.dimensions names"),
        (
            {"metricsSpec": [{"type": "longSum", "name": "a", "fieldName": "nope"}]},
            r"metricsSpec fieldName names \['nope'\]",
        ),
        (
            {"transformSpec": {"transforms": [{"name": "t", "expression": "upper(("}]}},
            r"transform 't': 'upper\(\(' is not a valid Spark SQL expression",
        ),
        (
            {"transformSpec": {"filter": "no_such_column > 1"}},
            r"transformSpec.filter 'no_such_column > 1' is not a valid",
        ),
        (
            # Valid SQL only if spliced into the parse's CASE: it must be refused, not run.
            {"transformSpec": {"filter": "false, false) THEN 'kept' WHEN coalesce(true"}},
            r"transformSpec.filter .* is not a valid Spark SQL condition",
        ),
        (
            # Cut off: Spark's expr() reads the dangling word as an alias and keeps every
            # row the first half keeps; one whole expression is required.
            {"transformSpec": {"filter": "channel = '#en' AND"}},
            r"transformSpec.filter \"channel = '#en' AND\" is not a valid Spark SQL condition"
            r".*followed by a column alias",
        ),
        (
            {"transformSpec": {"filter": "channel = '#en' -- comment"}},
            None,
        ),
        (
            {"transformSpec": {"transforms": [{"name": "t", "expression": "upper(channel) c"}]}},
            r"transform 't': 'upper\(channel\) c' is not a valid Spark SQL expression"
            r".*followed by a column alias",
        ),
        (
            {"transformSpec": {"transforms": [{"name": "t", "expression": "sum(added)"}]}},
            r"transform 't': 'sum\(added\)' is not a valid Spark SQL expression",
        ),
        ({"metricsSpec": [{"type": "sum", "name": "a"}]}, r"unknown aggregator type 'sum'"),
        ({"granularitySpec": {"segmentGranularity": "fortnight"}}, r"unknown granularity"),
    ],
)
def test_bad_specs_fail_before_any_work(
    spark: SparkSession, lake: Lake, ds: str, change: dict[str, Any], message: str | None
) -> None:
    if message is None:  # a control: the same kind of spec, well formed, runs
        assert lake.append(edits(spark, [GOOD]), ds, {**spec(), **change}).status == "SUCCESS"
        return
    with pytest.raises(SpecError, match=message):
        lake.append(edits(spark, [GOOD]), ds, {**spec(), **change})
    with pytest.raises(NotFound):  # nothing ran: no task, no lock, no datasource
        lake.tasks(ds)


def test_overwrite_interval_must_be_whole_chunks(spark: SparkSession, lake: Lake, ds: str) -> None:
    with pytest.raises(SpecError, match=r"aligned to the segment granularity DAY.*2024-01-01T00"):
        lake.overwrite(edits(spark, [GOOD]), ds, spec(), interval="2024-01-01T06:00:00Z/PT6H")
    with pytest.raises(SpecError, match="overwrite needs the interval"):
        lake.overwrite(edits(spark, [GOOD]), ds, spec(), interval=None)  # type: ignore[arg-type]


def test_iso_format_on_a_numeric_column_is_a_spec_error(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    df = spark.createDataFrame(
        [(1_704_067_200_000, "#en", "a", 1)], "ts BIGINT, channel STRING, user STRING, added BIGINT"
    )
    with pytest.raises(SpecError, match=r"format 'iso' needs a string column.*use 'millis'"):
        lake.append(df, ds, spec())


def test_bad_datasource_names_are_refused(spark: SparkSession, lake: Lake) -> None:
    for name in ("", "_segmentlake", "a/b"):
        with pytest.raises(SpecError, match="datasource"):
            lake.append(edits(spark, [GOOD]), name, spec())


def test_failure_while_writing_publishes_nothing_and_releases_locks(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    lake.append(edits(spark, [GOOD]), ds, spec())
    # Fails inside the write job, after the locks and the counting pass.
    exploding = {
        **spec(),
        "transformSpec": {
            "transforms": [
                {"name": "user", "expression": "IF(channel = '#de', raise_error('boom'), user)"}
            ]
        },
    }
    rows = [("2024-01-01T05:00:00Z", "#de", "x", 1)]
    with pytest.raises(Exception, match="boom"):
        lake.overwrite(edits(spark, rows), ds, exploding, interval="2024-01-01/P1D")
    assert [r.user for r in lake.read(ds).collect()] == ["alice"]  # the old data, still visible
    assert lake.locks(ds) == []
    assert [t.status for t in lake.tasks(ds)] == ["SUCCESS", "FAILED"]


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "dynamic"},
        {"type": "hashed", "targetRowsPerSegment": 10},
        {"type": "range", "partitionDimensions": ["channel"], "targetRowsPerSegment": 10},
    ],
    ids=["dynamic", "hashed", "range"],
)
@pytest.mark.parametrize("rows", ["outside", "none"])
def test_an_overwrite_no_row_reaches_counts_them_and_leaves_tombstones(
    spark: SparkSession, lake: Lake, ds: str, partitions: dict[str, Any], rows: str
) -> None:
    # Spark drops the write job's observed counts when every row was filtered before the
    # shuffle (adaptive execution turns the plan into an empty relation): the task must
    # still count the rows and replace the interval, not fail inside pyspark.
    ds = f"{ds[:40]}_{partitions['type']}_{rows}"
    frame = edits(spark, [GOOD, GOOD])
    if rows == "none":
        frame = frame.limit(0)
    report = lake.overwrite(
        frame, ds, {**spec(), "partitionsSpec": partitions}, interval="2024-02-01/P2D"
    )

    assert (report.status, report.segments, report.tombstones) == ("SUCCESS", 0, 2)
    expected_in = 2 if rows == "outside" else 0
    assert (report.rows.rows_in, report.rows.outside_interval) == (expected_in, expected_in)
    assert lake.read(ds, "2024-02-01/P2D").count() == 0


def test_an_append_of_only_unparseable_rows_fails_with_their_count(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    with pytest.raises(BadRowsError, match=r"2 unparseable row\(s\)") as caught:
        lake.append(edits(spark, BAD[:2]), ds, spec())  # both timestamps unparseable
    assert caught.value.report.rows.rows_in == 2
    assert lake.used_segments(ds) == []
