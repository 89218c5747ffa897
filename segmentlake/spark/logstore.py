"""Build segmentlake's multi-process-safe Delta LogStore jar on first need.

Delta's default LogStore for ``file:`` paths guards "version N is free, take it" only inside one
JVM, so two Spark drivers on one local warehouse can silently overwrite each other's commit
(DESIGN §2, §6). ``PutIfAbsentLogStore`` (Java source shipped in this package) publishes each log
version with a hard link, which the OS grants to exactly one writer. The source is compiled with
the machine's ``javac`` into ``<cache>/segmentlake-logstore-<source hash>.jar``, so an edited
source gets a fresh jar and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

from segmentlake.errors import EnvironmentSetupError
from segmentlake.spark._cache import cache_root, file_lock
from segmentlake.spark._jdk import jdk_tool
from segmentlake.spark.jars import spark_jars_dir

__all__ = ["LOGSTORE_CLASS", "LOGSTORE_CONF", "logstore_jar"]

logger = logging.getLogger(__name__)

LOGSTORE_CLASS = "io.segmentlake.storage.PutIfAbsentLogStore"
LOGSTORE_CONF = "spark.delta.logStore.file.impl"
_SOURCE_NAME = "PutIfAbsentLogStore.java"


def logstore_jar(delta_jars: list[Path]) -> Path:
    """Return the compiled LogStore jar, compiling it against ``delta_jars`` if needed."""
    source = (Path(__file__).parent / "java" / _SOURCE_NAME).read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    jar = cache_root() / f"segmentlake-logstore-{digest}.jar"
    if not jar.exists():
        with file_lock(jar.with_suffix(".lock")):
            if not jar.exists():
                _compile(source, jar, _compile_classpath(delta_jars))
    return jar


def _compile_classpath(delta_jars: list[Path]) -> list[Path]:
    storage = [j for j in delta_jars if "delta-storage" in j.name]
    hadoop = sorted(spark_jars_dir().glob("hadoop-client-api-*.jar"))
    if not storage or not hadoop:
        raise EnvironmentSetupError(
            "cannot compile the LogStore: need the delta-storage jar (resolved Delta jars: "
            f"{[j.name for j in delta_jars]}) and hadoop-client-api in {spark_jars_dir()}"
        )
    return [storage[0], hadoop[-1]]


def _compile(source: bytes, jar: Path, classpath: list[Path]) -> None:
    """Compile ``source`` and publish it as ``jar`` with an atomic rename."""
    javac = jdk_tool("javac")
    with tempfile.TemporaryDirectory(prefix="segmentlake-logstore-") as work:
        src = Path(work) / _SOURCE_NAME
        src.write_bytes(source)
        classes = Path(work) / "classes"
        command = [
            javac, "--release", "17", "-nowarn",
            "-cp", os.pathsep.join(str(p) for p in classpath),
            "-d", str(classes), str(src),
        ]  # fmt: skip
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise EnvironmentSetupError(
                f"javac failed to compile segmentlake's LogStore (needs a JDK 17):\n"
                f"{completed.stdout}{completed.stderr}"
            )
        staging = jar.with_name(f"{jar.name}.{os.getpid()}.tmp")
        # A jar is a zip; writing it ourselves avoids depending on the JDK's `jar` tool too.
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staging.replace(jar)
    logger.info("compiled %s into %s", LOGSTORE_CLASS, jar)
