"""A datasource's compaction configuration (kept in the metadata as JSON) and the registry
that turns its ``type`` names into planners and selectors, so third-party ones plug in.

Example::

    CompactionConfig(
        planner=RatioPlanner(ratio=2.0, max_segments_per_job=16),
        selectors=(FingerprintSelector(max_rows_per_segment=1_000_000),),
        segment_granularity=Granularity.DAY,  # the target: majors re-chunk what differs
        partitions_spec=HashedPartitionsSpec(target_rows_per_segment=5_000_000),
    )
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from segmentlake.core.compaction_jobs import DEFAULT_GROUP
from segmentlake.core.compaction_planning import (
    CompactionPlanner,
    CompactionSelector,
    FingerprintSelector,
    MaskedRowsSelector,
    RatioPlanner,
)
from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import MIN_MILLIS, Period
from segmentlake.core.partitions_spec import (
    HashedPartitionsSpec,
    PartitionsSpec,
    partitions_spec_from_dict,
)
from segmentlake.core.spec_reader import check_int, check_number, int_problem, safe_repr
from segmentlake.errors import SpecError

__all__ = [
    "CompactionConfig",
    "planner_from_json",
    "register_planner",
    "register_selector",
    "selector_from_json",
]

T = TypeVar("T")

PlannerFactory = Callable[[Mapping[str, Any]], CompactionPlanner]
SelectorFactory = Callable[[Mapping[str, Any]], CompactionSelector]

_DEFAULT_MAX_ROWS = 5_000_000
_DEFAULT_MAX_SEGMENTS = 32


def _keys(data: Mapping[str, Any], where: str, known: Iterable[str]) -> None:
    """Refuse unknown keys (a typo would otherwise leave a setting at its default)."""
    accepted = {"type", *known}
    unknown = sorted(k if isinstance(k, str) else safe_repr(k) for k in data if k not in accepted)
    if unknown:
        raise SpecError(f"{where}: unknown keys {unknown}; accepted: {sorted(accepted)}")


def _int(data: Mapping[str, Any], key: str, where: str, default: int, minimum: int) -> int:
    value = data.get(key)
    return default if value is None else check_int(value, f"{where}.{key}", minimum=minimum)


def _groups(value: Any, where: str) -> tuple[tuple[str, int | None], ...]:
    """``[[name, max input bytes or null], ...]``."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(g, list | tuple)
        and len(g) == 2
        and isinstance(g[0], str)
        and g[0]
        and (g[1] is None or int_problem(g[1], minimum=1) is None)
        for g in value
    ):
        raise SpecError(
            f"{where}.groups must be [name, max input bytes or null] pairs, e.g. "
            f'[["small", 100000000], ["large", null]]; got {safe_repr(value)}'
        )
    return tuple((name, limit) for name, limit in value)


def _ratio_planner(data: Mapping[str, Any]) -> CompactionPlanner:
    where = "planner (ratio)"
    _keys(data, where, ("ratio", "maxSegmentsPerJob", "maxRowsPerSegment", "groups"))
    ratio = data.get("ratio")
    return RatioPlanner(
        ratio=3.0 if ratio is None else float(check_number(ratio, f"{where}.ratio", minimum=1.0)),
        max_segments_per_job=_int(data, "maxSegmentsPerJob", where, _DEFAULT_MAX_SEGMENTS, 2),
        max_rows_per_segment=_int(data, "maxRowsPerSegment", where, _DEFAULT_MAX_ROWS, 1),
        groups=_groups(_or(data.get("groups"), [[DEFAULT_GROUP, None]]), where),
    )


def _fingerprint_selector(data: Mapping[str, Any]) -> CompactionSelector:
    where = "selector (fingerprint)"
    _keys(data, where, ("maxRowsPerSegment",))
    rows = _int(data, "maxRowsPerSegment", where, _DEFAULT_MAX_ROWS, 1)
    return FingerprintSelector(max_rows_per_segment=rows)


def _masked_rows_selector(data: Mapping[str, Any]) -> CompactionSelector:
    where = "selector (masked_rows)"
    _keys(data, where, ("threshold",))
    threshold = data.get("threshold")
    if threshold is not None:
        check_number(threshold, f"{where}.threshold", minimum=0.0, maximum=1.0)
    return MaskedRowsSelector(threshold=0.5 if threshold is None else float(threshold))


