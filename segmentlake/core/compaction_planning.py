"""Which segments of a chunk to compact together: the planner and selector SPI, the shipped
system planner and selectors, and the jobs that drain a selection.

Every job takes whole, complete atomic update groups in root-partition order, because a minor
compaction's outputs overshadow by root range: a job over a gap would hide whatever is
allocated in it later (Druid's segment-lock compaction rule).

* A :class:`CompactionPlanner` gets a :class:`ChunkView` and returns :class:`PlannedJob` s
  (segments, a score saying how badly the chunk needs them, a group). The shipped
  :class:`RatioPlanner` is Accumulo's ratio rule on consecutive segments.
* A :class:`CompactionSelector` gets a :class:`ChunkView` and returns segment ids to select;
  the manager persists them as a selection and drains it with :func:`selection_jobs`. Shipped:
  :class:`FingerprintSelector` (compaction state differs from the wanted one) and
  :class:`MaskedRowsSelector` (many stored rows that readers clip away).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from segmentlake.core.compaction_jobs import DEFAULT_GROUP, ChunkKey, ChunkView, SelectionState
from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.spec_reader import check_int, check_number, check_text
from segmentlake.errors import SpecError

__all__ = [
    "CompactionPlanner",
    "CompactionSelector",
    "FingerprintSelector",
    "MaskedRowsSelector",
    "PlannedJob",
    "RatioPlanner",
    "compaction_fingerprint",
    "consecutive_groups",
    "major_span",
    "needs_major",
    "selection_jobs",
    "whole_groups",
]

Group = tuple[DataSegment, ...]


@dataclass(frozen=True, slots=True)
class PlannedJob:
    """A planner's answer: segment ids of one chunk, how badly it needs them (>= 0), a group,
    and the most rows an output segment may have (None: the datasource's default)."""

    segments: tuple[str, ...]
    score: int
    group: str = DEFAULT_GROUP
    final: bool = False
    max_rows_per_segment: int | None = None


@runtime_checkable
class CompactionPlanner(Protocol):
    """Plans system compactions of one chunk. It must skip segments that are busy (a running
    compaction holds them) or selected, and return nothing while the chunk is held."""

    def plan(self, chunk: ChunkView) -> list[PlannedJob]: ...

    def config(self) -> Mapping[str, Any]: ...


@runtime_checkable
class CompactionSelector(Protocol):
    """Picks segments of one chunk for a selector compaction. ``name`` identifies it in the
    metadata; it runs again on a chunk only when the chunk's segment set or ``config()``
    changed since its last run there. A selector with a ``max_rows_per_segment`` attribute has
    its selections compacted to that target (else the datasource's default)."""

    @property
    def name(self) -> str: ...

    def select(self, chunk: ChunkView) -> tuple[str, ...]: ...

    def config(self) -> Mapping[str, Any]: ...


def consecutive_groups(
    visible: Sequence[DataSegment], *, exclude: frozenset[str] = frozenset()
) -> list[list[Group]]:
    """The chunk's complete atomic update groups in root order, cut into runs of adjacent root
    ranges; a group with an excluded member ends a run (it is never taken)."""
    groups: dict[tuple[int, int, int], list[DataSegment]] = {}
    for seg in visible:
        if not seg.is_tombstone:
            spec = seg.shard_spec
            key = (spec.start_root_partition_id, spec.end_root_partition_id, spec.minor_version)
            groups.setdefault(key, []).append(seg)
    runs: list[list[Group]] = []
    previous_end = None
    for key, members in sorted(groups.items()):
        complete = len(members) >= members[0].shard_spec.atomic_update_group_size
        if not complete or any(str(s.id) in exclude for s in members):
            previous_end = None
            continue
        group = tuple(sorted(members, key=lambda s: s.shard_spec.partition_num))
        if runs and previous_end == key[0]:
            runs[-1].append(group)
        else:
            runs.append([group])
        previous_end = key[1]
    return runs


def whole_groups(visible: Sequence[DataSegment], ids: Sequence[str]) -> tuple[str, ...]:
    """``ids`` widened to whole complete atomic update groups of ``visible`` (a selector may
    name one member of a group), in root order; ids not visible are dropped."""
    wanted = set(ids)
    chosen: list[str] = []
    for run in consecutive_groups(visible):
        for group in run:
            if any(str(s.id) in wanted for s in group):
                chosen += [str(s.id) for s in group]
    return tuple(chosen)


def _windows(run: list[Group], max_segments: int) -> list[list[Group]]:
    """Consecutive windows of whole groups, each of at most ``max_segments`` segments (a
    larger group alone makes its own window)."""
    windows: list[list[Group]] = [[]]
    count = 0
    for group in run:
        if windows[-1] and count + len(group) > max_segments:
            windows.append([])
            count = 0
        windows[-1].append(group)
        count += len(group)
    return [w for w in windows if w]


def _ids(window: list[Group]) -> tuple[str, ...]:
    return tuple(str(s.id) for group in window for s in group)


def _outputs(window: list[Group], max_rows: int) -> int:
    return max(1, -(-sum(s.num_rows for g in window for s in g) // max_rows))


@dataclass(frozen=True, slots=True)
class RatioPlanner:
    """Accumulo's compaction ratio on consecutive segments: a window of segments is worth
    compacting when their total size is at least ``ratio`` times the largest one's (so large
    segments are rewritten only once enough data has gathered next to them: logarithmic
    work), it has at least two segments, and it makes fewer segments. Jobs go to the first
    group of ``groups`` (name, max input bytes or None) whose limit they fit."""

    ratio: float = 3.0
    max_segments_per_job: int = 32
    max_rows_per_segment: int = 5_000_000
    groups: tuple[tuple[str, int | None], ...] = ((DEFAULT_GROUP, None),)

    def __post_init__(self) -> None:
        check_number(self.ratio, "ratio (e.g. 3.0)", minimum=1.0)
        check_int(self.max_segments_per_job, "max_segments_per_job", minimum=2)
        check_int(self.max_rows_per_segment, "max_rows_per_segment", minimum=1)
        if not self.groups or self.groups[-1][1] is not None:
            raise SpecError(
                f"groups must end with one without a size limit, e.g. [('small', 10**8), "
                f"('large', None)]; got {list(self.groups)}"
            )

    def config(self) -> Mapping[str, Any]:
        return {
            "type": "ratio",
            "ratio": self.ratio,
            "maxSegmentsPerJob": self.max_segments_per_job,
            "maxRowsPerSegment": self.max_rows_per_segment,
            "groups": [list(g) for g in self.groups],
        }

    def plan(self, chunk: ChunkView) -> list[PlannedJob]:
        if chunk.held or len(chunk.visible) < 2:
            return []
        exclude = chunk.busy_ids | chunk.selected_ids
        score = len(chunk.visible)
        jobs = []
        for run in consecutive_groups(chunk.visible, exclude=exclude):
            jobs += [
                PlannedJob(_ids(w), score, self.group_of(w)) for w in self._worth_compacting(run)
            ]
        return jobs

    def _worth_compacting(self, run: list[Group]) -> list[list[Group]]:
        chosen = []
        start = 0
        while start < len(run):
            window = self._longest_worth(_windows(run[start:], self.max_segments_per_job)[0])
            if window:
                chosen.append(window)
                start += len(window)
            else:
                start += 1
        return chosen

    def _longest_worth(self, window: list[Group]) -> list[Group]:
        """The longest prefix of ``window`` worth compacting (empty if none): small segments
        just before a large one are merged without it."""
        for end in range(len(window), 0, -1):
            if self._worth(window[:end]):
                return window[:end]
        return []

    def _worth(self, window: list[Group]) -> bool:
        sizes = [s.size for g in window for s in g]
        if len(sizes) < 2 or _outputs(window, self.max_rows_per_segment) >= len(sizes):
            return False
        return sum(sizes) >= self.ratio * max(sizes)

    def group_of(self, window: list[Group]) -> str:
        size = sum(s.size for g in window for s in g)
        return next(name for name, limit in self.groups if limit is None or size <= limit)


def selection_jobs(chunk: ChunkView, *, group: str = DEFAULT_GROUP) -> list[PlannedJob]:
    """The jobs that drain ``chunk``'s selection: while more than one job's worth of selected
    segments remains, full windows of ``max_segments_per_job`` consecutive free ones
    (intermediate jobs, whose outputs replace their inputs in the selection); then, once no
    job of the selection runs, one final job over everything left."""
    selection = chunk.selection
    if selection is None or selection.state is not SelectionState.SELECTED:
        return []
    selected = chunk.selected_ids
    remaining = [s for s in chunk.visible if str(s.id) in selected]
    if not remaining:
        return []
    busy = chunk.busy_ids
    score = len(remaining)
    limit = selection.max_segments_per_job
    if len(remaining) <= limit:
        if busy & selected:
            return []
        ids = whole_groups(remaining, list(selected))
        return [PlannedJob(ids, score, group, True, selection.max_rows_per_segment)]
    jobs = []
    runs = consecutive_groups(remaining, exclude=busy)
    for run in runs:
        for window in _windows(run, limit):
            if sum(len(g) for g in window) == limit:
                jobs.append(
                    PlannedJob(_ids(window), score, group, False, selection.max_rows_per_segment)
                )
    return jobs


def major_span(chunk: ChunkKey, granularity: Granularity | None) -> Interval:
    """What a major compaction of ``chunk`` to ``granularity`` (None: the chunk's own)
    rewrites: the chunk widened to whole buckets of the target."""
    interval = chunk.interval
    if granularity is None:
        return interval
    start = granularity.bucket_start_millis(interval.start_millis)
    end = granularity.bucket(interval.end_millis - 1).end_millis
    return Interval.of_millis(start, end)


def needs_major(
    chunk: ChunkView,
    *,
    segment_granularity: Granularity | None,
    partitions_spec: Mapping[str, Any],
) -> bool:
    """Whether a chunk differs from the datasource's target chunking: its interval is not one
    bucket of ``segment_granularity``, or most of its rows were not made by a major compaction
    to ``partitions_spec`` (JSON). Most, not all: rows appended after a major are merged by
    minor compactions until they outweigh it, so a chunk is not rewritten per append."""
    data = [s for s in chunk.visible if not s.is_tombstone]
    if not data:
        return False
    interval = chunk.chunk.interval
    if (
        segment_granularity is not None
        and segment_granularity.bucket(interval.start_millis) != interval
    ):
        return True
    made = sum(s.num_rows for s in data if _made_with(s, segment_granularity, partitions_spec))
    return 2 * made < sum(s.num_rows for s in data)


def _made_with(
    segment: DataSegment, granularity: Granularity | None, partitions: Mapping[str, Any]
) -> bool:
    state = segment.last_compaction_state
    if not state or state.get("type") != "major":
        return False
    made_in = (state.get("granularitySpec") or {}).get("segmentGranularity")
    if granularity is not None and made_in != granularity.name:
        return False
    return dict(state.get("partitionsSpec") or {}) == dict(partitions)


def compaction_fingerprint(state: Mapping[str, Any] | None) -> str | None:
    """What the fingerprint selector compares: the partitioning a segment was compacted with
    (None: never compacted)."""
    if not state:
        return None
    wanted = {"partitionsSpec": state.get("partitionsSpec")}
    return hashlib.sha1(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class FingerprintSelector:
    """Selects the segments whose compaction fingerprint differs from the datasource's wanted
    one: never compacted, or compacted with another ``max_rows_per_segment``."""

    max_rows_per_segment: int = 5_000_000
    name: str = "fingerprint"

    def __post_init__(self) -> None:
        check_int(self.max_rows_per_segment, "max_rows_per_segment", minimum=1)
        check_text(self.name, "selector name")

    def config(self) -> Mapping[str, Any]:
        return {"type": "fingerprint", "maxRowsPerSegment": self.max_rows_per_segment}

    def wanted(self) -> str | None:
        spec = {"type": "dynamic", "maxRowsPerSegment": self.max_rows_per_segment}
        return compaction_fingerprint({"partitionsSpec": spec})

    def select(self, chunk: ChunkView) -> tuple[str, ...]:
        wanted = self.wanted()
        differ = [
            str(s.id)
            for s in chunk.visible
            if not s.is_tombstone and compaction_fingerprint(s.last_compaction_state) != wanted
        ]
        return whole_groups(chunk.visible, differ)


@dataclass(frozen=True, slots=True)
class MaskedRowsSelector:
    """Selects a chunk's segments holding rows readers clip away when they make up at least
    ``threshold`` of the chunk's stored rows. Such rows come from re-published copies of
    coarser segments (an append upgraded into a finer chunk); rewriting keeps only the chunk's
    own rows. Assumes rows spread evenly over a segment's time range."""

    threshold: float = 0.5
    name: str = "masked_rows"

    def __post_init__(self) -> None:
        check_number(self.threshold, "threshold", maximum=1.0)
        if not self.threshold > 0.0:
            raise SpecError(f"threshold must be in (0, 1], e.g. 0.5; got {self.threshold}")
        check_text(self.name, "selector name")

    def config(self) -> Mapping[str, Any]:
        return {"type": "masked_rows", "threshold": self.threshold}

    def select(self, chunk: ChunkView) -> tuple[str, ...]:
        masked = {str(s.id): _masked_rows(s) for s in chunk.visible if not s.is_tombstone}
        stored = sum(s.num_rows for s in chunk.visible)
        if not stored or sum(masked.values()) < self.threshold * stored:
            return ()
        return whole_groups(chunk.visible, [sid for sid, n in masked.items() if n > 0])


def _masked_rows(segment: DataSegment) -> int:
    rows_span = segment.rows_interval
    inside = rows_span.intersection(segment.interval)
    kept = 0 if inside is None else inside.duration_millis
    total = rows_span.duration_millis
    return 0 if total <= 0 else round(segment.num_rows * (1 - kept / total))
