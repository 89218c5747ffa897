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
    check_path,
    safe_repr,
)
from segmentlake.errors import SpecError

__all__ = [
    "CoordinatorConfig",
    "CopyState",
    "LoadReason",
    "Volume",
    "floor_log5",
    "split_queue_shares",
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
        check_path(self.path, f"{where} path")
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
    "smartSegmentLoading": "smart_segment_loading",
    "loadingMinPercent": "loading_min_percent",
    "decommissioningMinPercent": "decommissioning_min_percent",
    "balancingMinPercent": "balancing_min_percent",
    "numBestServersChoosingFunction": "num_best_servers",
    "maxSegmentsToMove": "max_segments_to_move",
    "replicationThrottleLimit": "replication_throttle_limit",
    "segmentLoadingMaxSecondsBeforeAlerting": "segment_loading_max_seconds_before_alerting",
    "balancerMinCostReduction": "balancer_min_cost_reduction",
    "killUnusedAfterSeconds": "kill_unused_after_seconds",
    "markSegmentAsUnusedDelayMillis": "mark_segment_as_unused_delay_millis",
    "seed": "seed",
}
# The three queue shares, in LoadReason order, with their defaults: a share left out takes
# its part of what the given ones leave, in these proportions.
_SHARE_KEYS = ("loadingMinPercent", "decommissioningMinPercent", "balancingMinPercent")
_SHARE_DEFAULTS = (70, 10, 20)
# Moves off decommissioning volumes never take more than this share: loading must go on.
_DECOMMISSIONING_MAX_PERCENT = 70


def split_queue_shares(
    loading: int | None, decommissioning: int | None, balancing: int | None
) -> tuple[int, int, int]:
    """The three queue shares (percent, summing to 100) from those given (``None``: not
    given): none given, the defaults 70/10/20; one given, the other two split the rest in
    their default proportions; two given, the third is what they leave; all three given,
    they must sum to 100. A :class:`SpecError` names the wrong share and the right range."""
    given = (loading, decommissioning, balancing)
    for key, percent in zip(_SHARE_KEYS, given, strict=True):
        if percent is not None:
            check_int(percent, key, minimum=0, maximum=100)
    if decommissioning is not None and decommissioning > _DECOMMISSIONING_MAX_PERCENT:
        raise SpecError(
            f"decommissioningMinPercent must be at most {_DECOMMISSIONING_MAX_PERCENT}, got "
            f"{decommissioning}; loading and balancing need the rest of the queue"
        )
    known = [i for i, p in enumerate(given) if p is not None]
    rest = 100 - sum(p for p in given if p is not None)
    named = " + ".join(f"{_SHARE_KEYS[i]} {given[i]}" for i in known)
    if rest < 0:
        raise SpecError(
            f"the load queue shares add up to more than 100: {named} = {100 - rest}; "
            "loadingMinPercent, decommissioningMinPercent and balancingMinPercent together "
            f"make 100 (defaults {', '.join(map(str, _SHARE_DEFAULTS))})"
        )
    shares = [p if p is not None else 0 for p in given]
    missing = [i for i in range(3) if given[i] is None]
    if not missing and rest:
        raise SpecError(
            f"the load queue shares must sum to 100, got {named} = {100 - rest}; give two of "
            "them and the third follows, or add the missing "
            f"{rest} to one of them (defaults {', '.join(map(str, _SHARE_DEFAULTS))})"
        )
    if len(missing) == 3:
        return _SHARE_DEFAULTS
    if len(missing) == 2:
        first, second = missing
        weight = _SHARE_DEFAULTS[first] + _SHARE_DEFAULTS[second]
        shares[first] = round(rest * _SHARE_DEFAULTS[first] / weight)
        shares[second] = rest - shares[first]
    elif len(missing) == 1:
        shares[missing[0]] = rest
    if shares[1] > _DECOMMISSIONING_MAX_PERCENT:
        raise SpecError(
            f"decommissioningMinPercent would be {shares[1]} (100 less {named}), above its "
            f"maximum of {_DECOMMISSIONING_MAX_PERCENT}; give loadingMinPercent and "
            f"balancingMinPercent at least {100 - _DECOMMISSIONING_MAX_PERCENT} together"
        )
    return shares[0], shares[1], shares[2]


