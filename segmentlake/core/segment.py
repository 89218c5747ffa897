"""Segment identity (``SegmentId``) and the segment descriptor (``DataSegment``).

A segment id is Druid's ``datasource_start_end_version[_partitionNum]`` (the partition number is
omitted when 0). A ``DataSegment`` is the metadata record of one immutable segment; its
``load_spec`` says where its rows are and is kept apart from its id, so a segment can be
re-published under a new id or version (concurrent append + replace) without rewriting rows.
"""

from __future__ import annotations

import copy
import json
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from segmentlake.core.interval import Interval, format_timestamp, parse_timestamp, to_millis
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import NumberedShardSpec, ShardSpec, shard_spec_from_json
from segmentlake.core.spec_reader import safe_repr
from segmentlake.errors import SpecError

__all__ = ["DataSegment", "SegmentId"]


def _check_name(kind: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{kind} must be a non-empty string, got {safe_repr(value)}")


@dataclass(frozen=True, slots=True)
class SegmentId:
    """The identity of a segment: datasource, interval, version and partition number."""

    datasource: str
    interval: Interval
    version: str
    partition_num: int = 0
    # The string form, made on first use: a publish of 10^4 segments asks for each several
    # times, and formatting two timestamps costs more than the rest of the id.
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name("datasource", self.datasource)
        _check_name("version", self.version)
        if not isinstance(self.partition_num, int) or self.partition_num < 0:
            raise SpecError(f"partition_num must be an int >= 0, got {self.partition_num!r}")

    def __str__(self) -> str:
        text = self._text
        if text is None:
            base = (
                f"{self.datasource}_{format_timestamp(self.interval.start_millis)}_"
                f"{format_timestamp(self.interval.end_millis)}_{self.version}"
            )
            text = base if self.partition_num == 0 else f"{base}_{self.partition_num}"
            object.__setattr__(self, "_text", text)
        return text

    @classmethod
    def parse(cls, text: str, datasource: str | None = None) -> SegmentId:
        """Parse Druid's string form. Pass ``datasource`` when it may contain ``_`` followed by
        something that looks like a timestamp; otherwise the first timestamp pair is taken.

        >>> str(SegmentId.parse("wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1_3"))
        'wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1_3'
        """
        if not isinstance(text, str):
            raise SpecError(f"a segment id must be a string, got {text!r}")
        if datasource is not None:
            if not text.startswith(datasource + "_"):
                raise SpecError(f"segment id {text!r} does not start with '{datasource}_'")
            parsed = cls._parse_after(datasource, text[len(datasource) + 1 :].split("_"))
        else:
            parts = text.split("_")
            parsed = None
            # First look for timestamps in the exact form Druid writes in ids
            # ("2024-01-01T00:00:00.000Z"), so a datasource such as "events_20240101" or
            # "daily_2024-01-01" is not taken for a start timestamp; then accept any ISO form.
            for strict in (True, False):
                for k in range(1, len(parts) - 2):
                    parsed = cls._parse_after("_".join(parts[:k]), parts[k:], strict=strict)
                    if parsed is not None:
                        break
                if parsed is not None:
                    break
        if parsed is None:
            raise SpecError(
                f"malformed segment id {text!r}; expected "
                "'<datasource>_<start>_<end>_<version>[_<partition>]' with ISO timestamps"
            )
        return parsed

    @classmethod
    def _parse_after(
        cls, datasource: str, parts: list[str], *, strict: bool = False
    ) -> SegmentId | None:
        if len(parts) < 3 or not datasource:
            return None
        try:
            start, end = parse_timestamp(parts[0]), parse_timestamp(parts[1])
        except SpecError:
            return None
        if strict and (format_timestamp(start), format_timestamp(end)) != (parts[0], parts[1]):
            return None
        rest = parts[2:]
        partition = 0
        if len(rest) > 1 and rest[-1].isdigit():
            partition = int(rest.pop())
        version = "_".join(rest)
        if not version or to_millis(end) < to_millis(start):
            return None
        return cls(datasource, Interval(start, end), version, partition)


_FIELD_NAMES = (
    "datasource",
    "interval",
    "version",
    "shard_spec",
    "load_spec",
    "dimensions",
    "metrics",
    "size",
    "num_rows",
    "last_compaction_state",
    "binary_version",
    "schema",
)


@dataclass(frozen=True, slots=True, eq=False)
class DataSegment:
    """The metadata record of one immutable segment (Druid's segment descriptor).

    Equality and hashing go by :attr:`id`, as in Druid. ``load_spec`` locates the rows
    (``{"type": "delta", "path": ..., "segment": ...}``); ``last_compaction_state`` is the
    fingerprint of the compaction spec that produced the segment, if any; ``schema`` says
    how its metric columns were aggregated (what compaction re-aggregates them with).
    """

    datasource: str
    interval: Interval
    version: str
    shard_spec: ShardSpec = field(default_factory=lambda: NumberedShardSpec(0, 0))
    load_spec: Mapping[str, Any] = field(default_factory=dict)
    dimensions: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    size: int = 0
    num_rows: int = 0
    last_compaction_state: Mapping[str, Any] | None = None
    binary_version: int = 9
    schema: SegmentSchema | None = None
    # The id, made on first use (it is asked for again and again while publishing).
    _id: SegmentId | None = field(default=None, init=False, repr=False, compare=False)
    # The hash, made on first use: a timeline puts every segment in several sets and dicts,
    # and each lookup built and hashed a new identity tuple (~16,000 per append into busy chunks).
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name("datasource", self.datasource)
        _check_name("version", self.version)
        if not isinstance(self.interval, Interval):
            raise SpecError(f"interval must be an Interval, got {self.interval!r}")
        if not isinstance(self.shard_spec, ShardSpec):
            raise SpecError(f"shard_spec must be a ShardSpec, got {self.shard_spec!r}")
        if self.schema is not None and not isinstance(self.schema, SegmentSchema):
            raise SpecError(f"schema must be a SegmentSchema, got {self.schema!r}")
        for name in ("size", "num_rows", "binary_version"):
            value = getattr(self, name)
            _check_count(f"a segment's {name}", value)
            object.__setattr__(self, name, int(value))  # a numpy integer becomes an int
        if not isinstance(self.load_spec, Mapping):
            raise SpecError(f"load_spec must be a mapping, got {safe_repr(self.load_spec)}")
        state = self.last_compaction_state
        if state is not None and not isinstance(state, Mapping):
            raise SpecError(
                f"last_compaction_state must be a mapping or None, got {safe_repr(state)}"
            )
        for name in ("dimensions", "metrics"):
            _check_names(name, getattr(self, name))
        # Freeze (deep) copies of the mappings so a caller's later mutation, even of a nested
        # value such as a compaction state's partitionsSpec, cannot change a published record.
        object.__setattr__(self, "load_spec", MappingProxyType(_deep_copy(self.load_spec)))
        if self.last_compaction_state is not None:
            state = MappingProxyType(_deep_copy(self.last_compaction_state))
            object.__setattr__(self, "last_compaction_state", state)
        object.__setattr__(self, "dimensions", tuple(self.dimensions))
        object.__setattr__(self, "metrics", tuple(self.metrics))

    @classmethod
    def trusted(
        cls,
        *,
        datasource: str,
        interval: Interval,
        version: str,
        shard_spec: ShardSpec,
        load_spec: dict[str, Any],
        dimensions: tuple[str, ...],
        metrics: tuple[str, ...],
        size: int,
        num_rows: int,
        last_compaction_state: Mapping[str, Any] | None,
        binary_version: int,
        schema: SegmentSchema | None,
    ) -> DataSegment:
        """A segment from values already checked when it was published (its metadata
        record), built without checking and copying them again: a timeline of 10^6 segments
        is built in a third of the time. ``load_spec`` must be a dict no one else holds."""
        segment = object.__new__(cls)
        # The slots' own setters: a frozen dataclass refuses setattr, and object.__setattr__
        # by name costs several times as much (an inspection builds every segment).
        (
            set_datasource,
            set_interval,
            set_version,
            set_shard_spec,
            set_load_spec,
            set_dimensions,
            set_metrics,
            set_size,
            set_num_rows,
            set_state,
            set_binary_version,
            set_schema,
        ) = _SLOT_SETTERS
        set_datasource(segment, datasource)
        set_interval(segment, interval)
        set_version(segment, version)
        set_shard_spec(segment, shard_spec)
        set_load_spec(segment, MappingProxyType(load_spec))
        set_dimensions(segment, dimensions)
        set_metrics(segment, metrics)
        set_size(segment, size)
        set_num_rows(segment, num_rows)
        set_state(
            segment,
            None if last_compaction_state is None else MappingProxyType(last_compaction_state),
        )
        set_binary_version(segment, binary_version)
        set_schema(segment, schema)
        _set_id(segment, None)
        _set_hash(segment, None)
        return segment

    @property
    def id(self) -> SegmentId:
        found = self._id
        if found is None:
            found = SegmentId(
                self.datasource, self.interval, self.version, self.shard_spec.partition_num
            )
            _set_id(self, found)
        return found

    @property
    def is_tombstone(self) -> bool:
        return self.shard_spec.is_tombstone

    @property
    def rows_interval(self) -> Interval:
        """Where the segment's rows lie: its interval, or for a copy upgraded into a
        replacing chunk (concurrent append and replace), the interval of the segment it
        copies (``load_spec["interval"]``), which a finer chunk may not contain."""
        text = self.load_spec.get("interval")
        return Interval.parse(text) if isinstance(text, str) else self.interval

    def _identity(self) -> tuple[str, tuple[int, int], str, int]:
        return (self.datasource, self.interval.key, self.version, self.shard_spec.partition_num)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DataSegment):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        found = self._hash
        if found is None:
            found = hash(self._identity())
            _set_hash(self, found)
        return found

    def __repr__(self) -> str:
        return f"DataSegment({self.id})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A mappingproxy cannot be pickled (nor deep-copied); rebuild from plain dicts so
        # segments can be pickled, e.g. shipped to Spark executors.
        state = self.last_compaction_state
        return (
            type(self),
            (
                self.datasource,
                self.interval,
                self.version,
                self.shard_spec,
                dict(self.load_spec),
                self.dimensions,
                self.metrics,
                self.size,
                self.num_rows,
                None if state is None else dict(state),
                self.binary_version,
                self.schema,
            ),
        )

    def overshadows(self, other: DataSegment) -> bool:
        """Druid's segment overshadowing: a higher version over a contained interval, or, in the
        same chunk, a higher minor version over a contained root partition range."""
        if self.datasource != other.datasource or not self.interval.contains(other.interval):
            return False
        if self.version != other.version:
            return self.version > other.version
        return self.interval == other.interval and self.shard_spec.overshadows(other.shard_spec)

    def to_json(self) -> dict[str, Any]:
        """Druid's descriptor JSON (plus ``numRows``)."""
        return {
            "dataSource": self.datasource,
            "interval": str(self.interval),
            "version": self.version,
            "loadSpec": _deep_copy(self.load_spec),
            "dimensions": ",".join(self.dimensions),
            "metrics": ",".join(self.metrics),
            "shardSpec": self.shard_spec.to_json(),
            "lastCompactionState": (
                None
                if self.last_compaction_state is None
                else _deep_copy(self.last_compaction_state)
            ),
            "binaryVersion": self.binary_version,
            "schema": None if self.schema is None else self.schema.to_json(),
            "size": self.size,
            "numRows": self.num_rows,
            "identifier": str(self.id),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> DataSegment:
        """Inverse of :meth:`to_json`; also accepts a JSON string."""
        try:
            obj = json.loads(data) if isinstance(data, str) else data
        except ValueError as e:
            raise SpecError(f"segment descriptor is not valid JSON: {e}") from e
        if not isinstance(obj, Mapping):
            raise SpecError(f"segment descriptor must be a JSON object, got {obj!r}")
        missing = [key for key in ("dataSource", "interval", "version") if key not in obj]
        if missing:
            raise SpecError(f"segment descriptor lacks field {missing[0]!r}: {safe_repr(obj)}")
        # Checked here under their JSON names (the constructor names its own arguments).
        for key in ("dataSource", "version"):
            _check_name(f"segment descriptor field {key!r}", obj[key])
        for key in ("loadSpec", "lastCompactionState", "shardSpec"):
            if obj.get(key) is not None and not isinstance(obj[key], Mapping):
                raise SpecError(
                    f"segment descriptor field {key!r} must be a JSON object, got "
                    f"{safe_repr(obj[key])}"
                )
        return cls(
            datasource=obj["dataSource"],
            interval=Interval.parse(obj["interval"]),
            version=obj["version"],
            shard_spec=shard_spec_from_json(
                obj.get("shardSpec") or {"type": "numbered", "partitionNum": 0}
            ),
            load_spec=obj.get("loadSpec") or {},
            dimensions=_split(obj, "dimensions"),
            metrics=_split(obj, "metrics"),
            size=_count_field(obj, "size", 0),
            num_rows=_count_field(obj, "numRows", 0),
            last_compaction_state=obj.get("lastCompactionState"),
            binary_version=_count_field(obj, "binaryVersion", 9),
            schema=None if obj.get("schema") is None else SegmentSchema.from_json(obj["schema"]),
        )


# The slot descriptors' setters of DataSegment's fields, in _FIELD_NAMES order (trusted()).
_SLOT_SETTERS: tuple[Callable[[DataSegment, Any], None], ...] = tuple(
    getattr(DataSegment, name).__set__ for name in _FIELD_NAMES
)

# The cached id's slot setter (a frozen dataclass refuses plain assignment).
_set_id: Callable[[DataSegment, SegmentId | None], None] = vars(DataSegment)["_id"].__set__
_set_hash: Callable[[DataSegment, int | None], None] = vars(DataSegment)["_hash"].__set__

_SCALARS = (str, int, float, bool, type(None))


def _deep_copy(mapping: Mapping[str, Any]) -> dict[str, Any]:
    # A flat mapping of scalars (the usual load spec) needs no deep copy; building 10^5
    # segments from metadata rows spends most of its time here otherwise.
    flat = dict(mapping)
    if all(isinstance(v, _SCALARS) for v in flat.values()):
        return flat
    return copy.deepcopy(flat)


def _split(obj: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A descriptor's column list: Druid's comma-separated string, or a JSON list of names."""
    value = obj.get(key)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise SpecError(
        f"segment descriptor field {key!r} must be a comma-separated string or a list of "
        f"non-empty names, got {safe_repr(value)}"
    )


def _count_field(obj: Mapping[str, Any], key: str, default: int) -> int:
    """A descriptor's integer field (JSON null: absent)."""
    value = obj.get(key)
    if value is None:
        return default
    _check_count(f"segment descriptor field {key!r}", value)
    return int(value)


def _check_count(name: str, value: object) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
        raise SpecError(f"{name} must be an integer >= 0, got {safe_repr(value)}")


def _check_names(name: str, value: object) -> None:
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise SpecError(f"a segment's {name} must be a tuple of names, got {safe_repr(value)}")
    wrong = [v for v in value if not isinstance(v, str) or not v]
    if wrong:
        raise SpecError(f"a segment's {name} must be non-empty strings, got {safe_repr(wrong[:3])}")
