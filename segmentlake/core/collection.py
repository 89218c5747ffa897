"""Pausing Python's cyclic garbage collector around bulk work.

Building 10^5 to 10^6 segments, chunks or records makes objects and no cyclic garbage, yet every
few thousand allocations the collector rescans all of them, more each time they grow: a bulk
publish spent a quarter of its time there.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused"]


@contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic collector paused for the block (reference counting still frees what
    dies); it resumes after, if it ran before. Nesting is harmless."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
