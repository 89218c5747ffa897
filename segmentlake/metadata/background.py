"""Background threads that call into delta-rs, waited for when the interpreter exits.

At exit Python ends a daemon thread as soon as it takes the GIL back after native code, and
ending it there unwinds through delta-rs's Rust frames, which crashes the whole process
(SIGSEGV, exit status 139) after the program's own work is done. One in 8 to 18 processes
whose last commits started the metadata upkeep (a fold or a checkpoint) ended that way (gdb: the
``segmentlake-upkeep`` thread inside a delta-rs table load). A thread started here is told
to stop (its ``stop`` event, if any) and joined by an ``atexit`` hook, for at most
:data:`EXIT_WAIT_S` in all.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["EXIT_WAIT_S", "start_daemon"]

logger = logging.getLogger(__name__)

EXIT_WAIT_S = 120.0  # a fold or checkpoint at 10^5 records takes seconds; a stuck store, more

_running: dict[threading.Thread, threading.Event | None] = {}
_lock = threading.Lock()


def start_daemon(
    target: Callable[..., Any],
    *,
    name: str,
    args: tuple[Any, ...] = (),
    stop: threading.Event | None = None,
) -> threading.Thread:
    """Start ``target(*args)`` in a daemon thread that the interpreter's exit waits for
    (after setting ``stop``); returns the thread.

    >>> start_daemon(table.checkpoint, name="segmentlake-upkeep")  # doctest: +SKIP
    """

    def run() -> None:
        try:
            target(*args)
        finally:
            with _lock:
                _running.pop(threading.current_thread(), None)

    thread = threading.Thread(target=run, name=name, daemon=True)
    with _lock:
        _running[thread] = stop
    thread.start()
    return thread


def _wait_at_exit() -> None:
    with _lock:
        running = dict(_running)
    for stop in running.values():
        if stop is not None:
            stop.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            logger.warning("exiting while %s still runs", thread.name)


atexit.register(_wait_at_exit)