def floor_log5(n: int) -> int:
    """``⌊log₅ n⌋`` for ``n ≥ 1`` in integers (``math.log(125, 5)`` is not exactly 3)."""
    k = 0
    while n >= 5:
        n //= 5
        k += 1
    return k


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The coordinator's dynamic configuration, with Druid's names in JSON.

    * ``smart_segment_loading`` (on by default, as in Druid) — the coordinator sizes its own
      work: the balancer moves copies while moves cut cost and stops once 80 of its last 100
      candidates found no better volume (or it runs out of candidates), and replicas are not
      throttled. ``max_segments_to_move`` and ``replication_throttle_limit`` are then accepted
      (stored configs keep loading) but bound nothing. Off, they bound as before: balancing
      moves per tier per run, and replicas queued per tier per run.
    * ``max_segments_in_node_loading_queue`` — a volume's load queue limit (loads in flight);
      it is split into minimum shares: ``loading_min_percent`` for first copies and replicas,
      ``decommissioning_min_percent`` (at most 70) for moves off decommissioning volumes and
      ``balancing_min_percent`` for balancing moves. They sum to 100: those not given split
      what the given ones leave (:func:`split_queue_shares`). A share another phase does not
      need this run is free for the others.
    * ``num_best_servers`` (``numBestServersChoosingFunction``) — a new copy goes to one of
      the N cheapest volumes with room, chosen at random with ``seed`` so load spreads;
      ``None`` (the default) is ``replicas + ⌊log₅ volumes of the tier⌋``.
    * ``segment_loading_max_seconds_before_alerting`` — a segment with no loaded copy for
      longer than this raises an alert.
    * ``balancer_min_cost_reduction`` — a balancing move must cut the segment's normalized
      cost by at least this fraction; below it a move is noise, and taking it would make runs
      trade segments back and forth (apache/druid#3354).
    * ``kill_unused_after_seconds`` — when set, each run kills (deletes) segments unused for
      longer than this (Druid's ``druid.coordinator.kill.*``); off by default, as in Druid.
    * ``mark_segment_as_unused_delay_millis`` — each run marks unused the segments that have
      been fully overshadowed for at least this long (Druid's cleanup duty,
      ``MarkOvershadowedSegmentsAsUnused``, 15 minutes by default as in Druid). Druid counts
      the delay from the coordinator's start, to be sure its view of the metadata is
      complete; a run here reads the metadata's current version, so the delay is counted
      per segment instead, from the commit that overshadowed it: the window in which marking
      the newer data unused still falls back to it.
    """

    max_segments_in_node_loading_queue: int = 500
    smart_segment_loading: bool = True
    # None: not given; __post_init__ replaces each by its resolved share (an int).
    loading_min_percent: int | None = None
    decommissioning_min_percent: int | None = None
    balancing_min_percent: int | None = None
    num_best_servers: int | None = None
    max_segments_to_move: int = 100
    replication_throttle_limit: int = 500
    segment_loading_max_seconds_before_alerting: float = 900.0
    balancer_min_cost_reduction: float = 0.01
    kill_unused_after_seconds: float | None = None
    mark_segment_as_unused_delay_millis: int = 900_000
    seed: int = 0

    def __post_init__(self) -> None:
        check_int(
            self.max_segments_in_node_loading_queue,
            "maxSegmentsInNodeLoadingQueue",
            minimum=1,
            maximum=INT32_MAX,
        )
        check_flag(self.smart_segment_loading, "smartSegmentLoading")
        shares = split_queue_shares(
            self.loading_min_percent, self.decommissioning_min_percent, self.balancing_min_percent
        )
        for attr, share in zip(
            ("loading_min_percent", "decommissioning_min_percent", "balancing_min_percent"),
            shares,
            strict=True,
        ):
            object.__setattr__(self, attr, share)
        if self.num_best_servers is not None:
            check_int(self.num_best_servers, "numBestServersChoosingFunction", minimum=1)
        check_int(self.max_segments_to_move, "maxSegmentsToMove", minimum=0, maximum=INT32_MAX)
        check_int(self.replication_throttle_limit, "replicationThrottleLimit", minimum=0)
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
        check_int(
            self.mark_segment_as_unused_delay_millis,
            "markSegmentAsUnusedDelayMillis",
            minimum=0,
        )
        # numpy seeds its generator with non-negative integers.
        check_int(self.seed, "seed", minimum=0)

    @property
    def queue_shares(self) -> tuple[int, int, int]:
        """The resolved loading, decommissioning and balancing shares (percent, sum 100)."""
        loading = self.loading_min_percent
        decommissioning = self.decommissioning_min_percent
        balancing = self.balancing_min_percent
        # resolved by __post_init__
        assert loading is not None
        assert decommissioning is not None
        assert balancing is not None
        return loading, decommissioning, balancing

    def queue_share(self, reason: LoadReason) -> int:
        """The slots of a volume's load queue guaranteed to ``reason``."""
        return self.max_segments_in_node_loading_queue * self.queue_shares[reason] // 100

    def best_servers(self, replicas: int, volumes: int) -> int:
        """How many of the cheapest volumes a copy's destination is chosen among: the
        configured number, else ``replicas + ⌊log₅ volumes⌋`` (at least 1)."""
        if self.num_best_servers is not None:
            return self.num_best_servers
        return max(1, replicas + floor_log5(max(volumes, 1)))

    def to_json(self) -> dict[str, Any]:
        values = asdict(self)
        return {json_key: values[attr] for json_key, attr in _CONFIG_KEYS.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CoordinatorConfig:
        """The config of Druid-style JSON; missing keys keep their defaults (missing queue
        shares follow from the given ones)."""
        _check_keys(data, _CONFIG_KEYS, "coordinator config")
        return cls(**{_CONFIG_KEYS[k]: v for k, v in data.items()})

    @classmethod
    def from_stored_json(cls, data: Mapping[str, Any]) -> CoordinatorConfig:
        """A stored config, maybe written before smart loading: then its three shares could
        sum below 100 (the rest was free for whichever phase came first, which was loading),
        so loading gets the rest."""
        if isinstance(data, Mapping) and "smartSegmentLoading" not in data:
            shares = [data.get(k) for k in _SHARE_KEYS]
            ints = [p for p in shares if isinstance(p, int) and not isinstance(p, bool)]
            if len(ints) == len(shares):
                total = sum(ints)
                if 0 <= total < 100:
                    data = {**data, "loadingMinPercent": ints[0] + 100 - total}
        return cls.from_json(data)

    def updated(self, changes: Mapping[str, Any]) -> CoordinatorConfig:
        """This config with ``changes`` (Druid-style JSON) applied. Queue shares named in
        ``changes`` are re-split from those alone: setting one share re-divides the rest."""
        if not isinstance(changes, Mapping):
            raise SpecError(
                f"coordinator config JSON must be an object, got {safe_repr(changes)}; "
                'e.g. {"balancerMinCostReduction": 0.02}'
            )
        base = self.to_json()
        if any(k in changes for k in _SHARE_KEYS):
            for key in _SHARE_KEYS:
                del base[key]
        return CoordinatorConfig.from_json({**base, **dict(changes)})


def _check_keys(data: object, known: Iterable[str], what: str) -> None:
    """``data`` is a JSON object with only ``known`` keys."""
    if not isinstance(data, Mapping):
        raise SpecError(f"{what} JSON must be an object, got {safe_repr(data)}")
    accepted = set(known)
    unknown = sorted(k if isinstance(k, str) else safe_repr(k) for k in data if k not in accepted)
    if unknown:
        raise SpecError(f"unknown {what} keys {unknown}; known: {sorted(accepted)}")
