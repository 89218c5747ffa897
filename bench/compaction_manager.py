"""Benchmark of the compaction manager: manager passes over many chunks, and compactors
draining a backlog of jobs.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/compaction_manager.py pass          # 100,000 chunks, 1,000 needing work
    .venv/bin/python bench/compaction_manager.py drain --jobs 3000 --compactors 3
    .venv/bin/python bench/compaction_manager.py drain --jobs 300 --batch-jobs 1  # unbatched

* **pass**: ``--chunks`` (100,000) HOUR chunks, one segment record each, written straight to
  the metadata table (no rows: a pass reads only metadata); the datasource has a fingerprint
  selector configured. The first pass (a fresh manager: every record parsed, every timeline
  built) runs the selector everywhere and records its hashes; the timed *idle* passes then find
  nothing to do (target <= 10 s). The plain way is the same pass with the selector hashes
  ignored (every selector runs on every chunk, as a manager without them must; same view
  cache): ratio = plain / idle. Then ``--busy`` (1,000) chunks get a second segment and a
  pass plans their jobs (timed).
* **drain**: ``--jobs`` (3,000) HOUR chunks of ``--rows-per-chunk`` (10) rows each, 2-3 real
  segments of at most half that per chunk (one append), a ratio planner with ratio 1, and
  ``--compactors`` (3) local compactors of one manager draining the backlog, each running up
  to ``--batch-jobs`` (16) jobs of ``--batch-segments`` (512) input segments as one
  compaction (``--batch-jobs 1``: one job per compaction, as before batching): jobs/minute,
  rows compacted/minute, commit retries (per job and per operation), refused and failed jobs.
  Two plain ways are timed after the drain:

  - the old one, Delta's ``OPTIMIZE`` of the datasource table itself. That table is
    partitioned by ``__segment``, one partition per segment, so OPTIMIZE finds next to
    nothing to merge: kept for comparison with earlier runs (``ratio_manager_over_optimize``
    = drain seconds / OPTIMIZE seconds), not a fair baseline;
  - the fair one: the same rows (the visible segments' rows before the drain) in a plain
    Delta table partitioned by a ``day`` DATE column, written right after the append with one
    file per segment, so each day holds as many small files as the datasource has segments
    that day. ``OPTIMIZE`` bin-packs each day into one file; its files before/after and the
    rows it rewrote (from its commit's add actions) prove it did the work. Ratio = manager
    rows compacted per minute / OPTIMIZE rows rewritten per minute.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake import Lake
from segmentlake.compact.manager import (
    DEFAULT_BATCH_JOBS,
    DEFAULT_BATCH_ROWS,
    DEFAULT_BATCH_SEGMENTS,
    CompactionManager,
    PassReport,
)
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


def _num_files(spark: SparkSession, path: str) -> int:
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["numFiles"])


def write_plain_by_day(
    spark: SparkSession, source: str, target: str, segments: list[DataSegment]
) -> dict:
    """The segments' rows in a Delta table partitioned by day, one file per segment."""
    keys = sorted({s.load_spec["segment"] for s in segments})
    n = len(keys)
    # One file per segment needs each segment alone in a task. A hash repartition by segment
    # would put colliding segments of a day in one task, hence one file. So each segment gets
    # a number whose hash (the one repartition uses: Murmur3, seed 42) lands in a shuffle
    # partition of its own; 20 candidates per partition leave one empty with odds e^-20.
    slots = (
        spark.range(20 * n)
        .select("id", F.expr(f"pmod(hash(id), {n})").alias("slot"))
        .groupBy("slot")
        .agg(F.min("id").alias("id"))
        .collect()
    )
    by_slot = {row["slot"]: row["id"] for row in slots}
    if len(by_slot) != n:
        raise AssertionError(f"found shuffle keys for {len(by_slot)} of {n} partitions")
    spread = spark.createDataFrame(
        [(key, by_slot[slot]) for slot, key in enumerate(keys)], "__segment STRING, spread LONG"
    )
    rows = spark.read.format("delta").load(source).join(F.broadcast(spread), "__segment")
    plain = (
        rows.repartition(n, "spread")
        .withColumn("day", F.to_date("__time"))  # the session is UTC
        .drop("__segment", "spread")
    )
    plain.write.format("delta").partitionBy("day").save(target)
    written = spark.read.format("delta").load(target)
    return {
        "segments": n,
        "rows": written.count(),
        "days": written.select("day").distinct().count(),
        "files": _num_files(spark, target),
    }


