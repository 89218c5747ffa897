"""Shard specs: partition-id spaces, root ranges, overshadowing and Druid's JSON forms."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest

from segmentlake.core.shard_spec import (
    FIRST_GENERATION_PARTITION_ID_MAX,
    HASH_PARTITION_FUNCTION,
    NON_ROOT_GENERATION_PARTITION_ID_MAX,
    NON_ROOT_GENERATION_PARTITION_ID_MIN,
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    ShardSpec,
    SingleDimensionShardSpec,
    TombstoneShardSpec,
    shard_spec_from_json,
)
from segmentlake.errors import SpecError


def overwrite(
    partition_num: int = 32768,
    start: int = 0,
    end: int = 1,
    minor: int = 1,
    group: int = 1,
) -> NumberedOverwriteShardSpec:
    return NumberedOverwriteShardSpec(partition_num, start, end, minor, group)


ALL_SPECS: list[ShardSpec] = [
    NumberedShardSpec(0, 0),
    NumberedShardSpec(3, 5),
    NumberedShardSpec(FIRST_GENERATION_PARTITION_ID_MAX, 0),
    NumberedOverwriteShardSpec(32768, 0, 3, 1, 2),
    NumberedOverwriteShardSpec(65535, 5, 32768, 65535, 7),
    TombstoneShardSpec(),
    HashBasedNumberedShardSpec(1, 4, 1, 4, ("country", "city")),
    HashBasedNumberedShardSpec(0, 2, 0, 2),
    HashBasedNumberedShardSpec(2, 3, 2, 3, ("a",), "murmur3_32_abs"),
    DimensionRangeShardSpec(0, 3, ("country", "city"), None, ("fr", "paris")),
    DimensionRangeShardSpec(1, 3, ("country", "city"), ("fr", "paris"), ("us", None)),
    DimensionRangeShardSpec(2, 3, ("country", "city"), ("us", None), None),
    DimensionRangeShardSpec(0, 1, ("country",), None, None),
    SingleDimensionShardSpec(0, 2, "country", None, "fr"),
    SingleDimensionShardSpec(1, 2, "country", "fr", None),
]


# --------------------------------------------------------------------------- id spaces


def test_id_space_constants():
    assert FIRST_GENERATION_PARTITION_ID_MAX == 32767
    assert NON_ROOT_GENERATION_PARTITION_ID_MIN == 32768
    assert NON_ROOT_GENERATION_PARTITION_ID_MAX == 65535


@pytest.mark.parametrize("partition_num", [0, 1, 32767])
def test_first_generation_ids_accepted(partition_num):
    assert NumberedShardSpec(partition_num, 0).partition_num == partition_num


@pytest.mark.parametrize("partition_num", [-1, 32768, 65535, 100000])
def test_first_generation_ids_outside_0_to_32767_rejected(partition_num):
    with pytest.raises(SpecError, match=rf"partition_num {partition_num}.*0\.\.32767"):
        NumberedShardSpec(partition_num, 0)
    with pytest.raises(SpecError, match="first-generation"):
        HashBasedNumberedShardSpec(partition_num, 1, 0, 1)
    with pytest.raises(SpecError, match="first-generation"):
        DimensionRangeShardSpec(partition_num, 1, ("d",), None, None)
    with pytest.raises(SpecError, match="first-generation"):
        SingleDimensionShardSpec(partition_num, 1, "d", None, None)


def test_negative_core_partitions_rejected():
    with pytest.raises(SpecError, match="num_core_partitions"):
        NumberedShardSpec(0, -1)


@pytest.mark.parametrize("bad", [1.5, 1.0, "1", True, None])
def test_non_int_partition_numbers_rejected(bad):
    with pytest.raises(SpecError, match="must be an int"):
        NumberedShardSpec(bad, 0)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="must be an int"):
        NumberedShardSpec(0, bad)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="must be an int"):
        NumberedOverwriteShardSpec(32768, 0, 1, bad, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("partition_num", [32768, 40000, 65535])
def test_overwrite_ids_accepted(partition_num):
    assert overwrite(partition_num).partition_num == partition_num


@pytest.mark.parametrize("partition_num", [0, 32767, 65536, -1])
def test_overwrite_ids_outside_32768_to_65535_rejected(partition_num):
    with pytest.raises(SpecError, match=rf"partition_num {partition_num}.*32768\.\.65535"):
        overwrite(partition_num)


@pytest.mark.parametrize(("start", "end"), [(0, 1), (0, 32768), (32767, 32768), (5, 9)])
def test_overwrite_root_range_accepted(start, end):
    spec = overwrite(start=start, end=end)
    assert (spec.start_root_partition_id, spec.end_root_partition_id) == (start, end)


@pytest.mark.parametrize(("start", "end"), [(-1, 1), (1, 1), (2, 1), (0, 32769), (32768, 32769)])
def test_overwrite_root_range_invalid(start, end):
    with pytest.raises(SpecError, match=r"root partition range.*0 <= start < end <= 32768"):
        overwrite(start=start, end=end)


@pytest.mark.parametrize("minor", [0, -1, 65536])
def test_overwrite_minor_version_must_be_positive(minor):
    with pytest.raises(SpecError, match="minor_version"):
        overwrite(minor=minor)


@pytest.mark.parametrize("group", [0, -3])
def test_overwrite_group_size_must_be_at_least_one(group):
    with pytest.raises(SpecError, match="atomic_update_group_size"):
        overwrite(group=group)


def test_tombstone_is_partition_0_of_1():
    spec = TombstoneShardSpec()
    assert (spec.partition_num, spec.num_core_partitions) == (0, 1)
    assert spec.is_tombstone
    with pytest.raises(SpecError, match="tombstone"):
        TombstoneShardSpec(1)
    with pytest.raises(SpecError, match="tombstone"):
        TombstoneShardSpec(0, 2)


def test_only_tombstones_are_tombstones():
    assert [s.is_tombstone for s in ALL_SPECS].count(True) == 1


def test_hash_bucket_validation():
    with pytest.raises(SpecError, match="bucket_id"):
        HashBasedNumberedShardSpec(0, 2, 2, 2)
    with pytest.raises(SpecError, match="bucket_id"):
        HashBasedNumberedShardSpec(0, 2, -1, 2)
    with pytest.raises(SpecError, match="bucket_id"):
        HashBasedNumberedShardSpec(0, 2, 0, 0)
    with pytest.raises(SpecError, match="list of dimension names"):
        HashBasedNumberedShardSpec(0, 2, 0, 2, "country")  # type: ignore[arg-type]


def test_range_validation():
    with pytest.raises(SpecError, match="at least one"):
        DimensionRangeShardSpec(0, 1, (), None, None)
    with pytest.raises(SpecError, match="one value for each of the 2 dimensions"):
        DimensionRangeShardSpec(0, 1, ("a", "b"), ("x",), None)
    with pytest.raises(SpecError, match="below end"):
        DimensionRangeShardSpec(0, 1, ("a",), ("y",), ("x",))
    with pytest.raises(SpecError, match="below end"):
        DimensionRangeShardSpec(0, 1, ("a",), ("x",), ("x",))
    with pytest.raises(SpecError, match="list of dimension names"):
        DimensionRangeShardSpec(0, 1, "country", None, None)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="below end"):
        SingleDimensionShardSpec(0, 1, "a", "m", "b")
    # Nulls sort first (Druid's StringTuple ordering).
    DimensionRangeShardSpec(0, 1, ("a", "b"), ("x", None), ("x", "y"))


def test_range_bounds_normalized_to_tuples():
    spec = DimensionRangeShardSpec(0, 2, ["a", "b"], ["x", "y"], None)  # type: ignore[arg-type]
    assert spec.dimensions == ("a", "b")
    assert spec.start == ("x", "y")
    hash(spec)
    hashed = HashBasedNumberedShardSpec(0, 1, 0, 1, ["a"])  # type: ignore[arg-type]
    assert hashed.partition_dimensions == ("a",)
    hash(hashed)


# --------------------------------------------------------------------------- derived fields


@pytest.mark.parametrize(
    "spec",
    [
        NumberedShardSpec(7, 10),
        HashBasedNumberedShardSpec(7, 10, 7, 10),
        DimensionRangeShardSpec(7, 10, ("d",), ("a",), ("b",)),
        SingleDimensionShardSpec(7, 10, "d", "a", "b"),
    ],
)
def test_first_generation_derived_fields(spec):
    assert spec.start_root_partition_id == 7
    assert spec.end_root_partition_id == 8
    assert spec.minor_version == 0
    assert spec.atomic_update_group_size == 1
    assert spec.num_core_partitions == 10
    assert not spec.is_tombstone


def test_tombstone_derived_fields():
    spec = TombstoneShardSpec()
    assert (spec.start_root_partition_id, spec.end_root_partition_id) == (0, 1)
    assert (spec.minor_version, spec.atomic_update_group_size) == (0, 1)


def test_overwrite_fields():
    spec = NumberedOverwriteShardSpec(32770, 2, 5, 3, 4)
    assert spec.partition_num == 32770
    assert (spec.start_root_partition_id, spec.end_root_partition_id) == (2, 5)
    assert spec.minor_version == 3
    assert spec.atomic_update_group_size == 4
    assert spec.num_core_partitions == 0


def test_numbered_defaults_to_zero_core_partitions():
    assert NumberedShardSpec(4).num_core_partitions == 0


# --------------------------------------------------------------------------- overshadows


def test_first_generation_never_overshadows():
    a, b = NumberedShardSpec(0, 2), NumberedShardSpec(1, 2)
    assert not a.overshadows(b)
    assert not a.overshadows(a)
    assert not b.overshadows(a)


def test_overwrite_overshadows_contained_roots_with_lower_minor():
    spec = overwrite(start=0, end=2, minor=1, group=2)
    assert spec.overshadows(NumberedShardSpec(0, 2))
    assert spec.overshadows(NumberedShardSpec(1, 2))
    assert not spec.overshadows(NumberedShardSpec(2, 3))
    assert not NumberedShardSpec(0, 2).overshadows(spec)


def test_overwrite_generations():
    gen1 = overwrite(32768, start=0, end=2, minor=1)
    gen2 = overwrite(32769, start=0, end=2, minor=2)
    wider = overwrite(32770, start=0, end=4, minor=3)
    partial = overwrite(32771, start=1, end=3, minor=4)
    assert gen2.overshadows(gen1)
    assert not gen1.overshadows(gen2)
    assert not gen1.overshadows(overwrite(32772, start=0, end=2, minor=1))  # same minor
    assert wider.overshadows(gen1)
    assert wider.overshadows(gen2)
    assert not gen2.overshadows(wider)  # root range not contained
    assert not partial.overshadows(gen1)  # overlapping, not containing
    assert partial.overshadows(NumberedShardSpec(2, 4))


def test_overwrite_overshadows_tombstone_root():
    assert overwrite(start=0, end=1).overshadows(TombstoneShardSpec())


# --------------------------------------------------------------------------- frozen, hashable


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: type(s).__name__)
def test_frozen_and_hashable(spec):
    assert hash(spec) == hash(dataclasses.replace(spec))
    assert spec == dataclasses.replace(spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.partition_num = 9  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        spec.extra = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_equality_and_hash_by_value():
    assert NumberedShardSpec(1, 2) == NumberedShardSpec(1, 2)
    assert NumberedShardSpec(1, 2) != NumberedShardSpec(1, 3)
    assert len(set(ALL_SPECS)) == len(ALL_SPECS)
    assert {NumberedShardSpec(1, 2): "x"}[NumberedShardSpec(1, 2)] == "x"
    # Same numbers, different kind: not equal.
    assert NumberedShardSpec(0, 1) != TombstoneShardSpec()
    assert HashBasedNumberedShardSpec(0, 1, 0, 1) != NumberedShardSpec(0, 1)


def test_replace_revalidates():
    with pytest.raises(SpecError):
        dataclasses.replace(NumberedShardSpec(1, 2), partition_num=40000)


# --------------------------------------------------------------------------- JSON


def test_numbered_json():
    assert NumberedShardSpec(3, 5).to_json() == {
        "type": "numbered",
        "partitionNum": 3,
        "partitions": 5,
    }


def test_numbered_overwrite_json():
    assert NumberedOverwriteShardSpec(32768, 0, 3, 1, 2).to_json() == {
        "type": "numbered_overwrite",
        "partitionId": 32768,
        "startRootPartitionId": 0,
        "endRootPartitionId": 3,
        "minorVersion": 1,
        "atomicUpdateGroupSize": 2,
    }


def test_tombstone_json():
    assert TombstoneShardSpec().to_json() == {
        "type": "tombstone",
        "partitionNum": 0,
        "partitions": 1,
    }


def test_hashed_json():
    assert HashBasedNumberedShardSpec(1, 4, 1, 4, ("country",)).to_json() == {
        "type": "hashed",
        "partitionNum": 1,
        "partitions": 4,
        "bucketId": 1,
        "numBuckets": 4,
        "partitionDimensions": ["country"],
        "partitionFunction": HASH_PARTITION_FUNCTION,
    }


def test_range_json():
    assert DimensionRangeShardSpec(1, 3, ("country", "city"), ("fr", None), None).to_json() == {
        "type": "range",
        "dimensions": ["country", "city"],
        "start": ["fr", None],
        "end": None,
        "partitionNum": 1,
        "numCorePartitions": 3,
    }


def test_single_dim_json():
    assert SingleDimensionShardSpec(0, 2, "country", None, "fr").to_json() == {
        "type": "single",
        "dimension": "country",
        "start": None,
        "end": "fr",
        "partitionNum": 0,
        "numCorePartitions": 2,
    }


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: type(s).__name__)
def test_json_round_trip(spec):
    data = spec.to_json()
    assert shard_spec_from_json(data) == spec
    # ...also through a real JSON text (lists, not tuples).
    again = shard_spec_from_json(json.loads(json.dumps(data)))
    assert again == spec
    assert type(again) is type(spec)
    assert hash(again) == hash(spec)


def test_from_druid_json_with_defaults():
    # Druid omits "partitions" on old numbered specs and bucket fields on old hashed specs.
    assert shard_spec_from_json({"type": "numbered", "partitionNum": 2}) == NumberedShardSpec(2, 0)
    assert shard_spec_from_json(
        {"type": "hashed", "partitionNum": 1, "partitions": 3, "partitionDimensions": None}
    ) == HashBasedNumberedShardSpec(1, 3, 1, 3, ())
    assert shard_spec_from_json(
        {"type": "range", "dimensions": ["d"], "partitionNum": 0}
    ) == DimensionRangeShardSpec(0, 0, ("d",), None, None)
    assert shard_spec_from_json({"type": "tombstone"}) == TombstoneShardSpec()


@pytest.mark.parametrize(
    "data",
    [
        {"type": "linear", "partitionNum": 0},
        {"type": None},
        {},
        {"partitionNum": 0},
        None,
        "numbered",
        [],
    ],
)
def test_unknown_type_rejected(data):
    with pytest.raises(SpecError, match=r"unknown shard spec type.*numbered, numbered_overwrite"):
        shard_spec_from_json(data)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "missing"),
    [
        ({"type": "numbered"}, "partitionNum"),
        ({"type": "numbered_overwrite", "startRootPartitionId": 0}, "partitionId"),
        (
            {
                "type": "numbered_overwrite",
                "partitionId": 32768,
                "startRootPartitionId": 0,
                "endRootPartitionId": 1,
                "minorVersion": 1,
            },
            "atomicUpdateGroupSize",
        ),
        ({"type": "hashed", "partitionNum": 0}, "partitions"),
        ({"type": "range", "partitionNum": 0}, "dimensions"),
        ({"type": "single", "partitionNum": 0}, "dimension"),
    ],
)
def test_missing_field_rejected(data, missing):
    with pytest.raises(SpecError, match=f"lacks '{missing}'"):
        shard_spec_from_json(data)


@pytest.mark.parametrize(
    "data",
    [
        {"type": "numbered", "partitionNum": "0"},
        {"type": "numbered", "partitionNum": 1.5},
        {"type": "numbered", "partitionNum": 40000},
        {"type": "range", "partitionNum": 0, "dimensions": None},
        {"type": "range", "partitionNum": 0, "dimensions": "country"},
        {"type": "hashed", "partitionNum": 0, "partitions": 1, "partitionDimensions": "country"},
        {
            "type": "numbered_overwrite",
            "partitionId": 1,
            "startRootPartitionId": 0,
            "endRootPartitionId": 1,
            "minorVersion": 1,
            "atomicUpdateGroupSize": 1,
        },
    ],
)
def test_malformed_values_rejected(data):
    with pytest.raises(SpecError):
        shard_spec_from_json(data)
