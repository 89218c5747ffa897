"""``segmentlake`` sub-commands: quickstart, ingest, segments, locks, timeline, tasks."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from segmentlake.errors import BadRowsError, SegmentLakeError, SpecError

if TYPE_CHECKING:
    from segmentlake.core.druid_task import DruidIngestTask
    from segmentlake.lake import Lake

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
    ingest = sub.add_parser(
        "ingest",
        help="run a Druid native batch ingestion spec (an index_parallel or index task JSON)",
        description="Run a Druid index_parallel / index task JSON on Spark; see "
        "docs/druid-specs.md for the fields segmentlake reads.",
    )
    ingest.add_argument("spec", metavar="SPEC.json", help="the Druid task JSON file")
    # SUPPRESS: given here, it overrides the global --warehouse; not given, it leaves it be.
    ingest.add_argument("--warehouse", default=argparse.SUPPRESS, help="warehouse path")
    ingest.add_argument("--task-id", help="task id (default: the spec's id, else generated)")
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

    # A bad spec or missing input fails before Spark starts (seconds).
    task = _load_task(args.spec) if args.command == "ingest" else None
    spark = spark_session(app_name=f"segmentlake {args.command}")
    lake = Lake(spark, args.warehouse)
    if task is not None:
        return _ingest(lake, task, args.task_id)
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


def _load_task(path: str) -> DruidIngestTask:
    """Read and check a task spec file, and find its input files, before Spark starts."""
    from segmentlake.core.druid_task import DruidIngestTask
    from segmentlake.ingest.druid_task import input_files

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read the spec {path}: {e.strerror or e}") from e
    task = DruidIngestTask.from_json(text)
    input_files(task.input_source)
    return task


def _ingest(lake: Lake, task: DruidIngestTask, task_id: str | None) -> int:
    from segmentlake.ingest.druid_task import run_druid_task
    from segmentlake.ingest.report import TaskReport

    try:
        report = run_druid_task(lake, task, task_id=task_id)
    except BadRowsError as e:  # a data problem, not a usage one: exit 1, with the counts
        print(f"segmentlake: error: {e}", file=sys.stderr)
        if isinstance(e.report, TaskReport):
            print(e.report.summary())
        return 1
    print(report.summary())
    return 0
