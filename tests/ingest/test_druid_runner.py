"""Druid native batch tasks run end to end on Spark: JSON, CSV, TSV and Parquet files through
``segmentlake ingest`` (in-process, on the shared session) and ``run_druid_task``; what
``lake.read`` returns afterwards is exactly the rolled-up rows."""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from segmentlake.cli.main import main
from segmentlake.core.names import datasource_table_path
from segmentlake.core.shard_spec import HashBasedNumberedShardSpec
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid.kill_task import DruidKillTask
from segmentlake.druid_runner import run_druid_task
from segmentlake.errors import SpecError
from segmentlake.lake import Lake
from tests.ingest.conftest import ts

pytestmark = [pytest.mark.spark]

TUTORIAL = Path(__file__).parents[1] / "data" / "druid_tutorial"

# Druid's rollup tutorial: network flows, rolled up by minute.
FLOWS = [
    {
        "timestamp": "2018-01-01T01:01:35Z",
        "srcIP": "1.1.1.1",
        "dstIP": "2.2.2.2",
        "packets": 20,
        "bytes": 9024,
    },
    {
        "timestamp": "2018-01-01T01:01:51Z",
        "srcIP": "1.1.1.1",
        "dstIP": "2.2.2.2",
        "packets": 255,
        "bytes": 21133,
    },
    {
        "timestamp": "2018-01-01T01:01:59Z",
        "srcIP": "1.1.1.1",
        "dstIP": "2.2.2.2",
        "packets": 11,
        "bytes": 5780,
    },
    {
        "timestamp": "2018-01-01T01:02:14Z",
        "srcIP": "1.1.1.1",
        "dstIP": "2.2.2.2",
        "packets": 38,
        "bytes": 6289,
    },
    {
        "timestamp": "2018-01-01T01:02:29Z",
        "srcIP": "1.1.1.1",
        "dstIP": "2.2.2.2",
        "packets": 377,
        "bytes": 359971,
    },
    {
        "timestamp": "2018-01-01T01:03:29Z",
        "srcIP": "1.1.1.1",
        "dstIP": "2.2.2.2",
        "packets": 49,
        "bytes": 10204,
    },
    {
        "timestamp": "2018-01-02T21:33:14Z",
        "srcIP": "7.7.7.7",
        "dstIP": "8.8.8.8",
        "packets": 38,
        "bytes": 6289,
    },
    {
        "timestamp": "2018-01-02T21:33:45Z",
        "srcIP": "7.7.7.7",
        "dstIP": "8.8.8.8",
        "packets": 123,
        "bytes": 93999,
    },
    {
        "timestamp": "2018-01-02T21:35:45Z",
        "srcIP": "7.7.7.7",
        "dstIP": "8.8.8.8",
        "packets": 12,
        "bytes": 2818,
    },
]
# The tutorial's documented result.
FLOWS_ROLLED_UP = [
    ("2018-01-01T01:01:00Z", "1.1.1.1", "2.2.2.2", 3, 286, 35937),
    ("2018-01-01T01:02:00Z", "1.1.1.1", "2.2.2.2", 2, 415, 366260),
    ("2018-01-01T01:03:00Z", "1.1.1.1", "2.2.2.2", 1, 49, 10204),
    ("2018-01-02T21:33:00Z", "7.7.7.7", "8.8.8.8", 2, 161, 100288),
    ("2018-01-02T21:35:00Z", "7.7.7.7", "8.8.8.8", 1, 12, 2818),
]
FLOWS_SCHEMA = (
    "__time TIMESTAMP, srcIP STRING, dstIP STRING, count BIGINT, packets BIGINT, bytes BIGINT"
)


def rollup_task(datasource: str, base_dir: Path, fmt: dict[str, Any], **io: Any) -> dict[str, Any]:
    """Druid's rollup-index.json tutorial task, reading ``base_dir`` with ``fmt``."""
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "timestamp", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["srcIP", "dstIP"]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "packets", "fieldName": "packets"},
                    {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
                ],
                "granularitySpec": {
                    "type": "uniform",
                    "segmentGranularity": "day",
                    "queryGranularity": "minute",
                    "intervals": ["2018-01-01/2018-01-03"],
                    "rollup": True,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(base_dir), "filter": "*"},
                "inputFormat": fmt,
                "appendToExisting": False,
                **io,
            },
            "tuningConfig": {"type": "index_parallel", "maxRowsInMemory": 25000},
        },
    }


