"""Benchmark of compaction running while a stream appends into the same days, against plain
Delta's OPTIMIZE and replaceWhere rewrites of a day-partitioned table doing the same.

Run from the repository root (a temporary warehouse under /tmp is created and removed):

    .venv/bin/python bench/compaction_concurrency.py                  # 300 s phases, 3 days
    .venv/bin/python bench/compaction_concurrency.py --compaction minor --json minor.json
    .venv/bin/python bench/compaction_concurrency.py --seconds 30 --days 1     # a smoke run

Each side (``--side lake``, ``delta`` or ``both``, the default, one after the other) runs two
separate processes, each its own ``local[1]`` Spark driver:

* **the stream** appends batches of ``--rows-per-append`` (2,000) web edits, spread over
  ``--days`` (3) days, back to back. segmentlake: ``lake.append`` with HOUR segments, rollup
  to the minute (so every append adds one small segment to each of 72 hourly chunks).
  Delta: ``df.write.format("delta").mode("append").partitionBy("day")`` of the same rows.
* **the compactor** compacts those same days back to back. segmentlake: ``lake.compact``,
  ``--compaction major`` (default: HOUR -> DAY with perfect rollup, a new version; appends
  made meanwhile are upgraded into it) or ``minor`` (merges each chunk's runs of small
  segments). Delta (``--delta-compaction``): ``OPTIMIZE ... WHERE day IN (...)``, a
  ``replaceWhere`` overwrite of the days with their rows rolled up to the minute (Delta's way
  of doing what a major compaction does), or ``both`` alternating (default).

Both processes warm up first: ``--warmup`` (11) appends, uncounted in the latencies but in
the exactly-once sums, so the table's first Delta checkpoint (commit 10) is behind them; the
compactor compacts a datasource (table) of its own once. Then, in the same run, phase 1
(**baseline**) is the stream alone for ``--seconds`` (300), phase 2 (**with compaction**) the
stream with the compactor for ``--seconds``. The baseline counts the appends wholly inside
it; an append still running when the compactor starts counts in phase 2. A compaction still
running at the end is waited for and counted. Reported per side:

* appends done and FAILED (any exception; target 0) per phase, with the failures' classes;
* append latency p50 / p99 per phase (p99 is the nearest rank: with ~100 appends a phase it
  is the slowest one or two) and their ratios with/without compaction (target <= 1.5), and
  segmentlake's median time per task phase (lock, write, allocate, publish, ...);
* compactions completed / failed (with exception classes) / refused (``LockRefused``) /
  skipped (nothing to do), their median duration, throughput (input rows per second of
  compaction) and segments (Delta: files) in -> out, segments upgraded;
* exactly once: the rows the datasource (table) holds at the end (sum of the ``edits``
  count; sum of ``added``) equal the sum of every batch the stream appended successfully.

On 2 cores, the compactor's CPU alone slows the stream whatever the locking does: the ratio
includes it (on both sides alike). The load average at start and end is reported too. Delta
writes a checkpoint of a table every 10 commits, inside the committing call: that append is
several times slower than the others (on both sides), and with ~100 appends a phase about ten
of them fall in each phase, which is what the p99s mostly show.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

logger = logging.getLogger("compaction_concurrency")

START = datetime(2024, 1, 1, tzinfo=UTC)
DATASOURCE = "stream"
DIMENSIONS = ["channel", "page", "user", "country"]
CHANNELS = ["#en.wikipedia", "#de.wikipedia", "#fr.wikipedia", "#ja.wikipedia", "#es.wikipedia"]
COUNTRIES = ["US", "DE", "FR", "JP", "ES", "GB", "IN", "BR"]
RAW_SCHEMA = (
    "timestamp TIMESTAMP, channel STRING, page STRING, user STRING, country STRING, "
    "added BIGINT, deleted BIGINT"
)
# The plain table holds the rolled-up shape: a count column to sum, and the partition column.
DELTA_SCHEMA = RAW_SCHEMA + ", edits BIGINT, day DATE"


# -- shared helpers ---------------------------------------------------------------------------


def lake_spec(segment_granularity: str) -> dict[str, Any]:
    return {
        "timestampSpec": {"column": "timestamp", "format": "auto"},
        "dimensionsSpec": {"dimensions": DIMENSIONS},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "longSum", "name": "deleted", "fieldName": "deleted"},
        ],
        "granularitySpec": {
            "segmentGranularity": segment_granularity,
            "queryGranularity": "minute",
            "rollup": True,
        },
        "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000}},
    }


def batch(seed: int, rows: int, days: int, *, delta: bool) -> tuple[list[tuple], int]:
    """``rows`` deterministic web edits spread over ``days`` days (skewed pages and users, as
    in the quickstart), made in Python so their sum is known without a Spark job; returns the
    rows and the sum of ``added``."""
    rng = random.Random(seed)
    start_ms = int(START.timestamp() * 1000)
    out = []
    added_sum = 0
    for _ in range(rows):
        ms = start_ms + rng.randrange(days * 86_400_000)
        ts = datetime.fromtimestamp(ms / 1000, UTC)
        page = int(rng.random() ** 4 * 1000)
        user = int(rng.random() ** 3 * 300)
        added = rng.randrange(500)
        row: tuple = (
            ts,
            CHANNELS[page % 5],
            f"Page_{page}",
            f"user{user}",
            COUNTRIES[user % 8],
            added,
            rng.randrange(50),
        )
        if delta:
            row += (1, ts.date())
        out.append(row)
        added_sum += added
    return out, added_sum


def days_of(days: int) -> list[date]:
    return [(START + timedelta(days=d)).date() for d in range(days)]


def interval_of(days: int) -> str:
    return f"{START.date()}/P{days}D"


def error_class(err: BaseException) -> str:
    """The exception's class; for a JVM error, the Java class's simple name (Delta's
    ``ConcurrentAppendException`` and friends)."""
    origin = getattr(err, "java_exception", None) or getattr(err, "_origin", None)
    if origin is not None:
        try:
            return str(origin.getClass().getSimpleName())
        except Exception:  # the JVM may be gone
            pass
    return type(err).__name__


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile, ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 2)


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


# -- child processes --------------------------------------------------------------------------


def child_spark(cfg: dict[str, Any], role: str):  # type: ignore[no-untyped-def]
    from segmentlake.spark.session import spark_session

    return spark_session(
        app_name=f"bench-compaction-{cfg['side']}-{role}",
        master=cfg["master"],
        quiet_progress=True,
        extra_conf={
            "spark.ui.enabled": "false",
            "spark.driver.memory": cfg["driver_memory"],
            "spark.sql.shuffle.partitions": str(cfg["shuffle_partitions"]),
        },
    )


def wait_for_go(work: Path, parent: int) -> dict[str, float]:
    go = work / "go.json"
    while not go.exists():
        if (work / "abort").exists() or os.getppid() != parent:
            raise SystemExit("aborted: the parent gave up or is gone")
        time.sleep(0.05)
    return json.loads(go.read_text())


def sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.05))


def stream_child(cfg: dict[str, Any]) -> None:
    """Append batches back to back; record each append's start, latency, outcome and sums."""
    work = Path(cfg["work"])
    spark = child_spark(cfg, "stream")
    delta = cfg["side"] == "delta"
    if delta:
        path = cfg["table"]
    else:
        from segmentlake import Lake

        lake = Lake(spark, cfg["warehouse"])
        spec = lake_spec(cfg["segment_granularity"])
    records: list[dict[str, Any]] = []

    def append(index: int, warmup: bool) -> None:
        rows, added = batch(index, cfg["rows_per_append"], cfg["days"], delta=delta)
        df = spark.createDataFrame(rows, DELTA_SCHEMA if delta else RAW_SCHEMA)
        record: dict[str, Any] = {
            "index": index,
            "warmup": warmup,
            "rows": len(rows),
            "added": added,
            "start": time.time(),
        }
        started = time.perf_counter()
        try:
            if delta:
                df.write.format("delta").mode("append").partitionBy("day").save(path)
                record["ok"] = True
            else:
                report = lake.append(df, DATASOURCE, spec)
                record["ok"] = report.status == "SUCCESS"
                record["phases"] = dict(report.phases)
                record["segments"] = report.segments
                if not record["ok"]:
                    record["error_class"] = f"status {report.status}"
                    record["error"] = report.error
        except Exception as err:  # every exception is a failed append
            record["ok"] = False
            record["error_class"] = error_class(err)
            record["error"] = first_line(err)
            logger.warning("append %d failed: %s: %s", index, record["error_class"], err)
        record["seconds"] = time.perf_counter() - started
        records.append(record)
        if not record["ok"]:
            time.sleep(0.5)  # no hot loop on a persistent failure

    for i in range(cfg["warmup"]):
        append(i, True)
    (work / "ready-stream").touch()
    go = wait_for_go(work, cfg["parent"])
    sleep_until(go["t0"])
    index = cfg["warmup"]
    while time.time() < go["t2"]:
        append(index, False)
        index += 1
    (work / "stream.json").write_text(json.dumps(records))
    spark.stop()


