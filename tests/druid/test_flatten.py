"""Druid's flattenSpec read from task JSON, without Spark: JsonPath and jq paths as keys and
indexes, field types, and what is refused with what would work."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from segmentlake.druid.flatten import FlattenField, FlattenSpec, parse_jq, parse_json_path
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.errors import SpecError

TASK: dict[str, Any] = {
    "type": "index_parallel",
    "spec": {
        "dataSchema": {
            "dataSource": "events",
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["city", "first_tag"]},
            "granularitySpec": {"segmentGranularity": "day", "intervals": ["2024-01-01/P1D"]},
        },
        "ioConfig": {
            "type": "index_parallel",
            "inputSource": {"type": "local", "baseDir": "/tmp", "filter": "*.json"},
            "inputFormat": {"type": "json"},
        },
    },
}


def task_with(flatten: Any, fmt: str = "json") -> dict[str, Any]:
    task = copy.deepcopy(TASK)
    task["spec"]["ioConfig"]["inputFormat"] = {"type": fmt, "flattenSpec": flatten}
    return task


@pytest.mark.parametrize(
    ("expr", "steps"),
    [
        ("$.geo.city", ("geo", "city")),
        ("$['user agent'][0]", ("user agent", 0)),
        ('$["a.b"]["c"]', ("a.b", "c")),
        ("$.tags[-1]", ("tags", -1)),
        ("$.a_1.$b", ("a_1", "$b")),
    ],
)
def test_json_paths_become_keys_and_indexes(expr: str, steps: tuple) -> None:
    assert parse_json_path(expr) == steps


@pytest.mark.parametrize(
    ("expr", "steps"), [(".geo.city", ("geo", "city")), ('.["a b"][2].c', ("a b", 2, "c"))]
)
def test_jq_paths_become_keys_and_indexes(expr: str, steps: tuple) -> None:
    assert parse_jq(expr) == steps


@pytest.mark.parametrize("expr", ["$..city", "$.tags[*]", "$.tags[0:2]", "$.a[?(@.b)]", "$", "a"])
def test_paths_that_select_several_values_or_compute_are_refused(expr: str) -> None:
    with pytest.raises(SpecError, match=r"only keys and array indexes are supported"):
        parse_json_path(expr)


def test_a_task_reads_each_field_type_and_writes_it_back() -> None:
    flatten = {
        "useFieldDiscovery": False,
        "fields": [
            {"type": "root", "name": "ts"},
            {"type": "path", "name": "city", "expr": "$.geo.city"},
            {"type": "jq", "name": "first_tag", "expr": ".tags[0]"},
            {"type": "tree", "name": "country", "nodes": ["geo", "country"]},
        ],
    }
    task = DruidIngestTask.from_dict(task_with(flatten))
    spec = task.input_format.flatten
    assert spec == FlattenSpec(
        False,
        (
            FlattenField("ts", ("ts",), "root"),
            FlattenField("city", ("geo", "city"), "path", "$.geo.city"),
            FlattenField("first_tag", ("tags", 0), "jq", ".tags[0]"),
            FlattenField("country", ("geo", "country"), "tree", ["geo", "country"]),
        ),
    )
    assert DruidIngestTask.from_dict(task.to_dict()).input_format == task.input_format


def test_a_spec_that_flattens_nothing_is_no_flattening() -> None:
    task = DruidIngestTask.from_dict(task_with({"useFieldDiscovery": True, "fields": []}))
    assert task.input_format.flatten is None


@pytest.mark.parametrize(
    ("flatten", "fmt", "message"),
    [
        (
            {"fields": [{"type": "path", "name": "c", "expr": "$..c"}]},
            "json",
            r"flattenSpec\.fields\[0\]: JsonPath '\$\.\.c' at '\.\.c': only keys",
        ),
        (
            {"fields": [{"type": "javascript", "name": "c"}]},
            "json",
            r"fields\[0\]: flattenSpec field 'c': type 'javascript' is not supported; accepted",
        ),
        (
            {"fields": [{"type": "path", "expr": "$.c"}]},
            "parquet",
            r"fields\[0\]: a flattenSpec field needs a name",
        ),
        ({"useFieldDiscovery": False}, "json", r"useFieldDiscovery false and no fields reads"),
        (
            {"fields": [{"type": "root", "name": "a"}, {"type": "root", "name": "a"}]},
            "json",
            r"flattenSpec names \['a'\] twice",
        ),
        (
            {"fields": [{"type": "tree", "name": "t", "nodes": []}]},
            "json",
            r"a tree field needs nodes",
        ),
        (
            {"fields": [{"type": "root", "name": "a", "extra": 1}]},
            "json",
            r"fields\[0\]\.extra: not supported; accepted here: expr, name, nodes, type",
        ),
    ],
)
def test_bad_flatten_specs_name_the_field(flatten: Any, fmt: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        DruidIngestTask.from_dict(task_with(flatten, fmt))
