"""CLI of the compaction manager: ``manager``, ``compact --user``, ``compaction-status`` and
``compaction-config``. Printing is this module's job; the work is the manager's."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import TYPE_CHECKING

from segmentlake.errors import SegmentLakeError, SpecError

if TYPE_CHECKING:
    from segmentlake.compact.manager import CompactionManager, PassReport
    from segmentlake.lake import Lake

__all__ = ["add_manager_commands", "compaction_config", "print_status", "run_manager", "user"]


def add_manager_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    manager = sub.add_parser(
        "manager",
        help="run the compaction manager with N local compactors",
        description="Plan system, selector and user compactions and run them on local "
        "compactors, with a live status line. --once runs one pass, drains its jobs and exits "
        "(e.g. a scheduled Databricks job).",
    )
    manager.add_argument("--compactors", type=int, default=1, help="local compactors (default 1)")
    manager.add_argument("--once", action="store_true", help="one pass, drain its jobs, exit")
    manager.add_argument(
        "--interval-s", type=float, default=10.0, help="seconds between passes (default 10)"
    )
    manager.add_argument(
        "--datasource", action="append", help="only this datasource (repeatable; default all)"
    )
    manager.add_argument("--queue-size", type=int, default=10_000, help="jobs kept per group")
    manager.add_argument("--group", default="default", help="compactor group to run")
    status = sub.add_parser(
        "compaction-status", help="holds, selections, queued and running compaction jobs"
    )
    status.add_argument("datasource")
    config = sub.add_parser(
        "compaction-config", help="show or set a datasource's compaction manager config"
    )
    config.add_argument("datasource")
    config.add_argument(
        "--set",
        metavar="JSON",
        help='e.g. \'{"planner": {"type": "ratio", "ratio": 2}, "selectors": '
        '[{"type": "fingerprint"}]}\', or Druid\'s automatic compaction config, e.g. '
        '\'{"dataSource": "wiki", "granularitySpec": {"segmentGranularity": "DAY"}}\'',
    )


def run_manager(lake: Lake, args: argparse.Namespace) -> int:
    if args.compactors < 0:
        raise SpecError(f"--compactors must be >= 0, got {args.compactors}")
    manager = lake.compaction_manager(datasources=args.datasource, queue_size=args.queue_size)
    try:
        manager.run(
            compactors=args.compactors,
            group=args.group,
            once=args.once,
            interval_s=args.interval_s,
            on_pass=_status_line,
        )
    except KeyboardInterrupt:
        print("\nmanager stopped", file=sys.stderr)
    print(f"\n{_counters(manager)}")
    return 0 if not manager.outcomes["failed"] else 1


def _status_line(manager: CompactionManager, report: PassReport) -> None:
    print(f"\r{report.summary()} | {_counters(manager)}", end="", file=sys.stderr, flush=True)


def _counters(manager: CompactionManager) -> str:
    o = manager.outcomes
    return (
        f"jobs: {o['committed']} committed, {o['refused']} refused, {o['failed']} failed, "
        f"{manager.commit_retries} commit retries"
    )


def user(lake: Lake, args: argparse.Namespace) -> int:
    """``compact --user``: request a user compaction; unless ``--no-wait``, drive it to the
    end with an in-process manager (one compactor) and print its final state."""
    if args.interval is None:
        raise SpecError("compact --user needs --interval, e.g. 2024-01-01/P7D")
    requested = lake.start_user_compaction(
        args.datasource,
        args.interval,
        max_rows_per_segment=args.max_rows_per_segment,
        max_segments_per_job=args.max_segments_per_job,
    )
    print(requested.compaction_id)
    if not args.wait:
        return 0
    manager = lake.compaction_manager(datasources=[args.datasource])
    stop = threading.Event()
    thread = threading.Thread(
        target=manager.run, kwargs={"compactors": 1, "interval_s": 2.0, "stop": stop}
    )
    thread.start()
    try:
        while True:
            current = lake.user_compaction(args.datasource, requested.compaction_id)
            done = len(current.done)
            print(
                f"\r{current.compaction_id}: {done}/{len(current.chunks)} chunk(s) done",
                end="",
                file=sys.stderr,
                flush=True,
            )
            if current.status == "SUCCESS":
                break
            if not thread.is_alive():
                raise SegmentLakeError(
                    f"the manager driving {current.compaction_id} stopped (see the log above); "
                    "the compaction is recorded: run 'segmentlake manager' to finish it"
                )
            time.sleep(1.0)
    finally:
        stop.set()
        thread.join()
    print(f"\n{current.compaction_id} {current.status}: {len(current.chunks)} chunk(s)")
    return 0


def print_status(lake: Lake, datasource: str) -> int:
    status = lake.compaction_status(datasource)
    print(f"datasource {datasource}")
    for s in status.selections:
        print(f"  {s.state.value:8} {s.chunk}  owner={s.owner}  segments={len(s.segments)}")
    for r in status.running:
        print(
            f"  running  {r.job.chunk}  {r.job.kind.value} job {r.job.job_id} "
            f"({len(r.job.segments)} segments) on {r.compactor}"
        )
    for m in status.managers:
        print(f"  manager  {m.manager_id}: queued {dict(m.queued)}, {dict(m.outcomes)}")
    for j in status.queued:
        print(f"  queued   {j.chunk}  {j.kind.value} job {j.job_id} ({len(j.segments)} segments)")
    for u in status.users:
        print(f"  user     {u.compaction_id} {u.status}: {len(u.done)}/{len(u.chunks)} chunk(s)")
    return 0


def compaction_config(lake: Lake, args: argparse.Namespace) -> int:
    if args.set:
        try:
            data = json.loads(args.set)
        except ValueError as e:
            raise SpecError(f"--set is not JSON ({e})") from e
        config = lake.set_compaction_config(args.datasource, data)
    else:
        config = lake.compaction_config(args.datasource)
    print(json.dumps(config.to_json(), indent=2))
    return 0
