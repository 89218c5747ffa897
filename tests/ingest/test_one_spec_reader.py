"""One dataSchema, two ways in: ``lake.append(df, ds, schema)`` and a Druid task around the same
dataSchema ingest the same rows, with Druid's filter JSON, typed dimensions and expression
transforms; a hostile dataSchema fails ``lake.append`` / ``lake.overwrite`` before any work,
naming its field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid_runner import run_druid_task
from segmentlake.errors import NotFound, SpecError
from segmentlake.lake import Lake
from tests.core.test_one_spec_reader import SCHEMA, TUNING, changed
from tests.ingest.conftest import ts
from tests.ingest.test_druid_runner import write_json_lines

pytestmark = [pytest.mark.spark]

# port is text in the files and a long dimension; code a number and a string dimension.
EDITS = [
    {"time": "2024-01-01T01:10:00Z", "channel": "#en", "port": "443", "code": 7, "page": "Main",
     "added": 5, "comment": "a"},
    {"time": "2024-01-01T01:40:00Z", "channel": "#en", "port": "443", "code": 7, "page": "Main",
     "added": 3, "comment": "b"},
    {"time": "2024-01-01T02:00:00Z", "channel": "#fr", "port": "8443", "code": 7, "page": "Paris",
     "added": 10},
    # Filtered: port 80; channel #de; a port that is no number is null, and NOT (null = '80')
    # keeps no row (Druid's SQL-compatible three-valued logic).
    {"time": "2024-01-01T03:00:00Z", "channel": "#en", "port": "80", "code": 7, "page": "Main",
     "added": 1},
    {"time": "2024-01-02T00:30:00Z", "channel": "#de", "port": "443", "code": 9, "page": "Berlin",
     "added": 4},
    {"time": "2024-01-02T05:00:00Z", "channel": "#fr", "port": "x", "code": 9, "page": "Lyon",
     "added": 2},
]  # fmt: skip
EXPECTED_SCHEMA = (
    "__time TIMESTAMP, channel STRING, port BIGINT, code STRING, page STRING, "
    "page_length BIGINT, edits BIGINT, added BIGINT"
)
EXPECTED = [
    (ts("2024-01-01T01:00:00Z"), "#en", 443, "7", "Main", 4, 2, 8),
    (ts("2024-01-01T02:00:00Z"), "#fr", 8443, "7", "Paris", 5, 1, 10),
]


def druid_task(datasource: str, folder: Path) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {"dataSource": datasource, **copy.deepcopy(SCHEMA)},
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(folder), "filter": "*.json"},
                "inputFormat": {"type": "json"},
                "appendToExisting": True,
            },
            "tuningConfig": {"type": "index_parallel", **TUNING},
        },
    }


def test_the_api_ingests_a_druid_dataschema_as_the_druid_task_does(
    spark: SparkSession, lake: Lake, ds: str, tmp_path: Path
) -> None:
    path = write_json_lines(tmp_path / "in", "edits.json", EDITS)
    by_task, by_api = f"{ds}_task", f"{ds}_api"

    task_report = run_druid_task(lake, DruidIngestTask.from_dict(druid_task(by_task, path.parent)))
    df = spark.read.json(f"file://{path}")  # port: STRING, code: BIGINT, as Spark reads them
    api_report = lake.append(df, by_api, {**copy.deepcopy(SCHEMA), "tuningConfig": TUNING})

    expected = spark.createDataFrame(EXPECTED, EXPECTED_SCHEMA)
    for datasource, report in ((by_api, api_report), (by_task, task_report)):
        rows = report.rows
        assert (rows.rows_in, rows.filtered, rows.rows_out) == (6, 3, 2), datasource
        actual = lake.read(datasource).select(*expected.columns)
        assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("dimensionsSpec.dimensions.1", {"type": "int", "name": "port"}, "dimensions[1].type"),
        ("transformSpec.filter.fields.0.type", "javascript", "transformSpec.filter.fields[0].type"),
        ("transformSpec.transforms.0.type", "javascript", "transformSpec.transforms[0].type"),
    ],
)
def test_a_hostile_dataschema_fails_before_any_work(
    spark: SparkSession, lake: Lake, ds: str, path: str, value: Any, named: str
) -> None:
    df = spark.createDataFrame([("2024-01-01T00:00:00Z", "#en")], "time STRING, channel STRING")
    schema = changed(path, value)

    with pytest.raises(SpecError, match="accepted") as appending:
        lake.append(df, ds, schema)
    with pytest.raises(SpecError, match="accepted") as overwriting:
        lake.overwrite(df, ds, schema, interval="2024-01-01/P1D")

    assert named in str(appending.value)
    assert named in str(overwriting.value)
    with pytest.raises(NotFound):  # nothing was written or published
        lake.used_segments(ds)
