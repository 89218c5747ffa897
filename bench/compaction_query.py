"""Benchmark of what compaction buys a query over many small segments, and of what it costs
against plain Delta's OPTIMIZE of the same small files.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/compaction_query.py           # 30 days x 1,000 segments of 100 rows
    .venv/bin/python bench/compaction_query.py --days 2 --segments-per-day 20 --repeat 3

A datasource of ``--days`` (30) DAY chunks, each split into ``--segments-per-day`` (1,000)
segments of ``--rows-per-segment`` (100) web edits (the quickstart's rows; rollup off, so
compaction keeps every row and a query reads the same rows before and after), is built with
one ``lake.append`` per ``--days-per-append`` (1) days: a dynamic partitions spec with
``maxRowsPerSegment`` = rows per segment / 0.8 makes the append split each day into that many
segments. The number of segments actually made is reported. The plain side is the very rows
``lake.read`` returns, in a Delta table partitioned by day with the same number of small files
per day (``maxRecordsPerFile``). Both sides are warmed up first on a small datasource and
table of their own.

* **query**: a scan-and-aggregate (edits and added per channel over the whole datasource,
  through ``lake.read``) before vs after ``lake.compact(ds, mode="major")`` (one segment per
  day): medians of ``--repeat`` (3) rounds, each running the lake and the plain query back to
  back in alternating order; ratio = before / after (how many times faster). The plain table's
  query before and after its ``OPTIMIZE`` is reported alike, and the lake's query again after
  ``lake.mark_overshadowed_unused`` (the compacted-away segments leave the timeline), with the
  time ``lake.read`` takes to build the DataFrame (timeline + plan) in each state.
* **compaction**: ``lake.compact(ds, mode="major")`` (once: it is destructive) vs
  ``OPTIMIZE`` of the plain table (once); ratio = lake / plain, target <= 2. Unless
  ``--skip-minor``, a second copy of the datasource is built and ``lake.compact(ds,
  mode="minor")`` (every day's segments merged into one, in place) is timed too.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ingest_read import alternating, timed
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake import Lake
from segmentlake.cli.quickstart import SPEC, edits_of_days
from segmentlake.ingest.report import TaskReport
from segmentlake.spark.session import spark_session

logger = logging.getLogger("compaction_query")

START = datetime(2024, 1, 1, tzinfo=UTC)
FILL = 0.8  # an append splits an oversized segment into ceil(rows / (0.8 * max)) segments


def spec(max_rows_per_segment: int) -> dict[str, Any]:
    """The quickstart's spec without its sketch, DAY segments, rollup off, dynamic partitions
    small enough to split each day into many segments."""
    return {
        **SPEC,
        "metricsSpec": [m for m in SPEC["metricsSpec"] if m["type"] != "HLLSketchBuild"],
        "granularitySpec": {
            "segmentGranularity": "day",
            "queryGranularity": "none",
            "rollup": False,
        },
        "tuningConfig": {
            "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": max_rows_per_segment}
        },
    }


def max_rows_for(rows_per_segment: int) -> int:
    """The maxRowsPerSegment that splits a day into segments of ``rows_per_segment`` rows."""
    return math.ceil(rows_per_segment / FILL)


def build(
    lake: Lake,
    name: str,
    *,
    days: int,
    segments_per_day: int,
    rows_per_segment: int,
    days_per_append: int,
) -> dict[str, Any]:
    """Append ``days`` days of small segments into ``name``; what it took and made."""
    rows_per_day = segments_per_day * rows_per_segment
    the_spec = spec(max_rows_for(rows_per_segment))
    reports: list[TaskReport] = []
    started = time.perf_counter()
    for first in range(0, days, days_per_append):
        group = [
            START + timedelta(days=d) for d in range(first, min(days, first + days_per_append))
        ]
        df = edits_of_days(lake.spark, group, rows_per_day, seed=1)
        report = lake.append(df, name, the_spec)
        logger.info(
            "%s: appended days %d-%d: %d segments in %.1f s (%s)",
            name,
            first,
            first + len(group) - 1,
            report.segments,
            report.seconds,
            ", ".join(f"{k} {v:.1f}" for k, v in report.phases.items()),
        )
        reports.append(report)
    seconds = time.perf_counter() - started
    phases: dict[str, float] = {}
    for r in reports:
        for k, v in r.phases.items():
            phases[k] = phases.get(k, 0.0) + v
    return {
        "seconds": round(seconds, 1),
        "appends": len(reports),
        "rows": sum(r.rows.rows_out for r in reports),
        "segments_written": sum(r.segments for r in reports),
        "visible_segments": len(lake.timeline(name).visible_segments()),
        "max_rows_per_segment": max_rows_for(rows_per_segment),
        "largest_segment_rows": max(r.largest_segment_rows for r in reports),
        "phases_total_s": {k: round(v, 1) for k, v in phases.items()},
    }


def write_plain(spark: SparkSession, rows: DataFrame, path: str, rows_per_file: int) -> int:
    """``rows`` as a Delta table partitioned by day, ``rows_per_file`` rows a file (each day
    wholly in one task, so a day of N x rows_per_file rows makes N files); its file count."""
    (
        rows.withColumn("day", F.to_date("__time"))
        .repartition("day")
        .write.format("delta")
        .option("maxRecordsPerFile", rows_per_file)
        .partitionBy("day")
        .save(path)
    )
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"])


def optimize(spark: SparkSession, path: str) -> dict[str, Any]:
    started = time.perf_counter()
    metrics = spark.sql(f"OPTIMIZE delta.`{path}`").first()["metrics"]
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "files_in": metrics["numFilesRemoved"],
        "files_out": metrics["numFilesAdded"],
    }


def compact(lake: Lake, name: str, mode: str, interval: str) -> dict[str, Any]:
    started = time.perf_counter()
    report = lake.compact(name, interval, mode=mode)
    seconds = time.perf_counter() - started
    logger.info("%s", report.summary())
    return {
        "seconds": round(seconds, 2),
        "status": report.status,
        "segments_in": report.input_segments,
        "segments_out": report.segments,
        "rows_in": report.rows.rows_in,
        "rows_out": report.rows.rows_out,
        "phases": {k: round(v, 2) for k, v in report.phases.items()},
    }


def aggregate(df: DataFrame) -> list:
    return df.groupBy("channel").agg(F.sum("edits"), F.sum("added")).collect()


def answer(df: DataFrame) -> list:
    return sorted(map(tuple, aggregate(df)))


def queries(lake: Lake, name: str, plain: str, repeat: int) -> dict[str, Any]:
    """Lake vs plain scan-and-aggregate, alternating; medians, plus lake.read's planning."""
    spark = lake.spark
    assert answer(lake.read(name)) == answer(spark.read.format("delta").load(plain)), (
        "lake.read and the plain table disagree"
    )  # also warms both sides up
    plain_s, lake_s = alternating(
        repeat,
        lambda _: aggregate(spark.read.format("delta").load(plain)),
        lambda _: aggregate(lake.read(name)),
    )
    plan_s = [timed(lambda: lake.read(name)) for _ in range(repeat)]
    med = statistics.median
    return {
        "lake_s": round(med(lake_s), 3),
        "plain_s": round(med(plain_s), 3),
        "lake_building_the_dataframe_s": round(med(plan_s), 3),
        "runs": {"lake": lake_s, "plain": plain_s, "lake_plan": plan_s},
    }