def _at(where: str, read: Callable[[Any], T], data: Any) -> T:
    """``read(data)``, its error prefixed with where ``data`` is."""
    try:
        return read(data)
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from None


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


_PLANNERS: dict[str, PlannerFactory] = {"ratio": _ratio_planner}
_SELECTORS: dict[str, SelectorFactory] = {
    "fingerprint": _fingerprint_selector,
    "masked_rows": _masked_rows_selector,
}


def register_planner(type_name: str, factory: PlannerFactory) -> None:
    """Make ``{"type": type_name, ...}`` in a compaction config build a planner with
    ``factory(json)``; its ``config()`` must return that JSON back."""
    _PLANNERS[type_name] = factory


def register_selector(type_name: str, factory: SelectorFactory) -> None:
    """Like :func:`register_planner`, for selectors."""
    _SELECTORS[type_name] = factory


def _build(kind: str, registry: Mapping[str, Callable[[Mapping[str, Any]], Any]], data: Any) -> Any:
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise SpecError(
            f"a compaction {kind} must be an object with a 'type' name, got {safe_repr(data)}"
        )
    factory = registry.get(data["type"])
    if factory is None:
        raise SpecError(
            f"unknown compaction {kind} type {data['type']!r}; known: {sorted(registry)} "
            f"(register others with register_{kind})"
        )
    try:
        return factory(data)
    except SpecError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
        # A plugin's factory that does not check its JSON: still a bad-input error, named.
        raise SpecError(f"compaction {kind} {data['type']!r}: bad JSON ({safe_repr(e)})") from e


def planner_from_json(data: Any) -> CompactionPlanner:
    planner: CompactionPlanner = _build("planner", _PLANNERS, data)
    return planner


