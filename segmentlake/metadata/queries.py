"""The predicates over metadata rows that code outside ``metadata/`` may ask for.

Callers name what they read in the metadata's own terms (rows of a kind, one keyed row, the
used segments); the column names and their encoding stay inside this package, so a change of
the record layout touches only here.
"""

from __future__ import annotations

from typing import TypeAlias

import pyarrow.compute as pc

from segmentlake.metadata.records import SEGMENT

__all__ = ["USED_SEGMENTS", "Condition", "either", "of_kind", "row_of", "unused_segments_since"]

# What a metadata read filters on (opaque outside this package).
Condition: TypeAlias = pc.Expression


def of_kind(*kinds: str) -> Condition:
    """Rows of any of ``kinds``."""
    if not kinds:
        raise ValueError("of_kind needs at least one kind")
    if len(kinds) == 1:
        return pc.field("kind") == kinds[0]
    return pc.field("kind").isin(list(kinds))


def row_of(kind: str, row_id: str) -> Condition:
    """The one row of ``kind`` keyed ``row_id``."""
    return (pc.field("kind") == kind) & (pc.field("id") == row_id)


def either(*conditions: Condition) -> Condition:
    """Rows matching any of ``conditions``."""
    if not conditions:
        raise ValueError("either needs at least one condition")
    result = conditions[0]
    for condition in conditions[1:]:
        result = result | condition
    return result


USED_SEGMENTS: Condition = of_kind(SEGMENT) & pc.field("used")


def unused_segments_since(cutoff_ms: int) -> Condition:
    """Segment records marked unused at ``cutoff_ms`` or before (what a kill may remove)."""
    unused = of_kind(SEGMENT) & ~pc.field("used")
    return unused & (pc.field("updated_ms") <= cutoff_ms)