def optimize_plain(spark: SparkSession, path: str) -> dict:
    """Time ``OPTIMIZE`` of ``path``; files before/after, what its commit removed and added."""
    files_before = _num_files(spark, path)
    seconds, _ = timed(lambda: spark.sql(f"OPTIMIZE delta.`{path}`").collect())
    files_after = _num_files(spark, path)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
    if history["operation"] != "OPTIMIZE":
        raise AssertionError(f"the last commit of {path} is {history['operation']}")
    log = Path(path) / "_delta_log" / f"{history['version']:020d}.json"
    added = removed = rows = 0
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            added += 1
            rows += json.loads(action["add"]["stats"])["numRecords"]
        elif "remove" in action:
            removed += 1
    return {
        "optimize_s": round(seconds, 1),
        "files_before": files_before,
        "files_after": files_after,
        "files_removed": removed,
        "files_added": added,
        "rows_rewritten": rows,
        "rows_per_minute": round(rows / seconds * 60),
        "files_per_minute": round(removed / seconds * 60, 1),
    }


def bench_drain(lake: Lake, args: argparse.Namespace) -> dict:
    ds = "drain"
    spark = lake.spark
    per_chunk = args.rows_per_chunk
    spec = {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "user"]},
        "metricsSpec": [{"type": "count", "name": "edits"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour"},
        # 2-3 segments per chunk: what a ratio planner with ratio 1 compacts into one.
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": max(1, per_chunk // 2)},
    }
    # Row i of chunk h: distinct dimensions, so the rollup keeps every row. Generated by
    # Spark so that large --rows-per-chunk runs build their input quickly.
    start_s = int(START.timestamp())
    df = spark.range(args.jobs * per_chunk).select(
        F.date_format(
            F.timestamp_seconds(F.lit(start_s) + F.floor(F.col("id") / per_chunk) * 3600),
            "yyyy-MM-dd'T'HH:mm:ssXXX",
        ).alias("ts"),
        F.concat(F.lit("#c"), (F.col("id") % per_chunk).cast("string")).alias("channel"),
        F.concat(F.lit("u"), (F.col("id") % per_chunk).cast("string")).alias("user"),
        (F.col("id") % per_chunk).alias("added"),
    )
    seconds, _ = timed(lambda: lake.append(df, ds, spec))
    segments = len(lake.used_segments(ds))
    logger.info("appended %d segments in %.1fs", segments, seconds)
    visible_before = lake.timeline(ds).visible_segments()
    plain_path = f"{lake.warehouse}/plain_by_day"
    seconds, plain_table = timed(
        lambda: write_plain_by_day(spark, f"{lake.warehouse}/{ds}", plain_path, visible_before)
    )
    logger.info("wrote the plain table in %.1fs: %s", seconds, plain_table)
    rows_before = sum(s.num_rows for s in visible_before)
    if (plain_table["files"], plain_table["rows"]) != (len(visible_before), rows_before):
        raise AssertionError(
            f"{len(visible_before)} segments of {rows_before} rows, plain table: {plain_table}"
        )
    lake.set_compaction_config(ds, CompactionConfig(planner=RatioPlanner(ratio=1.0)))
    target = IngestTarget(spark, lake.warehouse, lake.lockbox)
    manager = CompactionManager(
        target,
        datasources=[ds],
        batch_jobs=args.batch_jobs,
        batch_segments=args.batch_segments,
        batch_rows=args.batch_rows,
    )
    started = time.monotonic()
    manager.run(compactors=args.compactors, once=True)
    drained = time.monotonic() - started
    left = manager.run_pass()
    plain, _ = timed(lambda: spark.sql(f"OPTIMIZE delta.`{lake.warehouse}/{ds}`").collect())
    optimized = optimize_plain(spark, plain_path)
    committed = manager.outcomes["committed"]
    visible_after = lake.timeline(ds).visible_segments()
    kept = {s.id for s in visible_after}
    compacted = [s for s in visible_before if s.id not in kept]
    rows_compacted = sum(s.num_rows for s in compacted)
    rows_per_minute = rows_compacted / drained * 60
    return {
        "jobs": args.jobs,
        "segments_before": segments,
        "segments_after": len(visible_after),
        "compactors": args.compactors,
        "drain_s": round(drained, 1),
        "jobs_committed": committed,
        "jobs_per_minute": round(committed / drained * 60, 1),
        "refused": manager.outcomes["refused"],
        "failed": manager.outcomes["failed"],
        "batch_jobs": args.batch_jobs,
        "batch_rows": args.batch_rows,
        "commit_retries": manager.commit_retries,
        "commit_retries_per_job": round(manager.commit_retries / max(1, committed), 2),
        "retries_by_operation": manager.retries_by_operation,
        "jobs_left_after": left.planned,
        "plain_optimize_s": round(plain, 1),
        "ratio_manager_over_optimize": round(drained / plain, 2),
        "rows_before": rows_before,
        "rows_compacted": rows_compacted,
        "rows_per_minute": round(rows_per_minute),
        # With 10 rows per chunk both sides are bound by per-file costs, not by rows.
        "rows_per_chunk": args.rows_per_chunk,
        "segments_compacted": len(compacted),
        "segments_per_minute": round(len(compacted) / drained * 60, 1),
        "fair_baseline": {
            "table": "the same rows, partitioned by day, one file per segment",
            **plain_table,
            **optimized,
            "ratio_manager_rows_per_min_over_optimize": round(
                rows_per_minute / optimized["rows_per_minute"], 4
            ),
            "ratio_optimize_rows_per_min_over_manager": round(
                optimized["rows_per_minute"] / rows_per_minute, 1
            ),
        },
    }


def drain_summary(result: dict, command: str) -> str:
    fair = result["fair_baseline"]
    return "\n".join(
        [
            f"$ {command}",
            f"manager drain, {result['compactors']} compactors, batches of <= "
            f"{result['batch_jobs']} jobs: {result['jobs_committed']} jobs in "
            f"{result['drain_s']} s = {result['jobs_per_minute']} jobs/min, "
            f"{result['rows_compacted']:,} rows = {result['rows_per_minute']:,} rows/min "
            f"({result['segments_before']} -> {result['segments_after']} segments, "
            f"{result['commit_retries']} commit retries "
            f"({result['commit_retries_per_job']}/job: {result['retries_by_operation']}), "
            f"{result['refused']} refused, "
            f"{result['failed']} failed)",
            f"OPTIMIZE of the same rows partitioned by day: {fair['files_before']} -> "
            f"{fair['files_after']} files over {fair['days']} days in {fair['optimize_s']} s, "
            f"{fair['rows_rewritten']:,} rows = {fair['rows_per_minute']:,} rows/min",
            f"ratio manager / OPTIMIZE, rows per minute: "
            f"{fair['ratio_manager_rows_per_min_over_optimize']} (OPTIMIZE "
            f"{fair['ratio_optimize_rows_per_min_over_manager']}x faster)",
            f"(old baseline, OPTIMIZE of the datasource table partitioned by segment: "
            f"{result['plain_optimize_s']} s, drain / OPTIMIZE seconds = "
            f"{result['ratio_manager_over_optimize']})",
        ]
    )


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
    drain.add_argument("--batch-jobs", type=int, default=DEFAULT_BATCH_JOBS)
    drain.add_argument("--batch-segments", type=int, default=DEFAULT_BATCH_SEGMENTS)
    drain.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS)
    drain.add_argument(
        "--rows-per-chunk",
        type=int,
        default=10,
        help="rows per HOUR chunk, split into 2-3 segments (10: per-file costs dominate both "
        "sides; larger: rows do)",
    )
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
        command = " ".join([".venv/bin/python", "bench/compaction_manager.py", *sys.argv[1:]])
        if args.which == "pass":
            result = {"command": command, **bench_pass(lake, args)}
            print(json.dumps(result, indent=2))
        else:
            result = {"command": command, **bench_drain(lake, args)}
            print(json.dumps(result, indent=2))
            print()
            print(drain_summary(result, command))
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
