"""segmentlake with executors in their own JVMs, as on a real cluster.

The rest of the suite runs ``local[2]``: executors are threads of the driver's JVM and see its
classpath (the in-process local file system, the compiled LogStore). Here one driver runs on
``local-cluster[1,1,1024]`` — a standalone master and worker in the driver's JVM and an executor
JVM launched the way a cluster launches one — and appends, overwrites with hashed and range
perfect rollup, compacts and reads back (``cluster_worker.py``). Then this session reads the
same warehouse: what a cluster wrote is what any other session sees. The whole suite runs on
such a master with ``SEGMENTLAKE_TEST_MASTER`` (docs/development.md).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from segmentlake.core.shard_spec import DimensionRangeShardSpec, HashBasedNumberedShardSpec
from segmentlake.lake import Lake
from tests.spark.cluster_worker import ROWS, TARGET_ROWS

pytestmark = [
    pytest.mark.spark,
    pytest.mark.multiprocess,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

WORKER = Path(__file__).with_name("cluster_worker.py")


def run_worker(warehouse: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    env.pop("SPARK_REMOTE", None)
    done = subprocess.run(
        [sys.executable, str(WORKER), warehouse],
        capture_output=True,
        text=True,
        env=env,
        timeout=800,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, (done.stdout + done.stderr)[-4000:]
    return json.loads(lines[-1])


def test_a_cluster_driver_ingests_compacts_and_reads_what_any_session_reads(
    spark: SparkSession, warehouse: str
) -> None:
    seen = run_worker(warehouse)
    assert seen["master"].startswith("local-cluster")
    assert seen["executors"] >= 2  # the driver and an executor JVM
    assert set(seen["status"].values()) == {"SUCCESS"}, seen["status"]
    # Rollup keeps every input row in `edits`; `added` sums id % 10 over the rows.
    added = sum(i % 10 for i in range(ROWS))
    late = 2 * sum(i % 10 for i in range(100))
    assert seen["sums"] == {
        "appended": [ROWS + 200, added + late],
        "hashed": [ROWS, added],
        "ranged": [ROWS, added],
    }
    assert seen["segments"]["compact"] == 1  # minor compaction merged the two late appends

    # This session reads the same warehouse the cluster wrote.
    lake = Lake(spark, warehouse)
    for name, (edits, total) in seen["sums"].items():
        got = lake.read(name).selectExpr("sum(edits) AS e", "sum(added) AS a").first()
        assert [got["e"], got["a"]] == [edits, total], name
    assert lake.read("ranged").where("user = 'user7'").count() >= 1
    pruned = lake.read("ranged").where("user = 'user7'").selectExpr("sum(edits)").first()[0]
    assert pruned == seen["pruned_user7_edits"]

    # Hashed: per chunk, ceil(rolled-up rows / target) buckets, each a segment.
    chunks: dict[int, list] = defaultdict(list)
    for segment in lake.used_segments("hashed"):
        chunks[segment.interval.start_millis].append(segment)
    assert len(chunks) == 3
    for segments in chunks.values():
        rows = sum(s.num_rows for s in segments)
        specs = [s.shard_spec for s in segments]
        assert all(isinstance(s, HashBasedNumberedShardSpec) for s in specs)
        assert {s.num_buckets for s in specs} == {math.ceil(rows / TARGET_ROWS)}
    # Range: per chunk, ranges of `user` that tile the line in order.
    chunks.clear()
    for segment in lake.used_segments("ranged"):
        chunks[segment.interval.start_millis].append(segment)
    assert len(chunks) == 3
    for segments in chunks.values():
        specs = sorted(
            (s.shard_spec for s in segments), key=lambda s: (s.start is not None, s.start)
        )
        assert all(isinstance(s, DimensionRangeShardSpec) for s in specs)
        assert specs[0].start is None
        assert specs[-1].end is None
        assert all(a.end == b.start for a, b in itertools.pairwise(specs))
