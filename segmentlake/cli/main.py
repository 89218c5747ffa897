"""``segmentlake`` sub-commands: quickstart, ingest, segments, locks, timeline, tasks, compact,
cleanup, kill, manager, compaction-status, compaction-config, rules, volume, coordinator,
migrate. Commands that only read or write metadata never start Spark."""

from __future__ import annotations

import argparse
import importlib.abc
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segmentlake.cli import manage, tier_commands
from segmentlake.core.compaction import COMPACTION_MODES
from segmentlake.errors import BadRowsError, SegmentLakeError, SpecError

if TYPE_CHECKING:
    from segmentlake.druid.tasks import DruidTask
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
        help="run a Druid task JSON: native batch ingestion (index_parallel, index), compact, kill",
        description="Run a Druid index_parallel / index task JSON on Spark, a compact task (a "
        "major compaction of its interval) or a kill task (lake.kill of its interval); see "
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
    sub.add_parser(
        "migrate",
        help="migrate a warehouse written by segmentlake 0.1 to the current metadata engine",
        description="Convert the old metadata table (_segmentlake/metadata) into the current "
        "one; run it once, with no task running on the warehouse. The old table is kept.",
    )
    view = sub.add_parser(
        "view",
        help="bring a datasource's visible table up to date and print a CREATE VIEW for it",
        description="Sync the visible table (a Delta table holding exactly the visible rows; "
        "no Spark needed) and print the CREATE VIEW statement any Spark SQL session or "
        "metastore can run, with or without segmentlake. The view never goes stale.",
    )
    view.add_argument("datasource")
    view.add_argument("--name", help="the view's name (default: the datasource's)")
    tasks = sub.add_parser("tasks", help="list a datasource's ingestion tasks and their reports")
    tasks.add_argument("datasource")
    tasks.add_argument("--id", dest="task_id", help="print this task's whole report")
    _add_cleanup_commands(sub)
    _add_compact_command(sub)
    manage.add_manager_commands(sub)
    tier_commands.add_tier_commands(sub)
    return parser


def _add_compact_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compact = sub.add_parser(
        "compact",
        help="compact a datasource now (minor: merge small segments; major: rewrite chunks)",
        description="Run one compaction and print its report. Appends may go on meanwhile.",
    )
    compact.add_argument("datasource")
    compact.add_argument("--interval", help="ISO interval (default: all the data)")
    compact.add_argument("--mode", choices=COMPACTION_MODES, default="minor")
    compact.add_argument("--segment-granularity", help="major only, e.g. DAY")
    compact.add_argument(
        "--partitions-spec", metavar="JSON", help="major only: Druid's partitionsSpec JSON"
    )
    compact.add_argument(
        "--max-rows-per-segment", type=int, default=None, help="minor/user (default 5M)"
    )
    compact.add_argument(
        "--user",
        action="store_true",
        help="a user compaction through the compaction manager: every chunk of --interval "
        "compacted to its final form (prints its id; waits unless --no-wait)",
    )
    compact.add_argument("--max-segments-per-job", type=int, help="--user: segments per job")
    compact.add_argument(
        "--no-wait", dest="wait", action="store_false", help="--user: print the id and return"
    )


def _add_cleanup_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cleanup = sub.add_parser(
        "cleanup", help="mark a datasource's fully overshadowed segments unused"
    )
    cleanup.add_argument("datasource")
    kill = sub.add_parser(
        "kill",
        help="delete a datasource's unused segments (records and rows), then VACUUM",
        description="Delete the segments unused for longer than --older-than (their records, "
        "then their rows unless a used segment shares them; without --interval also rows no "
        "segment references), then VACUUM the datasource's Delta table.",
    )
    kill.add_argument("datasource")
    kill.add_argument("--interval", help="only segments wholly inside this ISO interval")
    kill.add_argument(
        "--older-than",
        default="PT1H",
        metavar="DURATION",
        help="unused for at least this long: ISO-8601 (PT1H, P7D) or seconds (default PT1H)",
    )
    kill.add_argument(
        "--vacuum-retention-hours",
        type=float,
        metavar="HOURS",
        help="VACUUM retention (default: the table's delta.deletedFileRetentionDuration)",
    )
    kill.add_argument(
        "--no-vacuum",
        dest="vacuum",
        action="store_false",
        help="skip VACUUM (it lists the whole table; deleted files stay until one runs)",
    )