def selector_from_json(data: Any) -> CompactionSelector:
    selector: CompactionSelector = _build("selector", _SELECTORS, data)
    return selector


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """How the manager compacts one datasource: the system planner, the selectors, the
    defaults of user compactions (``max_rows_per_segment`` of outputs, ``max_segments_per_job``
    of their intermediate jobs), and the target chunking: with ``segment_granularity`` or
    ``partitions_spec`` (hashed, range or single_dim) set, the manager schedules a MAJOR
    compaction of a chunk whose granularity differs, or whose rows were mostly not made with
    that target (Druid's auto-compaction ``granularitySpec`` / ``partitionsSpec``); a
    ``dynamic`` partitions spec is only a target next to a ``segment_granularity`` (each
    chunk re-chunked, rolled up whole and cut to its ``maxRowsPerSegment``).
    ``skip_offset_from_latest`` (Druid's ``skipOffsetFromLatest``) leaves the newest data
    to the appends still arriving: no system compaction (planner or major) touches a chunk
    ending after the datasource's latest data end minus that period; user compactions and
    selectors, which are asked for, still do."""

    planner: CompactionPlanner = field(default_factory=RatioPlanner)
    selectors: tuple[CompactionSelector, ...] = ()
    max_rows_per_segment: int = _DEFAULT_MAX_ROWS
    max_segments_per_job: int = _DEFAULT_MAX_SEGMENTS
    segment_granularity: Granularity | None = None
    partitions_spec: PartitionsSpec | None = None
    skip_offset_from_latest: Period | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.planner, CompactionPlanner):
            raise SpecError(f"planner must be a CompactionPlanner, got {safe_repr(self.planner)}")
        if not isinstance(self.selectors, list | tuple) or not all(
            isinstance(s, CompactionSelector) for s in self.selectors
        ):
            raise SpecError(
                f"selectors must be a tuple of CompactionSelectors, got {safe_repr(self.selectors)}"
            )
        object.__setattr__(self, "selectors", tuple(self.selectors))
        names = [s.name for s in self.selectors]
        if len(set(names)) != len(names):
            raise SpecError(f"selector names must be unique in a config, got {names}")
        check_int(self.max_segments_per_job, "max_segments_per_job", minimum=2)
        check_int(self.max_rows_per_segment, "max_rows_per_segment", minimum=1)
        if self.segment_granularity is not None and not isinstance(
            self.segment_granularity, Granularity
        ):
            object.__setattr__(
                self, "segment_granularity", Granularity.parse(self.segment_granularity)
            )
        spec = self.partitions_spec
        if spec is not None and not spec.perfect_rollup and self.segment_granularity is None:
            raise SpecError(
                "a compaction config's partitionsSpec is a major compaction's: 'hashed', "
                f"'range' or 'single_dim', or {spec.type_name!r} next to a segmentGranularity "
                "(without one, the planner's minor compactions already cut segments to "
                "maxRowsPerSegment)"
            )
        offset = self.skip_offset_from_latest
        if offset is not None and not isinstance(offset, Period):
            object.__setattr__(self, "skip_offset_from_latest", Period.parse(offset))

    @property
    def major_target(self) -> bool:
        """Whether the manager re-chunks chunks that differ from a target (majors)."""
        return self.segment_granularity is not None or self.partitions_spec is not None

    def skip_cutoff(self, latest_end_ms: int) -> int | None:
        """The end after which a chunk is left to the appends (None: none is), for data
        whose latest end is ``latest_end_ms``."""
        if self.skip_offset_from_latest is None:
            return None
        try:
            return self.skip_offset_from_latest.add_to(latest_end_ms, -1)
        except SpecError:  # reaching before year 1: every chunk is recent
            return MIN_MILLIS

    def major_partitions(self) -> PartitionsSpec:
        """The partitioning a major compaction writes (hashed by default, as lake.compact)."""
        return self.partitions_spec or HashedPartitionsSpec()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "planner": dict(self.planner.config()),
            "selectors": [dict(s.config()) for s in self.selectors],
            "maxRowsPerSegment": self.max_rows_per_segment,
            "maxSegmentsPerJob": self.max_segments_per_job,
        }
        if self.segment_granularity is not None:
            data["segmentGranularity"] = self.segment_granularity.name
        if self.partitions_spec is not None:
            data["partitionsSpec"] = self.partitions_spec.to_json()
        if self.skip_offset_from_latest is not None:
            data["skipOffsetFromLatest"] = self.skip_offset_from_latest.to_iso()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompactionConfig:
        if not isinstance(data, Mapping):
            raise SpecError(f"a compaction config must be an object, got {safe_repr(data)}")
        where = "compaction config"
        keys = (
            "planner",
            "selectors",
            "maxRowsPerSegment",
            "maxSegmentsPerJob",
            "segmentGranularity",
            "partitionsSpec",
            "skipOffsetFromLatest",
        )
        unknown = sorted(k if isinstance(k, str) else safe_repr(k) for k in data if k not in keys)
        if unknown:
            raise SpecError(f"{where}: unknown keys {unknown}; accepted: {sorted(keys)}")
        selectors = _or(data.get("selectors"), [])
        if not isinstance(selectors, list | tuple):
            raise SpecError(f"{where}.selectors must be a list, got {safe_repr(selectors)}")
        planner = _or(data.get("planner"), {"type": "ratio"})
        return cls(
            planner=_at(f"{where}.planner", planner_from_json, planner),
            selectors=tuple(
                _at(f"{where}.selectors[{i}]", selector_from_json, s)
                for i, s in enumerate(selectors)
            ),
            max_rows_per_segment=_int(data, "maxRowsPerSegment", where, _DEFAULT_MAX_ROWS, 1),
            max_segments_per_job=_int(data, "maxSegmentsPerJob", where, _DEFAULT_MAX_SEGMENTS, 2),
            segment_granularity=_at(
                f"{where}.segmentGranularity",
                _optional(Granularity.parse),
                data.get("segmentGranularity"),
            ),
            partitions_spec=_at(
                f"{where}.partitionsSpec",
                _optional(partitions_spec_from_dict),
                data.get("partitionsSpec"),
            ),
            skip_offset_from_latest=_at(
                f"{where}.skipOffsetFromLatest",
                _optional(Period.parse),
                data.get("skipOffsetFromLatest"),
            ),
        )


def _optional(read: Callable[[Any], T]) -> Callable[[Any], T | None]:
    return lambda value: None if value is None else read(value)
