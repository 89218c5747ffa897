"""The ingestion spec: Druid's dataSchema JSON in, validated frozen objects out."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

import pytest

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import (
    DimensionsSpec,
    DynamicPartitionsSpec,
    ExpressionTransform,
    GranularitySpec,
    IngestionSpec,
    MetricSpec,
    TimestampSpec,
    TransformSpec,
)
from segmentlake.core.segment_schema import combining_metric
from segmentlake.errors import SpecError

WIKI: dict[str, Any] = {
    "dataSchema": {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", {"type": "string", "name": "page"}]},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "lgK": 14},
        ],
        "granularitySpec": {
            "segmentGranularity": "DAY",
            "queryGranularity": {"type": "hour"},
            "rollup": True,
        },
        "transformSpec": {
            "transforms": [{"type": "expression", "name": "lang", "expression": "lower(lang)"}],
            "filter": "added >= 0",
        },
    },
    "tuningConfig": {
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 1000},
        "maxParseExceptions": 5,
    },
}


def test_druid_json_reads_into_the_spec_objects() -> None:
    spec = IngestionSpec.from_dict(WIKI)

    assert spec == IngestionSpec(
        timestamp_spec=TimestampSpec("ts", "iso"),
        dimensions_spec=DimensionsSpec(("channel", "page"), types=(("page", "string"),)),
        metrics=(
            MetricSpec("count", "edits"),
            MetricSpec("longSum", "added", "added"),
            MetricSpec("HLLSketchBuild", "users", "user", lg_k=14),
        ),
        granularity_spec=GranularitySpec(Granularity.DAY, Granularity.HOUR, rollup=True),
        transform_spec=TransformSpec((ExpressionTransform("lang", "lower(lang)"),), "added >= 0"),
        partitions_spec=DynamicPartitionsSpec(max_rows_per_segment=1000),
        max_parse_exceptions=5,
    )
    # The same under an ingestion spec's "spec" key, and bare (no dataSchema wrapper).
    assert IngestionSpec.from_dict({"spec": WIKI}) == spec
    bare = IngestionSpec.from_dict(WIKI["dataSchema"])
    assert bare.metrics == spec.metrics
    assert bare.partitions_spec == DynamicPartitionsSpec()


def test_defaults_discover_dimensions_and_bucket_by_day() -> None:
    spec = IngestionSpec.from_dict({"dimensionsSpec": {"dimensions": []}})

    assert spec.dimensions_spec.dimensions is None  # every other column
    assert spec.timestamp_spec == TimestampSpec("timestamp", "auto")
    assert spec.granularity_spec == GranularitySpec(Granularity.DAY, Granularity.NONE, True)
    assert spec.max_parse_exceptions == 0
    assert spec.partitions_spec.max_rows_per_segment == 5_000_000


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["timestampSpec"].update(format="yyyy z"), r"timestampSpec.format 'yyyy z'"),
        (lambda s: s["metricsSpec"].append({"type": "avg", "name": "x"}), r"unknown aggregator"),
        (lambda s: s["metricsSpec"].append({"type": "longSum", "name": "x"}), r"needs a fieldName"),
        (lambda s: s["metricsSpec"].append({"name": "x"}), r"metricsSpec\[3\]\.type: is required"),
        (lambda s: s["metricsSpec"].append({"type": "count", "name": "edits"}), r"appears twice"),
        (
            lambda s: s["metricsSpec"].append({"type": "count", "name": "page"}),
            r"both as dimension",
        ),
        (lambda s: s["metricsSpec"].append({"type": "count", "name": "__x"}), r"reserved"),
        (
            lambda s: s["metricsSpec"].append(
                {"type": "HLLSketchBuild", "name": "u2", "fieldName": "u", "lgK": 30}
            ),
            r"metricsSpec\[3\]\.lgK: must be an integer in 4\.\.21, got 30",
        ),
        (
            lambda s: s["metricsSpec"].append(
                {"type": "thetaSketch", "name": "t", "fieldName": "u", "size": 10000}
            ),
            r"size 10000 is not a power of two; Druid's theta sketches take e\.g\. 8192 or 16384",
        ),
        (
            lambda s: s["metricsSpec"].append(
                {"type": "thetaSketch", "name": "t", "fieldName": "u", "isInputThetaSketch": "y"}
            ),
            r"metricsSpec\[3\]\.isInputThetaSketch: must be true or false",
        ),
        (
            lambda s: s["metricsSpec"].append(
                {"type": "floatSum", "name": "t", "fieldName": "u", "size": 32}
            ),
            r"metricsSpec\[3\]\.size: not supported; accepted here: fieldName, name, type",
        ),
        (
            lambda s: s["granularitySpec"].update(
                segmentGranularity="hour", queryGranularity="day"
            ),
            r"coarser than segmentGranularity HOUR",
        ),
        (lambda s: s["granularitySpec"].update(segmentGranularity="none"), r"cannot be NONE"),
        (lambda s: s["granularitySpec"].update(segmentGranularity="fortnight"), r"unknown granul"),
        (lambda s: s["dimensionsSpec"].update(dimensions=["a", "a"]), r"'a' appears twice"),
        (
            lambda s: s["transformSpec"].update(filter={"type": "selector"}),
            r"transformSpec\.filter\.dimension: must be a column name",
        ),
    ],
)
def test_bad_specs_name_the_field(mutate: Any, message: str) -> None:
    schema = copy.deepcopy(WIKI["dataSchema"])
    mutate(schema)

    with pytest.raises(SpecError, match=message):
        IngestionSpec.from_dict(schema)


@pytest.mark.parametrize(
    ("tuning", "message"),
    [
        ({"partitionsSpec": {"type": "hash", "numShards": 2}}, r"'hash' is not supported"),
        (
            {"partitionsSpec": {"type": "hashed", "partitionDimensions": ["nope"]}},
            r"\['nope'\] are not among the dimensions",
        ),
        (
            {"partitionsSpec": {"type": "dynamic"}, "forceGuaranteedRollup": True},
            r"tuningConfig\.forceGuaranteedRollup: true contradicts partitionsSpec type 'dynamic'",
        ),
        ({"partitionsSpec": {"maxRowsPerSegment": 0}}, r"maxRowsPerSegment must be a positive"),
        ({"partitionsSpec": {"maxTotalRows": -1}}, r"maxTotalRows must be a positive"),
        ({"maxParseExceptions": -1}, r"tuningConfig\.maxParseExceptions: must be an integer >= 0"),
    ],
)
def test_bad_tuning_names_the_field(tuning: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        IngestionSpec.from_dict({"dataSchema": WIKI["dataSchema"], "tuningConfig": tuning})


def test_not_a_dict() -> None:
    with pytest.raises(SpecError, match="must be a dict, got list"):
        IngestionSpec.from_dict([])  # type: ignore[arg-type]


def test_specs_are_frozen_and_hashable() -> None:
    spec = IngestionSpec.from_dict(WIKI)
    assert hash(spec) == hash(IngestionSpec.from_dict(WIKI))
    with pytest.raises(AttributeError):
        spec.max_parse_exceptions = 3  # type: ignore[misc]


# -- the strict reader (issue 19: hostile input) ---------------------------------------------

README_SPEC: dict[str, Any] = {
    **WIKI["dataSchema"],
    "tuningConfig": WIKI["tuningConfig"],
}


def test_every_form_reads_the_same_spec() -> None:
    spec = IngestionSpec.from_dict(WIKI)
    task = {
        "type": "index_parallel",
        "id": "t1",
        "spec": {
            "dataSchema": {"dataSource": "wiki", **WIKI["dataSchema"]},
            "ioConfig": {"type": "index_parallel", "inputSource": {"type": "http"}},
            "tuningConfig": {"type": "index_parallel", **WIKI["tuningConfig"]},
        },
        "context": {"priority": 5},
    }
    assert IngestionSpec.from_dict(README_SPEC) == spec  # tuningConfig next to the keys
    assert IngestionSpec.from_dict(task) == spec
    assert IngestionSpec.from_dict(spec.to_dict()) == spec
    old_form = {**task["spec"], "type": "index_parallel"}  # type: ignore[dict-item]
    assert IngestionSpec.from_dict(old_form) == spec


def test_druid_filter_json_and_typed_dimensions_are_read() -> None:
    schema = {
        "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "n"}]},
        "transformSpec": {
            "filter": {
                "type": "or",
                "fields": [
                    {"type": "selector", "dimension": "page", "value": "Main"},
                    {"type": "bound", "dimension": "n", "lower": "10", "ordering": "numeric"},
                ],
            }
        },
    }
    spec = IngestionSpec.from_dict(schema)
    assert spec.dimensions_spec.dimensions == ("page", "n")
    assert spec.transform_spec.filter == (
        "((CAST(`page` AS STRING) = 'Main') OR (try_cast(`n` AS DOUBLE) >= 10.0))"
    )


def test_keys_without_effect_here_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    spec = {
        "dataSchema": {"dataSource": "wiki", **WIKI["dataSchema"]},
        "ioConfig": {"type": "index_parallel"},
        "tuningConfig": {"maxRowsInMemory": 1000, "partitionsSpec": {"type": "dynamic"}},
    }
    with caplog.at_level(logging.INFO, logger="segmentlake.core.ingest_spec"):
        IngestionSpec.from_dict(spec)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for path in ("dataSchema.dataSource", "ioConfig", "tuningConfig.maxRowsInMemory"):
        assert f"{path} has no effect on Spark: " in logged


def test_all_problems_come_in_one_error_each_with_its_path() -> None:
    schema = copy.deepcopy(WIKI)
    schema["dataSchema"]["timestampSpec"]["formt"] = "iso"
    schema["dataSchema"]["granularitySpec"]["rollup"] = "false"
    schema["dataSchema"]["dimensionsSpec"]["dimensions"] = "abc"
    schema["dataSchema"]["metricsSpec"][2]["lgK"] = "12"
    schema["tuningConfig"]["maxParseExceptions"] = "abc"
    schema["tuningConfig"]["partitionsSpec"]["maxRowsPerSegment"] = "5"

    with pytest.raises(SpecError) as caught:
        IngestionSpec.from_dict(schema)

    message = str(caught.value)
    assert message.startswith("this ingestion spec cannot be used (6 problems)")
    for expected in (
        "dataSchema.timestampSpec.formt: not supported; accepted here: column, format",
        'dataSchema.granularitySpec.rollup: must be true or false, got "false"',
        'dataSchema.dimensionsSpec.dimensions: must be a list, got "abc"',
        'dataSchema.metricsSpec[2].lgK: must be an integer in 4..21, got "12"',
        'tuningConfig.maxParseExceptions: must be an integer >= 0, got "abc"',
        "tuningConfig.partitionsSpec: partitionsSpec.maxRowsPerSegment must be a positive",
    ):
        assert expected in message, f"{expected!r} not in:\n{message}"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"metricsSpec": [{"type": "count", "name": "n", "lgK": 12}]}, r"\[0\]\.lgK: not supp"),
        ({"partitionsSpec": {}, "tuningConfig": {"partitionsSpec": {}}}, r"given twice"),
        (
            {"granularitySpec": {"queryGranularity": {"type": "day", "timeZone": "UTC"}}},
            r"only Druid's",
        ),
        ({"granularitySpec": {"intervals": "2024-01-01/P1D"}}, r"intervals: must be a list"),
        ({"tuningConfig": {"type": "index_hadoop"}}, r"task type \"index_hadoop\""),
        ({"spec": {"dataSchema": {}, "tuningConfig": {}}, "tuningConfig": {}}, r"^.*- tuningC"),
        ({"transformSpec": {"filter": 5}}, r"transformSpec\.filter: must be a Spark SQL"),
        ({"transformSpec": {"filter": ""}}, r"transformSpec: transformSpec\.filter must be"),
    ],
)
def test_what_the_lax_reader_let_through_is_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=re.compile(message, re.MULTILINE)):
        IngestionSpec.from_dict(spec)


@pytest.mark.parametrize(
    "build",
    [
        lambda: GranularitySpec(rollup="false"),  # type: ignore[arg-type]
        lambda: GranularitySpec(segment_granularity="fortnight"),  # type: ignore[arg-type]
        lambda: MetricSpec("HLLSketchBuild", "u", "u", lg_k="12"),  # type: ignore[arg-type]
        lambda: MetricSpec("HLLSketchBuild", "u", "u", lg_k=True),
        lambda: MetricSpec("longSum", "s", "x", lg_k=14),  # lgK is for HLL sketches only
        lambda: MetricSpec("longSum", "s", 5),  # type: ignore[arg-type]
        lambda: MetricSpec(["count"], "c"),  # type: ignore[arg-type]
        lambda: IngestionSpec(max_parse_exceptions=True),
        lambda: IngestionSpec(max_parse_exceptions=2**64),
        lambda: IngestionSpec(metrics=[{"type": "count"}]),  # type: ignore[list-item]
        lambda: IngestionSpec(partitions_spec={"type": "dynamic"}),  # type: ignore[arg-type]
        lambda: DimensionsSpec(dimensions="abc"),  # type: ignore[arg-type]
        lambda: DimensionsSpec(dimensions=5),  # type: ignore[arg-type]
        lambda: DimensionsSpec(("a",), exclusions="b"),  # type: ignore[arg-type]
        lambda: TimestampSpec(format=["iso"]),  # type: ignore[arg-type]
        lambda: TransformSpec(transforms="x"),  # type: ignore[arg-type]
        lambda: TransformSpec(filter=" "),
        lambda: ExpressionTransform("x", 5),  # type: ignore[arg-type]
    ],
)
def test_the_dataclasses_refuse_wrong_types(build: Any) -> None:
    with pytest.raises(SpecError):
        build()


def test_float_and_theta_sketch_aggregators_read_and_write_druid_json() -> None:
    metrics = [
        {"type": "floatSum", "name": "f", "fieldName": "x"},
        {"type": "floatMin", "name": "lo", "fieldName": "x"},
        {"type": "floatMax", "name": "hi", "fieldName": "x"},
        {"type": "thetaSketch", "name": "users", "fieldName": "user"},
        {
            "type": "thetaSketch",
            "name": "merged",
            "fieldName": "sketches",
            "size": 4096,
            "isInputThetaSketch": True,
            "shouldFinalize": False,  # query-time only: logged, no effect
        },
    ]
    spec = IngestionSpec.from_dict({"timestampSpec": {"column": "ts"}, "metricsSpec": metrics})
    users, merged = spec.metrics[3:]
    assert (users.size, users.lg_nominal_entries, users.input_sketch) == (16384, 14, False)
    assert (merged.size, merged.lg_nominal_entries, merged.input_sketch) == (4096, 12, True)
    assert users.builds_sketch
    assert not merged.builds_sketch
    assert IngestionSpec.from_dict(spec.to_dict()) == spec  # written back as it was read
    combined = combining_metric(users)
    assert (combined.type, combined.field_name, combined.input_sketch) == (
        "thetaSketch",
        "users",
        True,
    )
    with pytest.raises(SpecError, match="isInputThetaSketch applies to thetaSketch only"):
        MetricSpec("longSum", "x", "x", input_sketch=True)
    with pytest.raises(SpecError, match="size applies to thetaSketch only"):
        MetricSpec("longSum", "x", "x", size=32)


def test_quantiles_sketch_aggregator_reads_and_writes_druid_json() -> None:
    metrics = [
        {"type": "quantilesDoublesSketch", "name": "latency", "fieldName": "ms"},
        {
            "type": "quantilesDoublesSketch",
            "name": "fine",
            "fieldName": "ms",
            "k": 1024,
            "maxStreamLength": 1000000000,  # Druid's bound: logged, no effect
            "shouldFinalize": False,
        },
    ]
    spec = IngestionSpec.from_dict({"timestampSpec": {"column": "ts"}, "metricsSpec": metrics})
    latency, fine = spec.metrics
    assert (latency.k, fine.k) == (128, 1024)
    assert latency.builds_sketch
    assert IngestionSpec.from_dict(spec.to_dict()) == spec
    combined = combining_metric(fine)
    assert (combined.type, combined.input_sketch, combined.k) == (
        "quantilesDoublesSketch",
        True,
        1024,
    )
    assert not combined.builds_sketch
    for k, message in (
        (100, r"k 100 is not a power of two; .* e\.g\. 64 or 128"),
        (4, r"k must be an integer in 8\.\.32768, got 4"),
        (65536, r"metricsSpec\[0\]\.k: must be an integer in 2\.\.32768"),
    ):
        bad = {"type": "quantilesDoublesSketch", "name": "q", "fieldName": "ms", "k": k}
        with pytest.raises(SpecError, match=message):
            IngestionSpec.from_dict({"timestampSpec": {"column": "ts"}, "metricsSpec": [bad]})
    with pytest.raises(SpecError, match="k applies to quantilesDoublesSketch only"):
        MetricSpec("doubleSum", "x", "x", k=256)


def test_hyper_unique_is_read_as_an_hll_sketch_build() -> None:
    """Druid's older cardinality aggregator: the same estimate from an HLL sketch."""
    spec = IngestionSpec.from_dict(
        {
            "timestampSpec": {"column": "ts"},
            "metricsSpec": [
                {"type": "hyperUnique", "name": "uniques", "fieldName": "user", "round": True}
            ],
        }
    )
    assert spec.metrics == (MetricSpec("HLLSketchBuild", "uniques", "user"),)
    with pytest.raises(SpecError, match=r"metricsSpec\[0\]\.isInputHyperUnique: Druid's"):
        IngestionSpec.from_dict(
            {
                "timestampSpec": {"column": "ts"},
                "metricsSpec": [
                    {
                        "type": "hyperUnique",
                        "name": "u",
                        "fieldName": "user",
                        "isInputHyperUnique": True,
                    }
                ],
            }
        )
    with pytest.raises(SpecError, match=r"metricsSpec\[0\]\.fieldName: must be a non-empty"):
        IngestionSpec.from_dict(
            {
                "timestampSpec": {"column": "ts"},
                "metricsSpec": [{"type": "hyperUnique", "name": "u"}],
            }
        )


