"""The whole kill matrix: every operation by every crash point (tests/faults/scenarios.py).

Run from the repository root (fresh warehouses under /tmp, removed afterwards)::

    .venv/bin/python bench/kill_matrix.py                  # every case, ~40 s each
    .venv/bin/python bench/kill_matrix.py --operation major

For each case a separate driver is SIGKILLed at the point; then, as another driver: what
readers saw (old / new state, or neither), visible segments missing rows, the re-run of the
same operation, orphan keys before and after ``kill``, and whether the final state is exact.
Prints a Markdown table (docs/faults.md keeps the last one) and the JSON of every outcome.
CI runs a fixed slice of these cases (tests/faults/test_kill_points.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from segmentlake.spark.session import spark_session
from tests.faults.scenarios import CASES, Outcome, run_case

logger = logging.getLogger("kill_matrix")


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| operation | crash point | readers saw (old or new state, whole) "
        "| visible segments missing rows | re-run "
        "| orphans before → after kill | final state exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        seen = o.state if o.reached else "point not reached"
        exact = "yes" if o.final_exact else "NO"
        lines.append(
            f"| {o.operation} | `{o.point}` | {seen} | {len(o.missing)} | {o.rerun} "
            f"| {o.orphans_before_kill} → {o.orphans_after_kill} | {exact} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--operation", choices=sorted(CASES), action="append")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    spark = spark_session(
        app_name="kill-matrix",
        master="local[2]",
        quiet_progress=True,
        extra_conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    )
    outcomes = []
    started = time.monotonic()
    for operation in args.operation or list(CASES):
        for point in CASES[operation]:
            root = Path(tempfile.mkdtemp(prefix="kill-matrix-"))
            clock = time.monotonic()
            try:
                outcome = run_case(spark, root, operation, point)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            outcomes.append(outcome)
            print(
                f"{operation:11s} {point:36s} {'ok' if outcome.ok else 'FAILED'} "
                f"({time.monotonic() - clock:.0f} s)",
                flush=True,
            )
    failed = [o for o in outcomes if not o.ok]
    print()
    print(table(outcomes))
    print()
    print(
        f"{len(outcomes)} cases, {len(failed)} with a half-visible state or a failed check, "
        f"{time.monotonic() - started:.0f} s"
    )
    print(json.dumps([asdict(o) | {"ok": o.ok} for o in outcomes if not o.ok], indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
