"""Benchmark of Delta writes of many small files through Hadoop's local file system and
through segmentlake's in-process one (``NioLocalFileSystem``, see
:mod:`segmentlake.spark.local_fs`).

Run from the repository root:

    .venv/bin/python bench/local_fs.py                       # 30, 90, 270, 810 files
    .venv/bin/python bench/local_fs.py --partitions 810 --repeat 3

Each file system runs in its own Spark process (the class is fixed when the JVM starts);
the processes take turns, alternating which goes first. Each write is ``--rows`` rows
repartitioned into N partitions by a key with N values and written as a Delta table
partitioned by that key: N data files, N checksums, one commit. Prints JSON: per file system
and N, the median seconds, and the ratio Hadoop / in-process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

HADOOP = "org.apache.hadoop.fs.LocalFileSystem"


def child(file_system: str, rows: int, partitions: list[int]) -> None:
    from pyspark.sql import functions as F

    from segmentlake.spark.session import spark_session

    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    if file_system == "hadoop":
        conf["spark.hadoop.fs.file.impl"] = HADOOP
    spark = spark_session(app_name=f"bench-local-fs-{file_system}", extra_conf=conf)
    used = spark.sparkContext._jsc.hadoopConfiguration().get("fs.file.impl")  # type: ignore[union-attr]
    spark.range(1000).write.format("noop").mode("overwrite").save()  # warm up
    times = {}
    with tempfile.TemporaryDirectory(prefix="bench-local-fs-") as work:
        for n in partitions:
            df = spark.range(rows).select((F.col("id") % n).alias("p"), "id")
            began = time.perf_counter()
            df.repartition(n, "p").write.format("delta").partitionBy("p").save(f"{work}/t{n}")
            times[n] = time.perf_counter() - began
    print(json.dumps({"impl": used, "times": times}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[30, 90, 270, 810])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", choices=["hadoop", "nio"])
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows, args.partitions)
        return
    runs: dict[str, list[dict[str, float]]] = {"hadoop": [], "nio": []}
    impls = {}
    for round_ in range(args.repeat):
        order = ["hadoop", "nio"] if round_ % 2 == 0 else ["nio", "hadoop"]
        for fs in order:
            command = [sys.executable, __file__, "--child", fs, "--rows", str(args.rows)]
            command += ["--partitions", *map(str, args.partitions)]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            impls[fs] = result["impl"]
            runs[fs].append({int(k): v for k, v in result["times"].items()})
    report = {"rows": args.rows, "repeat": args.repeat, "file_system": impls, "files": {}}
    for n in args.partitions:
        hadoop = statistics.median(r[n] for r in runs["hadoop"])
        nio = statistics.median(r[n] for r in runs["nio"])
        report["files"][n] = {
            "hadoop_s": round(hadoop, 2),
            "in_process_s": round(nio, 2),
            "ratio": round(hadoop / nio, 2),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
