"""``python -m segmentlake.spark prepare|connect-server``.

``prepare`` resolves Delta's jars and builds the LogStore now (``make setup`` runs it, so the
first test or quickstart does not pay for it). ``connect-server`` runs a local Spark Connect
server with the same jars and defaults until interrupted (for trying segmentlake over
``sc://localhost:PORT``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import time

from segmentlake.spark.session import prepare

logger = logging.getLogger("segmentlake.spark")


def main(argv: list[str] | None = None) -> int:
    """Run the command named in ``argv`` and return the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m segmentlake.spark")
    parser.add_argument(
        "command",
        choices=["prepare", "connect-server"],
        help="prepare: resolve jars and build the LogStore; connect-server: run Spark Connect",
    )
    parser.add_argument("--port", type=int, default=15002, help="connect-server's port")
    parser.add_argument("--master", default="local[*]", help="connect-server's Spark master")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "connect-server":
        return _serve(args.port, args.master)
    started = time.monotonic()
    jars = prepare()
    logger.info(
        "%d jars ready in %.1f s (%s)", len(jars), time.monotonic() - started, jars[-1].parent
    )
    return 0


def _serve(port: int, master: str) -> int:
    from segmentlake.spark.connect import start_connect_server

    # A SIGTERM must stop the server too (it leads its own process group): exit through the
    # ``with`` block as Ctrl-C does.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    with start_connect_server(port=port, master=master) as server:
        logger.info(
            "Spark Connect at %s (log %s); SPARK_REMOTE=%s makes segmentlake use it; "
            "Ctrl-C stops it",
            server.url,
            server.log_path,
            server.url,
        )
        try:
            server.process.wait()
        except KeyboardInterrupt:
            logger.info("stopping %s", server.url)
            return 0
    code = server.process.returncode
    logger.error("the server exited with code %s; log: %s", code, server.log_path)
    return 1


def _exit_on_signal(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(main())
