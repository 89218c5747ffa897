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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from segmentlake.core.spec_reader import (
    INT32_MAX,
    check_flag,
    check_int,
    check_number,
    safe_repr,
)
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
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise SpecError(
                    f"volume {label} {safe_repr(value)} is not a valid name; use 1-128 letters, "
                    "digits, '_', '.' or '-', starting with a letter or digit (e.g. 'hot-1')"
                )
        where = f"volume {self.name!r}"
        if not isinstance(self.path, str) or not self.path.strip():
            raise SpecError(f"{where} needs a non-empty path, got {safe_repr(self.path)}")
        # Sizes are BIGINTs (the coordinator sums them in int64 arrays): check_int's bound.
        check_int(self.capacity_bytes, f"{where} capacity_bytes (capacityBytes)", minimum=1)
        check_flag(self.decommissioning, f"{where} decommissioning")
        # druid.server.priority is a Java int.
        check_int(self.priority, f"{where} priority", minimum=-INT32_MAX - 1, maximum=INT32_MAX)

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
        _check_keys(data, known, "volume")
        missing = {"name", "tier", "path", "capacityBytes"} - set(data)
        if missing:
            raise SpecError(f"volume JSON lacks {sorted(missing)}: {safe_repr(data)}")
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
        check_int(
            self.max_segments_in_node_loading_queue,
            "maxSegmentsInNodeLoadingQueue",
            minimum=1,
            maximum=INT32_MAX,
        )
        percents = {
            "loadingMinPercent": self.loading_min_percent,
            "decommissioningMinPercent": self.decommissioning_min_percent,
            "balancingMinPercent": self.balancing_min_percent,
        }
        for key, percent in percents.items():
            check_int(percent, key, minimum=0, maximum=100)
        if sum(percents.values()) > 100:
            raise SpecError(
                "loadingMinPercent, decommissioningMinPercent and balancingMinPercent must be "
                f"integers summing to at most 100, got {tuple(percents.values())}; Druid's "
                "defaults are (70, 10, 20)"
            )
        check_int(self.max_segments_to_move, "maxSegmentsToMove", minimum=0, maximum=INT32_MAX)
        check_number(
            self.segment_loading_max_seconds_before_alerting,
            "segmentLoadingMaxSecondsBeforeAlerting",
            minimum=0,
        )
        check_number(
            self.balancer_min_cost_reduction, "balancerMinCostReduction", minimum=0, below=1
        )
        if self.kill_unused_after_seconds is not None:
            check_number(self.kill_unused_after_seconds, "killUnusedAfterSeconds", minimum=0)
        # numpy seeds its generator with non-negative integers.
        check_int(self.seed, "seed", minimum=0)

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
        _check_keys(data, _CONFIG_KEYS, "coordinator config")
        return cls(**{_CONFIG_KEYS[k]: v for k, v in data.items()})


def _check_keys(data: object, known: Iterable[str], what: str) -> None:
    """``data`` is a JSON object with only ``known`` keys."""
    if not isinstance(data, Mapping):
        raise SpecError(f"{what} JSON must be an object, got {safe_repr(data)}")
    accepted = set(known)
    unknown = sorted(k if isinstance(k, str) else safe_repr(k) for k in data if k not in accepted)
    if unknown:
        raise SpecError(f"unknown {what} keys {unknown}; known: {sorted(accepted)}")
