"""One ``lake.append`` into 10^4 HOUR segments, end to end, against the plain Delta append.

The issue that moved the metadata onto delta-rs measured this append failing on the old
engine: 200,000 rows over 10,000 hours, allocation quadratic in the locks, leases expired by
publish time (``LockRefused``). Here it runs on real Spark and the local warehouse:

    .venv/bin/python bench/append_many_segments.py                  # 200k rows, 10,000 hours
    .venv/bin/python bench/append_many_segments.py --hours 1000     # quicker
    .venv/bin/python bench/append_many_segments.py --small-appends 0 --syncs 0  # the big append

Reported: the append's status, segments, its phases (parse, lock, write, allocate, publish),
metadata commits and retries, the Python driver's peak RSS growth, a cold ``timeline()`` of
the datasource, and the read-back count. The plain way is the same rows appended to a Delta
table partitioned by hour (``partitionBy("hour")``: what a Delta user would write), measured
in the same run; ratio = segmentlake / plain.

Then ``--small-appends`` rounds of what a stream does next: 100 rows into one hour, appended to
the datasource of 10^4 segments and to the plain table of 10^4 hour partitions, alternating
which goes first; medians after the first (uncounted, warm-up) round, with the append's phases.

Then ``--syncs`` rounds of the visible table's sync alone at 10^4 segments, each after one
segment was marked unused or used again (its files leave or join the visible table): the
median in the thread that synced before (the process follows both tables' logs), one sync in
a thread that never synced (it follows what the process followed), the first sync of a
process while the table is current (a read's: it reads the visible table's latest log entry),
one as the first sync of a process after a change (it loads both tables' files first, at the
same time), and one that rebuilds the visible table from nothing (10^4 add actions with their
stats), and the sync after it (one segment marked unused: it follows past the rebuild's own
entry).
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest_read import alternating

from segmentlake.lake import Lake
from segmentlake.metadata.visible_table import (
    SyncReport,
    _forget_followed,
    sync_visible_table,
    syncs_deferred,
    visible_table_path,
)
from segmentlake.spark.session import spark_session

CONF = {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}
HOUR_MS = 3_600_000
START_MS = 1_577_836_800_000  # 2020-01-01


def make_input(spark: SparkSession, path: str, rows: int, hours: int) -> DataFrame:
    """``rows`` rows spread evenly over ``hours`` hours (deterministic), stored as Delta."""
    per_hour = max(1, rows // hours)
    df = spark.range(rows).select(
        (F.lit(START_MS) + (F.col("id") / per_hour).cast("long") * HOUR_MS + F.col("id") % 1000)
        .cast("long")
        .alias("ts"),
        (F.col("id") % 97).cast("string").alias("channel"),
        (F.col("id") % 13).cast("string").alias("page"),
        F.lit(1).cast("long").alias("added"),
    )
    df = df.withColumn("timestamp", F.timestamp_millis("ts")).drop("ts")
    df.write.format("delta").save(path)
    return spark.read.format("delta").load(path)


SPEC = {
    "timestampSpec": {"column": "timestamp", "format": "auto"},
    "dimensionsSpec": {"dimensions": ["channel", "page"]},
    "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False},
}


def small_appends(lake: Lake, small: DataFrame, plain: Path, rounds: int) -> dict:
    """``rounds`` appends of ``small`` into the big datasource and into the plain table,
    alternating which goes first; medians of all rounds but the first."""
    hourly = small.withColumn("hour", F.date_trunc("hour", F.col("timestamp")))
    phases: list[dict[str, float]] = []

    def ours(_: int) -> None:
        report = lake.append(small, "many", SPEC)
        assert report.status == "SUCCESS", report.error
        phases.append(report.phases)

    def theirs(_: int) -> None:
        hourly.write.format("delta").mode("append").partitionBy("hour").save(str(plain))

    plain_s, lake_s = alternating(rounds, theirs, ours)
    med = statistics.median
    return {
        "rows": small.count(),
        "rounds_counted": rounds - 1,
        "segmentlake_s": round(med(lake_s[1:]), 3),
        "plain_s": round(med(plain_s[1:]), 3),
        "ratio": round(med(lake_s[1:]) / med(plain_s[1:]), 2),
        "phases_s": {k: round(med([p.get(k, 0.0) for p in phases[1:]]), 3) for k in phases[0]},
        "segmentlake_runs_s": [round(x, 3) for x in lake_s],
        "plain_runs_s": [round(x, 3) for x in plain_s],
    }


def syncs(lake: Lake, rounds: int) -> dict:
    """The visible table's sync at the datasource's size: warm (this thread synced before),
    in a thread that never did, as a process's first (nothing followed yet), a rebuild
    (the visible table deleted) and the sync after the rebuild."""
    visible = lake.timeline("many").visible_segments()
    segment = visible[len(visible) // 2].id
    warm = []
    for i in range(rounds):
        with syncs_deferred():
            (lake.mark_unused if i % 2 == 0 else lake.mark_used)([segment])
        started = time.perf_counter()
        report = sync_visible_table(lake.metadata, "many")
        warm.append(time.perf_counter() - started)
        assert report.added + report.removed > 0, report
    if rounds % 2:
        lake.mark_used([segment])

    def timed_in_new_thread() -> float:
        took: list[float] = []

        def run() -> None:
            started = time.perf_counter()
            reports.append(sync_visible_table(lake.metadata, "many"))
            took.append(time.perf_counter() - started)

        with syncs_deferred():
            lake.mark_unused([segment])
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        lake.mark_used([segment])
        return took[0]

    reports: list[SyncReport] = []
    new_thread = timed_in_new_thread()
    _forget_followed()  # what a process that never synced knows
    started = time.perf_counter()
    current = sync_visible_table(lake.metadata, "many")  # a read's, the table current
    first_current = time.perf_counter() - started
    assert current.already_current, current
    _forget_followed()
    cold = timed_in_new_thread()
    shutil.rmtree(visible_table_path(lake.warehouse, "many"))
    started = time.perf_counter()
    rebuilt = sync_visible_table(lake.metadata, "many")
    rebuild = time.perf_counter() - started
    with syncs_deferred():
        lake.mark_unused([segment])
    started = time.perf_counter()
    after = sync_visible_table(lake.metadata, "many")  # follows past the rebuild's own entry
    after_rebuild = time.perf_counter() - started
    lake.mark_used([segment])
    return {
        "segments": len(visible),
        "rounds": rounds,
        "warm_median_ms": round(statistics.median(warm[1:]) * 1000, 1),
        "warm_runs_ms": [round(x * 1000, 1) for x in warm],
        "new_thread_ms": round(new_thread * 1000, 1),
        "first_in_process_current_ms": round(first_current * 1000, 1),
        "first_in_process_ms": round(cold * 1000, 1),
        "first_in_process_keys_diffed": reports[-1].keys_diffed,
        "rebuild_ms": round(rebuild * 1000, 1),
        "rebuild_added_files": rebuilt.added,
        "after_rebuild_ms": round(after_rebuild * 1000, 1),
        "after_rebuild_keys_diffed": after.keys_diffed,
    }


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--hours", type=int, default=10_000)
    parser.add_argument("--small-appends", type=int, default=7)
    parser.add_argument("--syncs", type=int, default=12)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = spark_session(app_name="bench-append-many", quiet_progress=True, extra_conf=CONF)
    root = Path(tempfile.mkdtemp(prefix="bench-append-many-"))
    try:
        source = make_input(spark, str(root / "source"), args.rows, args.hours)
        rows = source.count()
        lake = Lake(spark, str(root / "warehouse"))

        started = time.perf_counter()
        hour = F.date_trunc("hour", F.col("timestamp"))
        source.withColumn("hour", hour).write.format("delta").partitionBy("hour").save(
            str(root / "plain")
        )
        plain_s = time.perf_counter() - started

        rss_before = rss_mb()
        started = time.perf_counter()
        report = lake.append(source, "many", SPEC, lock_timeout_s=600)
        append_s = time.perf_counter() - started
        rss_after = rss_mb()

        started = time.perf_counter()
        cold = Lake(None, lake.warehouse).timeline("many")
        timeline_s = time.perf_counter() - started
        started = time.perf_counter()
        read_back = lake.read("many").count()
        read_s = time.perf_counter() - started

        result = {
            "command": " ".join(sys.argv),
            "rows": rows,
            "hours": args.hours,
            "status": report.status,
            "error": report.error,
            "segments": report.segments,
            "append_s": round(append_s, 1),
            "phases_s": {k: round(v, 1) for k, v in report.phases.items()},
            "metadata_commits": dict(report.commits),
            "metadata_retries": dict(report.retries),
            "plain_delta_append_partitioned_by_hour_s": round(plain_s, 1),
            "ratio_append_over_plain": round(append_s / plain_s, 2),
            "python_peak_rss_growth_mb": round(rss_after - rss_before, 1),
            "python_rss_growth_kb_per_segment": round(
                (rss_after - rss_before) * 1024 / max(1, report.segments), 2
            ),
            "cold_timeline_s": round(timeline_s, 2),
            "timeline_segments": len(cold),
            "read_back_rows": read_back,
            "read_back_s": round(read_s, 1),
        }
        if args.small_appends > 0 and report.status == "SUCCESS":
            small = make_input(spark, str(root / "small"), 100, 1)
            result["small_appends"] = small_appends(lake, small, root / "plain", args.small_appends)
        if args.syncs > 0 and report.status == "SUCCESS":
            result["visible_table_sync"] = syncs(lake, args.syncs)
        print(json.dumps(result, indent=2))
        if report.status != "SUCCESS" or read_back != rows:
            raise SystemExit("the append failed or lost rows")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
