"""The manager's duties on one datasource, decided on one metadata state and committed as one
conditional change (so a crashed manager restarts where the metadata says it was):

1. forget reservations whose lease ran out (their jobs are planned again);
2. move user compactions on: per chunk, *hold* it while compactions run there, *select* its
   visible segments once none runs, count it done when its chunk is gone;
3. run each selector on the chunks whose segment set (or the selector's config) changed since
   it last ran there, and hold or select what it picked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from segmentlake.compact.manager_state import ManagerState
from segmentlake.core.compaction_jobs import (
    ChunkView,
    CompactionKind,
    Selection,
    SelectionState,
    segment_set_hash,
)
from segmentlake.core.compaction_planning import CompactionSelector, whole_groups
from segmentlake.metadata.compaction_records import (
    UserCompaction,
    selection_row,
    selector_run_row,
    user_row,
)
from segmentlake.metadata.store import Change

__all__ = ["DutyReport", "decide_duties", "selection_for", "selector_owner"]

logger = logging.getLogger(__name__)


@dataclass
class DutyReport:
    """What one duty decision changed (counts for the status line and the benchmarks)."""

    expired: int = 0
    held: int = 0
    selected: int = 0
    chunks_done: int = 0
    users_finished: int = 0
    selector_runs: int = 0
    selector_skips: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.expired or self.held or self.selected or self.chunks_done or self.selector_runs
        )


def selector_owner(name: str) -> str:
    return f"selector:{name}"


def selection_for(
    view: ChunkView,
    owner: str,
    kind: CompactionKind,
    ids: tuple[str, ...],
    *,
    max_rows_per_segment: int,
    max_segments_per_job: int,
) -> Selection:
    """A hold while compactions run in the chunk, else the selection of ``ids``."""
    if view.running:
        return Selection(
            view.chunk,
            owner,
            kind,
            SelectionState.HELD,
            max_rows_per_segment=max_rows_per_segment,
            max_segments_per_job=max_segments_per_job,
        )
    return Selection(
        view.chunk,
        owner,
        kind,
        SelectionState.SELECTED,
        ids,
        max_rows_per_segment,
        max_segments_per_job,
    )


def decide_duties(datasource: str, ms: ManagerState, at_ms: int) -> tuple[list[Change], DutyReport]:
    """The changes of one duty pass over ``ms`` (empty when nothing is due)."""
    report = DutyReport()
    changes = [Change("delete", row) for row in ms.expired]
    report.expired = len(ms.expired)
    views = dict(ms.views)
    for user in ms.users:
        if user.finished_ms is None:
            changes += _advance_user(datasource, user, views, at_ms, report)
    for selector in ms.config.selectors:
        changes += _run_selector(datasource, selector, ms, views, at_ms, report)
    return changes, report


def _advance_user(
    datasource: str,
    user: UserCompaction,
    views: dict[str, ChunkView],
    at_ms: int,
    report: DutyReport,
) -> list[Change]:
    changes: list[Change] = []
    done = list(user.done)
    for chunk_id in user.pending:
        view = views.get(chunk_id)
        selection = None if view is None else view.selection
        if view is None or (not view.visible and selection is None):
            done.append(chunk_id)  # the chunk was replaced (or emptied) meanwhile
            continue
        if selection is not None and selection.owner != user.compaction_id:
            continue  # another compaction's selection: wait for it to finish
        new = _next_selection(view, user)
        if new is None:
            if selection is not None:
                changes.append(Change("delete", selection_row(datasource, selection, now_ms=at_ms)))
            done.append(chunk_id)
        elif new != selection:
            changes.append(Change("upsert", selection_row(datasource, new, now_ms=at_ms)))
            views[chunk_id] = replace(view, selection=new)
            if new.state is SelectionState.HELD:
                report.held += 1
            else:
                report.selected += 1
    if len(done) != len(user.done):
        report.chunks_done += len(done) - len(user.done)
        finished = at_ms if len(done) == len(user.chunks) else None
        report.users_finished += finished is not None
        updated = replace(user, done=tuple(done), finished_ms=finished)
        changes.append(Change("upsert", user_row(datasource, updated, now_ms=at_ms)))
    return changes


def _next_selection(view: ChunkView, user: UserCompaction) -> Selection | None:
    """The user's selection of ``view`` from now on; None once it has nothing left to do."""
    selection = view.selection
    data = [s for s in view.visible if not s.is_tombstone]
    if selection is None or selection.state is SelectionState.HELD:
        if not data and not view.running:
            return None
        ids = whole_groups(view.visible, [str(s.id) for s in data])
        return selection_for(
            view,
            user.compaction_id,
            CompactionKind.USER,
            ids,
            max_rows_per_segment=user.max_rows_per_segment,
            max_segments_per_job=user.max_segments_per_job,
        )
    visible = {str(s.id) for s in view.visible}
    if not (visible & set(selection.segments)) and not view.running:
        return None  # everything selected was replaced by someone else
    return selection


def _run_selector(
    datasource: str,
    selector: CompactionSelector,
    ms: ManagerState,
    views: dict[str, ChunkView],
    at_ms: int,
    report: DutyReport,
) -> list[Change]:
    changes: list[Change] = []
    owner = selector_owner(selector.name)
    config = dict(selector.config())
    for chunk_id, view in views.items():
        selection = view.selection
        if selection is not None and selection.owner != owner:
            continue  # one selection per chunk: run again once it is cleared
        if selection is not None:
            changes += _advance_selector(datasource, selector, view, at_ms, report)
            continue
        digest = segment_set_hash((str(s.id) for s in view.visible), config)
        run_id = f"{selector.name}|{chunk_id}"
        if ms.selector_runs.get(run_id) == digest or not view.visible:
            report.selector_skips += 1
            continue
        report.selector_runs += 1
        changes.append(
            Change(
                "upsert",
                selector_run_row(datasource, selector.name, view.chunk, digest, now_ms=at_ms),
            )
        )
        ids = selector.select(view)
        if ids:
            new = selection_for(
                view,
                owner,
                CompactionKind.SELECTOR,
                ids,
                # A selector that wants a partitioning gets it, or it would select forever.
                max_rows_per_segment=getattr(
                    selector, "max_rows_per_segment", ms.config.max_rows_per_segment
                ),
                max_segments_per_job=ms.config.max_segments_per_job,
            )
            changes.append(Change("upsert", selection_row(datasource, new, now_ms=at_ms)))
            views[chunk_id] = replace(view, selection=new)
            report.held += new.state is SelectionState.HELD
            report.selected += new.state is SelectionState.SELECTED
    return changes


def _advance_selector(
    datasource: str,
    selector: CompactionSelector,
    view: ChunkView,
    at_ms: int,
    report: DutyReport,
) -> list[Change]:
    """A selector's hold becomes its selection once nothing runs; a selection whose segments
    were all replaced by others is dropped."""
    selection = view.selection
    assert selection is not None
    if selection.state is SelectionState.HELD:
        if view.running:
            return []
        ids = selector.select(replace(view, selection=None))
        if not ids:
            return [Change("delete", selection_row(datasource, selection, now_ms=at_ms))]
        report.selected += 1
        new = replace(selection, state=SelectionState.SELECTED, segments=ids)
        return [Change("upsert", selection_row(datasource, new, now_ms=at_ms))]
    visible = {str(s.id) for s in view.visible}
    if not (visible & set(selection.segments)) and not view.running:
        return [Change("delete", selection_row(datasource, selection, now_ms=at_ms))]
    return []
