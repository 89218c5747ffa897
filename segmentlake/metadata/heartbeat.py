"""Keep a running task's lock leases alive: a live task keeps its locks however long it runs,
a dead one loses them within one lease."""

from __future__ import annotations

import logging
import threading

from segmentlake.metadata.background import start_daemon
from segmentlake.metadata.lockbox import Lockbox

__all__ = ["LeaseKeeper"]

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the leases of ``group_id``'s locks every third of a lease, from construction
    until :meth:`finish`. Start it right after the locks are granted."""

    def __init__(self, lockbox: Lockbox, datasource: str, group_id: str) -> None:
        self.lockbox = lockbox
        self.datasource = datasource
        self.group_id = group_id
        self.stop = threading.Event()
        self.thread = start_daemon(self._beat, name=f"heartbeat-{group_id}", stop=self.stop)

    def _beat(self) -> None:
        while not self.stop.wait(self.lockbox.lease_ms / 3000):
            try:
                self.renew()
            except Exception:  # the publish will find out; keep beating meanwhile
                logger.warning("%s: heartbeat failed", self.group_id, exc_info=True)

    def renew(self) -> None:
        if not self.lockbox.heartbeat(self.datasource, self.group_id) and not self.stop.is_set():
            logger.warning("%s: its locks are gone (revoked or expired)", self.group_id)

    def finish(self, *, renew: bool) -> None:
        """Stop beating; with ``renew``, renew the leases once more first. A publish calls
        this: a renewal rewrites the lock rows the publish reads, so beating through a long
        publish (thousands of locks) would make it lose every commit race."""
        if not self.thread.is_alive():
            return
        self.stop.set()
        self.thread.join()
        if renew:
            self.renew()