def rows(spark: SparkSession, data: list[tuple[Any, ...]], schema: str) -> DataFrame:
    return spark.createDataFrame([(ts(t), *rest) for t, *rest in data], schema)


def assert_read(lake: Lake, datasource: str, expected: DataFrame) -> None:
    actual = lake.read(datasource).select(*expected.columns)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def write_json_lines(folder: Path, name: str, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def in_quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *files: str) -> None:
    """Work in ``tmp_path`` with the tutorial's data ``files`` under quickstart/tutorial/,
    where Druid's tutorial specs read them (relative to the working directory, as in Druid)."""
    data = tmp_path / "quickstart" / "tutorial"
    data.mkdir(parents=True)
    for name in files:
        shutil.copy(TUTORIAL / "data" / name, data)
    monkeypatch.chdir(tmp_path)


def write_spec(folder: Path, task: dict[str, Any]) -> str:
    path = folder / "task.json"
    path.write_text(json.dumps(task, indent=2))
    return str(path)


def test_json_task_through_the_cli(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json_lines(tmp_path / "in", "flows-1.json", FLOWS[:5])
    write_json_lines(tmp_path / "in" / "more", "flows-2.json", FLOWS[5:])  # found recursively
    (tmp_path / "in" / "empty.json").touch()  # skipped, as in Druid
    spec = write_spec(tmp_path, rollup_task(ds, tmp_path / "in", {"type": "json"}))

    code = main(["ingest", spec, "--warehouse", lake.warehouse, "--task-id", f"{ds}_1"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"overwrite {ds} [{ds}_1]: SUCCESS" in out
    assert "rows: 9 in, 9 processed, 5 out after rollup" in out
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))
    assert [t.task_id for t in lake.tasks(ds)] == [f"{ds}_1"]


def test_csv_with_skipped_rows_and_typed_dimensions(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    folder = tmp_path / "csv"
    folder.mkdir()
    lines = ["# exported 2018-01-03", "timestamp,srcIP,dstIP,port,packets,bytes"]
    lines += [
        ",".join(map(str, [r["timestamp"], r["srcIP"], r["dstIP"], 443 if i % 2 else 80]))
        + f",{r['packets']},{r['bytes']}"
        for i, r in enumerate(FLOWS)
    ]
    (folder / "flows.csv").write_text("\n".join(lines) + "\n")
    task = rollup_task(
        ds, folder, {"type": "csv", "findColumnsFromHeader": True, "skipHeaderRows": 1}
    )
    task["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] = [
        "srcIP",
        {"type": "long", "name": "port"},
    ]
    task["spec"]["dataSchema"]["granularitySpec"]["queryGranularity"] = "day"

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert report.status == "SUCCESS"
    assert (report.rows.rows_in, report.rows.rows_out) == (9, 4)
    assert lake.read(ds).schema["port"].dataType.simpleString() == "bigint"
    expected = [
        ("2018-01-01T00:00:00Z", "1.1.1.1", 80, 3, 20 + 11 + 377, 9024 + 5780 + 359971),
        ("2018-01-01T00:00:00Z", "1.1.1.1", 443, 3, 255 + 38 + 49, 21133 + 6289 + 10204),
        ("2018-01-02T00:00:00Z", "7.7.7.7", 80, 2, 38 + 12, 6289 + 2818),
        ("2018-01-02T00:00:00Z", "7.7.7.7", 443, 1, 123, 93999),
    ]
    schema = (
        "__time TIMESTAMP, srcIP STRING, port BIGINT, count BIGINT, packets BIGINT, bytes BIGINT"
    )
    assert_read(lake, ds, rows(spark, expected, schema))


def test_csv_with_a_joda_time_pattern_and_a_missing_value(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    """Times as an access log writes them, read with Druid's Joda pattern; a row without a
    time gets the spec's missingValue, as in Druid."""
    folder = tmp_path / "log"
    folder.mkdir()
    lines = ["timestamp,srcIP,dstIP,packets,bytes"]
    for r in FLOWS:
        when = datetime.fromisoformat(r["timestamp"]).astimezone(timezone(timedelta(hours=-8)))
        logged = when.strftime("%d/%b/%Y:%H:%M:%S %z")  # 31/Dec/2017:17:01:35 -0800
        lines.append(f"{logged},{r['srcIP']},{r['dstIP']},{r['packets']},{r['bytes']}")
    lines.append(",9.9.9.9,2.2.2.2,1,100")  # no time at all
    (folder / "flows.csv").write_text("\n".join(lines) + "\n")
    task = rollup_task(ds, folder, {"type": "csv", "findColumnsFromHeader": True})
    task["spec"]["dataSchema"]["timestampSpec"] = {
        "column": "timestamp",
        "format": "dd/MMM/yyyy:HH:mm:ss Z",
        "missingValue": "2018-01-02T12:00:00Z",
    }

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert report.status == "SUCCESS", report.error
    assert (report.rows.rows_in, report.rows.unparseable) == (10, 0)
    missing = ("2018-01-02T12:00:00Z", "9.9.9.9", "2.2.2.2", 1, 1, 100)
    assert_read(lake, ds, rows(spark, [*FLOWS_ROLLED_UP, missing], FLOWS_SCHEMA))


def test_nested_json_flattened_by_path_jq_tree_and_root_fields(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    """Druid's flattenSpec over nested JSON: a path the rows lack reads null; a field whose
    rows disagree on its type (an object here, a string there) is read as JSON text, and the
    path is followed into it; an index beyond an array reads null (ANSI Spark would fail)."""
    records = [
        {"ts": "2024-01-01T01:00:00Z", "geo": {"city": "Paris", "cc": "FR"}, "tags": ["a", "b"]},
        {"ts": "2024-01-01T02:00:00Z", "geo": {"city": "Lyon"}, "tags": [], "n": 4},
        {"ts": "2024-01-01T03:00:00Z", "geo": "somewhere", "n": 5, "other": 1},
    ]
    write_json_lines(tmp_path / "in", "events.json", records)
    task = rollup_task(ds, tmp_path / "in", {"type": "json"})
    task["spec"]["ioConfig"]["inputFormat"]["flattenSpec"] = {
        "useFieldDiscovery": False,
        "fields": [
            {"type": "root", "name": "ts"},
            {"type": "path", "name": "city", "expr": "$.geo.city"},
            {"type": "tree", "name": "cc", "nodes": ["geo", "cc"]},
            {"type": "jq", "name": "first_tag", "expr": ".tags[0]"},
            {"type": "path", "name": "third_tag", "expr": "$.tags[2]"},
            {"type": "path", "name": "nothing", "expr": "$.nope.x"},
            {"type": "root", "name": "n"},
        ],
    }
    schema = task["spec"]["dataSchema"]
    schema["timestampSpec"] = {"column": "ts", "format": "iso"}
    schema["dimensionsSpec"] = {"dimensions": ["city", "cc", "first_tag", "third_tag", "nothing"]}
    schema["metricsSpec"] = [{"type": "longSum", "name": "n", "fieldName": "n"}]
    schema["granularitySpec"]["queryGranularity"] = "hour"
    schema["granularitySpec"]["intervals"] = ["2024-01-01/2024-01-02"]

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert report.status == "SUCCESS"
    got = lake.read(ds).orderBy("__time").collect()
    assert [(r.city, r.cc, r.first_tag, r.third_tag, r.nothing, r.n) for r in got] == [
        ("Paris", "FR", "a", None, None, None),
        ("Lyon", None, None, None, None, 4),
        (None, None, None, None, None, 5),
    ]
    assert "other" not in lake.read(ds).columns  # not discovered: useFieldDiscovery false


def test_parquet_structs_flattened_next_to_the_top_level_fields(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    frame = spark.createDataFrame(
        [("2024-01-01T01:00:00Z", "x", ("Paris", [1, 2]), {"k": "v"})],
        "ts STRING, page STRING, geo STRUCT<city: STRING, ids: ARRAY<INT>>, m MAP<STRING, STRING>",
    )
    frame.write.parquet(str(tmp_path / "in"))
    task = rollup_task(ds, tmp_path / "in", {"type": "parquet"})
    task["spec"]["ioConfig"]["inputSource"]["filter"] = "*.parquet"
    task["spec"]["ioConfig"]["inputFormat"]["flattenSpec"] = {
        "fields": [
            {"type": "path", "name": "city", "expr": "$.geo.city"},
            {"type": "path", "name": "last_id", "expr": "$.geo.ids[-1]"},
            {"type": "path", "name": "k", "expr": "$.m.k"},
        ],
    }
    schema = task["spec"]["dataSchema"]
    schema["timestampSpec"] = {"column": "ts", "format": "iso"}
    schema["dimensionsSpec"] = {"dimensions": ["page", "city", "last_id", "k"]}
    schema["metricsSpec"] = [{"type": "count", "name": "count"}]
    schema["granularitySpec"]["intervals"] = ["2024-01-01/2024-01-02"]

    assert run_druid_task(lake, DruidIngestTask.from_dict(task)).status == "SUCCESS"
    (row,) = lake.read(ds).collect()
    assert (row.page, row.city, row.last_id, row.k, row["count"]) == ("x", "Paris", "2", "v", 1)


def test_inline_json_and_csv_input_sources(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    """Druid's inline input source (its console's "paste data"): the rows are in the task."""
    json_task = rollup_task(ds, tmp_path, {"type": "json"})
    json_task["spec"]["ioConfig"]["inputSource"] = {
        "type": "inline",
        "data": "".join(json.dumps(r) + "\n" for r in FLOWS),
    }
    task = DruidIngestTask.from_dict(json_task)
    assert DruidIngestTask.from_dict(task.to_dict()) == task

    assert run_druid_task(lake, task).status == "SUCCESS"
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))

    header = "# exported\ntimestamp,srcIP,dstIP,packets,bytes\n"
    body = "".join(
        f"{r['timestamp']},{r['srcIP']},{r['dstIP']},{r['packets']},{r['bytes']}\n" for r in FLOWS
    )
    fmt = {"type": "csv", "findColumnsFromHeader": True, "skipHeaderRows": 1}
    csv_task = rollup_task(f"{ds}_csv", tmp_path, fmt)
    csv_task["spec"]["ioConfig"]["inputSource"] = {"type": "inline", "data": header + body}
    report = run_druid_task(lake, DruidIngestTask.from_dict(csv_task))
    assert (report.status, report.rows.rows_in) == ("SUCCESS", 9)
    assert_read(lake, f"{ds}_csv", rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))

    csv_task["spec"]["ioConfig"]["inputFormat"] = {"type": "parquet"}
    with pytest.raises(SpecError, match="inline data is text: its inputFormat is json, csv or tsv"):
        DruidIngestTask.from_dict(csv_task)


def test_tsv_with_columns_through_the_cli(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tsv"
    folder.mkdir()
    body = "".join(
        f"{r['timestamp']}|{r['srcIP']}|{r['dstIP']}|{r['packets']}|{r['bytes']}\n" for r in FLOWS
    )
    with gzip.open(folder / "flows.tsv.gz", "wt") as out:  # compressed input, by its extension
        out.write(body)
    columns = ["timestamp", "srcIP", "dstIP", "packets", "bytes"]
    fmt = {"type": "tsv", "columns": columns, "delimiter": "|"}
    spec = write_spec(tmp_path, rollup_task(ds, folder, fmt))

    assert main(["--warehouse", lake.warehouse, "ingest", spec]) == 0

    assert "SUCCESS" in capsys.readouterr().out
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))


def test_parquet_task(spark: SparkSession, lake: Lake, ds: str, tmp_path: Path) -> None:
    spark.createDataFrame(FLOWS).repartition(2).write.parquet(str(tmp_path / "pq"))
    task = rollup_task(ds, tmp_path / "pq", {"type": "parquet"})
    task["spec"]["ioConfig"]["inputSource"]["filter"] = "*.parquet"

    report = run_druid_task(lake, DruidIngestTask.from_dict(task), task_id=f"{ds}_pq")

    assert (report.task_id, report.rows.rows_in, report.segments) == (f"{ds}_pq", 9, 2)
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))


