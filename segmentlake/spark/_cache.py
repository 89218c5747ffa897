"""Where segmentlake keeps what it builds once per machine, and how processes share it.

Resolved Delta jars and the compiled LogStore jar live under one cache root
(``$SEGMENTLAKE_CACHE_DIR``, else ``$XDG_CACHE_HOME/segmentlake``, else
``~/.cache/segmentlake``). Several Spark drivers may start at once (tests, parallel jobs), so
every build runs under an exclusive file lock and publishes its result with an atomic rename:
a reader sees either nothing or the finished artifact, never a half-written one.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["cache_root", "file_lock"]

CACHE_DIR_ENV = "SEGMENTLAKE_CACHE_DIR"


def cache_root() -> Path:
    """Return the cache root directory, creating it if needed."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        root = Path(override).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        root = Path(base) / "segmentlake"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if absent) for the block.

    ``flock`` locks are released by the kernel when the process dies, so a crashed build never
    leaves the cache wedged; the next process simply redoes the work.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
