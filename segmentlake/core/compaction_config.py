"""A datasource's compaction configuration (kept in the metadata as JSON) and the registry
that turns its ``type`` names into planners and selectors, so third-party ones plug in.

Example::

    CompactionConfig(
        planner=RatioPlanner(ratio=2.0, max_segments_per_job=16),
        selectors=(FingerprintSelector(max_rows_per_segment=1_000_000),),
    )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from segmentlake.core.compaction_planning import (
    CompactionPlanner,
    CompactionSelector,
    FingerprintSelector,
    MaskedRowsSelector,
    RatioPlanner,
)
from segmentlake.errors import SpecError

__all__ = [
    "CompactionConfig",
    "planner_from_json",
    "register_planner",
    "register_selector",
    "selector_from_json",
]

PlannerFactory = Callable[[Mapping[str, Any]], CompactionPlanner]
SelectorFactory = Callable[[Mapping[str, Any]], CompactionSelector]


def _ratio_planner(data: Mapping[str, Any]) -> CompactionPlanner:
    groups = tuple((str(name), limit) for name, limit in data.get("groups", [["default", None]]))
    return RatioPlanner(
        ratio=float(data.get("ratio", 3.0)),
        max_segments_per_job=int(data.get("maxSegmentsPerJob", 32)),
        max_rows_per_segment=int(data.get("maxRowsPerSegment", 5_000_000)),
        groups=groups,
    )


def _fingerprint_selector(data: Mapping[str, Any]) -> CompactionSelector:
    return FingerprintSelector(max_rows_per_segment=int(data.get("maxRowsPerSegment", 5_000_000)))


def _masked_rows_selector(data: Mapping[str, Any]) -> CompactionSelector:
    return MaskedRowsSelector(threshold=float(data.get("threshold", 0.5)))


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
    if not isinstance(data, Mapping) or "type" not in data:
        raise SpecError(f"a compaction {kind} must be an object with a 'type', got {data!r}")
    factory = registry.get(data["type"])
    if factory is None:
        raise SpecError(
            f"unknown compaction {kind} type {data['type']!r}; known: {sorted(registry)} "
            f"(register others with register_{kind})"
        )
    return factory(data)


def planner_from_json(data: Any) -> CompactionPlanner:
    planner: CompactionPlanner = _build("planner", _PLANNERS, data)
    return planner


def selector_from_json(data: Any) -> CompactionSelector:
    selector: CompactionSelector = _build("selector", _SELECTORS, data)
    return selector


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """How the manager compacts one datasource: the system planner, the selectors, and the
    defaults of user compactions (``max_rows_per_segment`` of outputs, ``max_segments_per_job``
    of their intermediate jobs)."""

    planner: CompactionPlanner = field(default_factory=RatioPlanner)
    selectors: tuple[CompactionSelector, ...] = ()
    max_rows_per_segment: int = 5_000_000
    max_segments_per_job: int = 32

    def __post_init__(self) -> None:
        names = [s.name for s in self.selectors]
        if len(set(names)) != len(names):
            raise SpecError(f"selector names must be unique in a config, got {names}")
        if self.max_segments_per_job < 2:
            raise SpecError(f"max_segments_per_job must be >= 2, got {self.max_segments_per_job}")
        if self.max_rows_per_segment < 1:
            raise SpecError(f"max_rows_per_segment must be >= 1, got {self.max_rows_per_segment}")

    def to_json(self) -> dict[str, Any]:
        return {
            "planner": dict(self.planner.config()),
            "selectors": [dict(s.config()) for s in self.selectors],
            "maxRowsPerSegment": self.max_rows_per_segment,
            "maxSegmentsPerJob": self.max_segments_per_job,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompactionConfig:
        if not isinstance(data, Mapping):
            raise SpecError(f"a compaction config must be an object, got {data!r}")
        return cls(
            planner=planner_from_json(data.get("planner", {"type": "ratio"})),
            selectors=tuple(selector_from_json(s) for s in data.get("selectors", [])),
            max_rows_per_segment=int(data.get("maxRowsPerSegment", 5_000_000)),
            max_segments_per_job=int(data.get("maxSegmentsPerJob", 32)),
        )
