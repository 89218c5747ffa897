"""Shard specs: how one segment relates to the other segments of its time chunk.

Partition ids live in two spaces, as in Druid's segment locking design: first-generation
segments (written by ingestion) take 0..32767 and are their own *root partition* ``[p, p+1)``;
segments that replace others inside the same chunk (minor compaction) take 32768..65535 and
record the root range they cover, a minor version and the size of their atomic update group.
All specs serialize to Druid's JSON (``to_json`` / ``shard_spec_from_json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from segmentlake.core.spec_reader import safe_repr
from segmentlake.errors import SpecError

__all__ = [
    "FIRST_GENERATION_PARTITION_ID_MAX",
    "HASH_PARTITION_FUNCTION",
    "NON_ROOT_GENERATION_PARTITION_ID_MAX",
    "NON_ROOT_GENERATION_PARTITION_ID_MIN",
    "DimensionRangeShardSpec",
    "HashBasedNumberedShardSpec",
    "NumberedOverwriteShardSpec",
    "NumberedShardSpec",
    "ShardSpec",
    "SingleDimensionShardSpec",
    "TombstoneShardSpec",
    "shard_spec_from_json",
]

FIRST_GENERATION_PARTITION_ID_MAX = 32767
NON_ROOT_GENERATION_PARTITION_ID_MIN = 32768
NON_ROOT_GENERATION_PARTITION_ID_MAX = 65535
# Name recorded in hashed shard specs; the function itself belongs to the ingestion engine.
HASH_PARTITION_FUNCTION = "spark_murmur3_32_pmod"


class ShardSpec:
    """Common interface of all shard specs (the frozen dataclasses below).

    Every spec has ``partition_num``, ``num_core_partitions``, the root partition range
    ``[start_root_partition_id, end_root_partition_id)``, ``minor_version`` and
    ``atomic_update_group_size``; first-generation specs derive the last four.
    """

    __slots__ = ()
    type_name: ClassVar[str]

    if TYPE_CHECKING:
        # Declared for type checkers only: at run time the subclasses' fields or properties
        # provide them (a base attribute would become every dataclass field's default).

        @property
        def partition_num(self) -> int: ...

        @property
        def num_core_partitions(self) -> int: ...

        @property
        def start_root_partition_id(self) -> int: ...

        @property
        def end_root_partition_id(self) -> int: ...

        @property
        def minor_version(self) -> int: ...

        @property
        def atomic_update_group_size(self) -> int: ...

    @property
    def is_tombstone(self) -> bool:
        return False

    def overshadows(self, other: ShardSpec) -> bool:
        """Within one chunk: this spec's root range contains ``other``'s and its minor version is
        higher (Druid's ``Overshadowable.overshadows``)."""
        return (
            self.start_root_partition_id <= other.start_root_partition_id
            and other.end_root_partition_id <= self.end_root_partition_id
            and self.minor_version > other.minor_version
        )

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


class _FirstGeneration(ShardSpec):
    """A segment written by ingestion: its own root partition ``[p, p+1)``, minor version 0."""

    __slots__ = ()

    @property
    def start_root_partition_id(self) -> int:
        return self.partition_num

    @property
    def end_root_partition_id(self) -> int:
        return self.partition_num + 1

    @property
    def minor_version(self) -> int:
        return 0

    @property
    def atomic_update_group_size(self) -> int:
        return 1


def _check_ints(**values: object) -> None:
    # Without this a float (1.5) or bool passes the range checks below and only fails later,
    # far away, when the segment id is built.
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise SpecError(f"{name} must be an int, got {value!r}")


def _check_not_str(name: str, value: object) -> None:
    # tuple("country") would silently become seven one-letter dimensions.
    if isinstance(value, str):
        raise SpecError(f"{name} must be a list of dimension names, got the string {value!r}")


def _check_first_generation(partition_num: int, num_core_partitions: int) -> None:
    _check_ints(partition_num=partition_num, num_core_partitions=num_core_partitions)
    if not 0 <= partition_num <= FIRST_GENERATION_PARTITION_ID_MAX:
        raise SpecError(
            f"partition_num {partition_num} is outside the first-generation id space "
            f"0..{FIRST_GENERATION_PARTITION_ID_MAX}"
        )
    if num_core_partitions < 0:
        raise SpecError(f"num_core_partitions must be >= 0, got {num_core_partitions}")


@dataclass(frozen=True, slots=True)
class NumberedShardSpec(_FirstGeneration):
    """A first-generation segment ``partition_num`` of a chunk with ``num_core_partitions`` core
    partitions (0 for appended segments, which never make a chunk incomplete)."""

    type_name: ClassVar[str] = "numbered"
    partition_num: int
    num_core_partitions: int = 0

    def __post_init__(self) -> None:
        _check_first_generation(self.partition_num, self.num_core_partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "partitionNum": self.partition_num,
            "partitions": self.num_core_partitions,
        }


@dataclass(frozen=True, slots=True)
class NumberedOverwriteShardSpec(ShardSpec):
    """A segment that replaces the root partitions ``[start_root_partition_id,
    end_root_partition_id)`` of its chunk (minor compaction), together with the other
    ``atomic_update_group_size - 1`` segments of its atomic update group."""

    type_name: ClassVar[str] = "numbered_overwrite"
    partition_num: int
    start_root_partition_id: int
    end_root_partition_id: int
    minor_version: int
    atomic_update_group_size: int

    def __post_init__(self) -> None:
        _check_ints(
            partition_num=self.partition_num,
            start_root_partition_id=self.start_root_partition_id,
            end_root_partition_id=self.end_root_partition_id,
            minor_version=self.minor_version,
            atomic_update_group_size=self.atomic_update_group_size,
        )
        low, high = NON_ROOT_GENERATION_PARTITION_ID_MIN, NON_ROOT_GENERATION_PARTITION_ID_MAX
        if not low <= self.partition_num <= high:
            raise SpecError(
                f"partition_num {self.partition_num} of an overwrite shard spec is outside "
                f"{low}..{high} (first-generation ids 0..{low - 1} are for ingestion)"
            )
        if not 0 <= self.start_root_partition_id < self.end_root_partition_id <= low:
            raise SpecError(
                f"root partition range [{self.start_root_partition_id}, "
                f"{self.end_root_partition_id}) is invalid; expected 0 <= start < end <= {low}"
            )
        if self.minor_version < 1 or self.minor_version > 0xFFFF:
            raise SpecError(f"minor_version must be in 1..65535, got {self.minor_version}")
        if self.atomic_update_group_size < 1:
            raise SpecError(
                f"atomic_update_group_size must be >= 1, got {self.atomic_update_group_size}"
            )

    @property
    def num_core_partitions(self) -> int:
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "partitionId": self.partition_num,
            "startRootPartitionId": self.start_root_partition_id,
            "endRootPartitionId": self.end_root_partition_id,
            "minorVersion": self.minor_version,
            "atomicUpdateGroupSize": self.atomic_update_group_size,
        }


