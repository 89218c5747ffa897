"""Benchmark of the compaction manager's bounded job queue (pure Python, no Spark).

Run from the repository root:

    .venv/bin/python bench/compaction_queue.py        # N = 10,000, 10^6 offers

10^6 jobs with random priorities over 1,000 chunks are built first (not timed). Then:

* **offers**: all of them offered to a queue of ``--size`` (10,000): offers/s (target >=
  500,000/s), with how many were kept, rejected and evicted;
* **mixed**: 10^6 operations on a full queue — 84% offers, 10% polls, 5% deletes, 1% chunk
  replacements: operations/s;
* **plain way**: the same offers pushed into an unbounded ``heapq`` (every job kept), then the
  best ``--size`` popped: ratio = queue offers/s / heapq pushes/s, and the memory each holds.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import time

from segmentlake.core.compaction_jobs import ChunkKey, CompactionJob, CompactionKind
from segmentlake.core.compaction_queue import JobQueue
from segmentlake.core.interval import Interval


def build(offers: int, seed: int) -> list[CompactionJob]:
    rng = random.Random(seed)
    base = Interval.parse("2024-01-01/PT1H").start_millis
    chunks = [
        ChunkKey(Interval.of_millis(base + h * 3_600_000, base + (h + 1) * 3_600_000), "v")
        for h in range(1_000)
    ]
    return [
        CompactionJob(
            chunks[n % 1_000],
            CompactionKind.SYSTEM,
            (f"s{n}",),
            rng.randrange(1 << 32),
            job_id=f"j{n}",
        )
        for n in range(offers)
    ]


def bench_offers(jobs: list[CompactionJob], size: int) -> dict:
    queue = JobQueue(size)
    offer = queue.offer
    started = time.perf_counter()
    for job in jobs:
        offer(job)
    seconds = time.perf_counter() - started
    return {
        "offers": len(jobs),
        "seconds": round(seconds, 3),
        "offers_per_s": round(len(jobs) / seconds),
        "kept": len(queue),
        "rejected": queue.rejected,
        "evicted": queue.evicted,
    }


def bench_mixed(jobs: list[CompactionJob], size: int, seed: int) -> dict:
    rng = random.Random(seed)
    queue = JobQueue(size)
    for job in jobs[:size]:
        queue.offer(job)
    plan = [rng.random() for _ in range(len(jobs))]
    started = time.perf_counter()
    for n, (job, r) in enumerate(zip(jobs, plan, strict=True)):
        if r < 0.84:
            queue.offer(job)
        elif r < 0.94:
            queue.poll()
        elif r < 0.99:
            queue.delete(jobs[n // 2].job_id)
        else:
            queue.replace_chunk(job.chunk, [job])
    seconds = time.perf_counter() - started
    return {
        "operations": len(jobs),
        "seconds": round(seconds, 3),
        "ops_per_s": round(len(jobs) / seconds),
        "left": len(queue),
    }


def bench_plain(jobs: list[CompactionJob], size: int) -> dict:
    heap: list[tuple[int, int, CompactionJob]] = []
    push = heapq.heappush
    started = time.perf_counter()
    for n, job in enumerate(jobs):
        push(heap, (-job.priority, n, job))
    pushed = time.perf_counter() - started
    held = len(heap)
    for _ in range(size):
        heapq.heappop(heap)
    seconds = time.perf_counter() - started
    return {
        "pushes_per_s": round(len(jobs) / pushed),
        "seconds_with_top_n": round(seconds, 3),
        "entries_held": held,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--offers", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    jobs = build(args.offers, args.seed)
    offers = bench_offers(jobs, args.size)
    mixed = bench_mixed(jobs, args.size, args.seed)
    plain = bench_plain(jobs, args.size)
    result = {
        "size": args.size,
        "offers": offers,
        "mixed": mixed,
        "plain_heapq": plain,
        "ratio_offers_over_heapq_pushes": round(offers["offers_per_s"] / plain["pushes_per_s"], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
