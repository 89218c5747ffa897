"""Race several processes writing the same Delta log versions through a JVM LogStore.

Each of ``--processes`` Spark drivers (one JVM each, built by ``segmentlake.spark``) walks
log versions ``0..N-1`` of one shared ``_delta_log`` directory and calls the LogStore's
``write(path, actions, overwrite=false)`` on every version, as a committing driver does. A
write that returns means "this version is mine"; ``FileAlreadyExistsException`` means "someone
else has it". A version that more than one process believes it won is a silently lost commit.
Run for segmentlake's ``PutIfAbsentLogStore`` and for Delta's default ``HDFSLogStore``::

    .venv/bin/python bench/logstore_race.py --versions 2000 --processes 4

Reports per store: versions written, versions won by more than one writer, versions whose
file holds another writer's line than the one told it won (both are lost commits), writes
refused, unexpected errors, and elapsed time from the common start to the last writer.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

logger = logging.getLogger("logstore_race")

STORES = {
    "PutIfAbsentLogStore": "io.segmentlake.storage.PutIfAbsentLogStore",
    "HDFSLogStore": "io.delta.storage.HDFSLogStore",
}


def child(store_class: str, log_dir: Path, barrier: Path, writer: int, writers: int,
          versions: int, result: Path) -> None:  # fmt: skip
    """Write every version once as ``writer``; record which versions this writer won."""
    from py4j.protocol import Py4JJavaError

    from segmentlake.spark import spark_session

    spark = spark_session(
        app_name=f"logstore-race-{writer}",
        master="local[1]",
        quiet_progress=True,
        extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "512m"},
    )
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    store = getattr(jvm, store_class)(hadoop_conf)
    hadoop_path = jvm.org.apache.hadoop.fs.Path
    singleton = jvm.java.util.Collections.singletonList

    (barrier / f"ready-{writer}").touch()
    while len(list(barrier.glob("ready-*"))) < writers:
        time.sleep(0.01)
    started = time.time()
    won: list[int] = []
    refused = 0
    errors: list[str] = []
    for version in range(versions):
        path = hadoop_path(f"file:{log_dir}/{version:020d}.json")
        line = json.dumps({"commitInfo": {"writer": writer, "version": version}})
        try:
            store.write(path, singleton(line).iterator(), False, hadoop_conf)
            won.append(version)
        except Py4JJavaError as e:
            name = e.java_exception.getClass().getName()
            if name == "java.nio.file.FileAlreadyExistsException":
                refused += 1
            else:
                errors.append(f"{version}: {name}: {e.java_exception.getMessage()}")
    result.write_text(json.dumps({
        "won": won, "refused": refused, "errors": errors,
        "started": started, "finished": time.time(),
    }))  # fmt: skip
    spark.stop()


def race(store_name: str, *, versions: int, writers: int, work: Path) -> dict[str, object]:
    """Run one race for ``store_name`` and return its figures."""
    log_dir = work / store_name / "_delta_log"
    barrier = work / store_name / "barrier"
    log_dir.mkdir(parents=True)
    barrier.mkdir()
    results = [work / store_name / f"result-{w}.json" for w in range(writers)]
    procs = [
        subprocess.Popen([
            sys.executable, __file__, "--child", STORES[store_name], str(log_dir), str(barrier),
            str(w), str(writers), str(versions), str(results[w]),
        ])
        for w in range(writers)
    ]  # fmt: skip
    for proc in procs:
        if proc.wait() != 0:
            raise RuntimeError(f"a {store_name} writer failed with exit code {proc.returncode}")
    outcomes = [json.loads(r.read_text()) for r in results]
    claims: dict[int, list[int]] = {}
    for writer, outcome in enumerate(outcomes):
        for version in outcome["won"]:
            claims.setdefault(version, []).append(writer)
    lost = {v: w for v, w in claims.items() if len(w) > 1}
    # A writer told "won" whose line is not what the version file holds lost its commit too:
    # Delta's default store lets the loser's rename replace the winner's file, then refuses
    # the loser (its .crc rename fails), so only one writer claims the version, wrongly.
    replaced = 0
    for version, writers in claims.items():
        text = (log_dir / f"{version:020d}.json").read_text()
        holder = json.loads(text)["commitInfo"]["writer"]
        replaced += sum(1 for w in writers if w != holder)
    return {
        "store": store_name,
        "versions_written": len(list(log_dir.glob("*.json"))),
        "versions_claimed": len(claims),
        "won_by_more_than_one": len(lost),
        "lost_commits": sum(len(w) - 1 for w in lost.values()),
        "claimed_but_replaced": replaced,
        "refused": sum(o["refused"] for o in outcomes),
        "errors": [e for o in outcomes for e in o["errors"]][:5],
        "leftover_temp_files": len([p for p in log_dir.iterdir() if p.suffix == ".tmp"]),
        "elapsed_s": round(
            max(o["finished"] for o in outcomes) - min(o["started"] for o in outcomes), 1
        ),
    }


def main() -> None:
    """Parse arguments and race each requested store, logging one line of figures per store."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        store_class, log_dir, barrier, writer, writers, versions, result = sys.argv[2:]
        child(store_class, Path(log_dir), Path(barrier), int(writer), int(writers),
              int(versions), Path(result))  # fmt: skip
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--store", choices=[*STORES, "both"], default="both")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = list(STORES) if args.store == "both" else [args.store]
    with tempfile.TemporaryDirectory(prefix="logstore-race-") as tmp:
        for name in names:
            figures = race(name, versions=args.versions, writers=args.processes, work=Path(tmp))
            logger.info("%s", json.dumps(figures))


if __name__ == "__main__":
    main()
