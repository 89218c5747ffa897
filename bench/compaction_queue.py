"""Benchmark of the compaction manager's bounded job queue (pure Python, no Spark).

Run from the repository root:

    .venv/bin/python bench/compaction_queue.py        # N = 10,000, 10^6 offers, 3 rounds

10^6 jobs with random priorities over 1,000 chunks are built first (not timed). Each
contender then runs once per round, the contenders interleaved so that a busy spell of the
machine hits all of them; a figure is the best round. Rates are per second of this process's
CPU time (``time.process_time``), which other processes on a shared machine do not inflate;
the wall-clock rate is printed next to it.

* **offers**: all the jobs offered to a queue of ``--size`` (10,000), against the plain way
  of keeping the top N, a **bounded heapq**: a min-heap of N entries where an offer at or below
  its minimum is rejected in O(1) and one above replaces it (``heapq.heapreplace``). Both
  keep the same N jobs (checked). The bounded heapq does less than ``JobQueue``: it neither
  recognises a job offered twice nor indexes jobs by chunk, and it has no poll. The unbounded
  heapq (every job pushed, the best N popped at the end) is kept as a second figure.
* **mixed**: 10^6 operations on a full queue: 84% offers, 10% polls, 5% deletes, 1% chunk
  replacements. The plain ways need poll, delete and replace_chunk too, so they are written
  out inline: (a) a bounded heapq plus a dict for lazy deletion and a second heap for the
  best (the same algorithm as ``JobQueue``, without the class); (b) a
  ``sortedcontainers.SortedList`` of (-priority, seq, id) plus the same dicts (skipped if
  sortedcontainers is not installed). All of them end with the same jobs in the same order
  (checked).

Ratios are ``JobQueue`` rate / plain rate: below 1 means JobQueue is slower.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import importlib.util
import json
import random
import sys
import time
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any

from segmentlake.core.compaction_jobs import ChunkKey, CompactionJob, CompactionKind
from segmentlake.core.compaction_queue import JobQueue
from segmentlake.core.interval import Interval

try:
    from sortedcontainers import SortedList
except ImportError:  # only a plain contender needs it
    SortedList = None


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


class Timed:
    """Best-of-rounds timing of one contender: CPU and wall seconds."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.wall: list[float] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        gc.collect()  # a contender should not pay for the garbage of the one before it
        cpu, wall = time.process_time(), time.perf_counter()
        result = fn()
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        return result

    def rates(self, n: int, unit: str) -> dict[str, Any]:
        return {
            f"{unit}_per_cpu_s": round(n / min(self.cpu)),
            f"{unit}_per_wall_s": round(n / min(self.wall)),
            "cpu_s_rounds": [round(s, 3) for s in self.cpu],
        }


# -- offers -------------------------------------------------------------------------------------


def offers_jobqueue(
    jobs: list[CompactionJob], size: int, cls: type[JobQueue] = JobQueue
) -> JobQueue:
    queue = cls(size)
    offer = queue.offer
    for job in jobs:
        offer(job)
    return queue


def offers_bounded_heapq(
    jobs: list[CompactionJob], size: int
) -> list[tuple[int, int, CompactionJob]]:
    # (priority, -seq): the heap's minimum is the lowest-ranked job, the later of equals.
    heap: list[tuple[int, int, CompactionJob]] = []
    push, replace = heapq.heappush, heapq.heapreplace
    for seq, job in enumerate(jobs):
        priority = job.priority
        if len(heap) < size:
            push(heap, (priority, -seq, job))
        elif priority > heap[0][0]:
            replace(heap, (priority, -seq, job))
    return heap


def offers_unbounded_heapq(jobs: list[CompactionJob], size: int) -> tuple[list[str], int, float]:
    heap: list[tuple[int, int, CompactionJob]] = []
    push = heapq.heappush
    started = time.process_time()
    for seq, job in enumerate(jobs):
        push(heap, (-job.priority, seq, job))
    pushed = time.process_time() - started
    held = len(heap)
    top = [heapq.heappop(heap)[2].job_id for _ in range(min(size, held))]
    return top, held, pushed


