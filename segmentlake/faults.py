"""Crash points: named places where a fault-injection test may kill the driver.

Each step of a task that leaves something behind (a data write, a metadata commit, a volume
load) calls :func:`crash_point` with the step's name. Normally that is a dictionary-free string
comparison against None. When the environment variable ``SEGMENTLAKE_CRASH_AT`` names the point
(``name`` or ``name#k`` for its k-th pass), the process is killed with SIGKILL on the spot — its
whole process group when it leads one (a driver started with ``start_new_session``: the JVM
dies with it) — exactly as a driver lost to an OOM kill or a node failure would be. Tests and
``bench/kill_matrix.py`` use it to check that nothing half-done is ever visible.

Point names (see docs/faults.md for the matrix):

* ``commit.<operation>.before_log`` / ``commit.<operation>.after_log`` — inside a metadata
  commit: its data file staged but the log entry not yet written / the log entry written but
  the call not yet returned (``<operation>`` is ``lock``, ``allocate``, ``publish``, ``kill``,
  ``coordinator_run``, ``segment_loaded``, ...);
* ``ingest.after_parse``, ``ingest.after_write`` — an ingestion before / after its Spark write;
* ``compact.after_read`` (major: inputs read), ``compact.after_write`` (minor: outputs written);
* ``kill.after_delete`` — kill's rows deleted, VACUUM not run;
* ``coordinator.after_load`` — a volume's rows loaded, the copies not yet marked loaded.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import Counter

__all__ = ["CRASH_ENV", "crash_point"]

logger = logging.getLogger(__name__)

CRASH_ENV = "SEGMENTLAKE_CRASH_AT"
_ARMED = os.environ.get(CRASH_ENV) or None
_passes: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Kill this process (SIGKILL) here if ``SEGMENTLAKE_CRASH_AT`` names this point."""
    if _ARMED is None:
        return
    _passes[name] += 1
    if _ARMED not in (name, f"{name}#{_passes[name]}"):
        return
    logger.warning("crash point %s reached: killing the driver", _ARMED)
    for handler in logging.getLogger().handlers:
        handler.flush()
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
