"""Benchmark of the metadata store (delta-rs, no JVM): latency, scale, contention, upkeep.

Run from the repository root (warehouses under /tmp are created and removed):

    .venv/bin/python bench/metadata.py latency       # p50/p99 on a partition of 10^5 records
    .venv/bin/python bench/metadata.py scale         # the curve at 10^3..10^6 segments
    .venv/bin/python bench/metadata.py contention    # 8 processes on distinct chunks, 4 on one
    .venv/bin/python bench/metadata.py upkeep        # 10^5 commits, then size and read time
    .venv/bin/python bench/metadata.py inspect       # the CLI's inspection commands, no Spark
    .venv/bin/python bench/metadata.py kill          # a kill's records step under appends
    .venv/bin/python bench/metadata.py busy          # an append's publish into busy chunks
    .venv/bin/python bench/metadata.py all

* **latency**: a datasource partition pre-filled with ``--records`` (10^5) used segment
  records over 1,000 days; then p50/p99 of ``try_lock`` (an exclusive lock on a day that has
  segments), ``allocate`` (one append id and its segment lock), ``publish(1)`` and
  ``publish(10^4)`` (one commit), and allocating 10^4 ids in one commit. The plain way a
  Delta user would write the same change is a conditional MERGE of one row into a Delta
  table of that shape and size (delta-rs's ``merge`` with ``when_not_matched_insert``: the
  best plain way without a JVM; Spark SQL MERGE takes 1.5 s, DESIGN §6b), measured in the
  same run; ratio = segmentlake / plain.
* **scale**: for 10^3, 10^4, 10^5 and 10^6 segments in a fresh warehouse: allocate them in one
  commit, publish them in one commit, then load the timeline cold in a new process (the call
  itself and the process from start to answer) and that process's memory per segment; then,
  in that process, a one-day lookup and a lookup of all time (which builds every segment it
  returns: the timeline is loaded lazily) and the memory per segment after it.
* **contention**: ``--writers`` (8) processes allocating ids on distinct chunks of one
  datasource, then 4 on one chunk, for ``--seconds`` each; every allocated id is checked
  (no duplicate, no gap per chunk, as many as the writers reported); commits/s, decisions
  redone, the longest wait. The plain baseline is the same allocation as a MERGE-based id
  counter per chunk in a Delta table (insert-if-absent of the next id, retried on conflict).
* **inspect**: a warehouse with ``--records`` (10^5) segment records, a few locks and a rule
  chain; each of ``segmentlake segments|timeline|locks|tasks|compaction-status|rules`` run as
  a new process (``--repeat``/10 times), wall clock from start to exit, output discarded.
* **kill**: a partition of ``--records`` (10^5) used segment records over 1,000 days and 2
  processes allocating append ids on two recent days without pause; meanwhile, round after
  round, 10 segments of an old day are marked unused and a kill's records step
  (``older_than_ms=0``, no Spark) removes them: its seconds and the decisions it redid,
  with the shipped scope (the days of what it removes) and with the whole datasource as its
  scope (what it read before 2026-12-02), each for ``--seconds``, in the same run.
* **busy**: an append's publish (decide and commit, no visible-table sync) of 72 HOUR segments,
  one per hour of 3 days, after ``--appends`` (100) such appends have filled those chunks with
  7,200 segments; into the 72 HOUR chunks, into 3 DAY chunks that the HOUR appends join
  (a stream's days after a major compaction to DAY), and into those 3 DAY chunks with one
  segment a day (what ``lake.append`` writes there since it keys rows by the chunk they
  join: 300 segments after the appends); p50/p99 of 20.
* **upkeep**: ``--commits`` (10^5) small commits from ``--writers`` processes; then the
  table's files, bytes and log entries, and a cold read of the partition in a new process.
"""

from __future__ import annotations

import argparse
import compileall
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from segmentlake.metadata.records import PENDING, segment_row
from segmentlake.metadata.store import Change, now_ms
from segmentlake.metadata.transaction import recording_commits

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
EPOCH = Interval.parse("2020-01-01/P1D").start_millis


