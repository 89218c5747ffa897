"""A Spark Connect client running the quickstart's story on a warehouse, in its own process.

A process that has a classic SparkContext cannot also open a Connect session (pyspark refuses,
and a Connect session switches the whole process's ``pyspark.sql.functions`` to Connect), so
the test suite's shared session and this client live in different processes.

``python -m tests.connect.connect_worker URL WAREHOUSE INPUT_DIR RESULT_JSON`` writes what it
saw after each step to ``RESULT_JSON`` (see ``test_connect.py``); URL ``classic`` runs the same
story on a local classic session, for timing. A fifth argument ``stream`` runs a small
Structured Streaming ingestion instead.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.cli import quickstart
from segmentlake.cli.quickstart import DATASOURCE, SPEC, START, edits_of_days, sample_edits
from segmentlake.core.interval import Interval
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid_runner import run_druid_task
from segmentlake.errors import ClassicSessionRequired
from segmentlake.lake import Lake
from segmentlake.streaming import append_stream
from tests.multiprocess_support import write_json
from tests.streaming.support import SCHEMA as STREAM_SCHEMA
from tests.streaming.support import SPEC as STREAM_SPEC
from tests.streaming.support import write_files

ROWS_PER_DAY = 100


def per_day(lake: Lake) -> dict[str, int]:
    """Visible edits per day, summed by Spark over ``lake.read``."""
    rows = (
        lake.read(DATASOURCE)
        .groupBy(F.date_format("__time", "yyyy-MM-dd").alias("day"))
        .agg(F.sum("edits").alias("edits"))
        .collect()
    )
    return {r.day: int(r.edits) for r in rows}


def view_edits(spark: SparkSession, view: str) -> int:
    return int(spark.sql(f"SELECT SUM(edits) AS edits FROM {view}").collect()[0].edits)


def skip_header_task(folder: Path, *, skip: int) -> DruidIngestTask:
    """A Druid CSV task; ``skipHeaderRows`` (``skip`` > 0) needs the RDD API."""
    lines = ["# exported"] * skip + ["timestamp,page", "2024-01-01T00:00:00Z,a"]
    (folder / "rows.csv").write_text("\n".join(lines) + "\n")
    return DruidIngestTask.from_dict(
        {
            "type": "index_parallel",
            "spec": {
                "dataSchema": {
                    "dataSource": "skipped",
                    "timestampSpec": {"column": "timestamp", "format": "iso"},
                    "dimensionsSpec": {"dimensions": ["page"]},
                    "granularitySpec": {"segmentGranularity": "day", "rollup": False},
                },
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": {"type": "local", "baseDir": str(folder), "filter": "*.csv"},
                    "appendToExisting": True,
                    "inputFormat": {
                        "type": "csv",
                        "findColumnsFromHeader": True,
                        "skipHeaderRows": skip,
                    },
                },
            },
        }
    )


def session(url: str) -> SparkSession:
    """A Connect client on ``url``; ``classic`` makes a local classic session instead, to time
    the same story both ways."""
    if url != "classic":
        return SparkSession.builder.remote(url).getOrCreate()
    from segmentlake.spark import spark_session

    conf = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    return spark_session(master="local[2]", quiet_progress=True, extra_conf=conf)


def main(url: str, warehouse: str, inputs: Path, result_path: Path) -> None:
    result: dict[str, Any] = {"seconds": {}}
    began = time.monotonic()

    def step(name: str) -> None:
        result["seconds"][name] = round(time.monotonic() - began, 2)

    spark = session(url)
    result["session"] = type(spark).__module__
    lake = Lake(spark, warehouse)
    days = [START + timedelta(days=d) for d in range(4)]
    report = lake.append(edits_of_days(spark, days, ROWS_PER_DAY, seed=1), DATASOURCE, SPEC)
    result["append"] = {"status": report.status, "per_day": per_day(lake)}
    metrics = report.spark_metrics  # the status store is in the server's JVM: unknown
    result["append"]["metrics"] = None if metrics is None else metrics.to_json()
    step("append")
    late = [START + timedelta(days=1), START + timedelta(days=3)]
    report = lake.append(edits_of_days(spark, late, ROWS_PER_DAY // 10, seed=7), DATASOURCE, SPEC)
    result["late"] = {"status": report.status, "per_day": per_day(lake)}
    step("late append")
    day = START + timedelta(days=2)
    fixed = sample_edits(spark, day, ROWS_PER_DAY // 2, seed=42)
    interval = Interval(day, day + timedelta(days=1))
    report = lake.overwrite(fixed, DATASOURCE, SPEC, interval=interval)
    result["overwrite"] = {"status": report.status, "per_day": per_day(lake)}
    step("overwrite")

    # The quickstart's own tail on the existing datasource: timeline, view, SQL.
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result["quickstart_exit"] = quickstart.run(lake, days=4, rows_per_day=ROWS_PER_DAY)
    result["quickstart_out"] = printed.getvalue()
    view = lake.register_view(DATASOURCE, "wiki_view", temporary=False)
    result["view"] = {"edits": view_edits(spark, view)}
    handle = lake.table(DATASOURCE)
    result["inspect"] = {
        "used_segments": handle.inspect.segments().count(),
        "history": handle.inspect.history().count(),
    }
    holders = lake.timeline(DATASOURCE).lookup(Interval.parse("2024-01-01/2024-01-05"))
    result["timeline"] = [[str(h.interval), len(h.segments)] for h in holders]
    en = "channel = '#en.wikipedia'"
    read = lake.read(DATASOURCE, "2024-01-02/P2D", columns=["channel", "edits"], filter=en)
    in_sql = f"{en} AND __time >= '2024-01-02' AND __time < '2024-01-04'"
    result["filtered"] = {
        "read": int(read.agg(F.sum("edits")).collect()[0][0]),
        "sql": int(spark.sql(f"SELECT SUM(edits) FROM {view} WHERE {in_sql}").collect()[0][0]),
        "columns": read.columns,
    }
    result["bad_sql"] = bad_sql(lake, spark, days)
    step("timeline, view, SQL")

    # Jan 2's first append (100 rows) and its late data (10): the minor planner leaves a
    # segment that large alone, so the two are named (hand-picked segments are merged).
    late_day = Interval(late[0], late[0] + timedelta(days=1))
    report = lake.compact(DATASOURCE, segments=lake.used_segments(DATASOURCE, late_day))
    result["compact"] = {"status": report.status, "per_day": per_day(lake)}
    step("compact")
    unused = lake.mark_overshadowed_unused(DATASOURCE)
    killed = lake.kill(DATASOURCE, older_than=0, vacuum=False)
    result["kill"] = {
        "unused": len(unused),
        "killed": len(killed.killed),
        "rows_deleted": killed.rows_deleted,
        "per_day": per_day(lake),
        "view_edits": view_edits(spark, view),  # the persistent view follows on its own
    }
    step("kill")

    try:
        run_druid_task(lake, skip_header_task(inputs, skip=1))
        result["skip_header"] = "no error"
    except ClassicSessionRequired as e:
        result["skip_header"] = {"operation": e.operation, "message": str(e)}
    report = run_druid_task(lake, skip_header_task(inputs, skip=0))
    result["druid_csv"] = {"status": report.status, "rows": lake.read("skipped").count()}
    result["perfect_rollup"] = perfect_rollup(lake, spark, days)
    write_json(result_path, result)


def error_of(call: Any) -> dict[str, str] | str:
    try:
        call()
    except Exception as e:  # what the client sees, whatever it is
        return {"type": f"{type(e).__module__}.{type(e).__name__}", "message": str(e)}
    return "no error"


def bad_sql(lake: Lake, spark: SparkSession, days: list[Any]) -> dict[str, Any]:
    """A Connect client analyses a plan only when it runs: bad SQL in a read's filter or a
    transformSpec must still be a SpecError where it is given, before anything is written."""
    rows = edits_of_days(spark, days[:1], 5, seed=9)
    filtered = {**SPEC, "transformSpec": {"filter": "no_such_column = 1"}}
    transformed = {**SPEC, "transformSpec": {"transforms": [{"name": "x", "expression": "y +"}]}}
    return {
        "read_syntax": error_of(lambda: lake.read(DATASOURCE, filter="channel = ")),
        "read_cut_off": error_of(lambda: lake.read(DATASOURCE, filter="channel = 'a' AND")),
        "read_column": error_of(lambda: lake.read(DATASOURCE, filter=F.col("nope") == 1)),
        "ingest_filter": error_of(lambda: lake.append(rows, DATASOURCE, filtered)),
        "ingest_transform": error_of(lambda: lake.append(rows, DATASOURCE, transformed)),
    }


def perfect_rollup(lake: Lake, spark: SparkSession, days: list[Any]) -> dict[str, Any]:
    """Range partitioning with a target size: the buckets are determined inside the write
    job and come back as its observed metrics, which must work over Connect too."""
    ranged = {
        **SPEC,
        "partitionsSpec": {
            "type": "range",
            "partitionDimensions": ["channel"],
            "targetRowsPerSegment": 40,
        },
    }
    rows = edits_of_days(spark, days[:2], ROWS_PER_DAY, seed=3)
    interval = Interval(days[0], days[2])
    report = lake.overwrite(rows, "ranged", ranged, interval=interval)
    shards: dict[str, list[Any]] = {}
    for s in lake.used_segments("ranged"):
        shards.setdefault(str(s.interval), []).append(s.shard_spec)
    contiguous = all(_contiguous(v) for v in shards.values())
    return {
        "status": report.status,
        "rows_in": report.rows.rows_in,
        "rows_out": report.rows.rows_out,
        "segments_per_day": sorted(len(v) for v in shards.values()),
        "contiguous": contiguous,
        "read_rows": lake.read("ranged").count(),
    }


def _contiguous(shards: list[Any]) -> bool:
    """Whether a chunk's ranges, in partition order, are open at both ends and meet."""
    ordered = sorted(shards, key=lambda s: s.partition_num)
    meet = all(a.end == b.start for a, b in itertools.pairwise(ordered))
    return ordered[0].start is None and ordered[-1].end is None and meet


def stream(url: str, warehouse: str, inputs: Path, result_path: Path) -> None:
    """Structured Streaming into a datasource: each micro-batch's append runs in the server's
    Python worker (foreachBatch), which opens the warehouse on the batch's own session."""
    spark = session(url)
    lake = Lake(spark, warehouse)
    written = write_files(inputs, 2, 10)
    frames = spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1)
    query = append_stream(
        lake,
        frames.json(str(inputs)),
        "events",
        STREAM_SPEC,
        checkpoint_location=str(inputs.parent / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    users = lake.read("events").groupBy().agg(F.countDistinct("user").alias("n")).collect()
    result = {"written": written, "users": users[0].n, "tasks": len(lake.tasks("events"))}
    write_json(result_path, result)


if __name__ == "__main__":
    story = main if len(sys.argv) < 6 or sys.argv[5] == "quickstart" else stream
    story(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
