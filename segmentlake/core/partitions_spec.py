"""Partitions specs: how an ingestion cuts each time chunk into segments (Druid's names).

* ``dynamic`` — segments are cut by size as rows arrive (appends; the default);
* ``hashed`` — perfect rollup: rows go to ``num_shards`` buckets per chunk by a hash of
  ``partition_dimensions`` (given, or determined from ``target_rows_per_segment``);
* ``range`` / ``single_dim`` — perfect rollup: each chunk's rows are cut into contiguous ranges
  of the ``partition_dimensions`` tuple, about ``target_rows_per_segment`` rolled-up rows each.

Hashed and range partitioning need all of a chunk's rows in one task, so they need a time-chunk
lock: they are for ``overwrite`` (Druid's ``forceGuaranteedRollup``), never for appends.

The hash is Spark SQL's ``hash`` (Murmur3 x86_32, seed 42, each value seeding the next) over
the partition dimensions cast to strings, taken ``pmod`` the bucket count::

    bucket = pmod(hash(CAST(d1 AS STRING), ..., CAST(dn AS STRING)), num_buckets)

so anyone with Spark can reproduce a row's bucket; :mod:`segmentlake.core.partition_hash`
computes the same in pure Python. With no partition dimensions, the query-granular time (epoch
milliseconds) and every dimension are hashed, as in Druid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from segmentlake.core.shard_spec import HASH_PARTITION_FUNCTION
from segmentlake.core.spec_reader import (
    INT32_MAX,
    INT64_MAX,
    check_flag,
    int_problem,
    safe_repr,
)
from segmentlake.errors import SpecError

__all__ = [
    "DEFAULT_MAX_ROWS_PER_SEGMENT",
    "DEFAULT_TARGET_ROWS_PER_SEGMENT",
    "DimensionRangePartitionsSpec",
    "DynamicPartitionsSpec",
    "HashedPartitionsSpec",
    "PartitionsSpec",
    "SingleDimensionPartitionsSpec",
    "partitions_spec_from_dict",
]

DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000
DEFAULT_TARGET_ROWS_PER_SEGMENT = 5_000_000
# Druid's range spec: without maxRowsPerSegment, a segment may exceed the target by half.
_MAX_OVER_TARGET = 1.5


def _positive(value: Any, where: str, *, optional: bool = False, maximum: int = INT64_MAX) -> None:
    """Row counts are Java longs in Druid (BIGINTs in the metadata), shard counts ints."""
    if value is None and optional:
        return
    if int_problem(value, minimum=1, maximum=maximum) is not None:
        raise SpecError(
            f"partitionsSpec.{where} must be a positive integer, got {safe_repr(value)} "
            f"(at most {maximum})"
        )


def _dimension_names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise SpecError(
            f"partitionsSpec.{where} must be a list of dimension names, got {safe_repr(value)}"
        )
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise SpecError(f"partitionsSpec.{where}: {safe_repr(name)} is not a dimension name")
    if len(set(names)) != len(names):
        raise SpecError(f"partitionsSpec.{where} names a dimension twice: {list(names)}")
    return names


@dataclass(frozen=True, slots=True)
class DynamicPartitionsSpec:
    """Druid's ``dynamic`` partitioning: a segment is cut after ``max_rows_per_segment`` rows;
    ``max_total_rows`` bounds the rows a task holds before writing (None: no bound)."""

    type_name: ClassVar[str] = "dynamic"
    perfect_rollup: ClassVar[bool] = False
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT
    max_total_rows: int | None = None

    def __post_init__(self) -> None:
        _positive(self.max_rows_per_segment, "maxRowsPerSegment")
        _positive(self.max_total_rows, "maxTotalRows", optional=True)

    @property
    def partition_dimensions(self) -> tuple[str, ...]:
        """None: segments are cut by row count, whatever their rows' values."""
        return ()

    @property
    def segment_row_limit(self) -> int:
        """The most rows one segment holds (``max_rows_per_segment``)."""
        return self.max_rows_per_segment

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "maxRowsPerSegment": self.max_rows_per_segment,
            "maxTotalRows": self.max_total_rows,
        }


