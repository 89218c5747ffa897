"""Volumes, tiers and the coordinator's dynamic configuration (Druid's historicals, tiers and
``CoordinatorDynamicConfig``, for a lake).

A **volume** is a place that holds loaded copies of segments — a local NVMe directory on a
Spark worker, a premium bucket, an archive bucket — playing the part of a Druid historical.
A **tier** is a named group of volumes; load rules say how many copies of a segment each tier
keeps, and readers prefer a copy in the tier they ask for. A volume's ``priority`` orders
tiers (the tier of the highest-priority volume a rule names gets a segment's first copy), as
``druid.server.priority`` does.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from segmentlake.errors import SpecError

__all__ = [
    "CoordinatorConfig",
    "CopyState",
    "LoadReason",
    "Volume",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class CopyState(enum.IntEnum):
    """Where a segment's copy on a volume is: in the volume (``LOADED``), queued to be copied
    there (``LOADING``), or queued to be deleted (``DROPPING``; readers no longer use it)."""

    LOADED = 0
    LOADING = 1
    DROPPING = 2


class LoadReason(enum.IntEnum):
    """Why a copy is being loaded: which share of a volume's load queue it uses."""

    LOAD = 0  # a first copy, a replica or a broadcast copy
    DECOMMISSION = 1  # moving off a decommissioning volume
    BALANCE = 2  # a balancing move


