"""Benchmark ``VersionedIntervalTimeline`` at Druid scale (10^6 segments).

The timeline holds ``--chunks`` consecutive DAY chunks of ``--partitions`` segments each, all of
version ``2024-01-01T00:00:00.000Z``. Half of the chunks (chosen at random) went through one
minor compaction: first-generation partitions ``0..P/2-1`` as ``NumberedShardSpec(p, P/2)``
plus ``P/2`` compacted segments ``NumberedOverwriteShardSpec(32768+i, 0, P/2, 1, P/2)`` that
overshadow them. The other chunks hold ``P`` plain ``NumberedShardSpec(p, P)`` segments.

Measured (segment objects are always created before anything is timed or traced):

1. add rate of ``tl.add(seg)`` in a loop and of ``tl.add_all(segments)``;
2. timeline memory per segment beyond the segments: ``tracemalloc`` over a build plus a first
   full lookup (so the lazily computed visible sets count), cross-checked by the RSS delta
   (``/proc/self/statm``) of another build;
3. lookup latency of random 1-day and 30-day intervals, cold (first lookup of never-visited
   chunks, which computes their visible sets) and warm (the same intervals again), plus
   ``lookup(ETERNITY)`` and ``find_fully_overshadowed()`` over the whole timeline.

A sanity check first verifies what the timeline answers, so a broken timeline cannot pass.

Run from the repository root::

    PYTHONPATH=. python bench/timeline.py [--chunks 100000] [--partitions 10] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from segmentlake.core.interval import ETERNITY, Interval, parse_timestamp, to_millis
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedOverwriteShardSpec, NumberedShardSpec
from segmentlake.core.timeline import VersionedIntervalTimeline

DATASOURCE = "bench"
VERSION = "2024-01-01T00:00:00.000Z"
ORIGIN_MILLIS = to_millis(parse_timestamp("2000-01-01"))
DAY_MILLIS = 86_400_000
WINDOW_DAYS = 30
OVERWRITE_ID_MIN = 32768

TARGET_ADDS_PER_S = 200_000
TARGET_BYTES_PER_SEGMENT = 600
TARGET_1DAY_P50_MS = 0.2
TARGET_30DAY_P50_MS = 5.0


# -- data set ----------------------------------------------------------------------------------


@dataclass
class Dataset:
    """The segments to load, in time order, and which chunks were compacted."""

    segments: list[DataSegment]
    compacted: bytearray  # 1 at chunk index i when chunk i holds a compaction generation
    partitions: int

    @property
    def chunks(self) -> int:
        return len(self.compacted)

    def day(self, index: int, days: int = 1) -> Interval:
        start = ORIGIN_MILLIS + index * DAY_MILLIS
        return Interval.of_millis(start, start + days * DAY_MILLIS)

    def chunk_segments(self, index: int) -> list[DataSegment]:
        return self.segments[index * self.partitions : (index + 1) * self.partitions]

    def expected_visible(self, index: int) -> list[DataSegment]:
        """What a lookup of chunk ``index`` must serve, ordered by partition number."""
        segs = self.chunk_segments(index)
        return segs[self.partitions // 2 :] if self.compacted[index] else segs

    def expected_overshadowed(self) -> list[DataSegment]:
        half = self.partitions // 2
        return [
            seg
            for i in range(self.chunks)
            if self.compacted[i]
            for seg in self.chunk_segments(i)[:half]
        ]


def build_dataset(chunks: int, partitions: int, rng: random.Random) -> Dataset:
    """Create every segment object. Shard specs are immutable and shared between chunks; the
    segments of a chunk share its Interval (as segments deserialized with interning would)."""
    half = partitions // 2
    plain_specs = [NumberedShardSpec(p, partitions) for p in range(partitions)]
    compacted_specs = [NumberedShardSpec(p, half) for p in range(half)] + [
        NumberedOverwriteShardSpec(OVERWRITE_ID_MIN + i, 0, half, 1, partitions - half)
        for i in range(partitions - half)
    ]
    compacted = bytearray(chunks)
    for i in rng.sample(range(chunks), chunks // 2):
        compacted[i] = 1
    segments: list[DataSegment] = []
    for i in range(chunks):
        start = ORIGIN_MILLIS + i * DAY_MILLIS
        interval = Interval.of_millis(start, start + DAY_MILLIS)
        specs = compacted_specs if compacted[i] else plain_specs
        segments.extend(DataSegment(DATASOURCE, interval, VERSION, spec) for spec in specs)
    return Dataset(segments, compacted, partitions)


# -- measurement helpers -----------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


class GcWatch:
    """Counts the time the cyclic garbage collector runs while the watch is active; its
    generation-2 passes over the ~10^6 live objects are what produce latency outliers."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full_collections = 0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._started
        self.full_collections += info["generation"] == 2

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


