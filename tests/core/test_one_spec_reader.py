"""One dataSchema reader: a dict given to ``lake.append`` / ``lake.overwrite``
(:meth:`IngestionSpec.from_dict`) is read exactly as the same dataSchema inside a Druid task
(:meth:`DruidIngestTask.from_dict`): the same spec, and for bad input the same problems at the
same JSON paths. The task only adds its ioConfig, tuningConfig and wrapper."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from segmentlake.core.ingest_spec import DimensionsSpec, IngestionSpec
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.errors import SpecError

# Druid filter JSON, typed dimensions, expression transforms: what a Druid user writes.
SCHEMA: dict[str, Any] = {
    "timestampSpec": {"column": "time", "format": "iso"},
    "dimensionsSpec": {
        "dimensions": [
            "channel",
            {"type": "long", "name": "port"},
            {"type": "string", "name": "code"},
            {"name": "page"},  # an object without a type declares none, as a bare name
            {"type": "long", "name": "page_length"},
        ],
        "dimensionExclusions": ["comment"],
    },
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
    "transformSpec": {
        "transforms": [
            {"type": "expression", "name": "page_length", "expression": "length(page)"},
        ],
        "filter": {
            "type": "and",
            "fields": [
                {"type": "in", "dimension": "channel", "values": ["#en", "#fr"]},
                {"type": "not", "field": {"type": "selector", "dimension": "port", "value": "80"}},
            ],
        },
    },
}
TUNING: dict[str, Any] = {
    "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 1000},
    "maxParseExceptions": 3,
}


def task(schema: dict[str, Any], tuning: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Druid task around ``schema``: its own keys (dataSource, ioConfig, ...) only."""
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {"dataSource": "wiki", **schema},
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": "in", "filter": "*.json"},
                "inputFormat": {"type": "json"},
                "appendToExisting": True,
            },
            "tuningConfig": {"type": "index_parallel", **(tuning or {})},
        },
    }


def test_the_api_reads_a_dataschema_as_a_druid_task_does() -> None:
    api = IngestionSpec.from_dict({**SCHEMA, "tuningConfig": TUNING})

    assert api == DruidIngestTask.from_dict(task(SCHEMA, TUNING)).spec
    dims = api.dimensions_spec
    assert dims.dimensions == ("channel", "port", "code", "page", "page_length")
    # The declared types are kept (not dropped on the way to lake.append).
    assert dims.types == (("port", "long"), ("code", "string"), ("page_length", "long"))
    assert api.transform_spec.filter == (
        "((CAST(`channel` AS STRING) IN ('#en', '#fr')) AND (NOT (CAST(`port` AS STRING) = '80')))"
    )
    assert [t.name for t in api.transform_spec.transforms] == ["page_length"]
    assert api.max_parse_exceptions == 3
    # partitionsSpec in the dataSchema itself (the API's short form) means the same.
    short = {**SCHEMA, "partitionsSpec": TUNING["partitionsSpec"]}
    assert IngestionSpec.from_dict(short).partitions_spec == api.partitions_spec


def test_typed_dimensions_round_trip_through_druid_json() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["dimensionsSpec"]["useSchemaDiscovery"] = True
    spec = IngestionSpec.from_dict(schema)

    written = spec.to_dict()["dataSchema"]["dimensionsSpec"]
    port, code = {"type": "long", "name": "port"}, {"type": "string", "name": "code"}
    assert written["dimensions"] == ["channel", port, code, "page", {**port, "name": "page_length"}]
    assert written["useSchemaDiscovery"] is True
    assert IngestionSpec.from_dict(spec.to_dict()) == spec
    assert spec.dimensions_spec.schema_discovery


def test_a_task_gives_undeclared_dimensions_druids_default_type() -> None:
    plain = DruidIngestTask.from_dict(task(SCHEMA))
    discovering = copy.deepcopy(SCHEMA)
    discovering["dimensionsSpec"]["useSchemaDiscovery"] = True

    assert plain.default_dimension_type == "string"
    assert DruidIngestTask.from_dict(task(discovering)).default_dimension_type == "auto"


