"""Advisory turns: a driver that keeps losing commit races on a datasource gets the next turn.

Optimistic concurrency alone starves: a driver that loses a race backs off while the winner
starts its next transaction at once, so a fast writer in a loop can win every race for a
minute (measured: one driver 49 commits in 20 s, the other none), and every lost attempt
burns CPU the winners need. So drivers that met contention on a datasource take turns:

* every transaction first waits while another driver holds a live *claim* on the datasource
  — a tiny file ``<warehouse>/_segmentlake/turns/<datasource>.json`` naming it, with an
  expiry;
* a driver that lost a race on the datasource in the last ``contended_s`` seconds takes the
  turn before each attempt: it creates the claim only if there is none (one past its expiry
  is removed first), and removes it once it has committed or given up.

Claims are hints, not locks: correctness never depends on them (Delta's conflict check does
that): where the storage's create-if-absent is not atomic, two drivers may rarely both
believe they have the turn, and one of them loses a race. A claimant that dies leaves a
claim that expires within ``lease_s``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from typing import Any

from pyspark.sql import SparkSession

from segmentlake.metadata.deltalog import safe_name

__all__ = ["Turns"]

logger = logging.getLogger(__name__)


class Turns:
    """Claims under ``<root>/<datasource>`` on the table's Hadoop file system."""

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        *,
        lease_s: float = 5.0,
        poll_s: float = 0.05,
        contended_s: float = 10.0,
    ) -> None:
        jvm = spark._jvm  # type: ignore[attr-defined]
        self._jvm = jvm
        self._root = jvm.org.apache.hadoop.fs.Path(root)
        # Our own FileSystem instance (not the JVM-wide cached one Delta uses), without
        # checksum sidecar files: a claim read while being rewritten must not make the local
        # file system log a stack trace about its .crc file.
        hadoop_conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        self._fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(self._root.toUri(), hadoop_conf)
        self._fs.setVerifyChecksum(False)
        self._fs.setWriteChecksum(False)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.contended_s = contended_s
        self._last_loss: dict[str, float] = {}

    def lost(self, datasource: str) -> None:
        """Record that this driver just lost a commit race on ``datasource``."""
        self._last_loss[datasource] = time.monotonic()

    def contended(self, datasource: str) -> bool:
        """Whether this driver lost a race on ``datasource`` recently."""
        last = self._last_loss.get(datasource)
        return last is not None and time.monotonic() - last < self.contended_s

    def acquire(self, datasource: str) -> None:
        """Wait for the turn on ``datasource`` and take it: create the claim file only if no
        claim is there (a claim past its expiry is removed first)."""
        path = self._path(datasource)
        while True:
            holder = self._holder(datasource)
            if holder is not None and holder["owner"] == self.owner:
                return
            if holder is not None and holder["expires_ms"] <= time.time() * 1000:
                self._fs.delete(path, False)
                holder = None
            if holder is None and self._create(path):
                return
            time.sleep(self.poll_s)

    def wait(self, datasource: str) -> float:
        """Wait while another driver holds a live claim on ``datasource`` (at most one lease
        past the claim's last renewal); return the seconds waited."""
        started = time.monotonic()
        while True:
            holder = self._holder(datasource)
            if holder is None or holder["owner"] == self.owner:
                return time.monotonic() - started
            if holder["expires_ms"] <= time.time() * 1000:
                return time.monotonic() - started
            time.sleep(self.poll_s)

    def _create(self, path: Any) -> bool:
        record = {"owner": self.owner, "expires_ms": int((time.time() + self.lease_s) * 1000)}
        try:
            out = self._fs.create(path, False)
        except Exception:  # another driver created it first
            return False
        try:
            out.write(bytearray(json.dumps(record).encode()))
        finally:
            out.close()
        return True

    def release(self, datasource: str) -> None:
        """Remove our claim on ``datasource`` (someone else's is left alone)."""
        holder = self._holder(datasource)
        if holder is not None and holder["owner"] == self.owner:
            self._fs.delete(self._path(datasource), False)

    def _holder(self, datasource: str) -> dict[str, Any] | None:
        path = self._path(datasource)
        try:
            if not self._fs.exists(path):
                return None
            stream = self._fs.open(path)
            try:
                data = bytes(stream.readAllBytes())
            finally:
                stream.close()
            return dict(json.loads(data))
        except Exception as e:  # deleted between exists and open, or half written: no claim
            logger.debug("no readable claim on %s: %s", datasource, e)
            return None

    def _path(self, datasource: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self._root, f"{safe_name(datasource)}.json")