def bench_offers(
    jobs: list[CompactionJob], size: int, rounds: int, other: type[JobQueue] | None
) -> dict[str, Any]:
    queue_t, bounded_t, unbounded_t, other_t = Timed(), Timed(), Timed(), Timed()
    push_cpu: list[float] = []
    for _ in range(rounds):
        if other is not None:
            other_kept = [
                j.job_id for j in other_t.run(partial(offers_jobqueue, jobs, size, other)).jobs()
            ]
        queue = queue_t.run(lambda: offers_jobqueue(jobs, size))
        heap = bounded_t.run(lambda: offers_bounded_heapq(jobs, size))
        top, held, pushed = unbounded_t.run(lambda: offers_unbounded_heapq(jobs, size))
        push_cpu.append(pushed)
        kept = [j.job_id for j in queue.jobs()]
        if not kept == [job.job_id for _, _, job in sorted(heap, reverse=True)] == top:
            raise AssertionError("the contenders kept different jobs")
        if other is not None and other_kept != kept:
            raise AssertionError("the other JobQueue kept different jobs")
    n = len(jobs)
    result = {
        "jobqueue": {
            **queue_t.rates(n, "offers"),
            "kept": len(queue),
            "rejected": queue.rejected,
            "evicted": queue.evicted,
        },
        "bounded_heapq": bounded_t.rates(n, "offers"),
        "unbounded_heapq": {
            "pushes_per_cpu_s": round(n / min(push_cpu)),
            "with_top_n_per_cpu_s": round(n / min(unbounded_t.cpu)),
            "entries_held": held,
        },
    }
    q, b = result["jobqueue"]["offers_per_cpu_s"], result["bounded_heapq"]["offers_per_cpu_s"]
    result["ratio_jobqueue_over_bounded_heapq"] = round(q / b, 2)
    result["ratio_jobqueue_over_unbounded_heapq_pushes"] = round(
        q / result["unbounded_heapq"]["pushes_per_cpu_s"], 2
    )
    if other is not None:
        result["other_jobqueue"] = other_t.rates(n, "offers")
        result["ratio_jobqueue_over_other_jobqueue"] = round(
            q / result["other_jobqueue"]["offers_per_cpu_s"], 2
        )
    return result


# -- mixed operations ---------------------------------------------------------------------------

# The operation of each step, drawn once: o = offer, p = poll, d = delete, r = replace_chunk.
Plan = list[str]


def make_plan(n: int, seed: int) -> Plan:
    rng = random.Random(seed)
    plan = []
    for _ in range(n):
        r = rng.random()
        plan.append("o" if r < 0.84 else "p" if r < 0.94 else "d" if r < 0.99 else "r")
    return plan