@dataclass(frozen=True, slots=True)
class HashedPartitionsSpec:
    """Perfect rollup into hash buckets of ``partition_dimensions`` (every dimension and the
    time when empty): ``num_shards`` buckets per chunk, or as many as make each about
    ``target_rows_per_segment`` rolled-up rows (determined per chunk; default 5,000,000)."""

    type_name: ClassVar[str] = "hashed"
    perfect_rollup: ClassVar[bool] = True
    num_shards: int | None = None
    target_rows_per_segment: int | None = None
    partition_dimensions: tuple[str, ...] = ()
    partition_function: str = HASH_PARTITION_FUNCTION

    def __post_init__(self) -> None:
        _positive(self.num_shards, "numShards", optional=True, maximum=INT32_MAX)
        _positive(self.target_rows_per_segment, "targetRowsPerSegment", optional=True)
        if self.num_shards is not None and self.target_rows_per_segment is not None:
            raise SpecError(
                "partitionsSpec (hashed): give numShards or targetRowsPerSegment, not both "
                f"(got {self.num_shards} and {self.target_rows_per_segment})"
            )
        if self.num_shards is None and self.target_rows_per_segment is None:
            object.__setattr__(self, "target_rows_per_segment", DEFAULT_TARGET_ROWS_PER_SEGMENT)
        object.__setattr__(
            self,
            "partition_dimensions",
            _dimension_names(self.partition_dimensions, "partitionDimensions"),
        )
        if self.partition_function != HASH_PARTITION_FUNCTION:
            raise SpecError(
                f"partitionsSpec.partitionFunction {safe_repr(self.partition_function)} is not "
                f"supported; segmentlake hashes with {HASH_PARTITION_FUNCTION!r} (Spark SQL's "
                "pmod(hash(...), numBuckets)); remove the field or set it to that"
            )

    @property
    def segment_row_limit(self) -> None:
        """None: a bucket's segment holds every row that hashes to it; the target only
        chooses the bucket count."""
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "numShards": self.num_shards,
            "targetRowsPerSegment": None if self.num_shards else self.target_rows_per_segment,
            "partitionDimensions": list(self.partition_dimensions),
            "partitionFunction": self.partition_function,
        }


def _resolve_range_sizes(target: int | None, maximum: int | None) -> tuple[int, int]:
    _positive(target, "targetRowsPerSegment", optional=True)
    _positive(maximum, "maxRowsPerSegment", optional=True)
    if target is None and maximum is None:
        raise SpecError(
            "partitionsSpec (range): give targetRowsPerSegment (or maxRowsPerSegment), e.g. "
            '{"type": "range", "partitionDimensions": ["country"], '
            '"targetRowsPerSegment": 5000000}'
        )
    if target is None:
        assert maximum is not None
        target = max(1, math.floor(maximum / _MAX_OVER_TARGET))
    if maximum is None:
        maximum = math.ceil(target * _MAX_OVER_TARGET)
    if maximum < target:
        raise SpecError(
            f"partitionsSpec (range): maxRowsPerSegment {maximum} is below "
            f"targetRowsPerSegment {target}"
        )
    return target, maximum


class _RangeSizes:
    """What the two range specs share: Druid's target/max sizing, resolved when built."""

    __slots__ = ()
    target_rows_per_segment: int | None
    max_rows_per_segment: int | None

    def _resolve_sizes(self) -> None:
        target, maximum = _resolve_range_sizes(
            self.target_rows_per_segment, self.max_rows_per_segment
        )
        object.__setattr__(self, "target_rows_per_segment", target)
        object.__setattr__(self, "max_rows_per_segment", maximum)

    @property
    def segment_row_limit(self) -> int | None:
        """The most rows one segment holds (``max_rows_per_segment``, resolved when built)."""
        return self.max_rows_per_segment


@dataclass(frozen=True, slots=True)
class DimensionRangePartitionsSpec(_RangeSizes):
    """Perfect rollup into contiguous ranges of the ``partition_dimensions`` tuple (string
    dimensions), each about ``target_rows_per_segment`` rolled-up rows and at most
    ``max_rows_per_segment`` unless one value alone holds more (default: 1.5 times the target)."""

    type_name: ClassVar[str] = "range"
    perfect_rollup: ClassVar[bool] = True
    partition_dimensions: tuple[str, ...]
    target_rows_per_segment: int | None = None
    max_rows_per_segment: int | None = None

    def __post_init__(self) -> None:
        dims = _dimension_names(self.partition_dimensions, "partitionDimensions")
        if not dims:
            raise SpecError("partitionsSpec (range) needs at least one partitionDimensions entry")
        object.__setattr__(self, "partition_dimensions", dims)
        self._resolve_sizes()

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "partitionDimensions": list(self.partition_dimensions),
            "targetRowsPerSegment": self.target_rows_per_segment,
            "maxRowsPerSegment": self.max_rows_per_segment,
        }


@dataclass(frozen=True, slots=True)
class SingleDimensionPartitionsSpec(_RangeSizes):
    """Druid's ``single_dim``: range partitioning on one string dimension (its segments carry
    ``single`` shard specs)."""

    type_name: ClassVar[str] = "single_dim"
    perfect_rollup: ClassVar[bool] = True
    partition_dimension: str
    target_rows_per_segment: int | None = None
    max_rows_per_segment: int | None = None

    def __post_init__(self) -> None:
        _dimension_names([self.partition_dimension], "partitionDimension")
        self._resolve_sizes()

    @property
    def partition_dimensions(self) -> tuple[str, ...]:
        return (self.partition_dimension,)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "partitionDimension": self.partition_dimension,
            "targetRowsPerSegment": self.target_rows_per_segment,
            "maxRowsPerSegment": self.max_rows_per_segment,
        }


