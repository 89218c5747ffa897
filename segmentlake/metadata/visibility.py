"""Each used segment's visibility, kept in its record by the commit that changes it.

A segment record's ``visibility`` column says what the timeline does with it right now:
``visible``, ``overshadowed`` or ``standby`` (Druid's OvershadowableManager states; null when
the segment is unused). Every commit that publishes segments or marks them used or unused
recomputes the states of the used segments overlapping what it changed, from the timeline of
the used segments around them, and writes the ones that changed in the same commit — so SQL
can select the visible set directly and a reader never needs the whole timeline.

What a change can affect: instants inside the changed segments' intervals only. A segment
overlapping them has its state decided by the segments overlapping *it*, so the transaction
reads the used segments overlapping the hull of every interval that overlaps the change
(:func:`affected_scope`), and the decision checks that nothing it found reaches further
(:class:`~segmentlake.metadata.store.ScopeTooNarrow` otherwise: read wider and decide again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow.compute as pc

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NON_ROOT_GENERATION_PARTITION_ID_MIN, TombstoneShardSpec
from segmentlake.core.timeline import VISIBLE, VersionedIntervalTimeline
from segmentlake.metadata.records import SEGMENT, Row, segments_from_rows
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, ScopeTooNarrow

__all__ = ["affected_scope", "visibility_changes"]


def _used(
    store: MetadataStore, datasource: str, ranges: Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The intervals of the used segments overlapping ``ranges``."""
    out: list[tuple[int, int]] = []
    for start, end in ranges:
        used = store.arrow(
            datasource,
            pc.field("used"),
            kinds=[SEGMENT],
            columns=("start_ms", "end_ms"),
            fresh=False,
            scope=Scope.of([(start, end)]),
        )
        out += zip(used["start_ms"].to_pylist(), used["end_ms"].to_pylist(), strict=True)
    return out


def affected_scope(store: MetadataStore, datasource: str, intervals: Sequence[Interval]) -> Scope:
    """The time ranges a change of segments in ``intervals`` must read to recompute every
    affected visibility: the hull of each interval with the used segments overlapping it."""
    ranges = [(i.start_millis, i.end_millis) for i in intervals]
    return Scope.of(ranges + _used(store, datasource, Scope.of(ranges).ranges))


def visibility_changes(
    used_rows: Sequence[Row],
    *,
    added: Sequence[DataSegment] = (),
    removed: Iterable[str] = (),
    changed: Sequence[Interval],
    scope: Scope,
    now_ms: int,
) -> tuple[dict[str, str], list[Change]]:
    """The states after adding ``added`` and removing (marking unused) the ids ``removed``
    from the used segments ``used_rows`` (every used segment the transaction read within
    ``scope``): by id, the states of the new segments and of the read ones overlapping
    ``changed`` (only those can change), and upserts for the read records whose state
    changed."""
    gone = set(removed)
    _check_within(scope, [(*s.interval.key, str(s.id)) for s in added])
    if not gone:
        appended = _appended_states(used_rows, added, changed)
        if appended is not None:
            return appended, []
    rows = [r for r in used_rows if r["id"] not in gone] if gone else used_rows
    touched = Scope.of((i.start_millis, i.end_millis) for i in changed)
    near = [i for i, r in enumerate(rows) if touched.overlaps_range(r["start_ms"], r["end_ms"])]
    _check_within(scope, [(rows[i]["start_ms"], rows[i]["end_ms"], rows[i]["id"]) for i in near])
    read = segments_from_rows(rows)
    timeline = VersionedIntervalTimeline(read)
    timeline.add_all(added)
    # Looked up by segment, for the read records by their own ids: formatting an id costs
    # two timestamps, and a busy chunk's decision reads ~10^4 of them.
    by_segment = timeline.visibility_states()
    states = {str(seg.id): by_segment[seg] for seg in added}
    updates = []
    for i in near:
        row = rows[i]
        state = by_segment.get(read[i])
        if state is None:
            continue
        states[row["id"]] = state
        if state != row.get("visibility"):
            updates.append(Change("upsert", {**row, "visibility": state, "updated_ms": now_ms}))
    return states, updates


def _appended_states(
    used_rows: Sequence[Row], added: Sequence[DataSegment], changed: Sequence[Interval]
) -> dict[str, str] | None:
    """The states when the change only adds partitions to complete, visible chunks, or None.

    Such a partition (an append's, or its upgraded copy) is numbered after every partition
    of its chunk and outside the chunk's core partitions, and claims no more core partitions
    than the chunk has (as allocation gives it), so the chunk stays complete and
    its versions and intervals stay what they were: the new segment is visible like the
    rest of its chunk and no other segment changes state. This is what nearly every append
    publishes, and it spares the timeline of every used segment of the days it touches
    (~50 ms for 15,000 of them, an append's whole commit being ~6 ms). A chunk with a
    tombstone, an overwrite (minor compaction) partition or a segment not visible, or a
    change beyond the added chunks, is decided by the timeline."""
    if not added:
        return None
    chunks = {(*s.interval.key, s.version) for s in added}
    if not {i.key for i in changed} <= {key[:2] for key in chunks}:
        return None
    highest: dict[tuple[int, int, str], int] = {}
    cores: dict[tuple[int, int, str], int] = {}
    for row in used_rows:
        key = (row["start_ms"], row["end_ms"], row["version"])
        if key not in chunks:
            continue
        partition = row["partition_num"]
        if row.get("visibility") != VISIBLE or row["shard_type"] == TombstoneShardSpec.type_name:
            return None
        if partition >= NON_ROOT_GENERATION_PARTITION_ID_MIN:
            return None
        highest[key] = max(highest.get(key, -1), partition)
        cores[key] = max(cores.get(key, 0), row["core_partitions"] or 0)
    states = {}
    for segment in added:
        key = (*segment.interval.key, segment.version)
        top = highest.get(key)
        spec = segment.shard_spec
        if top is None or segment.is_tombstone:
            return None  # a new chunk: what it overlaps decides
        if not top < spec.partition_num < NON_ROOT_GENERATION_PARTITION_ID_MIN:
            return None
        # More core partitions than the chunk has would leave it incomplete.
        if not spec.num_core_partitions <= min(cores[key], spec.partition_num):
            return None
        states[str(segment.id)] = VISIBLE
    return states


def _check_within(scope: Scope, spans: Iterable[tuple[int, int, str]]) -> None:
    """A changed segment's state depends on the segments overlapping it, which the
    transaction read only within its scope: one reaching beyond it needs a wider read."""
    if scope.everything:
        return
    for start, end, segment_id in spans:
        # One bisect each: a busy append's decision checks ~10^4 segments against ~10^2 ranges.
        if not scope.covers_range(start, end):
            raise ScopeTooNarrow(f"segment {segment_id} reaches beyond the ranges read")