def run() -> None:
    """The console script: :func:`main`, then the exit code once output is flushed, without
    the interpreter's normal shutdown: delta-rs's runtime threads can abort a short process
    at that point ("terminate called without an active exception") after all the work is done,
    which would turn a success into a crash."""
    args = _parser().parse_args()
    if not _needs_spark(args):
        _pyarrow_without_pandas()
    code = _main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: the process's arguments); returns the exit code."""
    return _main(_parser().parse_args(argv))


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ImportError("pandas is not needed by a metadata command")


def _pyarrow_without_pandas() -> None:
    """Let pyarrow settle, once, that pandas is absent. On its first conversion of a Python
    value pyarrow imports pandas (a large share of a metadata command's run) only to tell
    pandas values apart; metadata commands never hold any. pandas stays importable: only
    this one check runs with the import refused."""
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.scalar(0)
    finally:
        sys.meta_path.remove(finder)


def _main(args: argparse.Namespace) -> int:
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
    from segmentlake.cli import text_tables
    from segmentlake.lake import Lake

    # A bad name, spec or option or a missing input fails before Spark starts (seconds).
    _check_names(args)
    task = _load_task(args.spec) if args.command == "ingest" else None
    older_than = _kill_options(args) if args.command == "kill" else None
    if getattr(args, "interval", None) is not None and args.command != "kill":
        from segmentlake.core.interval import Interval

        Interval.parse(args.interval)
    if args.command == "migrate":
        from segmentlake.metadata.migration import migrate

        print(migrate(_qualified_path(args.warehouse)).summary())
        return 0
    # Metadata needs no Spark: inspection answers at once, and a command that moves data
    # starts Spark on first need. Read-only commands open the warehouse (a typo'd path is an
    # error, never a new warehouse).
    spark = None
    if _needs_spark(args):
        from segmentlake.spark.session import spark_session

        spark = spark_session(app_name=f"segmentlake {args.command}")
    lake = Lake(spark, args.warehouse, create=not _read_only(args))
    if task is not None:
        return _ingest(lake, task, args.task_id)
    if args.command == "quickstart":
        from segmentlake.cli import quickstart

        return quickstart.run(lake, days=args.days, rows_per_day=args.rows_per_day)
    if args.command == "cleanup":
        return _cleanup(lake, args.datasource)
    if args.command == "compact":
        return manage.user(lake, args) if args.user else _compact(lake, args)
    if args.command == "manager":
        return manage.run_manager(lake, args)
    if args.command == "compaction-status":
        return manage.print_status(lake, args.datasource)
    if args.command == "compaction-config":
        return manage.compaction_config(lake, args)
    if args.command in tier_commands.COMMANDS:
        return tier_commands.run_tier_command(lake, args)
    if older_than is not None:
        return _kill(lake, args, older_than)
    if args.command == "view":
        return _view(lake, args.datasource, args.name)
    if args.command == "segments":
        text_tables.print_segments(lake, args.datasource, args.interval)
    elif args.command == "tasks":
        text_tables.print_tasks(lake, args.datasource, args.task_id)
    elif args.command == "locks":
        text_tables.print_locks(lake, args.datasource)
    else:
        text_tables.print_timeline(lake, args.datasource, args.interval)
    return 0


_READ_ONLY = frozenset({"segments", "locks", "timeline", "tasks", "compaction-status"})
_SPARK_COMMANDS = frozenset({"ingest", "quickstart", "compact", "kill", "manager", "coordinator"})


def _needs_spark(args: argparse.Namespace) -> bool:
    """Whether the command moves data (the others read and write metadata only)."""
    return args.command in _SPARK_COMMANDS


def _qualified_path(warehouse: str) -> str:
    from segmentlake.lake import qualified_warehouse

    return qualified_warehouse(warehouse)


def _read_only(args: argparse.Namespace) -> bool:
    """Whether the command only reads (so it must find a warehouse, and writes nothing)."""
    if args.command in _READ_ONLY:
        return True
    if args.command in ("compaction-config", "coordinator-config"):
        return args.set is None
    if args.command == "rules":
        return args.set is None
    return bool(args.command == "volume" and args.action == "list")


def _check_names(args: argparse.Namespace) -> None:
    """Every name on the command line follows segmentlake's name rule."""
    from segmentlake.core.names import check_datasource_name, check_name

    if not args.warehouse or not str(args.warehouse).strip():
        raise SpecError("--warehouse must be a non-empty path")
    datasource = getattr(args, "datasource", None)
    if isinstance(datasource, str) and not (args.command == "rules" and datasource == "_default"):
        check_datasource_name(datasource)
    elif isinstance(datasource, list):  # coordinator --datasource, repeatable
        for name in datasource:
            check_datasource_name(name)
    if args.command == "volume" and args.action != "list":
        check_name(args.name, what="volume")
        if args.action == "add":
            check_name(args.tier, what="tier")