@dataclass(frozen=True, slots=True)
class TombstoneShardSpec(_FirstGeneration):
    """An interval overwritten with no rows: it hides older versions and serves nothing."""

    type_name: ClassVar[str] = "tombstone"
    partition_num: int = 0
    num_core_partitions: int = 1

    def __post_init__(self) -> None:
        if (self.partition_num, self.num_core_partitions) != (0, 1):
            raise SpecError(
                "a tombstone is partition 0 of 1 core partition, got "
                f"{self.partition_num} of {self.num_core_partitions}"
            )

    @property
    def is_tombstone(self) -> bool:
        return True

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "partitionNum": 0, "partitions": 1}


@dataclass(frozen=True, slots=True)
class HashBasedNumberedShardSpec(_FirstGeneration):
    """Perfect-rollup segment holding hash bucket ``bucket_id`` of ``num_buckets`` over
    ``partition_dimensions`` (all dimensions when empty)."""

    type_name: ClassVar[str] = "hashed"
    partition_num: int
    num_core_partitions: int
    bucket_id: int
    num_buckets: int
    partition_dimensions: tuple[str, ...] = ()
    partition_function: str = HASH_PARTITION_FUNCTION

    def __post_init__(self) -> None:
        _check_first_generation(self.partition_num, self.num_core_partitions)
        _check_ints(bucket_id=self.bucket_id, num_buckets=self.num_buckets)
        _check_not_str("partition_dimensions", self.partition_dimensions)
        object.__setattr__(self, "partition_dimensions", tuple(self.partition_dimensions))
        if self.num_buckets < 1 or not 0 <= self.bucket_id < self.num_buckets:
            raise SpecError(
                f"bucket_id {self.bucket_id} must be in 0..num_buckets-1 "
                f"(num_buckets={self.num_buckets})"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "partitionNum": self.partition_num,
            "partitions": self.num_core_partitions,
            "bucketId": self.bucket_id,
            "numBuckets": self.num_buckets,
            "partitionDimensions": list(self.partition_dimensions),
            "partitionFunction": self.partition_function,
        }


