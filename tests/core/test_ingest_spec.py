"""The ingestion spec: Druid's dataSchema JSON in, validated frozen objects out."""

from __future__ import annotations

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
        dimensions_spec=DimensionsSpec(("channel", "page")),
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
        (lambda s: s["timestampSpec"].update(format="yyyy"), r"timestampSpec.format 'yyyy'"),
        (lambda s: s["metricsSpec"].append({"type": "avg", "name": "x"}), r"unknown aggregator"),
        (lambda s: s["metricsSpec"].append({"type": "longSum", "name": "x"}), r"needs a fieldName"),
        (lambda s: s["metricsSpec"].append({"name": "x"}), r"metricsSpec\[3\] lacks 'type'"),
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
            r"lgK must be within",
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
        (lambda s: s["transformSpec"].update(filter={"type": "selector"}), r"Spark SQL expression"),
    ],
)
def test_bad_specs_name_the_field(mutate: Any, message: str) -> None:
    import copy

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
            r"forceGuaranteedRollup=True contradicts",
        ),
        ({"partitionsSpec": {"maxRowsPerSegment": 0}}, r"maxRowsPerSegment must be a positive"),
        ({"partitionsSpec": {"maxTotalRows": -1}}, r"maxTotalRows must be a positive"),
        ({"maxParseExceptions": -1}, r"maxParseExceptions must be >= 0"),
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
