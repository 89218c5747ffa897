"""CLI of retention rules, volumes and the coordinator: ``rules``, ``volume``, ``coordinator``
and ``coordinator-config``. Printing is this module's job; the work is the lake's."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from segmentlake.errors import SpecError

if TYPE_CHECKING:
    from segmentlake.coordinator.coordinator import CoordinatorReport
    from segmentlake.core.retention_rules import Rule
    from segmentlake.lake import Lake

__all__ = ["COMMANDS", "add_tier_commands", "run_tier_command"]

COMMANDS = ("rules", "volume", "coordinator", "coordinator-config")


def add_tier_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = sub.add_parser(
        "rules",
        help="show, set or audit a datasource's retention/load rules",
        description="Without options, print DATASOURCE's rule chain ('_default': the default "
        "chain). --set replaces it with Druid rule JSON; --history lists the audit trail.",
    )
    rules.add_argument("datasource")
    rules.add_argument(
        "--set",
        metavar="JSON",
        help='e.g. \'[{"type": "loadByPeriod", "period": "P1M", "tieredReplicants": '
        '{"hot": 1}}, {"type": "dropForever"}]\'',
    )
    rules.add_argument("--author", default="", help="who changes the rules (audit)")
    rules.add_argument("--comment", default="", help="why (audit)")
    rules.add_argument("--history", action="store_true", help="print the audit trail")
    volume = sub.add_parser("volume", help="add, list, decommission or remove storage volumes")
    actions = volume.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="register a volume of a tier")
    add.add_argument("name")
    add.add_argument("--tier", required=True)
    add.add_argument("--path", required=True, help="directory or bucket prefix")
    add.add_argument("--capacity", required=True, help="bytes, or with a unit: 500G, 2T")
    add.add_argument("--priority", type=int, default=0, help="higher tiers load first")
    actions.add_parser("list", help="list volumes with their loaded bytes")
    for name, text in (
        ("decommission", "move every copy off the volume"),
        ("recommission", "stop decommissioning"),
        ("remove", "deregister the volume (its copies are re-replicated)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("name")
    coordinator = sub.add_parser(
        "coordinator",
        help="run the coordinator: retention, loading, dropping and balancing",
        description="Apply every datasource's rules, load and drop copies on the volumes and "
        "balance them, each run printing a status line. --once runs once and exits.",
    )
    coordinator.add_argument("--once", action="store_true", help="one run, then exit")
    coordinator.add_argument("--interval-s", type=float, default=60.0, help="seconds between runs")
    coordinator.add_argument("--datasource", action="append", help="only this one (repeatable)")
    config = sub.add_parser("coordinator-config", help="show or set the coordinator's config")
    config.add_argument(
        "--set",
        metavar="JSON",
        help='e.g. \'{"loadingMinPercent": 60, "seed": 1}\'; maxSegmentsToMove and '
        "replicationThrottleLimit bound only with smartSegmentLoading false",
    )


def run_tier_command(lake: Lake, args: argparse.Namespace) -> int:
    if args.command == "rules":
        return _rules(lake, args)
    if args.command == "volume":
        return _volume(lake, args)
    if args.command == "coordinator":
        return _coordinator(lake, args)
    if args.set:
        lake.set_coordinator_config(_json(args.set, "--set"))
    print(json.dumps(lake.coordinator_config().to_json(), indent=2))
    return 0


def _rules(lake: Lake, args: argparse.Namespace) -> int:
    if args.set:
        revision = lake.set_rules(
            args.datasource, _json(args.set, "--set"), author=args.author, comment=args.comment
        )
        print(f"{args.datasource}: rules revision {revision}")
    if args.history:
        for entry in lake.rule_history(args.datasource):
            when = datetime.fromtimestamp(entry.at_ms / 1000, UTC).isoformat(timespec="seconds")
            print(f"r{entry.revision} {when} by {entry.author or '-'}: {entry.comment or '-'}")
            print(f"  old: {json.dumps(_rules_json(entry.old))}")
            print(f"  new: {json.dumps(_rules_json(entry.new))}")
        return 0
    print(json.dumps(_rules_json(lake.rules(args.datasource)), indent=2))
    return 0


def _rules_json(rules: Sequence[Rule] | None) -> list[dict[str, Any]] | None:
    if rules is None:
        return None
    return [rule.to_json() for rule in rules]


def _volume(lake: Lake, args: argparse.Namespace) -> int:
    if args.action == "add":
        volume = lake.add_volume(
            args.name,
            tier=args.tier,
            path=args.path,
            capacity_bytes=parse_bytes(args.capacity),
            priority=args.priority,
        )
        print(f"volume {volume.name} added to tier {volume.tier} at {volume.path}")
    elif args.action == "decommission":
        lake.decommission_volume(args.name)
        print(f"volume {args.name} is decommissioning")
    elif args.action == "recommission":
        lake.decommission_volume(args.name, decommissioning=False)
        print(f"volume {args.name} is active")
    elif args.action == "remove":
        found = lake.remove_volume(args.name)
        print(f"volume {args.name} {'removed' if found else 'was not registered'}")
    else:
        _print_volumes(lake)
    return 0


def _print_volumes(lake: Lake) -> None:
    loaded: dict[str, list[int]] = {}
    for datasource in lake.metadata.datasources():
        if datasource.startswith("_"):
            continue
        for copy in lake.segment_copies(datasource):
            if copy.state.name == "LOADED":
                total = loaded.setdefault(copy.volume, [0, 0])
                total[0] += 1
                total[1] += copy.size_bytes
    print(f"{'volume':<16} {'tier':<12} {'segments':>9} {'used':>12} {'capacity':>14}  state")
    for v in lake.volumes():
        count, used = loaded.get(v.name, [0, 0])
        state = "decommissioning" if v.decommissioning else "active"
        print(f"{v.name:<16} {v.tier:<12} {count:>9} {used:>12} {v.capacity_bytes:>14}  {state}")


def _coordinator(lake: Lake, args: argparse.Namespace) -> int:
    coordinator = lake.coordinator(datasources=args.datasource)
    if args.once:
        _print_run(coordinator.run_once())
        return 0
    stop = threading.Event()
    try:
        coordinator.run(interval_s=args.interval_s, stop=stop, on_run=_print_run)
    except KeyboardInterrupt:
        stop.set()
    return 0


def _print_run(report: CoordinatorReport) -> None:
    print(report.summary(), flush=True)
    for tier, stats in report.stats.tiers.items():
        print(
            f"  tier {tier}: {stats.under_replicated} under-, {stats.fully_replicated} fully, "
            f"{stats.over_replicated} over-replicated",
            flush=True,
        )


def _json(text: str, option: str) -> Any:
    """``text`` parsed; its shape is checked by the Lake method it is handed to."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"{option} must be JSON: {e}") from None


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def parse_bytes(text: str) -> int:
    """``"500G"`` → bytes (binary units K, M, G, T, P; a plain number is bytes)."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in _UNITS and value[-1:] else ""
    try:
        number = float(value[: len(value) - len(unit)])
    except ValueError:
        number = -1.0
    if number <= 0:
        raise SpecError(f"capacity {text!r} is not a positive size; e.g. 500G, 2T or 1000000")
    return int(number * _UNITS[unit])
