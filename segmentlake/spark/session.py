"""The one way segmentlake gets a SparkSession.

Where Spark is already running (Databricks, ``spark-submit``, a notebook that made its own
session), that session is returned untouched: the platform owns its configuration. Otherwise a
local session is built from ``conf/spark-defaults.conf`` (the repository's ``spark_conf/``), with
Delta's jars from segmentlake's cache and the multi-process-safe LogStore for ``file:`` paths.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkContext
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from segmentlake.core.spec_reader import check_flag, check_text, show
from segmentlake.errors import EnvironmentSetupError, SpecError
from segmentlake.spark.jars import delta_jars
from segmentlake.spark.local_fs import (
    FILE_SYSTEM_CONF,
    LOCAL_FS_CLASS,
    local_fs_conf,
    local_fs_jar,
)
from segmentlake.spark.logstore import LOGSTORE_CLASS, LOGSTORE_CONF, logstore_jar

__all__ = [
    "CONF_DIR",
    "MASTER_ENV",
    "REMOTE_ENV",
    "prepare",
    "read_spark_defaults",
    "spark_session",
]

logger = logging.getLogger(__name__)

CONF_DIR = Path(__file__).parent / "conf"
MASTER_ENV = "SEGMENTLAKE_SPARK_MASTER"
# pyspark's own variable for a Spark Connect server (``sc://host:port``).
REMOTE_ENV = "SPARK_REMOTE"
# Java-properties syntax as Spark reads it: the key ends at the first '=', ':' or whitespace.
_CONF_LINE = re.compile(r"^(?P<key>[^\s=:]+)\s*[=:\s]\s*(?P<value>.*)$")
# Options that hold lists: a caller's value is added to ours instead of replacing it.
_JARS = "spark.jars"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def spark_session(
    *,
    app_name: str = "segmentlake",
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    quiet_progress: bool = False,
) -> SparkSession:
    """Return the running SparkSession, or start a local one with Delta and segmentlake set up.

    With ``$SPARK_REMOTE`` set (``sc://host:port``), connect to that Spark Connect server
    instead (see :mod:`segmentlake.spark.connect`); the other arguments are then unused.

    A local session uses ``master`` (default ``$SEGMENTLAKE_SPARK_MASTER``, else ``local[*]``),
    the defaults in ``spark_conf/spark-defaults.conf`` and then ``extra_conf``; values of
    ``spark.jars`` and ``spark.driver.extraJavaOptions`` in ``extra_conf`` are appended to
    segmentlake's own. ``quiet_progress`` hides Spark's console progress bar. The first call on
    a machine resolves Delta's jars and compiles the LogStore (``make setup`` does it ahead).
    """
    extra_conf = _checked_options(
        app_name=app_name, master=master, extra_conf=extra_conf, quiet_progress=quiet_progress
    )
    try:
        # The thread's active session, else the process's default one (a session made in
        # another thread): either way the caller's platform owns it, so no conf is applied.
        return SparkSession.active()
    except PySparkRuntimeError:
        pass
    remote = os.environ.get(REMOTE_ENV)
    if remote:
        # Spark Connect: the server owns the conf (it must have Delta's jars and extension).
        logger.debug("connecting to Spark Connect at %s", remote)
        return SparkSession.builder.remote(remote).getOrCreate()
    master = master or os.environ.get(MASTER_ENV) or "local[*]"
    conf = _local_conf(extra_conf, quiet_progress=quiet_progress, master=master)
    if conf.get(FILE_SYSTEM_CONF) == LOCAL_FS_CLASS and not _jvm_can_load(LOCAL_FS_CLASS):
        # A JVM this process started earlier (with another conf) keeps its classpath.
        del conf[FILE_SYSTEM_CONF]
    # Python workers must import what the driver imports: run them with this very interpreter,
    # not whatever "python3" is first on PATH. A local SparkContext takes the worker's Python
    # from the environment only (the spark.pyspark.python conf is read by spark-submit).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master)
    builder = builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _checked_options(
    *, app_name: object, master: object, extra_conf: object, quiet_progress: object
) -> dict[str, str]:
    """The arguments of :func:`spark_session` checked, before any session is looked up (a
    bad one fails the same with or without a running Spark), and ``extra_conf`` as strings:
    numbers and bools are written as Spark's builder writes them (``4``, ``true``)."""
    check_text(app_name, "app_name")
    if master is not None:
        check_text(master, "master", what="a Spark master URL such as local[2]")
    check_flag(quiet_progress, "quiet_progress")
    if extra_conf is None:
        return {}
    if not isinstance(extra_conf, Mapping):
        raise SpecError(f"extra_conf must be a mapping of Spark options, got {show(extra_conf)}")
    conf: dict[str, str] = {}
    for key, value in extra_conf.items():
        if not isinstance(key, str) or not key.strip():
            raise SpecError(f"extra_conf keys must be Spark option names, got {show(key)}")
        if isinstance(value, bool):
            conf[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            conf[key] = str(value)
        else:
            raise SpecError(
                f"extra_conf[{key!r}] must be a string, number or bool, got {show(value)}"
            )
    return conf


def prepare() -> list[Path]:
    """Resolve Delta's jars and build segmentlake's own (the LogStore, the local file system)
    now; return the jars a session loads (the local file system's goes on the classpath)."""
    jars = delta_jars()
    local_fs_jar()
    return [*jars, logstore_jar(jars)]


def read_spark_defaults(path: Path = CONF_DIR / "spark-defaults.conf") -> dict[str, str]:
    """Parse a ``spark-defaults.conf`` file into a dict (comments and blank lines skipped)."""
    conf: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _CONF_LINE.match(line)
        if match is None:
            raise EnvironmentSetupError(f"{path}:{number}: expected 'key value', got {raw!r}")
        conf[match["key"]] = match["value"].strip()
    return conf


def _local_conf(
    extra_conf: Mapping[str, str], *, quiet_progress: bool, master: str
) -> dict[str, str]:
    """segmentlake's conf for a Spark it starts itself (a local session or a Connect server)."""
    conf = read_spark_defaults()
    conf[_JARS] = ",".join(str(jar) for jar in prepare())
    conf[LOGSTORE_CONF] = LOGSTORE_CLASS
    log4j = CONF_DIR / "log4j2.properties"
    conf[_JAVA_OPTIONS] = (
        f"{conf.get(_JAVA_OPTIONS, '')} -Dlog4j2.configurationFile={log4j.as_uri()}"
    )
    if "PYSPARK_PYTHON" not in os.environ:
        conf["spark.pyspark.python"] = sys.executable
    if quiet_progress:
        conf["spark.ui.showConsoleProgress"] = "false"
    for key, value in extra_conf.items():
        if key == _JARS:
            conf[key] = f"{conf[key]},{value}"
        elif key == _JAVA_OPTIONS:
            conf[key] = f"{conf[key]} {value}"
        else:
            conf[key] = value
    conf.update(local_fs_conf(master, conf))
    logger.debug("starting a local Spark session with %s", conf)
    return {key: value.strip() for key, value in conf.items()}


def _jvm_can_load(class_name: str) -> bool:
    """Whether the JVM pyspark runs in can load ``class_name``: a JVM not started yet can
    (it starts with the conf's classpath)."""
    jvm = SparkContext._jvm
    if jvm is None:
        return True
    try:
        jvm.java.lang.Class.forName(class_name)
    except Exception:  # py4j raises its own error for a missing class
        return False
    return True