@dataclass(frozen=True, slots=True)
class Volume:
    """A volume of a tier: ``path`` holds one Delta table per datasource with the rows of the
    segments loaded there; ``capacity_bytes`` bounds the loaded segments' sizes. A
    ``decommissioning`` volume takes no new copies and its copies move to other volumes of
    its tier (Druid's ``decommissioningNodes``).

    >>> Volume("nvme-1", "hot", "/mnt/nvme1/segmentlake", 500 * 2**30, priority=10)
    ... # doctest: +ELLIPSIS
    Volume(name='nvme-1', tier='hot', ...)
    """

    name: str
    tier: str
    path: str
    capacity_bytes: int
    decommissioning: bool = False
    priority: int = 0

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("tier", self.tier)):
            if not isinstance(value, str) or not _NAME.match(value):
                raise SpecError(
                    f"volume {label} {value!r} is not a valid name; use 1-128 letters, digits, "
                    "'_', '.' or '-', starting with a letter or digit (e.g. 'hot-1')"
                )
        if not isinstance(self.path, str) or not self.path.strip():
            raise SpecError(f"volume {self.name!r} needs a non-empty path, got {self.path!r}")
        if not _is_int(self.capacity_bytes) or self.capacity_bytes <= 0:
            raise SpecError(
                f"volume {self.name!r} capacity_bytes must be a positive integer, got "
                f"{self.capacity_bytes!r}"
            )
        if not isinstance(self.decommissioning, bool):
            raise SpecError(f"volume {self.name!r} decommissioning must be true or false")
        if not _is_int(self.priority):
            raise SpecError(f"volume {self.name!r} priority must be an integer")

    def to_json(self) -> dict[str, Any]:
        """Druid-style JSON (camelCase keys)."""
        return {
            "name": self.name,
            "tier": self.tier,
            "path": self.path,
            "capacityBytes": self.capacity_bytes,
            "decommissioning": self.decommissioning,
            "priority": self.priority,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Volume:
        """The volume of :meth:`to_json`'s JSON; unknown keys are an error."""
        known = {"name", "tier", "path", "capacityBytes", "decommissioning", "priority"}
        unknown = set(data) - known
        if unknown:
            raise SpecError(f"unknown volume keys {sorted(unknown)}; known: {sorted(known)}")
        missing = {"name", "tier", "path", "capacityBytes"} - set(data)
        if missing:
            raise SpecError(f"volume JSON lacks {sorted(missing)}: {dict(data)}")
        return cls(
            name=data["name"],
            tier=data["tier"],
            path=data["path"],
            capacity_bytes=data["capacityBytes"],
            decommissioning=data.get("decommissioning", False),
            priority=data.get("priority", 0),
        )


_CONFIG_KEYS = {
    "maxSegmentsInNodeLoadingQueue": "max_segments_in_node_loading_queue",
    "loadingMinPercent": "loading_min_percent",
    "decommissioningMinPercent": "decommissioning_min_percent",
    "balancingMinPercent": "balancing_min_percent",
    "maxSegmentsToMove": "max_segments_to_move",
    "segmentLoadingMaxSecondsBeforeAlerting": "segment_loading_max_seconds_before_alerting",
    "balancerMinCostReduction": "balancer_min_cost_reduction",
    "killUnusedAfterSeconds": "kill_unused_after_seconds",
    "seed": "seed",
}


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The coordinator's dynamic configuration, with Druid's names in JSON.

    * ``max_segments_in_node_loading_queue`` — a volume's load queue limit (loads in flight);
      it is split into minimum shares: ``loading_min_percent`` for first copies and replicas,
      ``decommissioning_min_percent`` for moves off decommissioning volumes and
      ``balancing_min_percent`` for balancing moves. A share another phase does not need this
      run is free for the others.
    * ``max_segments_to_move`` — balancing moves per tier per run.
    * ``segment_loading_max_seconds_before_alerting`` — a segment with no loaded copy for
      longer than this raises an alert.
    * ``balancer_min_cost_reduction`` — a balancing move must cut the segment's normalized
      cost by at least this fraction; below it a move is noise, and taking it would make runs
      trade segments back and forth (apache/druid#3354).
    * ``kill_unused_after_seconds`` — when set, each run kills (deletes) segments unused for
      longer than this (Druid's ``druid.coordinator.kill.*``); off by default, as in Druid.
    """

    max_segments_in_node_loading_queue: int = 500
    loading_min_percent: int = 70
    decommissioning_min_percent: int = 10
    balancing_min_percent: int = 20
    max_segments_to_move: int = 100
    segment_loading_max_seconds_before_alerting: float = 900.0
    balancer_min_cost_reduction: float = 0.01
    kill_unused_after_seconds: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not _is_int(self.max_segments_in_node_loading_queue) or (
            self.max_segments_in_node_loading_queue < 1
        ):
            raise SpecError(
                "maxSegmentsInNodeLoadingQueue must be a positive integer, got "
                f"{self.max_segments_in_node_loading_queue!r}"
            )
        percents = (
            self.loading_min_percent,
            self.decommissioning_min_percent,
            self.balancing_min_percent,
        )
        if not all(_is_int(p) and 0 <= p <= 100 for p in percents) or sum(percents) > 100:
            raise SpecError(
                f"loading/decommissioning/balancingMinPercent must be integers in 0..100 "
                f"summing to at most 100, got {percents}; Druid's defaults are (70, 10, 20)"
            )
        if not _is_int(self.max_segments_to_move) or self.max_segments_to_move < 0:
            raise SpecError(
                f"maxSegmentsToMove must be a non-negative integer, got "
                f"{self.max_segments_to_move!r}"
            )
        if not isinstance(self.segment_loading_max_seconds_before_alerting, int | float) or (
            self.segment_loading_max_seconds_before_alerting < 0
        ):
            raise SpecError("segmentLoadingMaxSecondsBeforeAlerting must be a number >= 0")
        if not isinstance(self.balancer_min_cost_reduction, int | float) or not (
            0 <= self.balancer_min_cost_reduction < 1
        ):
            raise SpecError(
                "balancerMinCostReduction must be a fraction in [0, 1), got "
                f"{self.balancer_min_cost_reduction!r}"
            )
        kill = self.kill_unused_after_seconds
        if kill is not None and (not isinstance(kill, int | float) or kill < 0):
            raise SpecError(f"killUnusedAfterSeconds must be null or >= 0, got {kill!r}")

    def queue_share(self, reason: LoadReason) -> int:
        """The slots of a volume's load queue guaranteed to ``reason``."""
        percent = (
            self.loading_min_percent,
            self.decommissioning_min_percent,
            self.balancing_min_percent,
        )[reason]
        return self.max_segments_in_node_loading_queue * percent // 100

    def to_json(self) -> dict[str, Any]:
        values = asdict(self)
        return {json_key: values[attr] for json_key, attr in _CONFIG_KEYS.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CoordinatorConfig:
        """The config of Druid-style JSON; missing keys keep their defaults."""
        unknown = set(data) - set(_CONFIG_KEYS)
        if unknown:
            raise SpecError(
                f"unknown coordinator config keys {sorted(unknown)}; known: {sorted(_CONFIG_KEYS)}"
            )
        return cls(**{_CONFIG_KEYS[k]: v for k, v in data.items()})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
