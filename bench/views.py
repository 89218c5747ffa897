"""SQL over the visible table against a plain Delta scan of the same rows, at 1k and 10k
segments; the cost of keeping the visible table current.

    .venv/bin/python bench/views.py                          # 1,000 and 10,000 segments
    .venv/bin/python bench/views.py --segments 1000 --rows 500000   # quicker

Per size: ``--rows`` rows over N HOUR segments (one ``lake.append``), and the same rows in a
plain Delta table partitioned by hour — the best plain layout for these queries, and the same
files' worth of data. Every row is visible, so both hold exactly the same rows. Queries, run
alternately on the view and the plain table, median of ``--repeat``:

* ``all``: a GROUP BY over every row;
* ``day``: the same over one day (the plain query filters on its partition column too);
* ``in-list``: ``all`` through the pre-visible-table read (the visible keys in one ``IN``
  list over the datasource table), for reference.

Also: files the ``day`` query read on the view (Delta's data skipping on ``__time`` stats),
and the visible table's upkeep: a sync with nothing to do, and a sync after one segment
was marked unused (the diff of N segments' files).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from segmentlake.lake import Lake
from segmentlake.metadata.visible_table import sync_visible_table, syncs_deferred
from segmentlake.spark.session import spark_session
from segmentlake.storage.visible_rows import visible_rows

CONF = {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}
HOUR_MS = 3_600_000
START_MS = 1_577_836_800_000  # 2020-01-01
DAY_SQL = (
    "__time >= TIMESTAMP'2020-01-03 00:00:00 UTC' AND __time < TIMESTAMP'2020-01-04 00:00:00 UTC'"
)
SPEC = {
    "timestampSpec": {"column": "timestamp", "format": "auto"},
    "dimensionsSpec": {"dimensions": ["channel", "page"]},
    "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "NONE", "rollup": False},
}


def make_input(spark: SparkSession, rows: int, hours: int) -> DataFrame:
    per_hour = max(1, rows // hours)
    return spark.range(rows).select(
        F.timestamp_millis(
            F.lit(START_MS) + (F.col("id") / per_hour).cast("long") * HOUR_MS + F.col("id") % 1000
        ).alias("timestamp"),
        (F.col("id") % 97).cast("string").alias("channel"),
        (F.col("id") % 13).cast("string").alias("page"),
        F.lit(1).cast("long").alias("added"),
    )


def group_by(df: DataFrame) -> list:
    return df.groupBy("channel").agg(F.count("*"), F.sum("added")).collect()


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def files_read(spark: SparkSession, df: DataFrame) -> tuple[int, str]:
    """Files the scan of ``df`` read (its ``numFiles`` SQL metric, after data skipping) and
    its scan node. Adaptive execution is off for this one run: its plan hides the scan."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        qe = df._jdf.queryExecution()
        df._jdf.collect()
        plan = qe.executedPlan()
        leaves = plan.collectLeaves()
        found = -1
        for i in range(leaves.size()):
            metrics = leaves.apply(i).metrics()
            if metrics.contains("numFiles"):
                found = int(metrics.apply("numFiles").value())
        scans = [line.strip() for line in plan.toString().splitlines() if "FileScan" in line]
        return found, scans[0][:300] if scans else ""
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")


def run(spark: SparkSession, root: Path, segments: int, rows: int, repeat: int) -> None:
    lake = Lake(spark, str(root / f"wh{segments}"))
    source = make_input(spark, rows, segments)
    source.write.format("delta").save(str(root / f"in{segments}"))
    source = spark.read.format("delta").load(str(root / f"in{segments}"))
    started = time.perf_counter()
    report = lake.append(source, "events", SPEC)
    append_s = time.perf_counter() - started
    plain_path = str(root / f"plain{segments}")
    (
        source.withColumnRenamed("timestamp", "__time")
        .withColumn("hour", F.date_trunc("hour", "__time"))
        .write.format("delta")
        .partitionBy("hour")
        .save(plain_path)
    )
    view = lake.register_view("events", f"events{segments}")
    plain = spark.read.format("delta").load(plain_path)
    visible = len(lake.timeline("events").visible_segments())
    print(f"\n== {segments:,} segments, {rows:,} rows: append {append_s:.1f} s "
          f"({report.status}, {visible:,} visible)")  # fmt: skip

    def in_list() -> DataFrame:
        rows_df, _ = visible_rows(spark, f"{lake.warehouse}/events", lake.timeline("events"))
        return rows_df

    queries = {
        "all": (lambda: group_by(spark.table(view)), lambda: group_by(plain)),
        "day": (
            lambda: group_by(spark.table(view).where(DAY_SQL)),
            lambda: group_by(
                plain.where(DAY_SQL).where(
                    "hour >= TIMESTAMP'2020-01-03 00:00:00 UTC' "
                    "AND hour < TIMESTAMP'2020-01-04 00:00:00 UTC'"
                )
            ),
        ),
        "in-list": (lambda: group_by(in_list()), lambda: group_by(plain)),
    }
    assert sorted(queries["all"][0]()) == sorted(queries["all"][1]()), "view != plain"
    for name, (ours, theirs) in queries.items():
        ours(), theirs()  # warm
        a, b = [], []
        for _ in range(repeat):
            a.append(timed(ours))
            b.append(timed(theirs))
        ma, mb = statistics.median(a), statistics.median(b)
        spread = f"view runs {min(a):.3f}-{max(a):.3f}, plain {min(b):.3f}-{max(b):.3f}"
        print(f"{name:8s} view {ma:6.3f} s  plain {mb:6.3f} s  ratio {ma / mb:5.2f}  ({spread})")
    read, scan = files_read(spark, spark.table(view).where(DAY_SQL).groupBy("channel").count())
    total = len(spark.read.format("delta").load(lake.visible_table_path("events")).inputFiles())
    print(f"day query on the view read {read} of {total} files (data skipping on __time)")
    print(f"  its scan: {scan}")

    noop = [timed(lambda: sync_visible_table(lake.metadata, "events")) for _ in range(repeat)]
    one = lake.timeline("events").visible_segments()[0].id
    diffs = []
    for _ in range(repeat):
        with syncs_deferred():
            lake.mark_unused([one])
        diffs.append(timed(lambda: sync_visible_table(lake.metadata, "events")))
        with syncs_deferred():
            lake.mark_used([one])
        sync_visible_table(lake.metadata, "events")
    print(f"sync with nothing to do: median {statistics.median(noop) * 1000:.0f} ms; "
          f"after one segment marked unused: median {statistics.median(diffs) * 1000:.0f} ms "
          f"(runs {min(diffs) * 1000:.0f}-{max(diffs) * 1000:.0f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", default="1000,10000")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    spark = spark_session(
        app_name="bench-views", master="local[2]", extra_conf=CONF, quiet_progress=True
    )
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="bench-views-"))
    try:
        for n in (int(s) for s in args.segments.split(",")):
            run(spark, root, n, args.rows, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
