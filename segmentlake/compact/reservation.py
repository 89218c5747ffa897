"""A compactor's reservation of a job and the conditional commit of its outputs.

The reservation is the minor compaction's lock commit plus a running-compaction record with a
lease (renewed by the same heartbeat as the locks); it is refused unless, on the state it
commits on, the job may run: a system job takes no selected segment and nothing in a held
chunk, a user or selector job takes only segments of its owner's selection, and no live
reservation of the same job exists. The outputs' publish is refused unless the reservation
is still this compactor's; in the same commit the record goes and the selection moves on
(the outputs replace the inputs; a final job clears it and counts the chunk done).
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from segmentlake.core.compaction_jobs import (
    CompactionJob,
    CompactionKind,
    RunningCompaction,
    Selection,
    SelectionState,
)
from segmentlake.core.segment import DataSegment
from segmentlake.errors import LockRefused
from segmentlake.metadata.compaction_records import (
    RUNNING,
    SELECTION,
    USER,
    running_from_row,
    running_row,
    selection_from_row,
    selection_row,
    user_from_row,
    user_row,
)
from segmentlake.metadata.queries import Condition, either, of_kind, row_of
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, transact

__all__ = ["BatchReservation", "Reservation"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reservation:
    """The hooks a managed job's minor compaction runs in its lock and publish commits."""

    datasource: str
    job: CompactionJob
    compactor: str
    task_id: str
    lease_ms: int
    started: Callable[[CompactionJob], None] | None = None

    @property
    def reads(self) -> Condition:
        chunk = self.job.chunk.row_id
        return either(row_of(SELECTION, chunk), row_of(RUNNING, self.job.job_id), of_kind(USER))

    @property
    def scope(self) -> Scope:
        """What :attr:`reads` reads: the chunk's records (selection, reservation) and the user
        compaction the job belongs to, if any."""
        interval = self.job.chunk.interval
        keys = [f"{USER}:{self.job.owner}"] if self.job.kind is CompactionKind.USER else []
        return Scope.of([(interval.start_millis, interval.end_millis)], keys=keys)

    def on_lock(self, state: PartitionState) -> Sequence[Change]:
        """Refuse (LockRefused) unless the job may start; else the running record."""
        at = now_ms()
        self._check_selection(_selection(state))
        for row in state.of(RUNNING):
            other = running_from_row(row)
            if other.is_live(at) and row["task_id"] != self.task_id:
                raise LockRefused(
                    f"job {self.job.job_id} is already reserved by compactor {other.compactor}"
                )
        running = RunningCompaction(self.job, self.compactor, at, at + self.lease_ms)
        row = running_row(self.datasource, running, task_id=self.task_id, now_ms=at)
        return [Change("upsert", row)]

    def _check_selection(self, selection: Selection | None) -> None:
        job = self.job
        if job.kind is CompactionKind.SYSTEM:
            if selection is None:
                return
            if selection.state is SelectionState.HELD:
                raise LockRefused(
                    f"chunk {job.chunk} is held for {selection.owner}: no new system compaction"
                )
            taken = set(job.segments) & set(selection.segments)
            if taken:
                raise LockRefused(
                    f"system job {job.job_id} would take {len(taken)} segment(s) selected by "
                    f"{selection.owner}"
                )
            return
        if (
            selection is None
            or selection.owner != job.owner
            or selection.state is not SelectionState.SELECTED
        ):
            raise LockRefused(f"job {job.job_id}: {job.owner} holds no selection of {job.chunk}")
        outside = set(job.segments) - set(selection.segments)
        if outside:
            raise LockRefused(f"job {job.job_id} takes unselected segments {sorted(outside)}")

    def on_started(self) -> None:
        logger.info(
            "%s: reserved %s job %s (%d segments of %s)",
            self.compactor,
            self.job.kind.value,
            self.job.job_id,
            len(self.job.segments),
            self.job.chunk,
        )
        if self.started is not None:
            self.started(self.job)

    def abandon(self, store: MetadataStore) -> None:
        """Drop the running record after a failure (best effort: else its lease runs out)."""

        def decide(state: PartitionState) -> Decision[int]:
            mine = [r for r in state.of(RUNNING) if r["task_id"] == self.task_id]
            return Decision([Change("delete", r) for r in mine], len(mine))

        interval = self.job.chunk.interval
        try:
            transact(
                store,
                self.datasource,
                decide,
                operation="compaction_abandon",
                condition=row_of(RUNNING, self.job.job_id),
                # The running record lies in its chunk: commits elsewhere in the datasource
                # (appends to other days) are no reason to decide again.
                scope=Scope.of([(interval.start_millis, interval.end_millis)]),
            )
        except Exception:
            logger.warning("job %s: could not drop its reservation", self.job.job_id)

    def on_publish(self, state: PartitionState, outputs: Sequence[DataSegment]) -> Sequence[Change]:
        """Refuse unless the reservation is still ours; else end it and move the selection."""
        at = now_ms()
        rows = [r for r in state.of(RUNNING) if r["id"] == self.job.job_id]
        if not rows or rows[0]["task_id"] != self.task_id or rows[0]["expires_ms"] <= at:
            raise LockRefused(
                f"job {self.job.job_id}: the reservation of compactor {self.compactor} expired "
                "or was taken over; nothing published"
            )
        changes = [Change("delete", rows[0])]
        if self.job.kind is not CompactionKind.SYSTEM:
            changes += self._selection_changes(state, outputs, at)
        return changes

    def _selection_changes(
        self, state: PartitionState, outputs: Sequence[DataSegment], at: int
    ) -> list[Change]:
        selection = _selection(state)
        self._check_selection(selection)
        assert selection is not None
        if not self.job.final:
            inputs = set(self.job.segments)
            kept = [s for s in selection.segments if s not in inputs]
            moved = replace(selection, segments=(*kept, *(str(s.id) for s in outputs)))
            return [Change("upsert", selection_row(self.datasource, moved, now_ms=at))]
        changes = [Change("delete", selection_row(self.datasource, selection, now_ms=at))]
        if self.job.kind is CompactionKind.USER:
            changes += self._chunk_done(state, at)
        return changes

    def _chunk_done(self, state: PartitionState, at: int) -> list[Change]:
        users = [user_from_row(r) for r in state.of(USER) if r["id"] == self.job.owner]
        if not users:
            return []
        user = users[0]
        chunk = self.job.chunk.row_id
        done = user.done if chunk in user.done else (*user.done, chunk)
        finished = user.finished_ms
        if finished is None and len(done) == len(user.chunks):
            finished = at
        updated = replace(user, done=done, finished_ms=finished)
        return [Change("upsert", user_row(self.datasource, updated, now_ms=at))]


