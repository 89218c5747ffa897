"""Kill a driver at a crash point of an operation, then check what the others see.

One *case* is (operation, crash point). :func:`run_case`:

1. prepares a datasource in the caller's session (two days, two appended segments each);
2. starts a separate driver (``crash_worker.py``) with ``SEGMENTLAKE_CRASH_AT`` set to the point
   and lets it run the operation until the point kills it (SIGKILL of its process group: its
   JVM dies with it); a worker that finishes instead means the point was never reached, an
   error;
3. checks, as another driver: the rows a reader sees are the old state or the new state,
   whole (compared as multisets, so a row seen twice counts); every visible segment has all
   of its rows in the data table; the same operation then succeeds on the same chunks (waiting
   out the dead driver's leases); and ``kill`` reclaims what the dead driver left behind (no
   row in the data table that no segment record references).

``tests/faults/test_kill_points.py`` runs a fixed slice of the cases in CI;
``bench/kill_matrix.py`` runs every case and prints the matrix (docs/faults.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentlake.core.load_spec import segment_key
from segmentlake.core.names import SEGMENT_KEY_COLUMN
from segmentlake.faults import CRASH_ENV
from segmentlake.lake import Lake
from segmentlake.metadata.records import SEGMENT, SEGMENT_COLUMNS, segments_from_rows

DATASOURCE = "events"
LEASE_SECONDS = 4.0
SPEC: dict[str, Any] = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "count", "name": "n"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}
DAYS = ("2024-01-01", "2024-01-02")
WORKER = Path(__file__).with_name("crash_worker.py")

# Every crash point of every operation (the full matrix). Points inside a metadata commit are
# ``commit.<operation>.before_log`` / ``after_log`` (segmentlake/faults.py).
CASES: dict[str, tuple[str, ...]] = {
    "append": (
        "ingest.after_parse",
        "ingest.after_write",
        "commit.publish.before_log",
        "commit.publish.after_log",
    ),
    "overwrite": (
        "commit.lock.after_log",
        "ingest.after_write",
        "commit.publish.before_log",
        "commit.publish.after_log",
    ),
    "minor": (
        "commit.lock.after_log",
        "compact.after_write",
        "commit.allocate.after_log",
        "commit.publish.before_log",
        "commit.publish.after_log",
    ),
    "major": (
        "commit.lock.after_log",
        "compact.after_read",
        "ingest.after_write",
        "commit.publish.before_log",
        "commit.publish.after_log",
    ),
    "kill": ("commit.kill.before_log", "commit.kill.after_log", "kill.after_delete"),
    "coordinator": (
        "commit.coordinator_run.before_log",
        "commit.coordinator_run.after_log",
        "coordinator.after_load",
        "commit.segment_loaded.before_log",
        "commit.segment_loaded.after_log",
    ),
}


def rows_of(day: str, tag: str, count: int) -> list[tuple[str, str]]:
    return [(f"{day}T{h:02d}:00:00Z", f"{tag}-{h}") for h in range(count)]


def appended_rows() -> list[tuple[str, str]]:
    return rows_of(DAYS[0], "late", 3)


def overwrite_rows() -> list[tuple[str, str]]:
    return rows_of(DAYS[0], "new", 2)


def run_operation(lake: Lake, operation: str, volume_root: str, *, lock_timeout_s: float) -> str:
    """Run ``operation`` once on the prepared datasource; its report's status."""
    spark = lake.spark
    schema = "ts STRING, user STRING"
    if operation == "append":
        df = spark.createDataFrame(appended_rows(), schema)
        return lake.append(df, DATASOURCE, SPEC, lock_timeout_s=lock_timeout_s).status
    if operation == "overwrite":
        df = spark.createDataFrame(overwrite_rows(), schema)
        return lake.overwrite(
            df, DATASOURCE, SPEC, interval=f"{DAYS[0]}/P1D", lock_timeout_s=lock_timeout_s
        ).status
    if operation == "minor":
        return lake.compact(DATASOURCE, mode="minor", lock_timeout_s=lock_timeout_s).status
    if operation == "major":
        return lake.compact(
            DATASOURCE, mode="major", segment_granularity="DAY", lock_timeout_s=lock_timeout_s
        ).status
    if operation == "kill":
        lake.kill(DATASOURCE, older_than=0, vacuum=False)
        return "SUCCESS"
    if operation == "coordinator":
        report = lake.coordinator().run_once()
        return "SUCCESS" if not report.failed_loads else f"FAILED ({report.failed_loads} loads)"
    raise ValueError(f"unknown operation {operation!r}")


def prepare(lake: Lake, operation: str, volume_root: str) -> None:
    """Two days of two appended segments each; what ``operation`` needs on top of that."""
    spark = lake.spark
    for day in DAYS:
        for part in ("a", "b"):
            rows = spark.createDataFrame(
                rows_of(day, f"{part}{day[-1]}", 3), "ts STRING, user STRING"
            )
            lake.append(rows, DATASOURCE, SPEC)
    if operation == "kill":
        # Two overshadowed segments marked unused: the kill's candidates.
        newer = spark.createDataFrame(rows_of(DAYS[1], "c2", 2), "ts STRING, user STRING")
        lake.overwrite(newer, DATASOURCE, SPEC, interval=f"{DAYS[1]}/P1D")
        lake.mark_overshadowed_unused(DATASOURCE)
    if operation == "coordinator":
        lake.add_volume("hot-1", tier="hot", path=volume_root, capacity_bytes=10**12)
        lake.set_rules(DATASOURCE, [{"type": "loadForever", "tieredReplicants": {"hot": 1}}])