def _check_range(start: Sequence[Any] | None, end: Sequence[Any] | None, arity: int) -> None:
    for name, bound in (("start", start), ("end", end)):
        if bound is not None and len(bound) != arity:
            raise SpecError(
                f"range {name} {safe_repr(list(bound))} must have one value for each of the "
                f"{arity} dimensions"
            )
    if start is not None and end is not None and not _tuple_lt(start, end):
        raise SpecError(
            f"range start {safe_repr(list(start))} must be below end {safe_repr(list(end))}"
        )


def _tuple_lt(a: Sequence[Any], b: Sequence[Any]) -> bool:
    # Nulls sort first, as in Druid's StringTuple ordering.
    return [(v is not None, v) for v in a] < [(v is not None, v) for v in b]


@dataclass(frozen=True, slots=True)
class DimensionRangeShardSpec(_FirstGeneration):
    """Perfect-rollup segment holding the rows whose ``dimensions`` tuple is in
    ``[start, end)``; ``None`` bounds are open (first and last range)."""

    type_name: ClassVar[str] = "range"
    partition_num: int
    num_core_partitions: int
    dimensions: tuple[str, ...]
    start: tuple[str | None, ...] | None
    end: tuple[str | None, ...] | None

    def __post_init__(self) -> None:
        _check_first_generation(self.partition_num, self.num_core_partitions)
        _check_not_str("dimensions", self.dimensions)
        if not self.dimensions:
            raise SpecError(
                "a range shard spec needs at least one partition dimension (dimensions)"
            )
        object.__setattr__(self, "dimensions", tuple(self.dimensions))
        for name in ("start", "end"):
            value = getattr(self, name)
            object.__setattr__(self, name, None if value is None else tuple(value))
        _check_range(self.start, self.end, len(self.dimensions))

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "dimensions": list(self.dimensions),
            "start": None if self.start is None else list(self.start),
            "end": None if self.end is None else list(self.end),
            "partitionNum": self.partition_num,
            "numCorePartitions": self.num_core_partitions,
        }


@dataclass(frozen=True, slots=True)
class SingleDimensionShardSpec(_FirstGeneration):
    """Druid's ``single_dim`` range shard: rows with ``start <= dimension < end``."""

    type_name: ClassVar[str] = "single"
    partition_num: int
    num_core_partitions: int
    dimension: str
    start: str | None
    end: str | None

    def __post_init__(self) -> None:
        _check_first_generation(self.partition_num, self.num_core_partitions)
        _check_range(
            None if self.start is None else (self.start,),
            None if self.end is None else (self.end,),
            1,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "dimension": self.dimension,
            "start": self.start,
            "end": self.end,
            "partitionNum": self.partition_num,
            "numCorePartitions": self.num_core_partitions,
        }


def _field(data: Mapping[str, Any], name: str, default: Any = ...) -> Any:
    if name in data:
        return data[name]
    if default is ...:
        raise SpecError(
            f"shard spec {safe_repr(data)} of type {safe_repr(data.get('type'))} lacks {name!r}"
        )
    return default


