"""A class data sharing archive for the suite's Spark drivers, built once per JDK and classpath.

A driver a multi-process test starts spends most of its short life starting: on this 2-core
machine a session, its first Delta write and its first read took ~25 s, and ~16 s with the
classes Spark, Delta and segmentlake load mapped from an archive instead of read, parsed and
verified again (``-XX:SharedArchiveFile``, JDK 13+). ``make test`` builds it first
(``python -m tests.jvm_archive``: one driver runs a small ingestion and exits with
``-XX:ArchiveClassesAtExit``); :func:`archive_option` gives the option to drivers only when the
archive exists, so a suite run without it is slower, not different.

The JVM maps an archive only if its own build and classpath are the ones it was made with, and
otherwise starts without it; but a truncated archive crashes it. So the archive is written
under a temporary name and renamed into place only after the JVM that wrote it exited cleanly,
and its name carries what it depends on (the Python-side versions and the jars), so a new
JDK, PySpark or Delta gets a new archive rather than a rejected one.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["archive_option", "archive_path", "build"]


def archive_path() -> Path:
    """Where this JDK's and classpath's archive lives (it may not exist)."""
    import pyspark

    from segmentlake.spark._cache import cache_root
    from segmentlake.spark._jdk import jdk_tool
    from segmentlake.spark.session import prepare

    java = Path(jdk_tool("java")).resolve()
    parts = [pyspark.__version__, str(java), str(java.stat().st_mtime_ns)]
    parts += [f"{jar.name}:{jar.stat().st_size}:{jar.stat().st_mtime_ns}" for jar in prepare()]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_root() / "jvm" / f"spark-{key}.jsa"


def archive_option() -> str:
    """``-XX:SharedArchiveFile=...`` for ``spark.driver.extraJavaOptions``, or ``""`` when no
    archive was built for this JDK and classpath."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path.exists() else ""


def build() -> Path | None:
    """Build the archive unless it exists; return its path, or None when this JVM could not
    write one (the suite then runs without it, and says so). Runs one driver in a child
    process (its JVM writes the archive when it exits) and publishes the file with an atomic
    rename."""
    import subprocess

    from segmentlake.spark._cache import file_lock

    path = archive_path()
    if path.exists():
        return path
    with file_lock(path.with_suffix(".lock")):
        if path.exists():
            return path
        partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
        started = time.monotonic()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
        dumped = subprocess.run(
            [sys.executable, "-m", "tests.jvm_archive", "--dump", str(partial)], env=env
        )
        if dumped.returncode != 0 or not partial.exists() or partial.stat().st_size == 0:
            partial.unlink(missing_ok=True)
            print(
                f"no class data sharing archive (exit {dumped.returncode}): test drivers "
                "start without one, ~9 s slower each"
            )
            return None
        partial.replace(path)
        for stale in path.parent.glob("spark-*.jsa"):  # ~190 MB each, for a JDK or jars gone
            if stale != path:
                stale.unlink(missing_ok=True)
        print(f"class data sharing archive built in {time.monotonic() - started:.0f} s: {path}")
    return path


def _dump(partial: Path) -> None:
    """The driver that writes the archive: start as the test workers do, load the classes an
    ingestion, a compaction and a read load, then stop and wait for the JVM to exit (it writes
    the archive on a clean exit)."""
    from pyspark import SparkContext

    from segmentlake import Lake
    from segmentlake.spark.session import spark_session
    from tests.multiprocess_support import SHORT_LIVED_DRIVER_CONF

    conf = dict(SHORT_LIVED_DRIVER_CONF)
    conf["spark.driver.extraJavaOptions"] = (
        f"{conf['spark.driver.extraJavaOptions']} -XX:ArchiveClassesAtExit={partial} "
        # One warning per class it cannot archive (signed jars, generated classes): thousands.
        "-Xlog:cds*=off"
    )
    spark = spark_session(
        app_name="jvm-archive", master="local[1]", extra_conf=conf, quiet_progress=True
    )
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as warehouse:
        lake = Lake(spark, warehouse)
        rows = spark.createDataFrame(
            [(f"2024-01-0{1 + i % 2}T0{i % 9}:00:00Z", f"p{i % 5}", i) for i in range(50)],
            "ts string, page string, added long",
        )
        spec = {
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["page"]},
            "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
            "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR"},
        }
        lake.append(rows, "warm", spec)
        lake.append(rows, "warm", spec)
        hashed = {**spec, "partitionsSpec": {"type": "hashed", "targetRowsPerSegment": 10}}
        lake.overwrite(rows, "rolled", hashed, interval="2024-01-01/P2D")
        lake.compact("warm", mode="minor")
        lake.read("warm").count()
        lake.read("rolled").where("page = 'p1'").collect()
    gateway = SparkContext._gateway
    spark.stop()
    assert gateway is not None
    gateway.shutdown()
    gateway.proc.stdin.close()  # type: ignore[attr-defined]  # the JVM exits on EOF
    # A JVM that failed while writing leaves a partial file: only a clean exit publishes it.
    exit_code = gateway.proc.wait()  # type: ignore[attr-defined]
    if exit_code != 0:
        raise SystemExit(f"the JVM exited with {exit_code} while writing {partial}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dump"]:
        _dump(Path(sys.argv[2]))
    else:
        build()
