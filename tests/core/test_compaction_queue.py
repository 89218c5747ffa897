"""The bounded job queue against a reference model: top-N, eviction, delete and replace."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.compaction_jobs import ChunkKey, CompactionJob, CompactionKind
from segmentlake.core.compaction_queue import JobQueue
from segmentlake.core.interval import Interval
from segmentlake.errors import SpecError

CHUNKS = [ChunkKey(Interval.parse(f"2024-01-0{d}/P1D"), "v1") for d in range(1, 5)]


def job(n: int, priority: int, chunk: int = 0) -> CompactionJob:
    return CompactionJob(CHUNKS[chunk], CompactionKind.SYSTEM, (f"s{n}",), priority, job_id=f"j{n}")


class Model:
    """Every live job with its offer order; the queue must equal its best ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.live: dict[str, tuple[int, int, CompactionJob]] = {}
        self.order = 0

    def top(self) -> list[CompactionJob]:
        ranked = sorted(self.live.values(), key=lambda e: (-e[0], e[1]))
        return [j for _, _, j in ranked[: self.size]]

    def offer(self, j: CompactionJob) -> None:
        known = self.live.get(j.job_id)
        if known is not None and known[0] == j.priority:
            return
        self.order += 1
        self.live[j.job_id] = (j.priority, self.order, j)
        self.live = {e[2].job_id: e for e in (self.live[x.job_id] for x in self.top())}

    def poll(self) -> CompactionJob | None:
        top = self.top()
        if top:
            del self.live[top[0].job_id]
        return top[0] if top else None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("offer"), st.integers(0, 30), st.integers(0, 6), st.integers(0, 3)),
        st.tuples(st.just("poll"), st.just(0), st.just(0), st.just(0)),
        st.tuples(st.just("delete"), st.integers(0, 30), st.just(0), st.just(0)),
        st.tuples(st.just("replace"), st.integers(0, 30), st.integers(0, 6), st.integers(0, 3)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 8), ops=operations)
def test_queue_equals_the_top_n_of_the_model(size: int, ops: list[tuple]) -> None:
    queue, model = JobQueue(size), Model(size)
    for op, n, priority, chunk in ops:
        if op == "offer":
            queue.offer(job(n, priority, chunk))
            model.offer(job(n, priority, chunk))
        elif op == "poll":
            assert queue.poll() == model.poll()
        elif op == "delete":
            assert queue.delete(f"j{n}") == (f"j{n}" in model.live)
            model.live.pop(f"j{n}", None)
        else:
            new = [job(n, priority, chunk), job(n + 100, priority, chunk)]
            queue.replace_chunk(CHUNKS[chunk], new)
            keep = {j.job_id for j in new}
            for entry in list(model.live.values()):
                if entry[2].chunk == CHUNKS[chunk] and entry[2].job_id not in keep:
                    del model.live[entry[2].job_id]
            for j in new:
                model.offer(j)
        assert queue.jobs() == model.top()
        assert len(queue) <= size
        assert queue.peek() == (model.top() or [None])[0]


def test_full_queue_rejects_below_the_lowest_and_evicts_it_for_better() -> None:
    queue = JobQueue(2)
    assert queue.offer(job(1, 5))
    assert queue.offer(job(2, 3))
    assert not queue.offer(job(3, 3))  # equal to the lowest: the earlier one ranks higher
    assert queue.offer(job(4, 9))
    assert [j.job_id for j in queue.jobs()] == ["j4", "j1"]
    assert (queue.offered, queue.rejected, queue.evicted) == (4, 1, 1)
    assert "j2" not in queue


def test_equal_priorities_come_out_in_offer_order() -> None:
    queue = JobQueue(10)
    for n in range(5):
        queue.offer(job(n, 1))
    assert [queue.poll().job_id for _ in range(5)] == [f"j{n}" for n in range(5)]  # type: ignore[union-attr]
    assert queue.poll() is None


def test_heaps_stay_bounded_under_churn() -> None:
    queue = JobQueue(100)
    for n in range(20_000):
        queue.offer(job(n % 400, n % 97, n % 4))
        if n % 3 == 0:
            queue.delete(f"j{(n * 7) % 400}")
        if n % 5 == 0:
            queue.poll()
    assert len(queue) <= 100
    assert len(queue._best) <= 2 * 100 + 32 + 1
    assert len(queue._lowest) <= 2 * 100 + 32 + 1


def test_queue_needs_room_for_one_job() -> None:
    with pytest.raises(SpecError, match="at least one job"):
        JobQueue(0)


def test_a_dead_entry_below_the_lowest_does_not_let_a_lower_job_in() -> None:
    # The rejection test first compares with the lowest heap's raw top, which may be a
    # deleted job ranked below every live one; only the live lowest may decide.
    queue = JobQueue(2)
    queue.offer(job(1, 1))
    queue.offer(job(2, 5))
    assert queue.delete("j1")
    assert queue.offer(job(3, 4))  # room left by the delete; j1 stays dead in the heap
    assert not queue.offer(job(4, 3))
    assert not queue.offer(job(5, 4))  # equal to the lowest: the earlier one ranks higher
    assert queue.offer(job(6, 6))
    assert [j.job_id for j in queue.jobs()] == ["j6", "j2"]
    assert (queue.offered, queue.rejected, queue.evicted) == (6, 2, 1)


def test_a_queued_job_offered_at_a_lower_priority_moves_even_below_the_lowest() -> None:
    queue = JobQueue(2)
    queue.offer(job(1, 5))
    queue.offer(job(2, 4))
    assert queue.offer(job(1, 1))
    assert [(j.job_id, j.priority) for j in queue.jobs()] == [("j2", 4), ("j1", 1)]
    assert queue.offer(job(1, 1))  # the same priority: kept where it is
    assert (queue.offered, queue.rejected, queue.evicted) == (4, 0, 0)


def test_offered_counts_every_offer_including_those_of_replace_chunk() -> None:
    queue = JobQueue(3)
    for n in range(6):
        queue.offer(job(n, n, n % 2))
    # Held j5, j4, j3; the chunk's j4 goes, j10 takes its room, j11 ranks below j3.
    queue.replace_chunk(CHUNKS[0], [job(10, 9), job(11, 0)])
    assert [j.job_id for j in queue.jobs()] == ["j10", "j5", "j3"]
    assert (queue.offered, queue.rejected, queue.evicted) == (8, 1, 3)


def test_the_chunk_index_forgets_emptied_chunks() -> None:
    queue = JobQueue(4)
    for n in range(12):
        queue.offer(job(n, n % 5, n % 4))
    queue.replace_chunk(CHUNKS[1], [])
    while queue.poll() is not None:
        pass
    assert not queue._by_chunk
