"""Build segmentlake's multi-process-safe Delta LogStore jar on first need.

Delta's default LogStore for ``file:`` paths guards "version N is free, take it" only inside one
JVM, so two Spark drivers on one local warehouse can silently overwrite each other's commit
(DESIGN §2, §6). ``PutIfAbsentLogStore`` (Java source shipped in this package) publishes each log
version with a hard link, which the OS grants to exactly one writer. The source is compiled with
the machine's ``javac`` into ``<cache>/segmentlake-logstore-<source hash>.jar`` (see
:mod:`segmentlake.spark._java_build`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from segmentlake.errors import EnvironmentSetupError
from segmentlake.spark._java_build import compiled_jar
from segmentlake.spark.jars import hadoop_api_jar

__all__ = ["LOGSTORE_CLASS", "LOGSTORE_CONF", "logstore_jar"]

logger = logging.getLogger(__name__)

LOGSTORE_CLASS = "io.segmentlake.storage.PutIfAbsentLogStore"
LOGSTORE_CONF = "spark.delta.logStore.file.impl"
_SOURCE_NAME = "PutIfAbsentLogStore.java"


def logstore_jar(delta_jars: list[Path]) -> Path:
    """Return the compiled LogStore jar, compiling it against ``delta_jars`` if needed."""
    jar = compiled_jar("logstore", _SOURCE_NAME, _compile_classpath(delta_jars))
    logger.debug("LogStore %s in %s", LOGSTORE_CLASS, jar)
    return jar


def _compile_classpath(delta_jars: list[Path]) -> list[Path]:
    storage = [j for j in delta_jars if "delta-storage" in j.name]
    if not storage:
        raise EnvironmentSetupError(
            "cannot compile the LogStore: need the delta-storage jar (resolved Delta jars: "
            f"{[j.name for j in delta_jars]})"
        )
    return [storage[0], hadoop_api_jar()]
