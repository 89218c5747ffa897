"""Partitions specs: Druid's dynamic / hashed / range / single_dim JSON, validated."""

from __future__ import annotations

from typing import Any

import pytest

from segmentlake.core.partitions_spec import (
    DimensionRangePartitionsSpec,
    DynamicPartitionsSpec,
    HashedPartitionsSpec,
    SingleDimensionPartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.core.shard_spec import HASH_PARTITION_FUNCTION
from segmentlake.errors import SpecError


@pytest.mark.parametrize(
    ("json", "expected"),
    [
        ({}, DynamicPartitionsSpec()),
        ({"type": "dynamic", "maxRowsPerSegment": 10}, DynamicPartitionsSpec(10)),
        ({"type": "hashed", "numShards": 3}, HashedPartitionsSpec(num_shards=3)),
        (
            {"type": "hashed", "targetRowsPerSegment": 100, "partitionDimensions": ["a", "b"]},
            HashedPartitionsSpec(target_rows_per_segment=100, partition_dimensions=("a", "b")),
        ),
        # Druid's deprecated alias.
        ({"type": "hashed", "maxRowsPerSegment": 7}, HashedPartitionsSpec(None, 7)),
        (
            {"type": "range", "partitionDimensions": ["a"], "targetRowsPerSegment": 100},
            DimensionRangePartitionsSpec(("a",), 100, 150),
        ),
        (
            {"type": "range", "partitionDimensions": ["a"], "maxRowsPerSegment": 150},
            DimensionRangePartitionsSpec(("a",), 100, 150),
        ),
        (
            {"type": "single_dim", "partitionDimension": "a", "targetRowsPerSegment": 10},
            SingleDimensionPartitionsSpec("a", 10, 15),
        ),
    ],
)
def test_druid_json_reads(json: dict[str, Any], expected: Any) -> None:
    spec = partitions_spec_from_dict(json)

    assert spec == expected
    assert spec.perfect_rollup == (spec.type_name != "dynamic")
    assert partitions_spec_from_dict(spec.to_json()) == spec  # round trip


def test_hashed_defaults_to_druids_target() -> None:
    spec = HashedPartitionsSpec()

    assert spec.target_rows_per_segment == 5_000_000
    assert spec.partition_function == HASH_PARTITION_FUNCTION
    assert SingleDimensionPartitionsSpec("a", 4).partition_dimensions == ("a",)


@pytest.mark.parametrize(
    ("json", "message"),
    [
        ({"type": "hashed", "numShards": 2, "targetRowsPerSegment": 5}, r"not both"),
        ({"type": "hashed", "numShards": 0}, r"numShards must be a positive integer, got 0"),
        ({"type": "hashed", "partitionDimensions": "a"}, r"must be a list of dimension names"),
        ({"type": "hashed", "partitionDimensions": ["a", "a"]}, r"names a dimension twice"),
        ({"type": "hashed", "partitionFunction": "murmur3_32_abs"}, r"'murmur3_32_abs' is not"),
        (
            {"type": "hashed", "targetRowsPerSegment": 1, "maxRowsPerSegment": 1},
            r"old name for targetRowsPerSegment",
        ),
        ({"type": "range", "targetRowsPerSegment": 5}, r"at least one partitionDimensions"),
        ({"type": "range", "partitionDimensions": ["a"]}, r"give targetRowsPerSegment"),
        (
            {
                "type": "range",
                "partitionDimensions": ["a"],
                "targetRowsPerSegment": 10,
                "maxRowsPerSegment": 5,
            },
            r"maxRowsPerSegment 5 is below targetRowsPerSegment 10",
        ),
        (
            {"type": "range", "partitionDimensions": ["a"], "maxRowsPerSegment": 5, "x": 1},
            r"fields \['x'\] are not supported; accepted",
        ),
        (
            {
                "type": "range",
                "partitionDimensions": ["a"],
                "maxRowsPerSegment": 5,
                "assumeGrouped": True,
            },
            r"assumeGrouped is not supported",
        ),
        ({"type": "single_dim", "targetRowsPerSegment": 5}, r"partitionDimension: '' is not"),
        ({"type": "single_dim", "partitionDimension": "__time"}, r"is not a dimension name"),
        ({"type": "dynamic", "maxRowsPerSegment": 0}, r"maxRowsPerSegment must be a positive"),
        ({"type": "tiled"}, r"'tiled' is not supported; expected one of"),
        ("hashed", r"must be an object"),
    ],
)
def test_bad_specs_say_what_would_be_right(json: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        partitions_spec_from_dict(json)