def compactor_child(cfg: dict[str, Any]) -> None:
    """Warm up on a table of its own, then compact the stream's days back to back from t1."""
    work = Path(cfg["work"])
    spark = child_spark(cfg, "compactor")
    side = cfg["side"]
    records: list[dict[str, Any]] = []
    if side == "lake":
        from segmentlake import Lake

        lake = Lake(spark, cfg["warehouse"])
        compact = lake_compaction(lake, cfg)
        warmup_lake(spark, lake, cfg)
        kinds = [cfg["compaction"]]
    else:
        import delta.exceptions  # noqa: F401 - maps Delta's JVM conflicts to Python classes

        compact = delta_compaction(spark, cfg)
        warmup_delta(spark, cfg, compact)
        kinds = (
            ["optimize", "rewrite"]
            if cfg["delta_compaction"] == "both"
            else [cfg["delta_compaction"]]
        )
    (work / "ready-compactor").touch()
    go = wait_for_go(work, cfg["parent"])
    sleep_until(go["t1"])
    i = 0
    while time.time() < go["t2"]:
        kind = kinds[i % len(kinds)]
        i += 1
        record: dict[str, Any] = {"kind": kind, "start": time.time()}
        started = time.perf_counter()
        try:
            record.update(compact(kind, cfg["table"] if side == "delta" else DATASOURCE))
        except Exception as err:  # every exception is recorded
            record["status"] = "REFUSED" if error_class(err) == "LockRefused" else "FAILED"
            record["error_class"] = error_class(err)
            record["error"] = first_line(err)
            logger.warning("compaction (%s) failed: %s: %s", kind, record["error_class"], err)
        record["seconds"] = time.perf_counter() - started
        records.append(record)
        if record["status"] != "SUCCESS":
            time.sleep(1.0)  # a refused or skipped compaction: let the stream add something
    (work / "compactor.json").write_text(json.dumps(records))
    spark.stop()