@dataclass
class Timing:
    """Wall and process CPU seconds of one call, and the GC time inside it (the machine may
    be shared: CPU seconds are the figure that other processes do not inflate)."""

    wall_s: float
    cpu_s: float
    gc_s: float

    def as_dict(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "gc_s": self.gc_s}

    def note(self) -> str:
        return f"cpu {self.cpu_s:.2f} s, gc {self.gc_s:.2f} s"


def timed(fn: Callable[[], Any]) -> tuple[Timing, Any]:
    """``(timing, result)`` of one call."""
    with GcWatch() as watch:
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Timing(wall, cpu, watch.seconds), result


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


@dataclass
class Latency:
    """Per-call wall and thread-CPU latencies (milliseconds) of one kind of lookup."""

    name: str
    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    gc_s: float = 0.0
    full_collections: int = 0

    def summary(self) -> dict[str, float]:
        wall, cpu = sorted(self.wall_ms), sorted(self.cpu_ms)
        return {
            "count": len(wall),
            "p50_ms": percentile(wall, 50),
            "p99_ms": percentile(wall, 99),
            "mean_ms": sum(wall) / len(wall),
            "max_ms": wall[-1],
            "cpu_p50_ms": percentile(cpu, 50),
            "cpu_p99_ms": percentile(cpu, 99),
            "gc_s": self.gc_s,
            "gc_full_collections": self.full_collections,
        }


def time_lookups(
    tl: VersionedIntervalTimeline,
    intervals: Sequence[Interval],
    expected_pieces: int,
    name: str,
) -> Latency:
    """Time ``tl.lookup`` per interval; check each answer's piece count outside the timing."""
    latency = Latency(name)
    lookup = tl.lookup
    wall_clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    with GcWatch() as watch:
        for interval in intervals:
            wall, cpu = wall_clock(), cpu_clock()
            holders = lookup(interval)
            cpu, wall = cpu_clock() - cpu, wall_clock() - wall
            latency.wall_ms.append(wall / 1e6)
            latency.cpu_ms.append(cpu / 1e6)
            if len(holders) != expected_pieces:
                raise AssertionError(
                    f"{name}: lookup({interval}) gave {len(holders)} pieces, "
                    f"expected {expected_pieces}"
                )
    latency.gc_s, latency.full_collections = watch.seconds, watch.full_collections
    return latency