# (where in the dataSchema, the value put there, the path the error names)
HOSTILE = [
    ("dimensionsSpec.dimensions.1", {"type": "int", "name": "port"}, "dimensions[1].type"),
    ("dimensionsSpec.dimensions.1", {"type": "long"}, "dimensions[1].name"),
    ("dimensionsSpec.dimensions.1", {"type": "long", "name": "port", "tpye": "x"}, "[1].tpye"),
    (
        "dimensionsSpec.dimensions.1",
        {"type": "long", "name": "port", "multiValueHandling": "SORTED_ARRAY"},
        "dimensions[1].multiValueHandling",
    ),
    ("dimensionsSpec.dimensions.1", 443, "dimensionsSpec.dimensions[1]"),
    ("dimensionsSpec.useSchemaDiscovery", "true", "dimensionsSpec.useSchemaDiscovery"),
    ("transformSpec.filter.type", "javascript", "transformSpec.filter.type"),
    ("transformSpec.filter.fields.0.values", "#en", "transformSpec.filter.fields[0].values"),
    ("transformSpec.filter", 5, "transformSpec.filter"),
    ("transformSpec.transforms.0.type", "javascript", "transformSpec.transforms[0].type"),
    ("transformSpec.transforms.0.expression", "", "transformSpec.transforms[0].expression"),
    ("granularitySpec.rollup", "false", "granularitySpec.rollup"),
    ("metricsSpec.1.type", "longSumm", "metricsSpec[1].type"),
]


def changed(path: str, value: Any) -> dict[str, Any]:
    """A deep copy of SCHEMA with ``value`` at the dotted ``path`` (digits index lists)."""
    schema = copy.deepcopy(SCHEMA)
    *parents, last = path.split(".")
    obj: Any = schema
    for key in parents:
        obj = obj[int(key)] if key.isdigit() else obj[key]
    obj[int(last) if last.isdigit() else last] = value
    return schema


@pytest.mark.parametrize(("path", "value", "named"), HOSTILE)
def test_hostile_dataschemas_fail_alike_naming_the_field(path: str, value: Any, named: str) -> None:
    schema = changed(path, value)

    with pytest.raises(SpecError) as api:
        IngestionSpec.from_dict(schema)
    with pytest.raises(SpecError) as druid:
        DruidIngestTask.from_dict(task(schema))

    api_problems = str(api.value).splitlines()[1:]
    assert any(named in p for p in api_problems), str(api.value)
    # The same problems, at the same paths under the task's spec.dataSchema.
    assert str(druid.value).splitlines()[1:] == [
        p.replace("  - ", "  - spec.dataSchema.", 1) for p in api_problems
    ]


def test_every_problem_of_transforms_and_filter_comes_in_one_error() -> None:
    schema = changed("transformSpec.transforms.0.type", "javascript")
    schema["transformSpec"]["filter"]["type"] = "javascript"

    with pytest.raises(SpecError) as caught:
        IngestionSpec.from_dict(schema)

    assert "transformSpec.transforms[0].type" in str(caught.value)
    assert "transformSpec.filter.type" in str(caught.value)


@pytest.mark.parametrize(
    ("types", "message"),
    [
        ((("nope", "long"),), "not among the listed dimensions"),
        ((("a", "int"),), "'a' has type 'int'; accepted: string, long"),
        ((("a", "long"), ("a", "double")), "name a dimension twice"),
        ((("a",),), "must be (name, type) pairs"),
        ("a:long", "must be (name, type) pairs"),
    ],
)
def test_declared_types_are_checked_by_the_spec_itself(types: Any, message: str) -> None:
    with pytest.raises(SpecError, match=r"dimensionsSpec\.dimensions") as caught:
        DimensionsSpec(("a", "b"), types=types)
    assert message in str(caught.value)


def test_declared_types_follow_the_dimensions_order() -> None:
    spec = DimensionsSpec(("a", "b"), types=(("b", "double"), ("a", "auto")))

    assert spec.types == (("a", "auto"), ("b", "double"))
    assert spec == DimensionsSpec(("a", "b"), types=[("a", "auto"), ("b", "double")])