def lake_compaction(lake, cfg: dict[str, Any]):  # type: ignore[no-untyped-def]
    def compact(kind: str, datasource: str) -> dict[str, Any]:
        interval = interval_of(cfg["days"]) if datasource == DATASOURCE else None
        if kind == "major":
            report = lake.compact(
                datasource, interval, mode="major", segment_granularity=cfg["compact_to"]
            )
        else:
            report = lake.compact(
                datasource, interval, mode="minor", max_rows_per_segment=cfg["minor_max_rows"]
            )
        cleanup: dict[str, Any] = {}
        if cfg.get("cleanup", True) and report.status == "SUCCESS":
            # Druid's coordinator marks overshadowed segments unused every period; without
            # it, each compaction's upgraded copies and the segments they overshadow pile up
            # in the records every append reads.
            started = time.perf_counter()
            marked = lake.mark_overshadowed_unused(datasource)
            cleanup = {"cleanup_s": time.perf_counter() - started, "marked_unused": len(marked)}
        return {
            **cleanup,
            "status": report.status,
            "rows_in": report.rows.rows_in,
            "rows_out": report.rows.rows_out,
            "in": report.input_segments,
            "out": report.segments,
            "upgraded": report.upgraded,
            "skipped_chunks": report.skipped_chunks,
            "phases": dict(report.phases),
            "error": report.error,
        }

    return compact


