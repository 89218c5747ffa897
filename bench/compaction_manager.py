"""Benchmark of the compaction manager: manager passes over many chunks, and compactors
draining a backlog of jobs.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/compaction_manager.py pass          # 100,000 chunks, 1,000 needing work
    .venv/bin/python bench/compaction_manager.py drain --jobs 3000 --compactors 3

* **pass**: ``--chunks`` (100,000) HOUR chunks, one segment record each, written straight to
  the metadata table (no rows: a pass reads only metadata); the datasource has a fingerprint
  selector configured. The first pass (a fresh manager: every record parsed, every timeline
  built) runs the selector everywhere and records its hashes; the timed *idle* passes then find
  nothing to do (target <= 10 s). The plain way is the same pass with the selector hashes
  ignored (every selector runs on every chunk, as a manager without them must; same view
  cache): ratio = plain / idle. Then ``--busy`` (1,000) chunks get a second segment and a
  pass plans their jobs (timed).
* **drain**: ``--jobs`` (3,000) HOUR chunks of two real 5-row segments each (one append), a
  ratio planner with ratio 1, and ``--compactors`` (3) local compactors of one manager draining
  the backlog: jobs/minute, commit retries, refused and failed jobs. The plain way is Delta's
  ``OPTIMIZE`` of the same table (bin-packing every segment's small files), timed after;
  ratio = manager / OPTIMIZE.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from segmentlake import Lake
from segmentlake.compact.manager import CompactionManager, PassReport
from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_planning import FingerprintSelector, RatioPlanner
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import MetricSpec
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.ingest.task import IngestTarget
from segmentlake.metadata.records import segment_row
from segmentlake.metadata.store import Change, now_ms
from segmentlake.spark.session import spark_session

logger = logging.getLogger("compaction_manager")

START = datetime(2020, 1, 1, tzinfo=UTC)
SCHEMA = SegmentSchema((MetricSpec("count", "edits"),), Granularity.HOUR, rollup=True)
HOUR_MS = 3_600_000
WANTED = {"type": "dynamic", "maxRowsPerSegment": 5_000_000}


def record(ds: str, hour: int, partition: int) -> DataSegment:
    start = int(START.timestamp() * 1000) + hour * HOUR_MS
    return DataSegment(
        ds,
        Interval.of_millis(start, start + HOUR_MS),
        "2020-01-01T00:00:00.000Z",
        NumberedShardSpec(partition, 0),
        load_spec={"type": "delta", "segment": f"{hour}.{partition}"},
        dimensions=("channel",),
        metrics=("edits",),
        size=4096,
        num_rows=100,
        # Compacted as the fingerprint selector wants: an idle chunk.
        last_compaction_state={"type": "minor", "partitionsSpec": WANTED},
        schema=SCHEMA,
    )


def insert(lake: Lake, ds: str, segments: list[DataSegment]) -> None:
    at = now_ms()
    state = lake.metadata.read(ds)
    changes = [Change("insert", segment_row(s, used=True, now_ms=at)) for s in segments]
    lake.metadata.commit(state, changes, commit_id=f"bench:{at}")


def timed(fn):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    result = fn()
    return time.monotonic() - started, result


def bench_pass(lake: Lake, args: argparse.Namespace) -> dict:
    ds = "passes"
    config = CompactionConfig(planner=RatioPlanner(ratio=1.0), selectors=(FingerprintSelector(),))
    lake.set_compaction_config(ds, config)
    seconds, _ = timed(lambda: insert(lake, ds, [record(ds, h, 0) for h in range(args.chunks)]))
    logger.info("wrote %d segment records in %.1fs", args.chunks, seconds)
    target = IngestTarget(lake.spark, lake.warehouse, lake.lockbox)
    manager = CompactionManager(target, datasources=[ds], report_status=False)
    first, report = timed(manager.run_pass)
    logger.info("first pass (selector runs everywhere): %.2fs, %s", first, report.summary())
    idle = []
    for _ in range(args.repeat):
        seconds, report = timed(manager.run_pass)
        assert report.planned == 0, report.summary()
        assert report.duties.selector_runs == 0, report.summary()
        idle.append(seconds)
    # The plain way: no hashes, so every selector runs on every chunk every pass.
    manager_plain = CompactionManager(target, datasources=[ds], report_status=False)
    plain_runs = []
    for _ in range(args.repeat):
        seconds = _pass_without_hashes(manager_plain, lake, ds)
        plain_runs.append(seconds)
    busy_hours = range(0, args.chunks, max(1, args.chunks // args.busy))[: args.busy]
    insert(lake, ds, [record(ds, h, 1) for h in busy_hours])
    busy, report = timed(manager.run_pass)
    return {
        "chunks": args.chunks,
        "first_pass_s": round(first, 2),
        "idle_pass_s": round(min(idle), 2),
        "idle_pass_runs_s": [round(s, 2) for s in idle],
        "plain_pass_s": round(min(plain_runs), 2),
        "ratio_plain_over_idle": round(min(plain_runs) / min(idle), 2),
        "busy_chunks": len(busy_hours),
        "busy_pass_s": round(busy, 2),
        "busy_pass_planned": report.planned,
        "busy_pass_selector_runs": report.duties.selector_runs,
    }


def _pass_without_hashes(manager: CompactionManager, lake: Lake, ds: str) -> float:
    """A pass that runs every selector on every chunk (the hashes are not consulted)."""
    from segmentlake.compact.manager_state import MANAGER_READS, read_manager_state

    started = time.monotonic()
    state = lake.metadata.read(ds, MANAGER_READS)
    ms = read_manager_state(state, now_ms(), manager._cache(ds))
    for view in ms.views.values():
        for selector in ms.config.selectors:
            selector.select(view)
    manager._plan(ds, ms, PassReport())
    return time.monotonic() - started


def bench_drain(lake: Lake, args: argparse.Namespace) -> dict:
    ds = "drain"
    spark = lake.spark
    rows = [
        ((START + timedelta(hours=h)).isoformat(), f"#c{i}", f"u{i}", i)
        for h in range(args.jobs)
        for i in range(10)
    ]
    spec = {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "user"]},
        "metricsSpec": [{"type": "count", "name": "edits"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5},
    }
    df = spark.createDataFrame(rows, "ts STRING, channel STRING, user STRING, added LONG")
    seconds, _ = timed(lambda: lake.append(df, ds, spec))
    segments = len(lake.used_segments(ds))
    logger.info("appended %d segments in %.1fs", segments, seconds)
    lake.set_compaction_config(ds, CompactionConfig(planner=RatioPlanner(ratio=1.0)))
    target = IngestTarget(spark, lake.warehouse, lake.lockbox)
    manager = CompactionManager(target, datasources=[ds])
    started = time.monotonic()
    manager.run(compactors=args.compactors, once=True)
    drained = time.monotonic() - started
    left = manager.run_pass()
    plain, _ = timed(lambda: spark.sql(f"OPTIMIZE delta.`{lake.warehouse}/{ds}`").collect())
    committed = manager.outcomes["committed"]
    return {
        "jobs": args.jobs,
        "segments_before": segments,
        "segments_after": len(lake.timeline(ds).visible_segments()),
        "compactors": args.compactors,
        "drain_s": round(drained, 1),
        "jobs_committed": committed,
        "jobs_per_minute": round(committed / drained * 60, 1),
        "refused": manager.outcomes["refused"],
        "failed": manager.outcomes["failed"],
        "commit_retries": manager.commit_retries,
        "jobs_left_after": left.planned,
        "plain_optimize_s": round(plain, 1),
        "ratio_manager_over_optimize": round(drained / plain, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="which", required=True)
    passes = sub.add_parser("pass")
    passes.add_argument("--chunks", type=int, default=100_000)
    passes.add_argument("--busy", type=int, default=1_000)
    passes.add_argument("--repeat", type=int, default=3)
    drain = sub.add_parser("drain")
    drain.add_argument("--jobs", type=int, default=3_000)
    drain.add_argument("--compactors", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for name in ("segmentlake", "py4j"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warehouse = Path(tempfile.mkdtemp(prefix="bench-manager-"))
    try:
        spark = spark_session(
            app_name="bench compaction manager",
            extra_conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        )
        lake = Lake(spark, str(warehouse))
        result = bench_pass(lake, args) if args.which == "pass" else bench_drain(lake, args)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
