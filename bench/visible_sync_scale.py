"""Benchmark of the visible table's sync at 10^5 and 10^6 segments, Spark-free.

Run from the repository root (warehouses under a temporary directory, removed after):

    .venv/bin/python bench/visible_sync_scale.py                       # 10^5 and 10^6
    .venv/bin/python bench/visible_sync_scale.py --segments 100000

For each size it builds a local warehouse of N HOUR segments in one datasource: its Delta table
holds one add action per segment (the files themselves are not written: a sync reads logs
only, so the metadata and both logs are what they would be at that size) and one metadata
commit publishes every segment with the visible table's sync deferred. Then a fresh process
(its memory is its own) syncs: a rebuild of the visible table from nothing (N add actions),
the sync after one segment is marked unused (it follows past the rebuild's own entry), and a
third process's first sync with the table current. Then, ``--changes`` times over, a new
process marks one more segment unused and syncs: a process's first sync after a change (what
every job that appends once pays), which loads both tables and takes up from the last sync's
entry. Reported: seconds, the keys each sync diffed, and the process's resident memory after
each step (``ru_maxrss`` peak and current).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

START = datetime(2000, 1, 1, tzinfo=UTC)
DS = "scaled"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--changes", type=int, default=3, help="new processes that change")
    parser.add_argument("--child", nargs=2, metavar=("WAREHOUSE", "STEP"), help="internal")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        sys.stdout.flush()
        os._exit(0)  # delta-rs's runtime threads can crash a process in the shutdown
    results = []
    for n in args.segments:
        root = tempfile.mkdtemp(prefix="segmentlake-visible-scale-")
        try:
            warehouse = f"{root}/warehouse"
            built = _run(warehouse, f"build:{n}")
            rebuilt = _run(warehouse, "rebuild")
            current = _run(warehouse, "current")
            changed = [_run(warehouse, f"changed:{i + 1}") for i in range(args.changes)]
            results.append(
                {
                    "segments": n, "build": built, **rebuilt, "new_process": current,
                    "new_process_after_a_change": changed,
                }
            )  # fmt: skip
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=2))


def _run(warehouse: str, step: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", warehouse, step],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return dict(json.loads(out.strip().splitlines()[-1]))


def _child(warehouse: str, step: str) -> dict[str, Any]:
    from segmentlake.lake import Lake
    from segmentlake.metadata.visible_table import (
        sync_visible_table,
        syncs_deferred,
        visible_table_path,
    )

    if step.startswith("build:"):
        return _build(warehouse, int(step.removeprefix("build:")))
    lake = Lake(None, warehouse)
    out: dict[str, Any] = {"rss_start_mb": _rss_mb()}
    if step.startswith("changed:"):
        # One of the first used segments (building every DataSegment would cost seconds and
        # memory at 10^6, and is no part of what is measured).
        rows = lake.metadata.arrow(DS, kinds=["segment"], columns=["id", "used"])
        used = rows.filter(rows["used"])["id"]
        with syncs_deferred():
            lake.mark_unused([used[int(step.removeprefix("changed:"))].as_py()])
        started = time.perf_counter()
        report = sync_visible_table(lake.metadata, DS)
        out |= {"first_sync_s": round(time.perf_counter() - started, 3)}
        out |= {"keys_diffed": report.keys_diffed, "whole_diff": report.whole_diff}
        out |= {"removed": report.removed, "rss_mb": _rss_mb(), "peak_rss_mb": _peak_mb()}
        return out
    if step == "current":
        started = time.perf_counter()
        report = sync_visible_table(lake.metadata, DS)
        out |= {"first_sync_s": round(time.perf_counter() - started, 3)}
        out |= {"already_current": report.already_current, "rss_mb": _rss_mb()}
        return out
    shutil.rmtree(visible_table_path(warehouse, DS), ignore_errors=True)
    started = time.perf_counter()
    rebuilt = sync_visible_table(lake.metadata, DS)
    out |= {"rebuild_s": round(time.perf_counter() - started, 2), "rebuild_added": rebuilt.added}
    out |= {"rss_after_rebuild_mb": _rss_mb()}
    segment = lake.timeline(DS).visible_segments()[0].id
    with syncs_deferred():
        lake.mark_unused([segment])
    started = time.perf_counter()
    after = sync_visible_table(lake.metadata, DS)
    out |= {"after_rebuild_s": round(time.perf_counter() - started, 3)}
    out |= {"after_rebuild_keys_diffed": after.keys_diffed, "after_rebuild_removed": after.removed}
    out |= {"rss_end_mb": _rss_mb(), "peak_rss_mb": _peak_mb()}
    return out


def _build(warehouse: str, n: int) -> dict[str, Any]:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction, PostCommitHookProperties

    from segmentlake.core.interval import Interval
    from segmentlake.core.names import datasource_table_path
    from segmentlake.core.segment import DataSegment
    from segmentlake.core.shard_spec import NumberedShardSpec
    from segmentlake.lake import Lake
    from segmentlake.metadata.visible_table import syncs_deferred

    started = time.perf_counter()
    os.makedirs(warehouse, exist_ok=True)
    lake = Lake.create(None, warehouse)
    data = datasource_table_path(warehouse, DS)
    seed = pa.table({"v": pa.array([1], pa.int64()), "__segment": pa.array(["seed"])})
    write_deltalake(data, seed, partition_by=["__segment"])
    table = DeltaTable(data)
    adds = [
        AddAction(f"__segment=k{i}/part-{i}.parquet", 1000, {"__segment": f"k{i}"}, 1, True,
                  '{"numRecords":3}')
        for i in range(n)
    ]  # fmt: skip
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    table.create_write_transaction(
        adds, "append", table.schema(), partition_by=["__segment"], post_commithook_properties=hooks
    )
    DeltaTable(data).create_checkpoint()
    hours = [Interval(START + timedelta(hours=i), START + timedelta(hours=i + 1)) for i in range(n)]
    lock = lake.actions.try_lock(DS, Interval(START, hours[-1].end), group_id="all").lock
    assert lock is not None
    segments = [
        DataSegment(DS, hour, lock.version, NumberedShardSpec(0, 1), num_rows=3,
                    load_spec={"type": "delta", "path": data, "segment": f"k{i}"})
        for i, hour in enumerate(hours)
    ]  # fmt: skip
    with syncs_deferred():
        lake.actions.publish(DS, segments, group_id="all")
    return {"seconds": round(time.perf_counter() - started, 1)}


def _rss_mb() -> int:
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def _peak_mb() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


if __name__ == "__main__":
    main()
