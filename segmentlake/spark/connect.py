"""A local Spark Connect server with Delta, and how segmentlake tells a Connect session apart.

A Spark Connect client (``SparkSession.builder.remote("sc://host:port")``) has no JVM in its
process: no ``sparkContext``, no py4j, no Python ``DeltaTable`` API here (Delta's Connect
plugin is not served by the Maven registry we reach). segmentlake's metadata is committed from
Python through delta-rs, and its data-plane Spark work is DataFrames and SQL, so most of the
library runs unchanged over Connect; what cannot raises :class:`ClassicSessionRequired`.

``start_connect_server`` runs the Connect server that ships inside pyspark with the same jars
and defaults as :func:`segmentlake.spark.spark_session` (Delta, the multi-process-safe
LogStore, ``spark_conf/``), for tests, benchmarks and local trials; production servers are
the platform's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segmentlake.errors import ClassicSessionRequired, EnvironmentSetupError
from segmentlake.spark.jars import spark_jars_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ConnectServer",
    "default_parallelism",
    "is_connect",
    "require_classic",
    "start_connect_server",
]

logger = logging.getLogger(__name__)

# What a Connect session is assumed to run in parallel when its server's conf does not say.
_CONNECT_PARALLELISM = 8

_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_PORT_CONF = "spark.connect.grpc.binding.port"
_ADDRESS_CONF = "spark.connect.grpc.binding.address"
_POLL_S = 0.2
_STOP_WAIT_S = 30.0


def is_connect(spark: object) -> bool:
    """True for a Spark Connect session. Checked by class, without importing the Connect
    client (which needs grpc); ``pyspark.sql.utils.is_remote`` is process-wide instead."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """The session's default parallelism (the tasks it runs at once). A Spark Connect client
    has no SparkContext to ask: there, the server's ``spark.default.parallelism`` if set, else
    a small fixed floor."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value and value.isdigit() else _CONNECT_PARALLELISM


def require_classic(spark: object, operation: str, why: str) -> None:
    """Raise :class:`ClassicSessionRequired` naming ``operation`` and ``why`` if ``spark`` is a
    Connect session; do nothing on a classic one."""
    if is_connect(spark):
        raise ClassicSessionRequired(operation, why)


@dataclass(frozen=True)
class ConnectServer:
    """A running local Spark Connect server: ``url`` for ``SparkSession.builder.remote``.
    ``stop`` (or leaving its ``with`` block) ends it and the processes it started."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    started_s: float  # how long it took to start listening

    def session(self) -> SparkSession:
        """A Connect client session on this server."""
        from pyspark.sql import SparkSession

        return SparkSession.builder.remote(self.url).getOrCreate()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` of the server's log (what to show when it misbehaves)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Ask the server to shut down (SIGTERM runs Spark's shutdown hooks), kill it if it
        has not within 30 s. The server leads its own process group (its Python workers
        included), and only that group is signalled."""
        if self.process.poll() is not None:
            return
        _signal_group(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            logger.warning("Spark Connect server %s ignored SIGTERM; killing it", self.url)
            _signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_connect_server(
    *,
    port: int | None = None,
    master: str = "local[2]",
    extra_conf: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    timeout_s: float = 180.0,
) -> ConnectServer:
    """Start Spark Connect on ``localhost:port`` (a free port if ``None``) and return once it
    accepts connections.

    The server runs pyspark's own ``spark-submit`` with segmentlake's local defaults (Delta's
    jars and SQL extension, the LogStore, UTC) plus ``extra_conf``, and runs its Python
    workers (``foreachBatch``, UDFs) with this interpreter. Its output goes to
    ``<log_dir>/spark-connect-<port>.log``. Raises :class:`EnvironmentSetupError` with the log's
    tail if it exits or is not up within ``timeout_s``.
    """
    from segmentlake.spark.session import _local_conf

    port = port or _free_port()
    conf = _local_conf(extra_conf or {}, quiet_progress=True, master=master)
    conf.setdefault("spark.pyspark.python", sys.executable)
    conf[_PORT_CONF] = str(port)
    conf.setdefault(_ADDRESS_CONF, "localhost")
    command = [str(_spark_home() / "bin" / "spark-submit"), "--master", master]
    command += ["--class", _SERVER_CLASS, "--name", f"segmentlake-connect-{port}"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    directory = log_dir or Path(tempfile.mkdtemp(prefix="segmentlake-connect-"))
    log_path = directory / f"spark-connect-{port}.log"
    env = {**os.environ, "SPARK_HOME": str(_spark_home()), "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)  # the server is classic Spark
    began = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: stop() signals only that
        )
    server = ConnectServer(f"sc://localhost:{port}", port, process, log_path, 0.0)
    try:
        _wait_until_listening(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    started = time.monotonic() - began
    logger.info("Spark Connect server up at %s in %.1f s (log %s)", server.url, started, log_path)
    return dataclasses.replace(server, started_s=started)


def _wait_until_listening(server: ConnectServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.process.poll() is not None:
            raise EnvironmentSetupError(
                f"the Spark Connect server exited with code {server.process.returncode} before "
                f"listening on port {server.port}; its log ({server.log_path}) ends:\n"
                f"{server.log_tail()}"
            )
        if _listening(server.port):
            return
        if time.monotonic() >= deadline:
            raise EnvironmentSetupError(
                f"the Spark Connect server was not listening on port {server.port} after "
                f"{timeout_s:.0f} s; its log ({server.log_path}) ends:\n{server.log_tail()}"
            )
        time.sleep(_POLL_S)


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("localhost", port)) == 0


def _free_port() -> int:
    """A port the OS just had free (another process may take it before the server binds;
    the server then exits and says so)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("localhost", 0))
        port: int = probe.getsockname()[1]
        return port


def _spark_home() -> Path:
    return spark_jars_dir().parent


def _signal_group(pid: int, sig: Any) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(pid, sig)
