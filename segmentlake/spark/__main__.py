"""``python -m segmentlake.spark prepare``: resolve Delta's jars and build the LogStore now.

``make setup`` runs this so the first test or quickstart does not pay for it.
"""

from __future__ import annotations

import argparse
import logging
import time

from segmentlake.spark.session import prepare

logger = logging.getLogger("segmentlake.spark")


def main(argv: list[str] | None = None) -> int:
    """Run the command named in ``argv`` and return the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m segmentlake.spark")
    parser.add_argument("command", choices=["prepare"], help="resolve jars and build the LogStore")
    parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.monotonic()
    jars = prepare()
    logger.info(
        "%d jars ready in %.1f s (%s)", len(jars), time.monotonic() - started, jars[-1].parent
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
