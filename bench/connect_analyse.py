"""Benchmark of what checking a user's SQL costs on Spark Connect: the one analyse round trip
segmentlake makes when a read has a filter (and when an ingestion has a transformSpec), next to
the read and the append it belongs to.

Run from the repository root (a local Connect server and a warehouse under /tmp are started
and removed):

    .venv/bin/python bench/connect_analyse.py              # 30 rounds of each
    .venv/bin/python bench/connect_analyse.py --rounds 50

A Connect client builds plans without the server; segmentlake asks the server to analyse a
filter's plan where the filter is given (``DataFrame.isStreaming``, one round trip) so that a
bad filter is a ``SpecError`` there, not a Spark error at the first action. In one client
process, alternating, medians reported:

* **analyse**: the round trip alone, ``isStreaming`` of a filtered read's DataFrame;
* **read**: ``lake.read`` with a filter (checked, one round trip more) against without, and each
  followed by ``count()`` (what a user does next);
* **append**: ``lake.append`` of 100 rows with a ``transformSpec`` filter (checked) against the
  same spec without one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = {
    "timestampSpec": {"column": "ts", "format": "auto"},
    "dimensionsSpec": {"dimensions": ["channel", "page"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
}
FILTER = "channel = '#en' AND added > 10"


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def alternating(rounds: int, sides: dict[str, Callable[[int], object]]) -> dict[str, float]:
    """Each side ``rounds`` times, the order rotated every round; median ms per side."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter()
            sides[name](i)
            times[name].append(time.perf_counter() - started)
    return {name: median_ms(values) for name, values in times.items()}


def client(url: str, warehouse: str, rounds: int) -> dict[str, Any]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from segmentlake import Lake

    spark = SparkSession.builder.remote(url).getOrCreate()

    def rows(seed: int) -> Any:
        return spark.range(100).select(
            F.timestamp_millis(F.lit(1_704_067_200_000) + F.col("id") * 60_000).alias("ts"),
            F.when(F.col("id") % 3 == seed % 3, "#en").otherwise("#de").alias("channel"),
            F.concat(F.lit("p"), (F.col("id") % 7).cast("string")).alias("page"),
            (F.col("id") % 50).alias("added"),
        )

    lake = Lake(spark, warehouse)
    lake.append(rows(0), "wiki", SPEC)  # warm: the datasource exists, the server has run a job
    filtered_spec = {**SPEC, "transformSpec": {"filter": FILTER}}
    out: dict[str, Any] = {}
    out["analyse"] = alternating(
        rounds,
        {
            "isStreaming of a filtered read": lambda _: (
                lake.read("wiki").where(F.expr(FILTER)).isStreaming
            ),
        },
    )
    out["read (build only)"] = alternating(
        rounds,
        {
            "lake.read, no filter": lambda _: lake.read("wiki"),
            "lake.read, filter (checked)": lambda _: lake.read("wiki", filter=FILTER),
        },
    )
    out["read + count()"] = alternating(
        rounds,
        {
            "no filter, then where()": lambda _: lake.read("wiki").where(F.expr(FILTER)).count(),
            "filter (checked)": lambda _: lake.read("wiki", filter=FILTER).count(),
        },
    )
    out["append of 100 rows"] = alternating(
        max(5, rounds // 5),
        {
            "no transformSpec": lambda i: lake.append(rows(i), "plain_spec", SPEC),
            "transformSpec filter (checked)": lambda i: lake.append(
                rows(i), "filtered_spec", filtered_spec
            ),
        },
    )
    spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--client", nargs=2, metavar=("URL", "WAREHOUSE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:  # the Connect client, in a process of its own (see main)
        print(json.dumps(client(*args.client, args.rounds)))
        return
    from segmentlake.spark.connect import start_connect_server

    root = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    conf = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    server = start_connect_server(log_dir=root, extra_conf=conf)
    try:
        # A process with a classic SparkContext cannot open a Connect session: the client is
        # its own process, with no Spark of its own.
        command = [sys.executable, __file__, "--rounds", str(args.rounds)]
        command += ["--client", server.url, str(root / "warehouse")]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
        if done.returncode != 0:
            sys.exit(f"client failed:\n{done.stderr[-4000:]}\n{server.log_tail(30)}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["server_start_s"] = round(server.started_s, 1)
        print(json.dumps(result, indent=2))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
