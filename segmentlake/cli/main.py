"""``segmentlake`` sub-commands: quickstart, segments, locks, timeline, tasks."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from segmentlake.errors import SegmentLakeError

__all__ = ["main"]

DEFAULT_WAREHOUSE = os.environ.get("SEGMENTLAKE_WAREHOUSE", "warehouse")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="segmentlake", description="Druid's segment model on Delta Lake and Spark."
    )
    parser.add_argument(
        "--warehouse",
        default=DEFAULT_WAREHOUSE,
        help="warehouse path (default: $SEGMENTLAKE_WAREHOUSE or ./warehouse)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    quick = sub.add_parser("quickstart", help="build a sample datasource and show its timeline")
    quick.add_argument("--days", type=int, default=14, help="days of sample data (default 14)")
    quick.add_argument("--rows-per-day", type=int, default=20_000)
    for name, text in (
        ("segments", "list the used segments of a datasource"),
        ("locks", "list the live task locks of a datasource"),
        ("timeline", "print the visible timeline of a datasource"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("datasource")
        cmd.add_argument("--interval", help="ISO interval, e.g. 2024-01-01/P7D")
    tasks = sub.add_parser("tasks", help="list a datasource's ingestion tasks and their reports")
    tasks.add_argument("datasource")
    tasks.add_argument("--id", dest="task_id", help="print this task's whole report")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return _run(args)
    except SegmentLakeError as e:
        print(f"segmentlake: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from segmentlake.cli import inspect, quickstart
    from segmentlake.lake import Lake
    from segmentlake.spark.session import spark_session

    spark = spark_session(app_name=f"segmentlake {args.command}")
    lake = Lake(spark, args.warehouse)
    if args.command == "quickstart":
        return quickstart.run(lake, days=args.days, rows_per_day=args.rows_per_day)
    if args.command == "segments":
        inspect.print_segments(lake, args.datasource, args.interval)
    elif args.command == "tasks":
        inspect.print_tasks(lake, args.datasource, args.task_id)
    elif args.command == "locks":
        inspect.print_locks(lake, args.datasource)
    else:
        inspect.print_timeline(lake, args.datasource, args.interval)
    return 0