def warmup_lake(spark, lake, cfg: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    """Two small appends and one compaction of a datasource of its own (JIT, caches)."""
    spec = lake_spec(cfg["segment_granularity"])
    for seed in (10_001, 10_002):
        rows, _ = batch(seed, 500, 1, delta=False)
        lake.append(spark.createDataFrame(rows, RAW_SCHEMA), "warmup", spec)
    lake_compaction(lake, {**cfg, "days": 1})(cfg["compaction"], "warmup")


def delta_compaction(spark, cfg: dict[str, Any]):  # type: ignore[no-untyped-def]
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    def compact(kind: str, path: str) -> dict[str, Any]:
        days = days_of(cfg["days"] if path == cfg["table"] else 1)
        in_days = ", ".join(f"DATE'{d}'" for d in days)
        if kind == "optimize":
            metrics = spark.sql(f"OPTIMIZE delta.`{path}` WHERE day IN ({in_days})").first()
            m = metrics["metrics"]
            return {
                "status": "SUCCESS",
                "in": m["numFilesRemoved"],
                "out": m["numFilesAdded"],
            }
        # The Delta way of a major compaction: read the days, roll them up to the minute and
        # replace exactly those days (fails if an append lands in them meanwhile).
        seen_in, seen_out = Observation("rows_in"), Observation("rows_out")
        table = spark.read.format("delta").load(path)
        rows = table.where(F.col("day").isin(days)).observe(seen_in, F.count(F.lit(1)).alias("n"))
        rolled = rows.groupBy(
            F.date_trunc("minute", "timestamp").alias("timestamp"), *DIMENSIONS, "day"
        ).agg(*[F.sum(m).alias(m) for m in ("added", "deleted", "edits")])
        rolled = rolled.select(*table.columns).observe(seen_out, F.count(F.lit(1)).alias("n"))
        (
            rolled.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", f"day IN ({in_days})")
            .save(path)
        )
        return {"status": "SUCCESS", "rows_in": seen_in.get["n"], "rows_out": seen_out.get["n"]}

    return compact


def warmup_delta(spark, cfg: dict[str, Any], compact) -> None:  # type: ignore[no-untyped-def]
    path = cfg["table"] + "_warmup"
    for seed in (10_001, 10_002):
        rows, _ = batch(seed, 500, 1, delta=True)
        df = spark.createDataFrame(rows, DELTA_SCHEMA)
        df.write.format("delta").mode("append").partitionBy("day").save(path)
    compact("optimize", path)
    compact("rewrite", path)


def child_main(role: str, config: str) -> None:
    logging.basicConfig(level=logging.WARNING, format=f"[{role}] %(levelname)s %(message)s")
    cfg = json.loads(Path(config).read_text())
    (stream_child if role == "stream" else compactor_child)(cfg)


# -- the parent -------------------------------------------------------------------------------


class Children:
    """The two child processes of one side: started in their own process groups (their
    Spark JVMs with them), killed together on failure or Ctrl-C."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: dict[str, subprocess.Popen] = {}  # type: ignore[type-arg]

    def start(self, role: str, config: Path) -> None:
        log = open(self.work / f"{role}.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs[role] = subprocess.Popen(
            [sys.executable, __file__, "--child", role, str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def check(self) -> None:
        """Raise if a child exited with an error (showing the end of its log)."""
        for role, proc in self.procs.items():
            code = proc.poll()
            if code not in (None, 0):
                tail = (self.work / f"{role}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the {role} process failed (exit code {code}):\n{tail}")

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def wait_files(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all((self.work / n).exists() for n in names):
            self.check()
            if not self.running() and not all((self.work / n).exists() for n in names):
                raise RuntimeError(f"the children exited without writing {names}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {names} after {timeout:.0f} s")
            time.sleep(0.5)

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.running():
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"children still running after {timeout:.0f} s")
            time.sleep(0.5)
        self.check()

    def kill(self) -> None:
        (self.work / "abort").touch()
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_side(side: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Run the stream and the compactor of one side; return its figures."""
    work = root / side
    work.mkdir()
    cfg = {
        "side": side,
        "parent": os.getpid(),
        "work": str(work),
        "warehouse": str(root / "warehouse"),
        "table": str(root / "plain_table"),
        "days": args.days,
        "rows_per_append": args.rows_per_append,
        "warmup": args.warmup,
        "segment_granularity": args.segment_granularity,
        "compact_to": args.compact_to,
        "compaction": args.compaction,
        "minor_max_rows": args.minor_max_rows,
        "cleanup": args.cleanup,
        "delta_compaction": args.delta_compaction,
        "master": args.master,
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
    }
    config = work / "config.json"
    config.write_text(json.dumps(cfg))
    children = Children(work)
    try:
        children.start("stream", config)
        children.start("compactor", config)
        logger.info("%s: starting the stream and the compactor, warming up", side)
        children.wait_files(["ready-stream", "ready-compactor"], args.startup_timeout)
        t0 = time.time() + 1.0
        go = {"t0": t0, "t1": t0 + args.seconds, "t2": t0 + 2 * args.seconds}
        (work / "go.tmp").write_text(json.dumps(go))
        (work / "go.tmp").rename(work / "go.json")
        load_start = os.getloadavg()
        logger.info("%s: baseline for %.0f s, then with compaction for %.0f s",
                    side, args.seconds, args.seconds)  # fmt: skip
        children.wait(2 * args.seconds + args.end_timeout)
        load_end = os.getloadavg()
    except BaseException:
        children.kill()
        raise
    appends = json.loads((work / "stream.json").read_text())
    compactions = json.loads((work / "compactor.json").read_text())
    result: dict[str, Any] = {
        "side": side,
        "compaction": args.compaction if side == "lake" else args.delta_compaction,
        "baseline": append_stats(appends, go["t0"], go["t1"], baseline=True),
        "with_compaction": append_stats(appends, go["t1"], go["t2"], baseline=False),
        "compactions": compaction_stats(compactions, side),
        "load_average_1min": [round(load_start[0], 2), round(load_end[0], 2)],
    }
    base, busy = result["baseline"], result["with_compaction"]
    result["p50_ratio"] = ratio(busy["p50_s"], base["p50_s"])
    result["p99_ratio"] = ratio(busy["p99_s"], base["p99_s"])
    result["exactly_once"] = check(side, cfg, appends)
    result["runs"] = {"appends": appends, "compactions": compactions, "go": go}
    return result


def append_stats(
    records: list[dict[str, Any]], lo: float, hi: float, *, baseline: bool
) -> dict[str, Any]:
    """The appends of one phase: in the baseline, those wholly inside it; with compaction,
    every one that ran during it (one that straddles the compactor's start counts here)."""
    counted = [r for r in records if not r["warmup"]]
    if baseline:
        phase = [r for r in counted if lo <= r["start"] and r["start"] + r["seconds"] <= hi]
    else:
        phase = [r for r in counted if r["start"] + r["seconds"] > lo and r["start"] < hi]
    ok = [r for r in phase if r["ok"]]
    latencies = [r["seconds"] for r in ok]
    phases: dict[str, list[float]] = {}
    for r in ok:
        for name, seconds in (r.get("phases") or {}).items():
            phases.setdefault(name, []).append(seconds)
    return {
        "appends": len(ok),
        "failed": len(phase) - len(ok),
        "failures": dict(Counter(r.get("error_class", "?") for r in phase if not r["ok"])),
        "first_errors": [r.get("error") for r in phase if not r["ok"]][:3],
        "appends_per_s": round(len(ok) / (hi - lo), 3),
        "rows": sum(r["rows"] for r in ok),
        "p50_s": rounded(percentile(latencies, 0.5)),
        "p99_s": rounded(percentile(latencies, 0.99)),
        "max_s": rounded(max(latencies, default=None)),
        "task_phases_p50_s": {k: round(statistics.median(v), 3) for k, v in phases.items()},
    }


def compaction_stats(records: list[dict[str, Any]], side: str) -> dict[str, Any]:
    by_kind: dict[str, Any] = {}
    for kind in dict.fromkeys(r["kind"] for r in records):
        mine = [r for r in records if r["kind"] == kind]
        ok = [r for r in mine if r["status"] == "SUCCESS"]
        seconds = sum(r["seconds"] for r in ok)
        rows_in = sum(r.get("rows_in") or 0 for r in ok)
        phases: dict[str, list[float]] = {}
        for r in ok:
            for name, value in (r.get("phases") or {}).items():
                phases.setdefault(name, []).append(value)
        by_kind[kind] = {
            "completed": len(ok),
            "failed": sum(r["status"] == "FAILED" for r in mine),
            "refused": sum(r["status"] == "REFUSED" for r in mine),
            "skipped": sum(r["status"] == "SKIPPED" for r in mine),
            "failures": dict(
                Counter(r.get("error_class", "?") for r in mine if r["status"] == "FAILED")
            ),
            "first_errors": [r.get("error") for r in mine if r["status"] == "FAILED"][:3],
            "p50_s": rounded(percentile([r["seconds"] for r in ok], 0.5), 2),
            "rows_in": rows_in,
            "rows_out": sum(r.get("rows_out") or 0 for r in ok),
            "rows_per_s": round(rows_in / seconds) if seconds and rows_in else None,
            # segmentlake: segments; Delta OPTIMIZE: files.
            "in": sum(r.get("in") or 0 for r in ok),
            "out": sum(r.get("out") or 0 for r in ok),
            "upgraded": sum(r.get("upgraded") or 0 for r in ok),
            "task_phases_p50_s": {k: round(statistics.median(v), 2) for k, v in phases.items()},
        }
    return by_kind


def check(side: str, cfg: dict[str, Any], appends: list[dict[str, Any]]) -> dict[str, Any]:
    """What the datasource (table) holds against what the stream appended successfully."""
    from pyspark.sql import functions as F

    from segmentlake.spark.session import spark_session

    spark = spark_session(
        app_name="bench-compaction-check",
        master="local[2]",
        quiet_progress=True,
        extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "1g"},
    )
    if side == "lake":
        from segmentlake import Lake

        lake = Lake(spark, cfg["warehouse"])
        df = lake.read(DATASOURCE)
        timeline = lake.timeline(DATASOURCE)
        extra = {
            "visible_segments": len(timeline.visible_segments()),
            "used_segments": len(lake.used_segments(DATASOURCE)),
        }
    else:
        df = spark.read.format("delta").load(cfg["table"])
        extra = {"files": spark.sql(f"DESCRIBE DETAIL delta.`{cfg['table']}`").first().numFiles}
    row = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum("edits").alias("edits"),
        F.sum("added").alias("added"),
    ).first()
    ok = [r for r in appends if r["ok"]]
    failed = [r for r in appends if not r["ok"]]
    expected_edits = sum(r["rows"] for r in ok)
    expected_added = sum(r["added"] for r in ok)
    return {
        "ok": row["edits"] == expected_edits and row["added"] == expected_added,
        "edits": row["edits"],
        "expected_edits": expected_edits,
        "added": row["added"],
        "expected_added": expected_added,
        "missing_rows": expected_edits - (row["edits"] or 0),
        "failed_appends_rows": sum(r["rows"] for r in failed),
        "stored_rows": row["rows"],
        "successful_appends": len(ok),
        **extra,
    }


