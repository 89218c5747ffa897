"""One Spark driver whose executors are separate JVMs: the cluster-mode test's worker.

``python cluster_worker.py WAREHOUSE``: starts Spark on ``local-cluster[1,1,1024]`` (a
standalone master and worker inside this driver's JVM, one executor JVM launched the way a
cluster launches it, without the driver's extra classpath), then appends, overwrites with
hashed and range perfect rollup, compacts and reads back, and prints one JSON line of what it
saw. The test checks that line and reads the same warehouse from its own local session.
"""

from __future__ import annotations

import json
import sys

from segmentlake.lake import Lake
from segmentlake.spark import spark_session
from tests.multiprocess_support import driver_conf

MASTER = "local-cluster[1,1,1024]"
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
ROWS = 3_000
SPEC = {
    "timestampSpec": {"column": "ts", "format": "auto"},
    "dimensionsSpec": {"dimensions": ["page", "user"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
}
TARGET_ROWS = 400
INTERVAL = "2024-01-01/P3D"


def spec(**partitions: object) -> dict:
    return {**SPEC, "partitionsSpec": dict(partitions)} if partitions else SPEC


def main(warehouse: str) -> None:
    spark = spark_session(
        app_name="cluster-worker",
        master=MASTER,
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    sc = spark.sparkContext
    lake = Lake(spark, warehouse)
    # Three days of edits, one every 86.4 s (1,000 a day); 300 users, 40 pages.
    df = spark.range(ROWS).selectExpr(
        f"timestamp_millis({START_MS} + id * 86400) AS ts",
        "concat('page', CAST(id % 40 AS STRING)) AS page",
        "concat('user', CAST(pmod(id * 7, 300) AS STRING)) AS user",
        "id % 10 AS added",
    )
    reports = {
        "append": lake.append(df, "appended", spec()),
        "late_1": lake.append(df.limit(100), "appended", spec()),
        "late_2": lake.append(df.limit(100), "appended", spec()),
        "hashed": lake.overwrite(
            df,
            "hashed",
            spec(type="hashed", targetRowsPerSegment=TARGET_ROWS),
            interval=INTERVAL,
        ),
        "range": lake.overwrite(
            df,
            "ranged",
            spec(type="range", partitionDimensions=["user"], targetRowsPerSegment=TARGET_ROWS),
            interval=INTERVAL,
        ),
    }
    reports["compact"] = lake.compact("appended", mode="minor")
    sums = {
        name: lake.read(name).selectExpr("sum(edits) AS e", "sum(added) AS a").first()
        for name in ("appended", "hashed", "ranged")
    }
    pruned = lake.read("ranged").where("user = 'user7'").selectExpr("sum(edits)").first()[0]
    # The block managers that served the jobs: the driver's and the executor JVM's.
    executors = sc._jsc.sc().getExecutorMemoryStatus().size()
    print(
        json.dumps(
            {
                "master": sc.master,
                "executors": executors,
                "status": {k: r.status for k, r in reports.items()},
                "segments": {k: r.segments for k, r in reports.items()},
                "sums": {k: [v["e"], v["a"]] for k, v in sums.items()},
                "pruned_user7_edits": pruned,
            }
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