def test_hashed_perfect_rollup_overwrite(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    write_json_lines(tmp_path / "in", "flows.json", FLOWS)
    task = rollup_task(ds, tmp_path / "in", {"type": "json"})
    task["spec"]["tuningConfig"].update(
        forceGuaranteedRollup=True,
        partitionsSpec={"type": "hashed", "numShards": 2, "partitionDimensions": ["srcIP"]},
    )

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert report.status == "SUCCESS"
    segments = lake.used_segments(ds)
    assert segments
    assert all(isinstance(s.shard_spec, HashBasedNumberedShardSpec) for s in segments)
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))


def test_drop_existing_false_keeps_chunks_without_new_rows(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    write_json_lines(tmp_path / "all", "flows.json", FLOWS)
    run_druid_task(
        lake, DruidIngestTask.from_dict(rollup_task(ds, tmp_path / "all", {"type": "json"}))
    )
    day1 = [{**r, "packets": 1} for r in FLOWS[:6]]
    write_json_lines(tmp_path / "day1", "flows.json", day1)

    # Druid's default: only Jan 1 gets rows, so only Jan 1 is replaced; Jan 2 stays.
    task = rollup_task(ds, tmp_path / "day1", {"type": "json"})
    report = run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert report.interval == "2018-01-01T00:00:00.000Z/2018-01-02T00:00:00.000Z"
    new_day1 = [(t, s, d, c, c, b) for t, s, d, c, _, b in FLOWS_ROLLED_UP[:3]]
    assert_read(lake, ds, rows(spark, new_day1 + FLOWS_ROLLED_UP[3:], FLOWS_SCHEMA))

    # No row in the interval: nothing is replaced, the rows are counted.
    write_json_lines(tmp_path / "later", "flows.json", [{**FLOWS[0], "timestamp": "2018-02-01"}])
    task = rollup_task(ds, tmp_path / "later", {"type": "json"})
    report = run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert (report.status, report.segments, report.rows.outside_interval) == ("SUCCESS", 0, 1)
    # Rows in Jan 1 and Jan 3 but not Jan 2: Druid would replace two separate chunks.
    gap = [FLOWS[0], {**FLOWS[1], "timestamp": "2018-01-03T01:00:00Z"}]
    write_json_lines(tmp_path / "gap", "flows.json", gap)
    task = rollup_task(ds, tmp_path / "gap", {"type": "json"})
    task["spec"]["dataSchema"]["granularitySpec"]["intervals"] = ["2018-01-01/2018-01-04"]
    with pytest.raises(SpecError, match="2 separate runs of DAY chunks"):
        run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert_read(lake, ds, rows(spark, new_day1 + FLOWS_ROLLED_UP[3:], FLOWS_SCHEMA))

    # dropExisting: true replaces the whole interval: Jan 2 becomes empty.
    task = rollup_task(ds, tmp_path / "day1", {"type": "json"}, dropExisting=True)
    report = run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert report.tombstones == 1
    assert_read(lake, ds, rows(spark, new_day1, FLOWS_SCHEMA))


def test_an_overwrite_without_intervals_replaces_the_chunks_its_rows_fall_in(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    """Druid's behaviour without granularitySpec.intervals: the chunks are found from the
    rows, and only they are replaced."""
    write_json_lines(tmp_path / "all", "flows.json", FLOWS)
    first = rollup_task(ds, tmp_path / "all", {"type": "json"})
    del first["spec"]["dataSchema"]["granularitySpec"]["intervals"]
    report = run_druid_task(lake, DruidIngestTask.from_dict(first))
    assert report.interval == "2018-01-01T00:00:00.000Z/2018-01-03T00:00:00.000Z"
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))

    day2 = [{**r, "packets": 1} for r in FLOWS[6:]]
    write_json_lines(tmp_path / "day2", "flows.json", day2)
    task = rollup_task(ds, tmp_path / "day2", {"type": "json"})
    del task["spec"]["dataSchema"]["granularitySpec"]["intervals"]
    report = run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert report.interval == "2018-01-02T00:00:00.000Z/2018-01-03T00:00:00.000Z"
    new_day2 = [(t, s, d, c, c, b) for t, s, d, c, _, b in FLOWS_ROLLED_UP[3:]]
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP[:3] + new_day2, FLOWS_SCHEMA))

    gap = [FLOWS[0], {**FLOWS[1], "timestamp": "2018-01-05T01:00:00Z"}]
    write_json_lines(tmp_path / "gap", "flows.json", gap)
    task = rollup_task(ds, tmp_path / "gap", {"type": "json"})
    del task["spec"]["dataSchema"]["granularitySpec"]["intervals"]
    with pytest.raises(SpecError, match=r"2 separate runs of DAY chunks.*give granularitySpec"):
        run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP[:3] + new_day2, FLOWS_SCHEMA))


