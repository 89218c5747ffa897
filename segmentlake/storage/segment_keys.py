"""The ``__segment`` keys tasks write under (``<chunk ms>[.<bucket>].<token>``) and their
order; the key a published segment's rows are under is its load spec's
(:mod:`segmentlake.core.load_spec`)."""

from __future__ import annotations

__all__ = ["key_order"]


def key_order(key: str) -> tuple[int, ...]:
    """(chunk ms[, bucket]) of a key a task wrote: ``<chunk ms>.<token>``, or
    ``<chunk ms>.<bucket>.<token>`` of a split or a perfect rollup.

    The task's random token makes a key unique to the task, so rows of a task that fails
    before publishing are never read (only published keys are). The chunk comes first and the
    key stays short: Spark sorts rows by it before writing, and long shared prefixes made the
    write measurably slower."""
    return tuple(int(part) for part in key.split(".")[:-1])
