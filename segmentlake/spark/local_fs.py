"""A local file system for Spark that does not fork a process per file it writes.

pip's pyspark ships without Hadoop's native library, so Hadoop's local file system sets each
new file's permission by running ``chmod`` in a child process — for every data file and every
checksum Spark writes. ``NioLocalFileSystem`` (Java source shipped in this package) sets the
same bits with ``java.nio``: a Delta write of 810 small files took 17.3 s against 24.2 s
(``bench/local_fs.py``, 2 cores). A segment is a file, so this cost grows with the segments a
job writes. The class must be on the JVM's own classpath (Hadoop loads file systems
by name when the JVM first touches ``file:``), so it is given as the driver's extra classpath,
which only a local master uses for its executors too: clusters keep Hadoop's own.
"""

from __future__ import annotations

import os
from pathlib import Path

from segmentlake.spark._java_build import compiled_jar
from segmentlake.spark.jars import hadoop_api_jar

__all__ = [
    "FILE_SYSTEM_CONF",
    "LOCAL_FS_CLASS",
    "executors_in_driver",
    "local_fs_conf",
    "local_fs_jar",
]

LOCAL_FS_CLASS = "io.segmentlake.storage.NioLocalFileSystem"
FILE_SYSTEM_CONF = "spark.hadoop.fs.file.impl"
_SOURCE_NAME = "NioLocalFileSystem.java"
_CLASSPATH = "spark.driver.extraClassPath"


def local_fs_jar() -> Path:
    """Return the compiled local file system jar, compiling it if needed."""
    return compiled_jar("localfs", _SOURCE_NAME, [hadoop_api_jar()])


def executors_in_driver(master: str) -> bool:
    """Whether a Spark with ``master`` runs its executors in the driver's JVM (``local``,
    ``local[n]``); ``local-cluster[...]`` and real clusters start JVMs of their own, without
    the driver's classpath."""
    return master == "local" or master.startswith("local[")


def local_fs_conf(master: str, conf: dict[str, str]) -> dict[str, str]:
    """The conf that gives a Spark with ``master`` the in-process local file system: only
    where the executors are the driver's JVM (:func:`executors_in_driver`) and only where the
    caller set no ``file:`` file system of its own."""
    if not executors_in_driver(master) or FILE_SYSTEM_CONF in conf:
        return {}
    jar = str(local_fs_jar())
    classpath = conf.get(_CLASSPATH)
    return {
        _CLASSPATH: f"{classpath}{os.pathsep}{jar}" if classpath else jar,
        FILE_SYSTEM_CONF: LOCAL_FS_CLASS,
    }
