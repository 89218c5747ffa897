"""A driver SIGKILLed at a crash point leaves nothing half-done: readers see the old or the
new state whole, every visible segment has its rows, the next operation on the same chunks
succeeds once the dead driver's leases run out, and kill reclaims its leftovers.

CI runs this fixed slice (one case per operation, the riskiest point of each: inside or just
after a commit); ``bench/kill_matrix.py`` runs every case of ``scenarios.CASES``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.faults.scenarios import CASES, run_case

pytestmark = [pytest.mark.spark, pytest.mark.multiprocess, pytest.mark.slow]

SLICE = [
    ("append", "commit.publish.after_log"),
    ("overwrite", "ingest.after_write"),
    ("minor", "commit.publish.before_log"),
    ("major", "commit.publish.after_log"),
    ("kill", "commit.kill.after_log"),
    ("coordinator", "coordinator.after_load"),
]


@pytest.mark.parametrize(("operation", "point"), SLICE)
def test_killed_driver_leaves_nothing_half_done(
    spark: SparkSession, tmp_path: Path, operation: str, point: str
) -> None:
    assert point in CASES[operation]
    outcome = run_case(spark, tmp_path, operation, point)
    assert outcome.reached, f"never reached {point}:\n{outcome.worker_output}"
    assert outcome.state in ("old", "new"), outcome
    assert outcome.missing == [], outcome
    assert outcome.rerun in ("SUCCESS", "SKIPPED"), outcome
    assert outcome.orphans_after_kill == 0, outcome
    assert outcome.final_exact, outcome
