"""Benchmark of the metadata store: latency of lock, allocate, publish; timeline load; contention.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/metadata.py                 # everything
    .venv/bin/python bench/metadata.py --skip-contention --segments 20000

Reported, with the issue's targets:

* p50/p99 latency of ``try_lock`` (exclusive time chunk), ``allocate`` (one append id + its
  segment lock), ``publish`` of 1 segment, and ``publish`` of 10,000 segments (one commit);
* loading the timeline of a datasource with ``--segments`` (default 100,000) used segments,
  cold (a new ``Lake``) and warm;
* the plain Delta way of one metadata change in the same run: read the partition, then a
  one-row MERGE (the path the store used before it committed through Delta's transaction API);
* committed transactions/s and retries with ``--processes`` (default 4) separate Spark drivers
  allocating into the same chunk for ``--seconds`` seconds; afterwards every allocated id is
  checked: no duplicate, no gap, none lost.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc

from segmentlake import DataSegment, Interval, Lake, NumberedShardSpec
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.records import PENDING
from segmentlake.spark.session import spark_session

CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "n": len(ordered),
    }


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(repeat):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    return out


_EPOCH_DAY = Interval.parse("2020-01-01/P1D").start_millis


def day(i: int) -> Interval:
    return Interval.of_millis(_EPOCH_DAY + i * 86_400_000, _EPOCH_DAY + (i + 1) * 86_400_000)


def latencies(lake: Lake, repeat: int) -> dict[str, dict[str, float]]:
    def lock(i: int) -> None:
        lake.try_lock("bench_lock", day(i), group_id=f"lock-{i}")

    def alloc(i: int) -> None:
        lake.allocate("bench_alloc", [AllocateRequest(day(0), f"seq-{i}")], group_id=f"a-{i}")

    def publish_one(i: int) -> None:
        lk = lake.try_lock("bench_pub", day(i), group_id=f"p-{i}").lock
        assert lk is not None
        seg = DataSegment("bench_pub", day(i), lk.version, NumberedShardSpec(0, 1), num_rows=1)
        start = time.perf_counter()
        lake.publish("bench_pub", [seg], group_id=f"p-{i}")
        publish_times.append(time.perf_counter() - start)

    publish_times: list[float] = []
    lock_t = timed(lock, repeat)
    alloc_t = timed(alloc, repeat)
    timed(publish_one, max(3, repeat // 2))
    return {
        "lock": percentiles(lock_t[1:]),
        "allocate": percentiles(alloc_t[1:]),
        "publish(1)": percentiles(publish_times),
    }


def publish_many(lake: Lake, count: int, datasource: str) -> float:
    """Publish ``count`` segments (one per hour of consecutive days) in ONE commit."""
    days = max(1, -(-count // 24))
    span = Interval.of_millis(day(0).start_millis, day(days).start_millis)
    lk = lake.try_lock(datasource, span, group_id=f"bulk-{count}").lock
    assert lk is not None
    hour = 3_600_000
    segments = [
        DataSegment(
            datasource,
            Interval.of_millis(span.start_millis + h * hour, span.start_millis + (h + 1) * hour),
            lk.version,
            NumberedShardSpec(0, 1),
            num_rows=100,
            load_spec={"type": "delta", "segment": f"s{h}"},
        )
        for h in range(count)
    ]
    start = time.perf_counter()
    lake.publish(datasource, segments, group_id=f"bulk-{count}")
    return time.perf_counter() - start


def plain_merge(spark, path: str, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The plain Delta way to make the same change: read the partition, then MERGE one row
    (a lock upsert) into a table of the metadata's shape, partitioned the same way."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from segmentlake.metadata.records import COLUMNS, SCHEMA_DDL

    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA_DDL}) USING delta PARTITIONED BY (datasource)")
    table = DeltaTable.forPath(spark, path)
    schema = SCHEMA_DDL.replace(" NOT NULL", "")

    def once(i: int) -> None:
        spark.read.format("delta").load(path).where(F.col("datasource") == "ds").collect()
        row = dict.fromkeys(COLUMNS) | {"datasource": "ds", "kind": "lock", "id": f"l{i}"}
        source = spark.createDataFrame([tuple(row[c] for c in COLUMNS)], schema=schema)
        (
            table.alias("t")
            .merge(source.alias("s"), "t.datasource = 'ds' AND t.kind = s.kind AND t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    return timed(once, repeat)[1:]


def contender(warehouse: str, index: int, seconds: float, queue: mp.Queue) -> None:  # type: ignore[type-arg]
    retries = 0

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            nonlocal retries
            if "lost a commit race" in record.getMessage():
                retries += 1

    logging.getLogger("segmentlake.metadata.transaction").addHandler(Count())
    spark = spark_session(master="local[1]", quiet_progress=True, extra_conf=CONF)
    lake = Lake(spark, warehouse)
    lake.allocate("contended", [AllocateRequest(day(0), f"warmup-{index}")], group_id="w")
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lake.allocate(
            "contended", [AllocateRequest(day(0), f"p{index}-{done}")], group_id=f"g{index}"
        )
        done += 1
    queue.put({"process": index, "committed": done, "retries": retries})
    spark.stop()


def contention(warehouse: str, processes: int, seconds: float) -> dict[str, object]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=contender, args=(warehouse, i, seconds, queue)) for i in range(processes)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=seconds + 600) for _ in procs]
    for p in procs:
        p.join()
    committed = sum(r["committed"] for r in results)
    spark = spark_session(master="local[2]", quiet_progress=True, extra_conf=CONF)
    rows = Lake(spark, warehouse).metadata.rows("contended", pc.field("kind") == PENDING)
    ids = sorted(r["partition_num"] for r in rows)
    expected = committed + processes  # plus one warm-up allocation per process
    return {
        "processes": processes,
        "seconds": seconds,
        "committed": committed,
        "tx_per_s": committed / seconds,
        "retries": sum(r["retries"] for r in results),
        "per_process": sorted(r["committed"] for r in results),
        "ids_found": len(ids),
        "duplicates": len(ids) - len(set(ids)),
        "gapless": ids == list(range(len(ids))),
        "lost": expected - len(set(ids)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--segments", type=int, default=100_000)
    parser.add_argument("--bulk", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--skip-contention", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="segmentlake-bench-"))
    report: dict[str, object] = {}
    try:
        spark = spark_session(master="local[2]", quiet_progress=True, extra_conf=CONF)
        spark.sparkContext.setLogLevel("ERROR")
        lake = Lake(spark, str(root / "wh"))
        report.update(latencies(lake, args.repeat))
        print(_table(report), flush=True)
        report[f"publish({args.bulk})_s"] = publish_many(lake, args.bulk, "bench_bulk")
        publish_many(lake, args.segments, "bench_big")
        start = time.perf_counter()
        cold = Lake(spark, str(root / "wh"))  # a new Lake follows the log from scratch
        timeline = cold.timeline("bench_big")
        report["timeline_load_cold_s"] = time.perf_counter() - start
        start = time.perf_counter()
        timeline = cold.timeline("bench_big")
        report["timeline_load_warm_s"] = time.perf_counter() - start
        report["timeline_segments"] = len(timeline)
        report["plain MERGE"] = percentiles(plain_merge(spark, str(root / "plain"), args.repeat))
        if not args.skip_contention:
            spark.stop()
            report["contention"] = contention(str(root / "wh"), args.processes, args.seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report, indent=2, default=str) if args.json else _table(report))


def _table(report: dict[str, object]) -> str:
    lines = []
    for key, value in report.items():
        if isinstance(value, dict) and "p50" in value:
            lines.append(
                f"{key:<22} p50 {value['p50']:.3f} s  p99 {value['p99']:.3f} s  (n={value['n']})"
            )
        elif isinstance(value, dict):
            lines.append(f"{key:<22} " + ", ".join(f"{k}={v}" for k, v in value.items()))
        else:
            lines.append(
                f"{key:<22} {value:.3f}" if isinstance(value, float) else f"{key:<22} {value}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