def day(i: int) -> Interval:
    return Interval.of_millis(EPOCH + i * DAY_MS, EPOCH + (i + 1) * DAY_MS)


def hour(i: int) -> Interval:
    return Interval.of_millis(EPOCH + i * HOUR_MS, EPOCH + (i + 1) * HOUR_MS)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000, 1),
        "n": len(ordered),
    }


def fill(lake: Lake, datasource: str, records: int, days: int) -> float:
    """``records`` used segment records over ``days`` days, committed in one go; seconds."""
    lake.metadata.create()
    per_day = max(1, records // days)
    version = "2020-01-01T00:00:00.000Z"
    at = now_ms()
    started = time.perf_counter()
    changes = [
        Change(
            "insert",
            segment_row(
                DataSegment(
                    datasource,
                    day(i // per_day),
                    version,
                    NumberedShardSpec(i % per_day, per_day),
                    load_spec={"type": "delta", "segment": f"k{i}"},
                    num_rows=100,
                    size=10_000,
                ),
                used=True,
                now_ms=at,
                visibility="visible",
            ),
        )
        for i in range(records)
    ]
    state = lake.metadata.read(datasource)
    lake.metadata.commit(state, changes, commit_id="fill", operation="fill")
    return time.perf_counter() - started


# -- latency --------------------------------------------------------------------------------


def latency(records: int, repeat: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench-metadata-"))
    try:
        lake = Lake(None, str(root / "wh"))
        ds = "bench"
        filled = fill(lake, ds, records, days=1000)
        lake.metadata.upkeep(ds, min_files=1)
        out: dict[str, Any] = {"records": records, "fill_s": round(filled, 2)}

        def lock(i: int) -> None:
            assert lake.actions.try_lock(ds, day(i), group_id=f"lock-{i}").granted

        def alloc(i: int) -> None:
            lake.actions.allocate(
                ds, [AllocateRequest(day(500 + i), f"seq-{i}")], group_id=f"a-{i}"
            )

        publish_times = []

        def publish_one(i: int) -> None:
            (pending,) = lake.actions.allocate(
                ds, [AllocateRequest(day(800 + i), "p")], group_id=f"p{i}"
            )
            sid = pending.segment_id
            seg = DataSegment(
                ds, sid.interval, sid.version, NumberedShardSpec(sid.partition_num, 0),
                load_spec={"type": "delta", "segment": f"p{i}"}, num_rows=1,
            )  # fmt: skip
            started = time.perf_counter()
            lake.actions.publish(ds, [seg], group_id=f"p{i}")
            publish_times.append(time.perf_counter() - started)

        out["try_lock"] = percentiles(timed(lock, repeat))
        out["allocate"] = percentiles(timed(alloc, repeat))
        timed(publish_one, repeat)
        out["publish(1)"] = percentiles(publish_times)
        out["allocate(10^4) s"], out["publish(10^4) s"] = bulk(lake, ds, 10_000, start_hour=0)
        out["plain_merge"] = plain_merge(root / "plain", records, repeat)
        for op in ("try_lock", "allocate", "publish(1)"):
            out[f"ratio {op} / plain"] = round(out[op]["p50_ms"] / out["plain_merge"]["p50_ms"], 2)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def timed(fn: Any, repeat: int) -> list[float]:
    out = []
    for i in range(repeat):
        started = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - started)
    return out[1:]  # the first pays for the process's first file reads


def bulk(lake: Lake, ds: str, count: int, *, start_hour: int) -> tuple[float, float]:
    """Allocate ``count`` ids (one per hour chunk) in one commit, then publish them in one."""
    requests = [AllocateRequest(hour(start_hour + h), f"bulk-{h}") for h in range(count)]
    started = time.perf_counter()
    pendings = lake.actions.allocate(f"{ds}_hours", requests, group_id="bulk")
    allocated = time.perf_counter() - started
    segments = [
        DataSegment(
            f"{ds}_hours",
            p.segment_id.interval,
            p.segment_id.version,
            NumberedShardSpec(p.segment_id.partition_num, 0),
            load_spec={"type": "delta", "segment": f"b{i}"},
            num_rows=100,
        )
        for i, p in enumerate(pendings)
    ]
    lake.actions.heartbeat(f"{ds}_hours", "bulk")  # as a task does before it publishes
    started = time.perf_counter()
    lake.actions.publish(f"{ds}_hours", segments, group_id="bulk")
    return round(allocated, 2), round(time.perf_counter() - started, 2)


def plain_merge(path: Path, records: int, repeat: int) -> dict[str, float]:
    """A conditional MERGE of one lock row into a Delta table of ``records`` rows of the
    metadata's shape (partitioned by datasource), as a Delta user would write a lock table."""
    from deltalake import DeltaTable, write_deltalake

    rows = pa.table(
        {
            "datasource": ["bench"] * records,
            "kind": ["segment"] * records,
            "id": [f"s{i}" for i in range(records)],
            "start_ms": [day(i % 1000).start_millis for i in range(records)],
            "end_ms": [day(i % 1000).end_millis for i in range(records)],
            "payload": ["{}"] * records,
        }
    )
    write_deltalake(str(path), rows, partition_by=["datasource"])
    table = DeltaTable(str(path))
    times = []
    for i in range(repeat):
        source = pa.table(
            {
                "datasource": ["bench"],
                "kind": ["lock"],
                "id": [f"lock-{i}"],
                "start_ms": [day(i).start_millis],
                "end_ms": [day(i).end_millis],
                "payload": ["{}"],
            }
        )
        started = time.perf_counter()
        table.update_incremental()
        (
            table.merge(
                source,
                predicate="t.datasource = 'bench' AND s.datasource = t.datasource AND "
                "s.kind = t.kind AND s.id = t.id",
                source_alias="s",
                target_alias="t",
            )
            .when_not_matched_insert_all()
            .execute()
        )
        times.append(time.perf_counter() - started)
    return percentiles(times[1:])


# -- scale ----------------------------------------------------------------------------------

_COLD = """
import gc, json, sys, time
def rss_kb():  # current resident size (not the peak: the import's peak would hide growth)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
t0 = time.perf_counter()
from segmentlake.lake import Lake
from segmentlake.core.interval import ETERNITY, Interval
lake = Lake(None, sys.argv[1])
t1 = time.perf_counter()
gc.collect()
rss0 = rss_kb()
timeline = lake.timeline(sys.argv[2])
t2 = time.perf_counter()
gc.collect()
rss1 = rss_kb()
out = {"import_open_s": t1 - t0, "timeline_s": t2 - t1, "segments": len(timeline),
       "rss_kb_before": rss0, "rss_kb_after": rss1}
if sys.argv[3:] == ["lookups"]:
    # A day, then all time: the timeline is loaded lazily, so the lookups pay for building
    # what they return (a day: 24 HOUR chunks; all time: every segment).
    t3 = time.perf_counter()
    day = timeline.lookup(Interval.parse("2020-01-02/P1D"))
    t4 = time.perf_counter()
    full = timeline.lookup(ETERNITY)
    t5 = time.perf_counter()
    gc.collect()
    out |= {"day_lookup_s": t4 - t3, "day_pieces": len(day), "full_lookup_s": t5 - t4,
            "full_pieces": len(full), "full_segments": sum(len(h.segments) for h in full),
            "rss_kb_full": rss_kb()}
print(json.dumps(out))
"""


def scale(sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for count in sizes:
        root = Path(tempfile.mkdtemp(prefix="bench-metadata-scale-"))
        try:
            # One commit of 10^6 segments decides for minutes: its locks need a lease longer
            # than that (a task renews them between its commits, not during one).
            lake = Lake(None, str(root / "wh"), lease_seconds=1800)
            allocated, published = bulk(lake, "scale", count, start_hour=0)
            lake.metadata.upkeep("scale_hours", min_files=1)
            started = time.perf_counter()
            child = subprocess.run(
                [sys.executable, "-c", _COLD, lake.warehouse, "scale_hours", "lookups"],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            )
            process_s = time.perf_counter() - started
            cold = json.loads(child.stdout.strip().splitlines()[-1])
            grown = max(0, cold["rss_kb_after"] - cold["rss_kb_before"]) * 1024
            row = {
                "segments": count,
                "allocate_one_commit_s": allocated,
                "publish_one_commit_s": published,
                "cold_timeline_call_s": round(cold["timeline_s"], 2),
                "cold_process_total_s": round(process_s, 2),
                "bytes_per_segment": round(grown / count, 1),
                "day_lookup_s": round(cold["day_lookup_s"], 3),
                "full_lookup_s": round(cold["full_lookup_s"], 2),
                "full_lookup_segments": cold["full_segments"],
                "bytes_per_segment_after_full_lookup": round(
                    max(0, cold["rss_kb_full"] - cold["rss_kb_before"]) * 1024 / count, 1
                ),
            }
            print(json.dumps(row), flush=True)
            out.append(row)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


# -- contention -----------------------------------------------------------------------------


def _writer(args: tuple[str, str, int, Any, float, bool]) -> dict[str, Any]:
    warehouse, mode, worker, ready, seconds, plain = args
    chunk = day(0) if mode == "same" else day(worker)
    if plain:
        return _plain_writer(warehouse, chunk, worker, ready, seconds)
    lake = Lake(None, warehouse)
    lake.metadata.rows("bench")  # warm: the process's first read of the partition
    ready.wait()  # every writer is up: they start together
    start_at = time.time()
    cpu_at = time.process_time()  # every thread of the process: upkeep included
    ops, waits, redone = [], [], 0
    deadline = start_at + seconds
    n = 0
    while time.time() < deadline:
        started = time.time()
        with recording_commits() as log:
            (p,) = lake.actions.allocate(
                "bench", [AllocateRequest(chunk, f"w{worker}-{n}")], group_id=f"w{worker}-{n}"
            )
        waits.append(time.time() - started)
        redone += sum(log.retries.values())
        ops.append(str(p.segment_id))
        n += 1
    return {
        "worker": worker, "ids": ops, "waits": waits, "redone": redone,
        "rebases": lake.metadata.rebases, "cpu_s": time.process_time() - cpu_at,
    }  # fmt: skip


def _plain_writer(
    warehouse: str, chunk: Interval, worker: int, ready: Any, seconds: float
) -> dict[str, Any]:
    """The plain way: next id = max(id in chunk) + 1, inserted by a MERGE conditioned on the
    id being absent; a conflict (or an id taken) retries after reading again."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    table = DeltaTable(f"{warehouse}/plain")
    key = str(chunk.start_millis)
    ready.wait()
    start_at = time.time()
    ids, waits, redone = [], [], 0
    while time.time() < start_at + seconds:
        started = time.time()
        while True:
            table.update_incremental()
            taken = table.to_pyarrow_dataset().to_table(
                filter=pc.field("chunk") == key, columns=["n"]
            )
            nxt = 0 if not taken.num_rows else pc.max(taken["n"]).as_py() + 1
            source = pa.table({"chunk": [key], "n": [nxt], "worker": [worker]})
            try:
                result = (
                    table.merge(
                        source,
                        predicate=f"t.chunk = '{key}' AND s.chunk = t.chunk AND s.n = t.n",
                        source_alias="s",
                        target_alias="t",
                    )
                    .when_not_matched_insert_all()
                    .execute()
                )
            except CommitFailedError:
                redone += 1
                continue
            if result.get("num_target_rows_inserted") == 1:
                break
            redone += 1  # the id was taken meanwhile
        waits.append(time.time() - started)
        ids.append(f"{key}_{nxt}")
    return {"worker": worker, "ids": ids, "waits": waits, "redone": redone}


def contention(writers: int, seconds: float, *, plain: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, count in (("distinct", writers), ("same", 4)):
        root = Path(tempfile.mkdtemp(prefix="bench-metadata-contention-"))
        try:
            warehouse = str(root / "wh")
            lake = Lake(None, warehouse)
            lake.metadata.create()
            fill(lake, "bench", 10_000, days=1000)
            if plain:
                from deltalake import write_deltalake

                schema = pa.schema(
                    [("chunk", pa.string()), ("n", pa.int64()), ("worker", pa.int64())]
                )
                write_deltalake(f"{warehouse}/plain", schema.empty_table(), partition_by=["chunk"])
            context = mp.get_context("spawn")
            with context.Manager() as manager, context.Pool(count) as pool:
                ready = manager.Barrier(count)  # released once every writer has warmed up
                jobs = [(warehouse, mode, w, ready, seconds, plain) for w in range(count)]
                results = pool.map(_writer, jobs)
            ids = [i for r in results for i in r["ids"]]
            waits = [w for r in results for w in r["waits"]]
            duplicates = [i for i, n in Counter(ids).items() if n > 1]
            gaps = _gaps(ids)
            out[mode] = {
                "writers": count,
                "commits": len(ids),
                "tx_per_s": round(len(ids) / seconds, 1),
                "decisions_redone": sum(r["redone"] for r in results),
                "rebased_on_winners": sum(r.get("rebases", 0) for r in results),
                "duplicates": len(duplicates),
                "gaps": gaps,
                "longest_wait_s": round(max(waits), 3) if waits else None,
                "p50_wait_ms": round(statistics.median(waits) * 1000, 1) if waits else None,
            }
            if not plain and ids:
                # CPU of every writer process per commit: what the machine's cores bound.
                cpu = sum(r["cpu_s"] for r in results)
                out[mode]["cpu_ms_per_commit"] = round(cpu * 1000 / len(ids), 1)
            if not plain:
                stored = lake.metadata.rows(
                    "bench", pc.field("kind") == PENDING, columns=["payload"]
                )
                out[mode]["ids_in_metadata"] = len(stored)
                out[mode]["lost"] = len(set(ids) - {r["payload"] for r in stored})
            print(mode, json.dumps(out[mode]), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


def _gaps(ids: list[str]) -> int:
    """Partition numbers missing per chunk between the first and the last one allocated (ids
    are ``<...>_<partition>``; a chunk's first id follows the segments already in it)."""
    by_chunk: dict[str, list[int]] = {}
    for i in ids:
        chunk, _, number = i.rpartition("_")
        by_chunk.setdefault(chunk, []).append(int(number) if number.isdigit() else 0)
    return sum(max(n) - min(n) + 1 - len(set(n)) for n in by_chunk.values())


# -- upkeep ---------------------------------------------------------------------------------


def _renewer(args: tuple[str, int, int]) -> int:
    warehouse, worker, commits = args
    lake = Lake(None, warehouse)
    assert lake.actions.try_lock("bench", day(worker), group_id=f"u{worker}").granted
    for _ in range(commits - 1):
        lake.actions.heartbeat("bench", f"u{worker}")
    lake.metadata.settle()
    return commits


def _table_state(lake: Lake, warehouse: str) -> dict[str, Any]:
    """Files, log entries, bytes and a cold read of the partition (a new process)."""
    lake.metadata.table.refresh()
    files = lake.metadata.table.files()
    table_dir = Path(lake.metadata.path)
    log_files = list((table_dir / "_delta_log").glob("*.json"))
    size = sum(p.stat().st_size for p in table_dir.rglob("*") if p.is_file())
    cold = subprocess.run(
        [sys.executable, "-c", _COLD, warehouse, "bench"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )  # fmt: skip
    read = json.loads(cold.stdout.strip().splitlines()[-1])
    return {
        "live_data_files": len(files),
        "log_entries": len(log_files),
        "bytes_on_storage": size,
        "cold_timeline_s": round(read["timeline_s"], 2),
    }


def upkeep(commits: int, writers: int, *, rounds: int = 10) -> dict[str, Any]:
    """``commits`` one-row heartbeat commits in ``rounds`` rounds; after each, the table's
    state (it must stay flat) and the commit rate of the round."""
    root = Path(tempfile.mkdtemp(prefix="bench-metadata-upkeep-"))
    try:
        warehouse = str(root / "wh")
        lake = Lake(None, warehouse)
        fill(lake, "bench", 100_000, days=1000)
        done, curve, elapsed = 0, [], 0.0
        per_round = max(writers, commits // rounds)
        while done < commits:
            started = time.perf_counter()
            with mp.get_context("spawn").Pool(writers) as pool:
                jobs = [(warehouse, w, per_round // writers) for w in range(writers)]
                made = sum(pool.map(_renewer, jobs))
            seconds = time.perf_counter() - started
            done, elapsed = done + made, elapsed + seconds
            row = {"commits": done, "round_commits_per_s": round(made / seconds, 1)}
            row |= _table_state(lake, warehouse)
            print(json.dumps(row), flush=True)
            curve.append(row)
        latencies = timed(lambda i: lake.actions.heartbeat("bench", "u0"), 30)
        return {
            "commits": done,
            "seconds": round(elapsed, 1),
            "commits_per_s": round(done / elapsed, 1),
            "curve": curve,
            "heartbeat_after": percentiles(latencies),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- inspection ------------------------------------------------------------------------------

INSPECTIONS = ("segments", "timeline", "locks", "tasks", "compaction-status", "rules")


def inspect(records: int, repeat: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench-metadata-inspect-"))
    try:
        lake = Lake(None, str(root / "wh"))
        fill(lake, "bench", records, days=1000)
        for i in range(5):
            assert lake.actions.try_lock("bench", day(2000 + i), group_id=f"held-{i}").granted
        lake.set_rules("bench", [{"type": "loadForever", "tieredReplicants": {}}])
        lake.metadata.upkeep("bench", min_files=1)
        # Bytecode as an installed package has it (PYTHONDONTWRITEBYTECODE may be set).
        compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "segmentlake"), quiet=1)
        out: dict[str, Any] = {"records": records}
        for command in INSPECTIONS:
            times = []
            for _ in range(max(3, repeat // 10)):
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "segmentlake.cli", "--warehouse", lake.warehouse,
                     command, "bench"],
                    check=True, stdout=subprocess.DEVNULL,
                    env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                )  # fmt: skip
                times.append(time.perf_counter() - started)
            out[command] = percentiles(times)
            print(command, json.dumps(out[command]), flush=True)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def kill_under_appends(records: int, seconds: float) -> dict[str, Any]:
    from segmentlake.compact import kill as kill_module
    from segmentlake.metadata.scope import EVERYTHING
    from segmentlake.metadata.segments import set_used

    shipped = kill_module._candidates_scope
    out: dict[str, Any] = {}
    for side in ("narrow", "whole"):
        root = Path(tempfile.mkdtemp(prefix="bench-metadata-kill-"))
        try:
            warehouse = str(root / "wh")
            lake = Lake(None, warehouse)
            lake.metadata.create()
            fill(lake, "bench", records, days=1000)
            per_day = max(1, records // 1000)
            take = min(10, per_day)  # segments of one old day killed per round
            kill_module._candidates_scope = (  # type: ignore[assignment]
                shipped if side == "narrow" else (lambda *_: EVERYTHING)
            )
            context = mp.get_context("spawn")
            with context.Manager() as manager, context.Pool(2) as pool:
                ready = manager.Barrier(3)  # the two writers and this process
                jobs = [(warehouse, "distinct", 900 + w, ready, seconds, False) for w in range(2)]
                writers = pool.map_async(_writer, jobs)
                ready.wait()
                kills: list[float] = []
                redone = 0
                while not writers.ready():
                    n = len(kills)
                    ids = [f"k{i}" for i in range(n * per_day, n * per_day + take)]
                    rows = lake.metadata.rows("bench", pc.field("load_key").isin(ids))
                    set_used(lake.metadata, "bench", [r["id"] for r in rows], used=False,
                             operation="mark_unused")  # fmt: skip
                    started = time.perf_counter()
                    with recording_commits() as log:
                        killed = kill_module._delete_records(lake.metadata, "bench", 0, None, None)
                    kills.append(time.perf_counter() - started)
                    redone += sum(log.retries.values())
                    assert len(killed.killed) == take, killed
                appended = sum(len(r["ids"]) for r in writers.get())
            out[side] = {
                "kills": len(kills),
                "kill": percentiles(kills),
                "kill_decisions_redone": redone,
                "appends_meanwhile": appended,
            }
            print(side, json.dumps(out[side]), flush=True)
        finally:
            kill_module._candidates_scope = shipped  # type: ignore[assignment]
            shutil.rmtree(root, ignore_errors=True)
    return out


# -- an append into busy chunks ------------------------------------------------------------


def busy_chunks(appends: int, repeat: int) -> dict[str, Any]:
    """An append's publish (decide + commit, syncs deferred) of 72 HOUR segments, one per
    hour of 3 days, after ``appends`` such appends: into 72 HOUR chunks, and into 3 DAY
    chunks the HOUR appends join (what a stream meets after a major compaction to DAY)."""
    from segmentlake.metadata.append_publish import publish_append
    from segmentlake.metadata.visible_table import syncs_deferred

    out: dict[str, Any] = {"segments_before": appends * 72}
    ds = "stream"
    for chunks in ("hour", "day", "day, one segment each"):
        root = Path(tempfile.mkdtemp(prefix="bench-busy-"))
        try:
            lake = Lake(None, str(root / "wh"))
            joins = chunks == "day, one segment each"

            def append(
                name: str, intervals: list[Interval], lake: Lake = lake, joins: bool = joins
            ) -> float:
                def make(req: AllocateRequest, sid: Any, core: int) -> DataSegment:
                    spec = NumberedShardSpec(sid.partition_num, core)
                    load = {"type": "delta", "segment": f"{name}.{req.sequence_name}"}
                    return DataSegment(ds, sid.interval, sid.version, spec, load, num_rows=30)

                requests = [
                    AllocateRequest(iv, f"{name}|{i}", joins_chunk=joins and name != "days")
                    for i, iv in enumerate(intervals)
                ]
                started = time.perf_counter()
                publish_append(lake.lockbox, ds, requests, make, group_id=name)
                return time.perf_counter() - started

            with syncs_deferred():
                if chunks != "hour":
                    append("days", [day(d) for d in range(3)])
                # Keyed by the chunks it joins, an append is one segment a day (what
                # lake.append writes into a compacted day), else one an hour.
                spans = [day(d) for d in range(3)] if joins else [hour(h) for h in range(72)]
                for n in range(appends):
                    append(f"a{n}", spans)
                times = [append(f"t{n}", spans) for n in range(repeat)]
            out[f"into {chunks} chunks"] = percentiles(times)
            time.sleep(1.0)  # let the store's upkeep thread finish before the files go
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "what",
        choices=("latency", "scale", "contention", "upkeep", "inspect", "kill", "busy", "all"),
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=51)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=100, help="busy: appends before timing")
    args = parser.parse_args()
    results: dict[str, Any] = {"command": " ".join(sys.argv)}
    if args.what in ("latency", "all"):
        results["latency"] = latency(args.records, args.repeat)
        print(json.dumps(results["latency"], indent=2), flush=True)
    if args.what in ("scale", "all"):
        results["scale"] = scale([int(s) for s in args.sizes.split(",")])
    if args.what in ("contention", "all"):
        results["contention"] = contention(args.writers, args.seconds, plain=False)
        results["contention_plain"] = contention(args.writers, args.seconds, plain=True)
    if args.what in ("upkeep", "all"):
        results["upkeep"] = upkeep(args.commits, args.writers)
    if args.what in ("inspect", "all"):
        results["inspect"] = inspect(args.records, args.repeat)
    if args.what in ("kill", "all"):
        results["kill"] = kill_under_appends(args.records, args.seconds)
    if args.what in ("busy", "all"):
        results["busy"] = busy_chunks(args.appends, min(args.repeat, 20))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