# Per type, the JSON fields of each kind, checked under their JSON names before the spec is
# built (the constructors name their Python arguments).
_JSON_INTS = {
    "numbered": ("partitionNum", "partitions"),
    "numbered_overwrite": (
        "partitionId",
        "startRootPartitionId",
        "endRootPartitionId",
        "minorVersion",
        "atomicUpdateGroupSize",
    ),
    "hashed": ("partitionNum", "partitions", "bucketId", "numBuckets"),
    "range": ("partitionNum", "numCorePartitions"),
    "single": ("partitionNum", "numCorePartitions"),
}
_JSON_NAME_LISTS = {"hashed": ("partitionDimensions",), "range": ("dimensions",)}
_JSON_STRINGS = {"hashed": ("partitionFunction",), "single": ("dimension", "start", "end")}


def _check_json_fields(kind: str, data: Mapping[str, Any]) -> None:
    """The types of the fields ``data`` has (a missing one is :func:`_field`'s to report)."""

    def refuse(key: str, what: str) -> SpecError:
        return SpecError(
            f"shard spec ({kind}) field {key!r} must be {what}, got {safe_repr(data[key])}"
        )

    for key in _JSON_INTS.get(kind, ()):
        if key in data and (not isinstance(data[key], int) or isinstance(data[key], bool)):
            raise refuse(key, "an integer")
    for key in _JSON_NAME_LISTS.get(kind, ()):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) and v for v in value)
        ):
            raise refuse(key, "a list of dimension names")
    for key in _JSON_STRINGS.get(kind, ()):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise refuse(key, "a string")
    if kind == "range":
        for key in ("start", "end"):
            value = data.get(key)
            if value is not None and not (
                isinstance(value, list) and all(v is None or isinstance(v, str) for v in value)
            ):
                raise refuse(key, "null or a list of strings and nulls, one per dimension")


def shard_spec_from_json(data: Mapping[str, Any]) -> ShardSpec:
    """Build a shard spec from Druid's JSON form (``{"type": "numbered", ...}``)."""
    kind = data.get("type") if isinstance(data, Mapping) else None
    if isinstance(kind, str):
        _check_json_fields(kind, data)
    try:
        if kind == "numbered":
            return NumberedShardSpec(_field(data, "partitionNum"), _field(data, "partitions", 0))
        if kind == "numbered_overwrite":
            return NumberedOverwriteShardSpec(
                _field(data, "partitionId"),
                _field(data, "startRootPartitionId"),
                _field(data, "endRootPartitionId"),
                _field(data, "minorVersion"),
                _field(data, "atomicUpdateGroupSize"),
            )
        if kind == "tombstone":
            return TombstoneShardSpec()
        if kind == "hashed":
            return HashBasedNumberedShardSpec(
                _field(data, "partitionNum"),
                _field(data, "partitions"),
                _field(data, "bucketId", _field(data, "partitionNum")),
                _field(data, "numBuckets", _field(data, "partitions")),
                _field(data, "partitionDimensions", ()) or (),
                _field(data, "partitionFunction", None) or HASH_PARTITION_FUNCTION,
            )
        if kind == "range":
            return DimensionRangeShardSpec(
                _field(data, "partitionNum"),
                _field(data, "numCorePartitions", 0),
                _field(data, "dimensions"),
                _field(data, "start", None),
                _field(data, "end", None),
            )
        if kind == "single":
            return SingleDimensionShardSpec(
                _field(data, "partitionNum"),
                _field(data, "numCorePartitions", 0),
                _field(data, "dimension"),
                _field(data, "start", None),
                _field(data, "end", None),
            )
    except TypeError as e:
        raise SpecError(f"malformed shard spec {safe_repr(data)}: {e}") from e
    known = "numbered, numbered_overwrite, tombstone, hashed, range, single"
    raise SpecError(
        f"unknown shard spec type {safe_repr(kind)} in {safe_repr(data)}; expected one of {known}"
    )