def test_discovered_json_dimensions_are_strings_as_in_druid(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    records = [
        {"timestamp": "2018-01-01T01:00:00Z", "page": "A", "robot": True, "port": 80, "gone": None},
        {"timestamp": "2018-01-01T02:00:00Z", "page": "B", "robot": False, "port": 443},
    ]
    records[0]["geo"] = {"city": "Paris"}  # an object: Druid discovers only primitive fields
    path = write_json_lines(tmp_path / "in", "edits.json", records)
    with path.open("a") as out:
        out.write('{"timestamp": "2018-01-01T03:00:00Z", "page": \n')  # a malformed line
    task = rollup_task(ds, tmp_path / "in", {"type": "json"})
    schema = task["spec"]["dataSchema"]
    schema["dimensionsSpec"] = {"dimensions": []}
    schema["metricsSpec"] = [{"type": "count", "name": "count"}]
    task["spec"]["tuningConfig"]["maxParseExceptions"] = 1

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert (report.rows.rows_in, report.rows.unparseable, report.rows.rows_out) == (3, 1, 2)
    expected = [
        ("2018-01-01T01:00:00Z", "A", "true", "80", 1),
        ("2018-01-01T02:00:00Z", "B", "false", "443", 1),
    ]
    schema_sql = "__time TIMESTAMP, page STRING, robot STRING, port STRING, count BIGINT"
    assert_read(lake, ds, rows(spark, expected, schema_sql))
    assert "gone" not in lake.read(ds).columns  # null in every row: not discovered
    assert "geo" not in lake.read(ds).columns

    task["spec"]["ioConfig"]["inputFormat"]["keepNullColumns"] = True
    run_druid_task(lake, DruidIngestTask.from_dict(task))
    assert lake.read(ds).where("gone IS NULL").count() == 2


def test_append_to_existing(spark: SparkSession, lake: Lake, ds: str, tmp_path: Path) -> None:
    write_json_lines(tmp_path / "a", "flows.json", FLOWS[:3])
    write_json_lines(tmp_path / "b", "flows.json", FLOWS[3:])
    run_druid_task(
        lake, DruidIngestTask.from_dict(rollup_task(ds, tmp_path / "a", {"type": "json"}))
    )
    task = rollup_task(ds, tmp_path / "b", {"type": "json"}, appendToExisting=True)

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert report.type == "append"
    assert_read(lake, ds, rows(spark, FLOWS_ROLLED_UP, FLOWS_SCHEMA))


def test_unsupported_task_fails_listing_every_problem(
    lake: Lake, ds: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = rollup_task(ds, tmp_path, {"type": "avro_ocf"})
    task["spec"]["ioConfig"]["inputSource"] = {"type": "s3", "uris": ["s3://bucket/flows.json"]}
    task["spec"]["dataSchema"]["dimensionsSpec"]["spatialDimensions"] = [{"dimName": "geo"}]
    spec = write_spec(tmp_path, task)

    assert main(["--warehouse", lake.warehouse, "ingest", spec]) == 2

    err = capsys.readouterr().err
    assert "cannot run on segmentlake (3 problems)" in err
    for path in ("inputSource.type", "inputFormat.type", "dimensionsSpec.spatialDimensions"):
        assert f"spec.ioConfig.{path}" in err or f"spec.dataSchema.{path}" in err
    assert "Traceback" not in err


def test_no_input_files_and_bad_rows_fail_cleanly(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    spec = write_spec(tmp_path, rollup_task(ds, tmp_path / "in", {"type": "json"}))
    assert main(["--warehouse", lake.warehouse, "ingest", spec]) == 2
    assert "no input files under baseDir" in capsys.readouterr().err

    write_json_lines(
        tmp_path / "in", "flows.json", [*FLOWS, {**FLOWS[0], "timestamp": "yesterday"}]
    )
    assert main(["--warehouse", lake.warehouse, "ingest", spec]) == 1
    captured = capsys.readouterr()
    assert "1 unparseable row(s)" in captured.err
    assert "FAILED" in captured.out
    assert lake.read(ds).count() == 0  # nothing was published


def test_druid_transform_tutorial_with_its_filter_json(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    task = json.loads((TUTORIAL / "specs" / "transform-index.json").read_text())
    task["spec"]["dataSchema"]["dataSource"] = ds
    task["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(TUTORIAL / "data")

    run_druid_task(lake, DruidIngestTask.from_dict(task))

    # The tutorial's result: the Druid filter kept octopus (300 = 3 x 100), mongoose, snake.
    expected = [
        ("2018-01-01T05:01:00Z", "super-mongoose", 2, 1, 200, 600),
        ("2018-01-01T06:01:00Z", "super-snake", 3, 1, 300, 900),
        ("2018-01-01T07:01:00Z", "super-octopus", 1, 1, 100, 300),
    ]
    schema = (
        "__time TIMESTAMP, animal STRING, location BIGINT, count BIGINT, number BIGINT, "
        "`triple-number` BIGINT"
    )
    assert_read(lake, ds, rows(spark, expected, schema))


@pytest.mark.slow
def test_druid_wikipedia_tutorial_spec_runs_as_written(
    spark: SparkSession, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spec reads quickstart/tutorial/ relative to the working directory, as Druid does.
    in_quickstart(tmp_path, monkeypatch, "wikiticker-2015-09-12-sampled.json.gz")
    task = copy.deepcopy(json.loads((TUTORIAL / "specs" / "wikipedia-index.json").read_text()))

    report = run_druid_task(lake, DruidIngestTask.from_dict(task))

    assert (report.rows.rows_in, report.rows.rows_out, report.segments) == (39244, 39244, 1)
    wiki = lake.read("wikipedia")
    types = dict(wiki.dtypes)
    assert (types["added"], types["isRobot"], types["metroCode"]) == ("bigint", "string", "string")
    robots = wiki.where("isRobot = 'true'").count()
    assert 0 < robots < 39244


@pytest.mark.slow
def test_druid_compaction_tutorial_runs_as_written(
    spark: SparkSession,
    lake: Lake,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Druid's compaction tutorial: the Wikipedia sample ingested into HOUR segments of at most
    1,000 rows, then its two ``compact`` tasks through ``segmentlake ingest``: one segment per
    hour (dynamic partitioning, the segments' granularity kept), then one DAY segment. Every
    row survives both, exactly (rollup stays off, as the segments had it)."""
    in_quickstart(tmp_path, monkeypatch, "wikiticker-2015-09-12-sampled.json.gz")
    specs = TUTORIAL / "specs"
    ds = "compaction-tutorial"

    def run(spec: str) -> list[Any]:
        assert main(["--warehouse", lake.warehouse, "ingest", str(specs / spec)]) == 0
        assert "SUCCESS" in capsys.readouterr().out
        return lake.timeline(ds).visible_segments()

    initial = run("compaction-init-index.json")
    assert len({s.interval for s in initial}) == 24
    assert len(initial) > 24
    assert max(s.num_rows for s in initial) <= 1000
    rows = lake.read(ds).localCheckpoint()
    assert rows.count() == 39244

    hourly = run("compaction-keep-granularity.json")
    assert len(hourly) == 24  # one per hour: dynamic partitioning's 5,000,000 rows at most
    assert {s.interval for s in hourly} == {s.interval for s in initial}
    assert sum(s.num_rows for s in hourly) == 39244

    daily = run("compaction-day-granularity.json")
    assert [(str(s.interval), s.num_rows) for s in daily] == [
        ("2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z", 39244)
    ]
    assert daily[0].last_compaction_state["granularitySpec"]["segmentGranularity"] == "DAY"
    after = lake.read(ds)
    assert after.count() == 39244
    assert after.exceptAll(rows).count() == 0
    assert rows.exceptAll(after).count() == 0


@pytest.mark.slow
def test_druid_deletion_tutorial_kill_task(
    spark: SparkSession,
    lake: Lake,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Druid's deletion tutorial: hourly Wikipedia segments, two hours marked unused (the
    tutorial's ``segmentIds``), then its ``kill`` task through ``segmentlake ingest``: exactly
    those two segments and their rows are deleted; then a kill with ``markAsUnused`` deletes
    the used segments of its interval too."""
    in_quickstart(tmp_path, monkeypatch, "wikiticker-2015-09-12-sampled.json.gz")
    ds = "deletion-tutorial"
    hourly = json.loads((TUTORIAL / "specs" / "compaction-init-index.json").read_text())
    hourly["spec"]["dataSchema"]["dataSource"] = ds
    del hourly["spec"]["tuningConfig"]["maxRowsPerSegment"]  # one segment an hour
    run_druid_task(lake, DruidIngestTask.from_dict(hourly))
    used = lake.used_segments(ds)
    assert len(used) == 24
    disabled = [s for s in used if s.interval.start.hour in (13, 14)]
    assert lake.mark_unused(disabled) == 2
    rows = lake.read(ds).count()
    gone = sum(s.num_rows for s in disabled)
    path = datasource_table_path(lake.warehouse, ds)
    assert spark.read.format("delta").load(path).count() == 39244

    assert (
        main(
            [
                "--warehouse",
                lake.warehouse,
                "ingest",
                str(TUTORIAL / "specs" / "deletion-kill.json"),
            ]
        )
        == 0
    )
    assert "kill deletion-tutorial: 2 segment(s) killed" in capsys.readouterr().out
    assert {s.id for s in lake.used_segments(ds)} == {s.id for s in used} - {s.id for s in disabled}
    assert lake.segment_records(ds).num_rows == 22  # the killed records are gone
    assert lake.read(ds).count() == rows == 39244 - gone
    assert spark.read.format("delta").load(path).count() == 39244 - gone  # the rows too

    evening = DruidKillTask.from_dict(
        {
            "type": "kill",
            "dataSource": ds,
            "interval": "2015-09-12T20:00:00Z/2015-09-13",
            "markAsUnused": True,
        }
    )
    report = run_druid_task(lake, evening)
    assert len(report.killed) == 4
    assert all(s.interval.start.hour < 20 for s in lake.used_segments(ds))
    late = sum(s.num_rows for s in used if s.interval.start.hour >= 20)
    assert lake.read(ds).count() == 39244 - gone - late


def test_druid_updates_tutorial_runs_as_written(
    spark: SparkSession,
    lake: Lake,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Druid's "updating existing data" tutorial, its four tasks as written: load, overwrite,
    a reindex that combines the datasource's own rows (a ``druid`` input source) with new
    files in one overwrite, then an append. The result is the tutorial's table: lion's two
    input rows rolled up (count 2, number 400), bear's appended row a second row."""
    in_quickstart(tmp_path, monkeypatch, *(f"updates-data{n}.json" for n in ("", "2", "3", "4")))
    ds = "updates-tutorial"
    # Not UTC: the druid rows' times must come back as the same UTC instants all the same.
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for spec in (
            "updates-init-index.json",
            "updates-overwrite-index.json",
            "updates-append-index.json",
            "updates-append-index2.json",
        ):
            path = str(TUTORIAL / "specs" / spec)
            assert main(["--warehouse", lake.warehouse, "ingest", path]) == 0, spec
            assert "SUCCESS" in capsys.readouterr().out
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")

    expected = [
        ("2018-01-01T01:01:00Z", "lion", 2, 400),
        ("2018-01-01T03:01:00Z", "aardvark", 1, 9999),
        ("2018-01-01T04:01:00Z", "bear", 1, 111),
        ("2018-01-01T04:01:00Z", "bear", 1, 222),
        ("2018-01-01T05:01:00Z", "mongoose", 1, 737),
        ("2018-01-01T06:01:00Z", "snake", 1, 1234),
        ("2018-01-01T07:01:00Z", "octopus", 1, 115),
        ("2018-01-01T09:01:00Z", "falcon", 1, 1241),
    ]
    schema = "__time TIMESTAMP, animal STRING, count BIGINT, number BIGINT"
    assert_read(lake, ds, rows(spark, expected, schema))


def test_druid_input_source_reindexes_with_a_filter_and_time_from_time(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    """Druid's reindexing example: a ``druid`` input source (with a filter) read under
    ``{"column": "__time", "format": "millis"}`` into a coarser, rolled-up datasource."""
    flows = write_json_lines(tmp_path / "flows", "flows.json", FLOWS)
    run_druid_task(lake, DruidIngestTask.from_dict(rollup_task(ds, flows.parent, {"type": "json"})))
    task = rollup_task(f"{ds}_hourly", flows.parent, {"type": "json"})
    schema = task["spec"]["dataSchema"]
    schema["timestampSpec"] = {"column": "__time", "format": "millis"}
    schema["granularitySpec"]["queryGranularity"] = "hour"
    schema["metricsSpec"] = [
        {"type": "longSum", "name": "flows", "fieldName": "count"},
        {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
    ]
    task["spec"]["ioConfig"]["inputSource"] = {
        "type": "druid",
        "dataSource": ds,
        "interval": "2018-01-01/2018-01-03",
        "filter": {
            "type": "not",
            "field": {"type": "selector", "dimension": "srcIP", "value": "7.7.7.7"},
        },
    }
    del task["spec"]["ioConfig"]["inputFormat"]
    reindex = DruidIngestTask.from_dict(task)
    assert reindex.input_format is None
    assert DruidIngestTask.from_dict(reindex.to_dict()) == reindex

    report = run_druid_task(lake, reindex)

    assert report.rows.rows_in == 3  # the source's three rolled-up rows from 1.1.1.1
    expected = [("2018-01-01T01:00:00Z", "1.1.1.1", "2.2.2.2", 6, 35937 + 366260 + 10204)]
    assert_read(
        lake,
        f"{ds}_hourly",
        rows(
            spark,
            expected,
            "__time TIMESTAMP, srcIP STRING, dstIP STRING, flows BIGINT, bytes BIGINT",
        ),
    )