def _view(lake: Lake, datasource: str, name: str | None) -> int:
    from segmentlake.metadata.visible_table import sync_visible_table

    ddl = lake.view_sql(datasource, name)  # checks the datasource and the name first
    report = sync_visible_table(lake.metadata, datasource)
    if report.table_version is None:
        print(f"segmentlake: error: datasource {datasource!r} has no rows yet", file=sys.stderr)
        return 2
    print(
        f"-- visible table version {report.table_version} (metadata version "
        f"{report.metadata_version}): +{report.added} -{report.removed} files this sync",
        file=sys.stderr,
    )
    print(f"{ddl};")
    return 0


def _compact(lake: Lake, args: argparse.Namespace) -> int:
    import json

    options: dict[str, Any] = {}
    if args.segment_granularity:  # a minor compaction refuses it, with the reason
        options["segment_granularity"] = args.segment_granularity
    if args.partitions_spec:
        try:
            options["partitions_spec"] = json.loads(args.partitions_spec)
        except ValueError as e:
            raise SpecError(
                f"--partitions-spec is not JSON ({e}); e.g. "
                '\'{"type": "hashed", "targetRowsPerSegment": 5000000}\''
            ) from e
    if args.mode == "minor" and args.max_rows_per_segment is not None:
        options["max_rows_per_segment"] = args.max_rows_per_segment
    report = lake.compact(args.datasource, args.interval, mode=args.mode, **options)
    print(report.summary())
    return 0 if report.status in ("SUCCESS", "SKIPPED") else 1


def _load_task(path: str) -> DruidTask:
    """Read and check a task spec file, and find its input files, before Spark starts."""
    from segmentlake.druid.ingest_task import DruidIngestTask
    from segmentlake.druid.input import LocalInputSource, sources_of
    from segmentlake.druid.tasks import read_druid_task, task_json
    from segmentlake.druid_runner import input_files

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read the spec {path}: {e.strerror or e}") from e
    task = read_druid_task(task_json(text))
    if isinstance(task, DruidIngestTask):
        for source in sources_of(task.input_source):
            if isinstance(source, LocalInputSource):
                input_files(source)
    return task


def _ingest(lake: Lake, task: DruidTask, task_id: str | None) -> int:
    from segmentlake.druid_runner import run_druid_task
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


def duration_seconds(text: str) -> float:
    """A duration given as seconds (``3600``) or an ISO-8601 period of fixed length (``PT1H``,
    ``P7D``; months and years have no fixed length)."""
    from segmentlake.core.interval import Period, is_zero_period

    example = "e.g. PT1H, P7D or 3600 (seconds)"
    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = None
    if seconds is not None:
        if not math.isfinite(seconds) or seconds < 0:
            raise SpecError(
                f"duration {text!r} must be a non-negative number of seconds; {example}"
            )
        return seconds
    if is_zero_period(raw):
        return 0.0  # PT0S, P0D: zero is a fine retention here (Period wants a positive length)
    try:
        period = Period.parse(raw)
    except SpecError as e:
        raise SpecError(f"cannot parse duration {text!r}; {example}") from e
    if period.months:
        raise SpecError(
            f"duration {text!r} has months or years, which have no fixed length; use days or "
            f"weeks instead, {example}"
        )
    return period.millis / 1000


def _kill_options(args: argparse.Namespace) -> float:
    """Check kill's options before Spark starts; the duration in seconds."""
    from segmentlake.core.interval import Interval

    if args.interval is not None:
        Interval.parse(args.interval)
    return duration_seconds(args.older_than)


def _cleanup(lake: Lake, datasource: str) -> int:
    marked = lake.mark_overshadowed_unused(datasource)
    print(f"cleanup {datasource}: marked {len(marked):,} overshadowed segment(s) unused")
    return 0


def _kill(lake: Lake, args: argparse.Namespace, older_than: float) -> int:
    report = lake.kill(
        args.datasource,
        interval=args.interval,
        older_than=older_than,
        vacuum_retention_hours=args.vacuum_retention_hours,
        vacuum=args.vacuum,
    )
    print(report.summary())
    return 0