def test_first_and_last_aggregators_read_and_write_druid_json() -> None:
    metrics = [
        {"type": t, "name": f"m{i}", "fieldName": "x"}
        for i, t in enumerate(("longFirst", "longLast", "doubleFirst", "floatLast", "stringFirst"))
    ]
    metrics.append({"type": "stringLast", "name": "s", "fieldName": "x", "maxStringBytes": 64})
    metrics.append({"type": "doubleLast", "name": "t", "fieldName": "x", "timeColumn": "__time"})
    spec = IngestionSpec.from_dict({"timestampSpec": {"column": "ts"}, "metricsSpec": metrics})
    assert spec.metrics[5].max_string_bytes == 64
    assert spec.metrics[4].max_string_bytes == 1024
    assert not any(m.builds_sketch for m in spec.metrics)
    assert IngestionSpec.from_dict(spec.to_dict()) == spec
    assert combining_metric(spec.metrics[5]).type == "stringLast"
    for bad, message in (
        ({"timeColumn": "updated_at"}, r"metricsSpec\[0\]\.timeColumn: \"updated_at\" is not"),
        ({"maxStringBytes": 10}, r"metricsSpec\[0\]\.maxStringBytes: applies to stringFirst"),
        ({"type": "stringLast", "maxStringBytes": 0}, r"maxStringBytes: must be an integer >= 1"),
    ):
        metric = {"type": "doubleLast", "name": "t", "fieldName": "x", **bad}
        with pytest.raises(SpecError, match=message):
            IngestionSpec.from_dict({"timestampSpec": {"column": "ts"}, "metricsSpec": [metric]})
