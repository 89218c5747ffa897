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

__all__ = ["DEFAULT_QUEUE_SIZE", "JobQueue"]

DEFAULT_QUEUE_SIZE = 10_000

ChunkOf = Callable[[CompactionJob], Hashable]

# A live entry: priority, sequence number, the job, its chunk key, and the chunk's member
# set. Keeping the key and the set spares a forget the key function and a dict lookup (the
# manager's key builds a string per call).
_Entry = tuple[int, int, CompactionJob, Hashable, set[str]]


def _chunk(job: CompactionJob) -> Hashable:
    return job.chunk


class JobQueue:
    """At most ``max_size`` jobs, best (highest priority, then earliest offered) first;
    ``key`` maps a job to the chunk :meth:`replace_chunk` replaces (default ``job.chunk``)."""

    __slots__ = (
        "_admitted",
        "_best",
        "_by_chunk",
        "_entries",
        "_key",
        "_lowest",
        "_seq",
        "evicted",
        "max_size",
        "rejected",
    )

    def __init__(self, max_size: int, *, key: ChunkOf = _chunk) -> None:
        if max_size < 1:
            raise SpecError(f"a job queue holds at least one job, got max_size={max_size}")
        self.max_size = max_size
        self._key = key
        self._entries: dict[str, _Entry] = {}  # job id -> its live entry
        self._best: list[tuple[int, int, str]] = []  # (-priority, seq, id)
        self._lowest: list[tuple[int, int, str]] = []  # (priority, -seq, id)
        self._by_chunk: dict[Hashable, set[str]] = {}
        self._seq = itertools.count()
        # offered = admitted + rejected, so a rejection (the common case of a full queue)
        # updates one counter.
        self._admitted = 0
        self.rejected = 0
        self.evicted = 0

    @property
    def offered(self) -> int:
        """Jobs offered so far (kept, re-offered or rejected)."""
        return self._admitted + self.rejected

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._entries

    def offer(self, job: CompactionJob) -> bool:
        """Queue ``job``; False if it ranks below every queued job of a full queue. A job
        already queued (same id) keeps its place unless its priority changed."""
        priority = job.priority
        job_id = job.job_id
        entries = self._entries
        if job_id in entries:
            self._admitted += 1
            if entries[job_id][0] == priority:
                return True
            self._forget(job_id)
        elif len(entries) >= self.max_size:
            # The heap's top, dead or alive, ranks at most as high as the lowest live entry,
            # so a job at or below it is rejected without cleaning the heap.
            if priority <= self._lowest[0][0] or priority <= self._lowest_priority():
                self.rejected += 1
                return False
            self._admitted += 1
            self._evict()
        else:
            self._admitted += 1
        self._add(job, priority)
        return True

    def _add(self, job: CompactionJob, priority: int) -> None:
        seq = next(self._seq)
        job_id = job.job_id
        chunk = self._key(job)
        members = self._by_chunk.get(chunk)
        if members is None:
            members = self._by_chunk[chunk] = set()
        members.add(job_id)
        self._entries[job_id] = (priority, seq, job, chunk, members)
        heapq.heappush(self._best, (-priority, seq, job_id))
        heapq.heappush(self._lowest, (priority, -seq, job_id))

    def _lowest_priority(self) -> int:
        lowest, entries = self._lowest, self._entries
        while True:
            _, neg_seq, job_id = top = lowest[0]
            entry = entries.get(job_id)
            if entry is not None and entry[1] == -neg_seq:
                return top[0]
            heapq.heappop(lowest)

    def _evict(self) -> None:
        # Only offer evicts, after _lowest_priority dropped the dead entries from the top.
        _, _, job_id = heapq.heappop(self._lowest)
        self._forget(job_id)
        self.evicted += 1

    def _forget(self, job_id: str) -> CompactionJob:
        entries = self._entries
        _, _, job, chunk, members = entries.pop(job_id)
        members.discard(job_id)
        if not members:
            del self._by_chunk[chunk]
        # Lazy deletion leaves dead entries in the heaps; rebuild before they dominate.
        room = 2 * len(entries) + 32
        if len(self._best) > room or len(self._lowest) > room:
            self._compact_heaps()
        return job

    def _compact_heaps(self) -> None:
        room = 2 * len(self._entries) + 32
        if len(self._best) > room:
            self._best = [(-e[0], e[1], i) for i, e in self._entries.items()]
            heapq.heapify(self._best)
        if len(self._lowest) > room:
            self._lowest = [(e[0], -e[1], i) for i, e in self._entries.items()]
            heapq.heapify(self._lowest)

    def peek(self) -> CompactionJob | None:
        """The best job, left queued (None when empty)."""
        best, entries = self._best, self._entries
        while best:
            _, seq, job_id = best[0]
            entry = entries.get(job_id)
            if entry is not None and entry[1] == seq:
                return entry[2]
            heapq.heappop(best)
        return None

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
        return [e[2] for e in ordered]