def visible_rows(lake: Lake) -> Counter[tuple[str, str]]:
    """What a reader sees: (time, user) as a multiset."""
    return Counter((str(r["__time"]), r["user"]) for r in lake.read(DATASOURCE).collect())


def expected_new(operation: str, old: Counter[tuple[str, str]], lake: Lake) -> Counter:
    """The rows a reader sees once ``operation`` has landed, from the old rows."""
    if operation == "append":
        spark_rows = lake.spark.createDataFrame(appended_rows(), "ts STRING, user STRING")
        return old + Counter(
            (str(r.t), r.user)
            for r in spark_rows.select(F.to_timestamp("ts").alias("t"), "user").collect()
        )
    if operation == "overwrite":
        kept = Counter({k: v for k, v in old.items() if not k[0].startswith(DAYS[0])})
        spark_rows = lake.spark.createDataFrame(overwrite_rows(), "ts STRING, user STRING")
        return kept + Counter(
            (str(r.t), r.user)
            for r in spark_rows.select(F.to_timestamp("ts").alias("t"), "user").collect()
        )
    return old  # compactions, kill and loads change no visible row


def visible_ids(lake: Lake) -> set[str]:
    """The ids of the visible segments."""
    return {str(s.id) for s in lake.timeline(DATASOURCE).visible_segments()}


def missing_rows(lake: Lake) -> list[str]:
    """Visible segments whose rows are not all in the data table (should be none)."""
    table = lake.spark.read.format("delta").load(f"{lake.warehouse}/{DATASOURCE}")
    stored = {
        r[SEGMENT_KEY_COLUMN]: r["count"]
        for r in table.groupBy(SEGMENT_KEY_COLUMN).count().collect()
    }
    return [
        str(s.id)
        for s in lake.timeline(DATASOURCE).visible_segments()
        if not s.is_tombstone and stored.get(segment_key(s), 0) != s.num_rows
    ]


def orphan_keys(lake: Lake) -> set[str]:
    """Keys with rows in the data table that no segment record (used or not) references."""
    table = lake.spark.read.format("delta").load(f"{lake.warehouse}/{DATASOURCE}")
    stored = {r[0] for r in table.select(SEGMENT_KEY_COLUMN).distinct().collect()}
    rows = lake.metadata.rows(DATASOURCE, pc.field("kind") == SEGMENT, columns=SEGMENT_COLUMNS)
    return stored - {segment_key(s) for s in segments_from_rows(rows)}


def tier_matches_deep(lake: Lake) -> bool:
    deep = sorted(map(tuple, lake.read(DATASOURCE).collect()))
    hot = sorted(map(tuple, lake.read(DATASOURCE, tier="hot").collect()))
    return deep == hot


@dataclass
class Outcome:
    operation: str
    point: str
    reached: bool = False
    state: str = "?"  # what readers saw right after the kill: old, new or neither
    missing: list[str] = field(default_factory=list)
    rerun: str = "?"
    orphans_before_kill: int = 0
    orphans_after_kill: int = 0
    final_exact: bool = False
    worker_output: str = ""

    @property
    def ok(self) -> bool:
        return (
            self.reached
            and self.state in ("old", "new")
            and not self.missing
            and self.rerun in ("SUCCESS", "SKIPPED")
            and self.orphans_after_kill == 0
            and self.final_exact
        )


def start_worker(warehouse: str, operation: str, point: str, volume_root: str) -> subprocess.Popen:
    env = {
        **os.environ,
        CRASH_ENV: point,
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    return subprocess.Popen(
        [sys.executable, str(WORKER), warehouse, operation, volume_root],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # the crash point kills the group: Python and its JVM
    )


def run_case(spark: SparkSession, root: Path, operation: str, point: str) -> Outcome:
    """One case, in a fresh warehouse under ``root`` (see the module)."""
    outcome = Outcome(operation, point)
    warehouse, volume_root = str(root / "warehouse"), str(root / "volume")
    lake = Lake(spark, warehouse, lease_seconds=60)
    prepare(lake, operation, volume_root)
    old = visible_rows(lake)
    old_ids = visible_ids(lake)
    new = expected_new(operation, old, lake)

    proc = start_worker(warehouse, operation, point, volume_root)
    try:
        output, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    outcome.worker_output = output[-3000:]
    outcome.reached = proc.returncode == -signal.SIGKILL
    if not outcome.reached:
        return outcome

    seen = visible_rows(lake)
    outcome.state = "old" if seen == old else "new" if seen == new else "neither"
    if old == new and seen == old:
        # A compaction, kill or load changes no row: tell the states by what serves them.
        outcome.state = "old" if visible_ids(lake) == old_ids else "new"
    if operation == "coordinator" and not tier_matches_deep(lake):
        outcome.state = "neither"
    outcome.missing = missing_rows(lake)

    # The same operation on the same chunks, once the dead driver's leases have run out.
    outcome.rerun = run_operation(lake, operation, volume_root, lock_timeout_s=LEASE_SECONDS * 10)
    # A second append adds its rows again; an overwrite or a compaction lands once.
    if operation == "append":
        expected = new if outcome.state == "old" else expected_new("append", new, lake)
    else:
        expected = new
    outcome.orphans_before_kill = len(orphan_keys(lake))
    lake.kill(DATASOURCE, older_than=0, vacuum=False)
    outcome.orphans_after_kill = len(orphan_keys(lake))
    exact = visible_rows(lake) == expected and not missing_rows(lake)
    if operation == "coordinator":
        exact = exact and tier_matches_deep(lake)
    outcome.final_exact = exact
    return outcome