def mixed_jobqueue(
    jobs: list[CompactionJob], size: int, plan: Plan, cls: type[JobQueue] = JobQueue
) -> list[str]:
    queue = cls(size)
    for job in jobs[:size]:
        queue.offer(job)
    for n, (job, op) in enumerate(zip(jobs, plan, strict=True)):
        if op == "o":
            queue.offer(job)
        elif op == "p":
            queue.poll()
        elif op == "d":
            queue.delete(jobs[n // 2].job_id)
        else:
            queue.replace_chunk(job.chunk, [job])
    return [j.job_id for j in queue.jobs()]


def mixed_two_heaps(jobs: list[CompactionJob], size: int, plan: Plan) -> list[str]:
    """A bounded min-heap (rejection, eviction), a max-heap (poll), a dict of the live
    entries for lazy deletion and a dict of ids per chunk, written out inline."""
    live: dict[str, tuple[int, int, CompactionJob]] = {}  # id -> (priority, seq, job)
    lowest: list[tuple[int, int, str]] = []  # (priority, -seq, id)
    best: list[tuple[int, int, str]] = []  # (-priority, seq, id)
    by_chunk: dict[Hashable, set[str]] = {}
    push, pop = heapq.heappush, heapq.heappop
    seq = 0

    def forget(job_id: str) -> None:
        nonlocal lowest, best
        job = live.pop(job_id)[2]
        members = by_chunk[job.chunk]
        members.discard(job_id)
        if not members:
            del by_chunk[job.chunk]
        # Without this, every evicted and deleted job stays in the heaps.
        room = 2 * len(live) + 32
        if len(best) > room:
            best = [(-p, s, i) for i, (p, s, _) in live.items()]
            heapq.heapify(best)
        if len(lowest) > room:
            lowest = [(p, -s, i) for i, (p, s, _) in live.items()]
            heapq.heapify(lowest)

    def offer(job: CompactionJob) -> None:
        nonlocal seq
        priority, job_id = job.priority, job.job_id
        known = live.get(job_id)
        if known is not None:
            if known[0] == priority:
                return
            forget(job_id)
        elif len(live) >= size:
            if priority <= lowest[0][0]:  # the raw top ranks at most as high as the lowest
                return
            while lowest[0][2] not in live or live[lowest[0][2]][1] != -lowest[0][1]:
                pop(lowest)
            if priority <= lowest[0][0]:
                return
            forget(pop(lowest)[2])
        seq += 1
        live[job_id] = (priority, seq, job)
        push(best, (-priority, seq, job_id))
        push(lowest, (priority, -seq, job_id))
        by_chunk.setdefault(job.chunk, set()).add(job_id)

    for job in jobs[:size]:
        offer(job)
    for n, (job, op) in enumerate(zip(jobs, plan, strict=True)):
        if op == "o":
            offer(job)
        elif op == "p":
            while best and (best[0][2] not in live or live[best[0][2]][1] != best[0][1]):
                pop(best)
            if best:
                forget(pop(best)[2])
        elif op == "d":
            if jobs[n // 2].job_id in live:
                forget(jobs[n // 2].job_id)
        else:
            for job_id in list(by_chunk.get(job.chunk, ())):
                if job_id != job.job_id:
                    forget(job_id)
            offer(job)
    return [job.job_id for _, _, job in sorted(live.values(), key=lambda e: (-e[0], e[1]))]


def mixed_sorted_list(jobs: list[CompactionJob], size: int, plan: Plan) -> list[str]:
    """One SortedList, best first, so poll and eviction are its two ends; no lazy deletion."""
    assert SortedList is not None
    ranked = SortedList()  # (-priority, seq, id)
    live: dict[str, tuple[tuple[int, int, str], CompactionJob]] = {}
    by_chunk: dict[Hashable, set[str]] = {}
    seq = 0

    def forget(job_id: str) -> None:
        key, job = live.pop(job_id)
        ranked.remove(key)
        members = by_chunk[job.chunk]
        members.discard(job_id)
        if not members:
            del by_chunk[job.chunk]

    def offer(job: CompactionJob) -> None:
        nonlocal seq
        priority, job_id = job.priority, job.job_id
        known = live.get(job_id)
        if known is not None:
            if known[0][0] == -priority:
                return
            forget(job_id)
        elif len(live) >= size:
            if -priority >= ranked[-1][0]:
                return
            forget(ranked[-1][2])
        seq += 1
        key = (-priority, seq, job_id)
        ranked.add(key)
        live[job_id] = (key, job)
        by_chunk.setdefault(job.chunk, set()).add(job_id)

    for job in jobs[:size]:
        offer(job)
    for n, (job, op) in enumerate(zip(jobs, plan, strict=True)):
        if op == "o":
            offer(job)
        elif op == "p":
            if ranked:
                forget(ranked[0][2])
        elif op == "d":
            if jobs[n // 2].job_id in live:
                forget(jobs[n // 2].job_id)
        else:
            for job_id in list(by_chunk.get(job.chunk, ())):
                if job_id != job.job_id:
                    forget(job_id)
            offer(job)
    return [job.job_id for _, job in sorted(live.values(), key=lambda e: e[0])]


def bench_mixed(
    jobs: list[CompactionJob], size: int, seed: int, rounds: int, other: type[JobQueue] | None
) -> dict[str, Any]:
    plan = make_plan(len(jobs), seed)
    contenders: dict[str, Callable[[list[CompactionJob], int, Plan], list[str]]] = {
        "jobqueue": mixed_jobqueue,
        "plain_two_heaps": mixed_two_heaps,
    }
    if other is not None:
        contenders["other_jobqueue"] = partial(mixed_jobqueue, cls=other)
    if SortedList is not None:
        contenders["plain_sortedlist"] = mixed_sorted_list
    timers = {name: Timed() for name in contenders}
    for _ in range(rounds):
        outcomes = []
        for name, fn in contenders.items():
            outcomes.append(timers[name].run(partial(fn, jobs, size, plan)))
        if any(o != outcomes[0] for o in outcomes):
            raise AssertionError("the contenders ended with different queues")
    n = len(jobs)
    result: dict[str, Any] = {
        "operations": n,
        "left": len(outcomes[0]),
        **{name: t.rates(n, "ops") for name, t in timers.items()},
    }
    if SortedList is None:
        result["plain_sortedlist"] = "skipped: sortedcontainers is not installed"
    plain = {name: result[name]["ops_per_cpu_s"] for name in timers if name.startswith("plain")}
    best_plain = max(plain, key=lambda name: plain[name])
    result["best_plain"] = best_plain
    result["ratio_jobqueue_over_best_plain"] = round(
        result["jobqueue"]["ops_per_cpu_s"] / plain[best_plain], 2
    )
    if other is not None:
        result["ratio_jobqueue_over_other_jobqueue"] = round(
            result["jobqueue"]["ops_per_cpu_s"] / result["other_jobqueue"]["ops_per_cpu_s"], 2
        )
    return result


def load_queue(path: str) -> type[JobQueue]:
    """The JobQueue class of another version of compaction_queue.py (before/after figures)."""
    spec = importlib.util.spec_from_file_location("other_compaction_queue", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls: type[JobQueue] = module.JobQueue
    return cls


def summary(result: dict[str, Any]) -> str:
    o, m = result["offers"], result["mixed"]
    q, b, u = o["jobqueue"], o["bounded_heapq"], o["unbounded_heapq"]
    lines = [
        f"$ {result['command']}",
        f"offers, {result['offers_n']:,} into N = {result['size']:,} "
        f"({q['rejected']:,} rejected, {q['evicted']:,} evicted), per CPU second:",
        f"  JobQueue        {q['offers_per_cpu_s']:>12,}",
        f"  bounded heapq   {b['offers_per_cpu_s']:>12,}   "
        f"ratio JobQueue / bounded heapq = {o['ratio_jobqueue_over_bounded_heapq']}",
        f"  unbounded heapq {u['pushes_per_cpu_s']:>12,}   pushes, holds "
        f"{u['entries_held']:,}; ratio = {o['ratio_jobqueue_over_unbounded_heapq_pushes']}",
        f"mixed, {m['operations']:,} operations on a full queue, per CPU second:",
    ]
    for name in ("jobqueue", "plain_two_heaps", "plain_sortedlist"):
        if isinstance(m.get(name), dict):
            lines.append(f"  {name:<17} {m[name]['ops_per_cpu_s']:>10,}")
    lines.append(f"  ratio JobQueue / {m['best_plain']} = {m['ratio_jobqueue_over_best_plain']}")
    if "other_jobqueue" in o:
        lines.append(
            f"JobQueue of {result['other_queue']}: offers "
            f"{o['other_jobqueue']['offers_per_cpu_s']:,}/CPU s "
            f"(ratio this / that = {o['ratio_jobqueue_over_other_jobqueue']}), mixed "
            f"{m['other_jobqueue']['ops_per_cpu_s']:,}/CPU s "
            f"(ratio {m['ratio_jobqueue_over_other_jobqueue']})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--offers", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--other-queue",
        metavar="FILE",
        help="also time the JobQueue of this file, e.g. the committed version: "
        "git show HEAD:segmentlake/core/compaction_queue.py > /tmp/jobqueue_head.py",
    )
    args = parser.parse_args()
    other = load_queue(args.other_queue) if args.other_queue else None
    jobs = build(args.offers, args.seed)
    result = {
        "command": " ".join([".venv/bin/python", "bench/compaction_queue.py", *sys.argv[1:]]),
        "python": sys.version.split()[0],
        "size": args.size,
        "offers_n": args.offers,
        "rounds": args.rounds,
        "other_queue": args.other_queue,
        "offers": bench_offers(jobs, args.size, args.rounds, other),
        "mixed": bench_mixed(jobs, args.size, args.seed, args.rounds, other),
    }
    print(json.dumps(result, indent=2))
    print()
    print(summary(result))


if __name__ == "__main__":
    main()