def summary(results: list[dict[str, Any]]) -> str:
    """Both sides side by side."""

    def cell(r: dict[str, Any], key: str) -> str:
        b, w, c = r["baseline"], r["with_compaction"], r["compactions"]
        if key == "appends":
            return f"{b['appends']} / {w['appends']}"
        if key == "failed":
            fails = Counter(b["failures"]) + Counter(w["failures"])
            return f"{b['failed']} / {w['failed']}" + (f" {dict(fails)}" if fails else "")
        if key == "p50":
            return f"{b['p50_s']} / {w['p50_s']} s (x{r['p50_ratio']})"
        if key == "p99":
            return f"{b['p99_s']} / {w['p99_s']} s (x{r['p99_ratio']})"
        if key == "exact":
            e = r["exactly_once"]
            return "yes" if e["ok"] else f"NO: {e['edits']} rows vs {e['expected_edits']}"
        parts = []
        for kind, k in c.items():
            if key == "compactions":
                text = f"{k['completed']} ok, {k['failed']} failed, {k['refused']} refused"
                text += f", {k['skipped']} skipped" if k["skipped"] else ""
                text += f" {k['failures']}" if k["failures"] else ""
            elif not k["completed"]:
                text = "none completed"
            elif key == "compaction_s":
                text = f"p50 {k['p50_s']} s" + (
                    f", {k['rows_per_s']:,} rows/s" if k["rows_per_s"] else ""
                )
            else:  # in -> out
                unit = "files" if r["side"] == "delta" and kind == "optimize" else "segments"
                if r["side"] == "delta" and kind == "rewrite":
                    text = f"rows {k['rows_in']:,} -> {k['rows_out']:,}"
                else:
                    text = f"{unit} {k['in']:,} -> {k['out']:,}"
                    text += f", {k['upgraded']} upgraded" if r["side"] == "lake" else ""
            parts.append(f"{kind}: {text}" if len(c) > 1 or r["side"] == "delta" else text)
        return "; ".join(parts) or "none ran"

    rows = [
        ("appends, baseline / with compaction", "appends"),
        ("FAILED appends (target 0)", "failed"),
        ("append p50 (ratio, target <= 1.5)", "p50"),
        ("append p99 (ratio, target <= 1.5)", "p99"),
        ("compactions", "compactions"),
        ("compaction time, throughput", "compaction_s"),
        ("compaction in -> out", "in_out"),
        ("exactly once", "exact"),
    ]
    names = [
        f"segmentlake ({r['compaction']})" if r["side"] == "lake" else f"Delta ({r['compaction']})"
        for r in results
    ]
    table = [["", *names]] + [[label, *(cell(r, key) for r in results)] for label, key in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) for line in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r["side"] == "lake":
            lines.append(
                "segmentlake append phases, p50 baseline / with compaction: "
                + ", ".join(
                    f"{k} {v} / {r['with_compaction']['task_phases_p50_s'].get(k)}"
                    for k, v in r["baseline"]["task_phases_p50_s"].items()
                )
            )
            for kind, k in r["compactions"].items():
                if k["task_phases_p50_s"]:
                    lines.append(
                        f"segmentlake {kind} compaction phases, p50: "
                        + ", ".join(f"{n} {v}" for n, v in k["task_phases_p50_s"].items())
                    )
        lines.append(f"{r['side']}: load average (1 min) start / end {r['load_average_1min']}")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="length of each phase")
    parser.add_argument("--days", type=int, default=3, help="days the stream's rows cover")
    parser.add_argument("--rows-per-append", type=int, default=2_000)
    parser.add_argument("--side", choices=["lake", "delta", "both"], default="both")
    parser.add_argument("--compaction", choices=["major", "minor"], default="major")
    parser.add_argument(
        "--delta-compaction", choices=["optimize", "rewrite", "both"], default="both"
    )
    parser.add_argument("--segment-granularity", default="hour", help="the stream's segments")
    parser.add_argument("--compact-to", default="day", help="major compaction's granularity")
    parser.add_argument("--minor-max-rows", type=int, default=5_000_000)
    parser.add_argument(
        "--no-cleanup",
        dest="cleanup",
        action="store_false",
        help="segmentlake: do not mark overshadowed segments unused after each compaction "
        "(Druid's coordinator duty, on by default)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=11,
        help="uncounted appends first (11: the table's first Delta checkpoint, at commit 10, "
        "falls in the warm-up)",
    )
    parser.add_argument("--master", default="local[1]", help="each child's Spark master")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--shuffle-partitions", type=int, default=2)
    parser.add_argument("--startup-timeout", type=float, default=900.0)
    parser.add_argument(
        "--end-timeout", type=float, default=1800.0, help="extra wait for the last compaction"
    )
    parser.add_argument("--json", type=Path, help="write every figure (and each run) here")
    parser.add_argument("--keep", action="store_true", help="keep the warehouse")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Ctrl-C (even where a shell started us with SIGINT ignored) and kill clean up too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="bench-compaction-concurrency-"))
    sides = ["lake", "delta"] if args.side == "both" else [args.side]
    results = []
    try:
        for side in sides:
            result = run_side(side, args, root)
            results.append(result)
            logger.info(
                "%s: %s", side, json.dumps({k: v for k, v in result.items() if k != "runs"})
            )
        report = {"args": {k: str(v) for k, v in vars(args).items()}, "sides": results}
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, default=str))
        print(summary(results))
    finally:
        if args.keep:
            logger.info("kept %s", root)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
