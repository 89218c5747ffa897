"""The Literal types of string options agree with what the run-time checks accept, and the
partitions specs answer the questions ingestion and compaction ask them."""

from __future__ import annotations

from typing import get_args

import pytest

from segmentlake.core.compaction import COMPACTION_MODES, MAJOR, MINOR, CompactionMode
from segmentlake.core.locks import LockGranularity, LockGranularityName, LockType, LockTypeName
from segmentlake.core.partitions_spec import (
    DimensionRangePartitionsSpec,
    DynamicPartitionsSpec,
    HashedPartitionsSpec,
    PartitionsSpec,
    SingleDimensionPartitionsSpec,
)


def test_compaction_modes_are_the_literal() -> None:
    assert COMPACTION_MODES == get_args(CompactionMode) == ("minor", "major")
    assert {MINOR, MAJOR} == set(COMPACTION_MODES)


@pytest.mark.parametrize(
    ("literal", "enum"), [(LockTypeName, LockType), (LockGranularityName, LockGranularity)]
)
def test_lock_names_are_the_enum_values(literal: object, enum: type[LockType]) -> None:
    assert set(get_args(literal)) == {member.value for member in enum}


@pytest.mark.parametrize(
    ("spec", "limit", "dimensions"),
    [
        (DynamicPartitionsSpec(1000), 1000, ()),
        (HashedPartitionsSpec(num_shards=3, partition_dimensions=("a",)), None, ("a",)),
        (HashedPartitionsSpec(target_rows_per_segment=10), None, ()),
        (DimensionRangePartitionsSpec(("a", "b"), target_rows_per_segment=100), 150, ("a", "b")),
        (SingleDimensionPartitionsSpec("a", max_rows_per_segment=90), 90, ("a",)),
    ],
)
def test_partitions_specs_answer_row_limit_and_dimensions(
    spec: PartitionsSpec, limit: int | None, dimensions: tuple[str, ...]
) -> None:
    assert spec.segment_row_limit == limit
    assert spec.partition_dimensions == dimensions
