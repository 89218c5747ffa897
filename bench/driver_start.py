"""Benchmark: how long a test worker's Spark driver takes to become useful, with and without the
suite's class data sharing archive (tests/jvm_archive.py).

Run from the repository root (it builds the archive first if ``make test`` has not):

    .venv/bin/python bench/driver_start.py            # 4 rounds, alternating

Each round starts two fresh driver processes, one with the archive and one without, as the
multi-process tests start theirs (``driver_conf``: one core, the C1 compiler only), and times
the session's start, its first Delta write and its first Delta read. Prints the medians and
the ratio as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(use_archive: bool) -> None:
    """One driver: start, write a Delta table, read it; print the three times."""
    from segmentlake.spark.session import spark_session
    from tests.multiprocess_support import SHORT_LIVED_DRIVER_CONF, driver_conf

    began = time.monotonic()
    conf = driver_conf() if use_archive else dict(SHORT_LIVED_DRIVER_CONF)
    spark = spark_session(app_name="driver-start", master="local[1]", extra_conf=conf)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="driver-start-") as directory:
        spark.range(10).write.format("delta").save(f"{directory}/t")
        wrote = time.monotonic()
        spark.read.format("delta").load(f"{directory}/t").count()
        read = time.monotonic()
    spark.stop()
    print(json.dumps({"session": started - began, "write": wrote - started, "read": read - wrote}))


def run(use_archive: bool) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", "archive" if use_archive else "plain"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout
    times: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    times["total"] = sum(times.values())
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", choices=["archive", "plain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child == "archive")
        return
    from tests.jvm_archive import build

    archive = build()
    if archive is None:
        raise SystemExit("this JVM could not build an archive; nothing to compare")
    results: dict[str, list[dict[str, float]]] = {"archive": [], "plain": []}
    for _ in range(args.rounds):
        results["plain"].append(run(use_archive=False))
        results["archive"].append(run(use_archive=True))
    medians = {
        side: {k: round(statistics.median(r[k] for r in rounds), 2) for k in rounds[0]}
        for side, rounds in results.items()
    }
    medians["ratio"] = {
        k: round(medians["archive"][k] / medians["plain"][k], 2) for k in medians["plain"]
    }
    print(json.dumps({"rounds": args.rounds, "archive_file": str(archive), **medians}, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
