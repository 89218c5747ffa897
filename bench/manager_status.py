"""Benchmark of compaction managers reporting their status at once: commits, retries and time.

Run from the repository root (a local warehouse under /tmp is created and removed):

    .venv/bin/python bench/manager_status.py                       # 3 managers, 50 reports each
    .venv/bin/python bench/manager_status.py --managers 5 --reports 100

Each manager is a separate process (metadata only: delta-rs, no Spark) that reports its
status (``publish_manager_snapshot``, what every manager pass ends with) ``--reports`` times
back to back, 20 ms apart, once all are released together. Printed per manager: reports
committed, the conflicts that made a report decide again (retries), and the seconds its
reports took; then whether the managers' reporting overlapped. A status commit reads its own
row and the expired rows it deletes, so the expected retries are 0 (until 2026-12-01 every
report read every manager's row, and 3 managers retried 64-80 of their 150 reports).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import tempfile
import time
from typing import Any

from segmentlake.compact.control import ManagerSnapshot, publish_manager_snapshot
from segmentlake.metadata.store import MetadataStore, now_ms
from segmentlake.metadata.transaction import recording_commits


def manager(warehouse: str, name: str, reports: int, go: Any, out: Any) -> None:
    store = MetadataStore(warehouse)
    store.create()  # opens the log: not part of the timed reports
    go.wait()
    started = time.time()
    with recording_commits() as log:
        for i in range(reports):
            at = now_ms()
            snapshot = ManagerSnapshot(name, {"minor": i}, (), {}, at, at + 120_000)
            publish_manager_snapshot(store, snapshot)
            time.sleep(0.02)
    out.put((name, log.commits, log.retries, started, time.time()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--managers", type=int, default=3)
    parser.add_argument("--reports", type=int, default=50)
    args = parser.parse_args()
    warehouse = tempfile.mkdtemp(prefix="bench-status-")
    try:
        MetadataStore(warehouse).create()
        context = multiprocessing.get_context("spawn")  # delta-rs's runtime does not survive fork
        go, out = context.Event(), context.Queue()
        names = [f"m{i}" for i in range(args.managers)]
        procs = [
            context.Process(target=manager, args=(warehouse, n, args.reports, go, out))
            for n in names
        ]
        for p in procs:
            p.start()
        time.sleep(3)  # every process up and its store open
        go.set()
        results = [out.get() for _ in procs]
        for p in procs:
            p.join()
        per_manager = {
            name: {
                "committed": commits.get("manager_status", 0),
                "retries": retries.get("manager_status", 0),
                "seconds": round(end - start, 2),
            }
            for name, commits, retries, start, end in sorted(results)
        }
        overlap = max(r[3] for r in results) < min(r[4] for r in results)
        total = sum(m["retries"] for m in per_manager.values())
        print(json.dumps({"managers": per_manager, "retries": total, "overlapped": overlap}))
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
