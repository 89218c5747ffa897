"""Compile a Java source shipped in this package into a cached jar, once per source.

The jar is ``<cache>/segmentlake-<name>-<source hash>.jar``: an edited source gets a fresh
jar, an unchanged one is never rebuilt, and processes starting together build it once (a file
lock, then an atomic rename)."""

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

__all__ = ["compiled_jar"]

logger = logging.getLogger(__name__)

_SOURCES = Path(__file__).parent / "java"


def compiled_jar(name: str, source_name: str, classpath: list[Path]) -> Path:
    """The jar of ``java/<source_name>`` compiled against ``classpath``, built if needed."""
    source = (_SOURCES / source_name).read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    jar = cache_root() / f"segmentlake-{name}-{digest}.jar"
    if not jar.exists():
        with file_lock(jar.with_suffix(".lock")):
            if not jar.exists():
                _compile(source_name, source, jar, classpath)
    return jar


def _compile(source_name: str, source: bytes, jar: Path, classpath: list[Path]) -> None:
    javac = jdk_tool("javac")
    with tempfile.TemporaryDirectory(prefix="segmentlake-javac-") as work:
        src = Path(work) / source_name
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
                f"javac failed to compile segmentlake's {source_name} (needs a JDK 17):\n"
                f"{completed.stdout}{completed.stderr}"
            )
        staging = jar.with_name(f"{jar.name}.{os.getpid()}.tmp")
        # A jar is a zip; writing it ourselves avoids depending on the JDK's `jar` tool too.
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staging.replace(jar)
    logger.info("compiled %s into %s", source_name, jar)