def lake_only(lake: Lake, name: str, repeat: int) -> dict[str, Any]:
    aggregate(lake.read(name))  # warm
    lake_s = [timed(lambda: aggregate(lake.read(name))) for _ in range(repeat)]
    plan_s = [timed(lambda: lake.read(name)) for _ in range(repeat)]
    return {
        "lake_s": round(statistics.median(lake_s), 3),
        "lake_building_the_dataframe_s": round(statistics.median(plan_s), 3),
        "runs": {"lake": lake_s, "lake_plan": plan_s},
    }


def warm_up(lake: Lake, root: Path) -> None:
    """Every code path once on a small datasource and table (JIT, caches); not counted."""
    build(lake, "warmup", days=2, segments_per_day=4, rows_per_segment=100, days_per_append=1)
    write_plain(lake.spark, lake.read("warmup"), str(root / "plain_warmup"), 100)
    queries(lake, "warmup", str(root / "plain_warmup"), 1)
    compact(lake, "warmup", "major", f"{START.date()}/P2D")
    optimize(lake.spark, str(root / "plain_warmup"))


def summary(result: dict[str, Any]) -> str:
    b, a = result["query_before"], result["query_after"]
    c, o = result["compaction_major"], result["plain_optimize"]
    lines = [
        f"{result['days']} days x {result['segments_per_day']} segments of "
        f"{result['rows_per_segment']} rows: {result['build']['visible_segments']:,} segments "
        f"made ({result['build']['rows']:,} rows, build {result['build']['seconds']} s); plain "
        f"table {result['plain_files']:,} files",
        "",
        f"{'':44}{'segmentlake':>14}{'plain Delta':>14}{'ratio':>9}",
        f"{'query, many small segments / files':44}{b['lake_s']:>12} s{b['plain_s']:>12} s"
        f"{b['lake_s'] / b['plain_s']:>9.2f}",
        f"{'query, after major compaction / OPTIMIZE':44}{a['lake_s']:>12} s{a['plain_s']:>12} s"
        f"{a['lake_s'] / a['plain_s']:>9.2f}",
        f"{'query, after mark_overshadowed_unused':44}"
        f"{result['query_after_cleanup']['lake_s']:>12} s",
        f"{'query speed-up from compaction (before/after)':44}"
        f"{result['query_speedup']:>13}x{result['plain_query_speedup']:>13}x",
        f"{'compaction (major) vs OPTIMIZE, target <= 2':44}{c['seconds']:>12} s"
        f"{o['seconds']:>12} s{result['compaction_ratio']:>9.2f}",
    ]
    if "compaction_minor" in result:
        m = result["compaction_minor"]
        lines.append(
            f"{'compaction (minor) vs OPTIMIZE':44}{m['seconds']:>12} s{o['seconds']:>12} s"
            f"{result['minor_compaction_ratio']:>9.2f}"
        )
    lines += [
        "",
        f"major: {c['segments_in']:,} -> {c['segments_out']:,} segments, {c['rows_in']:,} rows; "
        + ", ".join(f"{k} {v} s" for k, v in c["phases"].items()),
        f"OPTIMIZE: {o['files_in']:,} -> {o['files_out']:,} files",
        f"lake.read building the DataFrame: before {b['lake_building_the_dataframe_s']} s, after "
        f"{a['lake_building_the_dataframe_s']} s, after cleanup "
        f"{result['query_after_cleanup']['lake_building_the_dataframe_s']} s "
        f"(mark_overshadowed_unused {result['mark_overshadowed_unused_s']} s)",
    ]
    if "compaction_minor" in result:
        m = result["compaction_minor"]
        lines.append(
            f"minor: {m['segments_in']:,} -> {m['segments_out']:,} segments; "
            + ", ".join(f"{k} {v} s" for k, v in m["phases"].items())
            + f"; query after it {result['query_after_minor']['lake_s']} s"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--segments-per-day", type=int, default=1_000)
    parser.add_argument("--rows-per-segment", type=int, default=100)
    parser.add_argument("--days-per-append", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-minor", action="store_true", help="no minor compaction copy")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--json", type=Path, help="write every figure (and each run) here")
    parser.add_argument("--keep", action="store_true", help="keep the warehouse")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logger.setLevel(logging.INFO)
    spark = spark_session(
        app_name="bench-compaction-query",
        master=args.master,
        quiet_progress=True,
        extra_conf={"spark.ui.enabled": "false"},
    )
    root = Path(tempfile.mkdtemp(prefix="bench-compaction-query-"))
    interval = f"{START.date()}/P{args.days}D"
    shape = {
        "days": args.days,
        "segments_per_day": args.segments_per_day,
        "rows_per_segment": args.rows_per_segment,
        "days_per_append": args.days_per_append,
    }
    try:
        lake = Lake(spark, str(root / "warehouse"))
        warm_up(lake, root)
        logger.info("building %s", shape)
        result: dict[str, Any] = {**shape, "build": build(lake, "small", **shape)}
        plain = str(root / "plain")
        result["plain_files"] = write_plain(spark, lake.read("small"), plain, args.rows_per_segment)
        logger.info("built: %s; plain table: %d files", result["build"], result["plain_files"])
        before = answer(lake.read("small"))
        result["query_before"] = queries(lake, "small", plain, args.repeat)
        logger.info("query before: %s", result["query_before"])
        result["compaction_major"] = compact(lake, "small", "major", interval)
        result["plain_optimize"] = optimize(spark, plain)
        logger.info("major: %s; OPTIMIZE %s", result["compaction_major"], result["plain_optimize"])
        assert answer(lake.read("small")) == before, "major compaction changed the answer"
        result["query_after"] = queries(lake, "small", plain, args.repeat)
        result["mark_overshadowed_unused_s"] = round(
            timed(lambda: lake.mark_overshadowed_unused("small")), 2
        )
        result["query_after_cleanup"] = lake_only(lake, "small", args.repeat)
        result["visible_segments_after"] = len(lake.timeline("small").visible_segments())
        result["query_speedup"] = round(
            result["query_before"]["lake_s"] / result["query_after"]["lake_s"], 2
        )
        result["plain_query_speedup"] = round(
            result["query_before"]["plain_s"] / result["query_after"]["plain_s"], 2
        )
        result["compaction_ratio"] = round(
            result["compaction_major"]["seconds"] / result["plain_optimize"]["seconds"], 2
        )
        if not args.skip_minor:
            result["build_minor_copy"] = build(lake, "minor", **shape)
            result["compaction_minor"] = compact(lake, "minor", "minor", interval)
            assert answer(lake.read("minor")) == before, "minor compaction changed the answer"
            result["query_after_minor"] = lake_only(lake, "minor", args.repeat)
            result["visible_segments_after_minor"] = len(lake.timeline("minor").visible_segments())
            result["minor_compaction_ratio"] = round(
                result["compaction_minor"]["seconds"] / result["plain_optimize"]["seconds"], 2
            )
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        print(summary(result))
    finally:
        if args.keep:
            logger.info("kept %s", root)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