def plan_cold_lookups(chunks: int, lookups: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """Start chunk indexes of ``lookups`` random 1-day and 30-day intervals that touch
    pairwise disjoint chunks, so the first lookup of each finds only never-visited chunks."""
    slots = list(range(chunks // WINDOW_DAYS))
    rng.shuffle(slots)
    windows = [s * WINDOW_DAYS for s in slots[:lookups]]
    spare_days = [s * WINDOW_DAYS + d for s in slots[lookups:] for d in range(WINDOW_DAYS)]
    days = rng.sample(spare_days, lookups)
    return days, windows


# -- sanity check ------------------------------------------------------------------------------


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(f"timeline sanity check failed: {message}")


def sanity_check_full(data: Dataset, holders: list[Any]) -> None:
    """``lookup(ETERNITY)`` must serve every chunk once, as one piece, with its expected
    number of segments."""
    check(len(holders) == data.chunks, f"{len(holders)} pieces for {data.chunks} chunks")
    for i in (0, data.chunks // 2, data.chunks - 1):
        check(holders[i].interval == data.day(i), f"piece {i} is {holders[i].interval}")
    served = sum(len(h.segments) for h in holders)
    n_compacted = sum(data.compacted)
    expected = (
        n_compacted * (data.partitions - data.partitions // 2)
        + (data.chunks - n_compacted) * data.partitions
    )
    check(served == expected, f"{served} segments served, expected {expected}")


def sanity_check_samples(data: Dataset, tl: VersionedIntervalTimeline) -> None:
    """Spot-check the size, a compacted and a plain chunk, a 30-day window and an empty span."""
    check(len(tl) == len(data.segments), f"len(tl) = {len(tl)}, expected {len(data.segments)}")
    compacted_index = data.compacted.index(1)
    plain_index = data.compacted.index(0)
    for index in (compacted_index, plain_index):
        holders = tl.lookup(data.day(index))
        check(len(holders) == 1, f"chunk {index}: {len(holders)} pieces")
        got, want = holders[0].segments, data.expected_visible(index)
        check(
            len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=False)),
            f"chunk {index} (compacted={data.compacted[index]}) serves {got}, expected {want}",
        )
    compacted_segments = tl.lookup(data.day(compacted_index))[0].segments
    check(
        all(s.shard_spec.partition_num >= OVERWRITE_ID_MIN for s in compacted_segments),
        "a compacted chunk serves first-generation segments",
    )
    start = min(data.chunks - WINDOW_DAYS, compacted_index)
    window = tl.lookup(data.day(start, WINDOW_DAYS))
    check(len(window) == WINDOW_DAYS, f"30-day window gave {len(window)} pieces")
    check(
        all(h.segments == tuple(data.expected_visible(start + k)) for k, h in enumerate(window)),
        "a 30-day window serves unexpected segments",
    )
    check(tl.lookup(data.day(-5, 3)) == [], "an interval before all chunks is not empty")


def sanity_check_overshadowed(data: Dataset, found: list[DataSegment]) -> None:
    """``find_fully_overshadowed`` must return exactly the compacted-away first generation."""
    expected = data.expected_overshadowed()
    check(
        len(found) == len(expected) and all(a is b for a, b in zip(found, expected, strict=False)),
        f"find_fully_overshadowed found {len(found)} segments, expected {len(expected)}",
    )


# -- phases ------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def bench_add_loop(data: Dataset, results: dict[str, Any]) -> None:
    """``add`` in a loop; the RSS delta of that build plus a first full lookup; the sanity
    checks; then ``lookup(ETERNITY)`` warm and ``find_fully_overshadowed``."""
    segments = data.segments
    n = len(segments)
    gc.collect()
    rss_before = rss_bytes()
    tl = VersionedIntervalTimeline()
    add = tl.add

    def add_each() -> None:
        for segment in segments:
            add(segment)

    timing, _ = timed(add_each)
    results["add_loop"] = {**timing.as_dict(), "segments_per_s": n / timing.wall_s}
    rss_built = rss_bytes()
    log(f"add() loop: {n / timing.wall_s:,.0f} segments/s")

    timing, holders = timed(lambda: tl.lookup(ETERNITY))
    results["lookup_eternity_cold"] = timing.as_dict()
    sanity_check_full(data, holders)
    del holders
    gc.collect()
    rss_after = rss_bytes()
    results["rss"] = {
        "bytes_per_segment_after_build": (rss_built - rss_before) / n,
        "bytes_per_segment": (rss_after - rss_before) / n,
    }
    sanity_check_samples(data, tl)
    log("sanity check passed")

    timing, holders = timed(lambda: tl.lookup(ETERNITY))
    results["lookup_eternity_warm"] = timing.as_dict()
    del holders

    timing, found = timed(tl.find_fully_overshadowed)
    sanity_check_overshadowed(data, found)
    results["find_fully_overshadowed"] = {**timing.as_dict(), "found": len(found)}
    log(f"find_fully_overshadowed: {timing.wall_s:.2f} s")


def bench_add_all_and_lookups(
    data: Dataset, lookups: int, rng: random.Random, results: dict[str, Any]
) -> None:
    """``add_all`` on a fresh timeline, then cold and warm random lookups on it."""
    n = len(data.segments)
    gc.collect()
    tl = VersionedIntervalTimeline()
    timing, _ = timed(lambda: tl.add_all(data.segments))
    results["add_all"] = {**timing.as_dict(), "segments_per_s": n / timing.wall_s}
    log(f"add_all(): {n / timing.wall_s:,.0f} segments/s")

    days, windows = plan_cold_lookups(data.chunks, lookups, rng)
    one_day = [data.day(i) for i in days]
    thirty_days = [data.day(i, WINDOW_DAYS) for i in windows]
    latencies = [time_lookups(tl, one_day, 1, "1-day cold")]
    rng.shuffle(one_day)
    latencies.append(time_lookups(tl, one_day, 1, "1-day warm"))
    latencies.append(time_lookups(tl, thirty_days, WINDOW_DAYS, "30-day cold"))
    rng.shuffle(thirty_days)
    latencies.append(time_lookups(tl, thirty_days, WINDOW_DAYS, "30-day warm"))
    results["lookups"] = {lat.name: lat.summary() for lat in latencies}
    log("lookups done")


def bench_tracemalloc(data: Dataset, results: dict[str, Any]) -> None:
    """Bytes the timeline allocates for a build plus its first full lookup (result freed)."""
    n = len(data.segments)
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tl = VersionedIntervalTimeline()
        tl.add_all(data.segments)
        gc.collect()
        built, _ = tracemalloc.get_traced_memory()
        holders = tl.lookup(ETERNITY)
        del holders
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    results["tracemalloc"] = {
        "bytes_per_segment_after_build": (built - base) / n,
        "bytes_per_segment": (current - base) / n,
        "peak_bytes_per_segment": (peak - base) / n,
        "timeline_mib": (current - base) / 2**20,
    }
    log(f"tracemalloc: {(current - base) / n:.0f} bytes/segment")


# -- report ------------------------------------------------------------------------------------

Row = tuple[str, str, str, str, str]  # metric, value, target, verdict, note


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report_rows(results: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for key, label in (("add_loop", "add() in a loop"), ("add_all", "add_all(list)")):
        r = results[key]
        rows.append(
            (
                label,
                f"{r['segments_per_s']:,.0f} seg/s ({r['wall_s']:.2f} s)",
                f">= {TARGET_ADDS_PER_S:,} seg/s",
                verdict(r["segments_per_s"] >= TARGET_ADDS_PER_S),
                f"cpu {r['cpu_s']:.2f} s, gc {r['gc_s']:.2f} s",
            )
        )
    tm, rss = results["tracemalloc"], results["rss"]
    rows += [
        (
            "memory, tracemalloc (build + full lookup)",
            f"{tm['bytes_per_segment']:.0f} B/seg ({tm['timeline_mib']:.0f} MiB)",
            f"<= {TARGET_BYTES_PER_SEGMENT} B/seg",
            verdict(tm["bytes_per_segment"] <= TARGET_BYTES_PER_SEGMENT),
            f"build only {tm['bytes_per_segment_after_build']:.0f}, "
            f"peak {tm['peak_bytes_per_segment']:.0f} B/seg",
        ),
        (
            "memory, RSS delta (build + full lookup)",
            f"{rss['bytes_per_segment']:.0f} B/seg",
            "cross-check",
            "",
            f"build only {rss['bytes_per_segment_after_build']:.0f} B/seg",
        ),
    ]
    for name, s in results["lookups"].items():
        target = TARGET_1DAY_P50_MS if name.startswith("1-day") else TARGET_30DAY_P50_MS
        rows.append(
            (
                f"lookup {name} (n={s['count']})",
                f"p50 {s['p50_ms']:.3f}  p99 {s['p99_ms']:.3f}  max {s['max_ms']:.2f} ms",
                f"p50 <= {target} ms",
                verdict(s["p50_ms"] <= target),
                f"cpu p50 {s['cpu_p50_ms']:.3f} p99 {s['cpu_p99_ms']:.3f} ms, "
                f"{s['gc_full_collections']} full gc {s['gc_s']:.2f} s",
            )
        )
    for key, label in (
        ("lookup_eternity_cold", "lookup(ETERNITY), first (all cold)"),
        ("lookup_eternity_warm", "lookup(ETERNITY), warm"),
        ("find_fully_overshadowed", "find_fully_overshadowed()"),
    ):
        r = results[key]
        found = f" ({r['found']:,} found)" if "found" in r else ""
        rows.append(
            (
                label,
                f"{r['wall_s']:.2f} s{found}",
                "",
                "",
                f"cpu {r['cpu_s']:.2f} s, gc {r['gc_s']:.2f} s",
            )
        )
    return rows


def print_table(results: dict[str, Any]) -> None:
    cfg = results["config"]
    print(
        f"VersionedIntervalTimeline: {cfg['segments']:,} segments = {cfg['chunks']:,} DAY "
        f"chunks x {cfg['partitions']} ({cfg['compacted_chunks']:,} compacted), "
        f"seed {cfg['seed']}, Python {cfg['python']}, load average {cfg['load_average']}"
    )
    print(f"segment objects created in {results['build_segments_s']:.1f} s (not measured below)")
    print()
    rows: list[Row] = [("metric", "value", "target", "", "note"), *report_rows(results)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print()
    print("all targets met" if results["targets_met"] else "SOME TARGETS MISSED")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="DAY chunks (100000)")
    parser.add_argument("--partitions", type=int, default=10, help="segments per chunk (10)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (42)")
    parser.add_argument("--lookups", type=int, default=2000, help="lookups per kind (2000)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.partitions < 2:
        parser.error("--partitions must be at least 2 (a compacted chunk needs both halves)")
    if args.lookups < 1:
        parser.error("--lookups must be at least 1")
    if (args.chunks // WINDOW_DAYS - args.lookups) * WINDOW_DAYS < args.lookups:
        parser.error(
            f"--chunks {args.chunks} is too small for {args.lookups} cold 1-day and 30-day "
            f"lookups on disjoint chunks; use at least {31 * args.lookups + WINDOW_DAYS}"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    log(f"creating {args.chunks * args.partitions:,} segment objects")
    timing, data = timed(lambda: build_dataset(args.chunks, args.partitions, rng))
    results: dict[str, Any] = {
        "config": {
            "chunks": args.chunks,
            "partitions": args.partitions,
            "segments": len(data.segments),
            "compacted_chunks": sum(data.compacted),
            "seed": args.seed,
            "lookups": args.lookups,
            "python": sys.version.split()[0],
            "load_average": round(os.getloadavg()[0], 1),
        },
        "build_segments_s": timing.wall_s,
    }
    bench_add_loop(data, results)
    bench_add_all_and_lookups(data, args.lookups, rng, results)
    bench_tracemalloc(data, results)
    results["targets_met"] = all(row[3] != "MISSED" for row in report_rows(results))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
