"""A compactor group's job queue: the best ``max_size`` jobs, whatever the backlog.

Accumulo's coordinator keeps only the top jobs per group in memory: when full, a job ranked
below the lowest queued one is dropped at once (its chunk is planned again on the next pass
if it still needs it), and one ranked above evicts the lowest. Two heaps give the best job
(poll) and the lowest (eviction) in O(log N); deletes are lazy (an entry is alive while the
index maps its job id to the same sequence number), and the heaps are rebuilt when dead
entries outnumber live ones, so memory stays O(N).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable

from segmentlake.core.compaction_jobs import CompactionJob
from segmentlake.errors import SpecError

__all__ = ["JobQueue"]

ChunkOf = Callable[[CompactionJob], Hashable]


def _chunk(job: CompactionJob) -> Hashable:
    return job.chunk


class JobQueue:
    """At most ``max_size`` jobs, best (highest priority, then earliest offered) first;
    ``key`` maps a job to the chunk :meth:`replace_chunk` replaces (default ``job.chunk``)."""

    def __init__(self, max_size: int, *, key: ChunkOf = _chunk) -> None:
        if max_size < 1:
            raise SpecError(f"a job queue holds at least one job, got max_size={max_size}")
        self.max_size = max_size
        self._key = key
        # job id -> (priority, seq, job): the live entries.
        self._entries: dict[str, tuple[int, int, CompactionJob]] = {}
        self._best: list[tuple[int, int, str]] = []  # (-priority, seq, id)
        self._lowest: list[tuple[int, int, str]] = []  # (priority, -seq, id)
        self._by_chunk: dict[Hashable, set[str]] = {}
        self._seq = itertools.count()
        self.offered = 0
        self.rejected = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._entries

    def offer(self, job: CompactionJob) -> bool:
        """Queue ``job``; False if it ranks below every queued job of a full queue. A job
        already queued (same id) keeps its place unless its priority changed."""
        self.offered += 1
        priority = job.priority
        known = self._entries.get(job.job_id)
        if known is not None:
            if known[0] == priority:
                return True
            self._forget(job.job_id)
        elif len(self._entries) >= self.max_size:
            if priority <= self._lowest_priority():
                self.rejected += 1
                return False
            self._evict()
        self._add(job, priority)
        return True

    def _add(self, job: CompactionJob, priority: int) -> None:
        seq = next(self._seq)
        job_id = job.job_id
        self._entries[job_id] = (priority, seq, job)
        heapq.heappush(self._best, (-priority, seq, job_id))
        heapq.heappush(self._lowest, (priority, -seq, job_id))
        self._by_chunk.setdefault(self._key(job), set()).add(job_id)

    def _alive(self, seq: int, job_id: str) -> bool:
        entry = self._entries.get(job_id)
        return entry is not None and entry[1] == seq

    def _lowest_priority(self) -> int:
        lowest = self._lowest
        while not self._alive(-lowest[0][1], lowest[0][2]):
            heapq.heappop(lowest)
        return lowest[0][0]

    def _evict(self) -> None:
        self._lowest_priority()  # drops dead entries from the top
        _, _, job_id = heapq.heappop(self._lowest)
        self._forget(job_id)
        self.evicted += 1

    def _forget(self, job_id: str) -> CompactionJob:
        _, _, job = self._entries.pop(job_id)
        members = self._by_chunk.get(self._key(job))
        if members is not None:
            members.discard(job_id)
            if not members:
                del self._by_chunk[self._key(job)]
        self._compact_heaps()
        return job

    def _compact_heaps(self) -> None:
        # Lazy deletion leaves dead entries in the heaps; rebuild before they dominate.
        if len(self._best) > 2 * len(self._entries) + 32:
            self._best = [(-p, s, i) for i, (p, s, _) in self._entries.items()]
            heapq.heapify(self._best)
        if len(self._lowest) > 2 * len(self._entries) + 32:
            self._lowest = [(p, -s, i) for i, (p, s, _) in self._entries.items()]
            heapq.heapify(self._lowest)

    def peek(self) -> CompactionJob | None:
        """The best job, left queued (None when empty)."""
        best = self._best
        while best and not self._alive(best[0][1], best[0][2]):
            heapq.heappop(best)
        return self._entries[best[0][2]][2] if best else None

    def poll(self) -> CompactionJob | None:
        """Remove and return the best job (None when empty)."""
        job = self.peek()
        if job is not None:
            heapq.heappop(self._best)
            self._forget(job.job_id)
        return job

    def delete(self, job_id: str) -> bool:
        """Remove a queued job; False if it was not queued."""
        if job_id not in self._entries:
            return False
        self._forget(job_id)
        return True

    def replace_chunk(self, chunk: Hashable, jobs: Iterable[CompactionJob]) -> None:
        """Make ``jobs`` the chunk's queued jobs: the chunk's other jobs go, these are offered
        (the planner now plans differently for it)."""
        jobs = list(jobs)
        keep = {job.job_id for job in jobs}
        for job_id in list(self._by_chunk.get(chunk, ())):
            if job_id not in keep:
                self._forget(job_id)
        for job in jobs:
            self.offer(job)

    def jobs(self) -> list[CompactionJob]:
        """The queued jobs, best first (for status displays: O(N log N))."""
        ordered = sorted(self._entries.values(), key=lambda e: (-e[0], e[1]))
        return [job for _, _, job in ordered]