PartitionsSpec = (
    DynamicPartitionsSpec
    | HashedPartitionsSpec
    | DimensionRangePartitionsSpec
    | SingleDimensionPartitionsSpec
)

# Druid JSON key -> accepted keys per type ("type" aside). Anything else is refused, not ignored.
_KEYS: Mapping[str, frozenset[str]] = {
    "dynamic": frozenset({"maxRowsPerSegment", "maxTotalRows"}),
    "hashed": frozenset(
        {
            "numShards",
            "targetRowsPerSegment",
            "maxRowsPerSegment",  # Druid's deprecated name for targetRowsPerSegment
            "partitionDimensions",
            "partitionFunction",
        }
    ),
    "range": frozenset(
        {"partitionDimensions", "targetRowsPerSegment", "maxRowsPerSegment", "assumeGrouped"}
    ),
    "single_dim": frozenset(
        {"partitionDimension", "targetRowsPerSegment", "maxRowsPerSegment", "assumeGrouped"}
    ),
}


def partitions_spec_from_dict(obj: Mapping[str, Any]) -> PartitionsSpec:
    """Read Druid's ``partitionsSpec`` JSON; unknown types and fields fail with the accepted
    ones listed. A missing field or a JSON null takes the default; any other value must have
    the field's type (``"5"`` is not a row count, ``""`` not a dimension list)."""
    if not isinstance(obj, Mapping):
        raise SpecError(f"partitionsSpec must be an object, got {safe_repr(obj)}")
    kind = obj.get("type", "dynamic")
    if not isinstance(kind, str) or kind not in _KEYS:
        raise SpecError(
            f"partitionsSpec type {safe_repr(kind)} is not supported; expected one of "
            f"{sorted(_KEYS)}"
        )
    names = (k if isinstance(k, str) else safe_repr(k) for k in obj)  # any key sorts
    unknown = sorted(k for k in names if k not in _KEYS[kind] and k != "type")
    if unknown:
        default = "" if "type" in obj else ", the default type, as no type is given"
        raise SpecError(
            f"partitionsSpec ({kind}{default}) fields {unknown} are not supported; accepted: "
            f"{sorted(_KEYS[kind])}"
        )
    if obj.get("assumeGrouped") is not None and check_flag(
        obj["assumeGrouped"], "partitionsSpec.assumeGrouped"
    ):
        raise SpecError(
            "partitionsSpec.assumeGrouped is not supported: segmentlake always rolls the input "
            "up itself; remove it or set it to false"
        )
    return _READERS[kind](obj)


def _or(value: Any, default: Any) -> Any:
    # Only a missing field or null takes the default: "" or 0 are values, and wrong ones.
    return default if value is None else value


def _dynamic(obj: Mapping[str, Any]) -> PartitionsSpec:
    size = _or(obj.get("maxRowsPerSegment"), DEFAULT_MAX_ROWS_PER_SEGMENT)
    return DynamicPartitionsSpec(size, obj.get("maxTotalRows"))


def _hashed(obj: Mapping[str, Any]) -> PartitionsSpec:
    target = obj.get("targetRowsPerSegment")
    if target is None:
        target = obj.get("maxRowsPerSegment")
    elif obj.get("maxRowsPerSegment") is not None:
        raise SpecError(
            "partitionsSpec (hashed): maxRowsPerSegment is Druid's old name for "
            "targetRowsPerSegment; give only one"
        )
    return HashedPartitionsSpec(
        obj.get("numShards"),
        target,
        _or(obj.get("partitionDimensions"), ()),
        _or(obj.get("partitionFunction"), HASH_PARTITION_FUNCTION),
    )


def _range(obj: Mapping[str, Any]) -> PartitionsSpec:
    return DimensionRangePartitionsSpec(
        _or(obj.get("partitionDimensions"), ()),
        obj.get("targetRowsPerSegment"),
        obj.get("maxRowsPerSegment"),
    )


def _single_dim(obj: Mapping[str, Any]) -> PartitionsSpec:
    return SingleDimensionPartitionsSpec(
        _or(obj.get("partitionDimension"), ""),
        obj.get("targetRowsPerSegment"),
        obj.get("maxRowsPerSegment"),
    )


_READERS: Mapping[str, Callable[[Mapping[str, Any]], PartitionsSpec]] = {
    "dynamic": _dynamic,
    "hashed": _hashed,
    "range": _range,
    "single_dim": _single_dim,
}