@dataclass(frozen=True, slots=True)
class BatchReservation:
    """Several jobs of one datasource (one per chunk) reserved, compacted and published by
    ONE minor compaction: one lock commit reserves them all (refused if any may not start),
    one publish commit ends them all and moves each one's selection. Each reservation decides
    on the rows it alone would have read, so the batch keeps every check of a single job."""

    reservations: tuple[Reservation, ...]

    @property
    def reads(self) -> Condition:
        return either(*(r.reads for r in self.reservations))

    @property
    def scope(self) -> Scope:
        return functools.reduce(operator.or_, (r.scope for r in self.reservations))

    def on_lock(self, state: PartitionState) -> Sequence[Change]:
        return [c for r in self.reservations for c in r.on_lock(_only(state, r.reads))]

    def on_started(self) -> None:
        for reservation in self.reservations:
            reservation.on_started()

    def on_publish(self, state: PartitionState, outputs: Sequence[DataSegment]) -> Sequence[Change]:
        changes: list[Change] = []
        for r in self.reservations:
            chunk = r.job.chunk
            mine = [
                o for o in outputs if o.interval == chunk.interval and o.version == chunk.version
            ]
            changes += r.on_publish(_only(state, r.reads), mine)
        return changes

    def abandon(self, store: MetadataStore) -> None:
        for reservation in self.reservations:
            reservation.abandon(store)


def _only(state: PartitionState, reads: Condition) -> PartitionState:
    """``state`` narrowed to the rows ``reads`` selects: what one job's reservation would
    have read alone (another chunk's selection or reservation is not its business)."""
    return PartitionState(state.datasource, state.version, state.table.filter(reads), state.scope)


def _selection(state: PartitionState) -> Selection | None:
    rows = state.of(SELECTION)
    return selection_from_row(rows[0]) if rows else None
