"""Perfect rollup with hashed and range partitioning, on real Spark and Delta.

Every test checks the rows against an independent pandas group-by of the same input, and the
segments against what their shard specs record."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from segmentlake import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    Interval,
    SpecError,
)
from segmentlake.core.shard_spec import SingleDimensionShardSpec
from segmentlake.lake import Lake

pytestmark = pytest.mark.spark

INTERVAL = Interval.parse("2024-03-01/2024-03-04")
CHANNELS = [f"#{c}" for c in "abcdefghij"]


def _rows(n: int, *, seed: int, skew: bool = False) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    rows = []
    for _ in range(n):
        day = rnd.randrange(3)
        hour = rnd.randrange(4)
        # Zipf-like channel popularity when skewed: '#a' alone is ~40% of the rows.
        if skew:
            channel = CHANNELS[min(int(rnd.paretovariate(1.2)) - 1, len(CHANNELS) - 1)]
        else:
            channel = rnd.choice(CHANNELS)
        user = f"u{rnd.randrange(60)}" if rnd.random() > 0.05 else None
        rows.append(
            (
                f"2024-03-0{day + 1}T{hour:02d}:{rnd.randrange(60):02d}:00Z",
                channel,
                user,
                rnd.randrange(-5, 100),
            )
        )
    return rows


def _spec(partitions: dict[str, Any], **granularity: Any) -> dict[str, Any]:
    return {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "user"]},
        "metricsSpec": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "longMin", "name": "least", "fieldName": "added"},
            {"type": "longMax", "name": "most", "fieldName": "added"},
            {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"},
        ],
        "granularitySpec": {
            "segmentGranularity": "day",
            "queryGranularity": "hour",
            **granularity,
        },
        "partitionsSpec": partitions,
    }


def _input(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    # Several input partitions, so rows of one key start in different Spark tasks and the
    # partial aggregation before the shuffle really has something to combine.
    df = spark.createDataFrame(rows, "ts STRING, channel STRING, user STRING, added BIGINT")
    return df.repartition(3)


def _expected(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["ts", "channel", "user", "added"])
    frame["__time"] = pd.to_datetime(frame["ts"]).dt.floor("h").dt.tz_localize(None)
    grouped = frame.groupby(["__time", "channel", "user"], dropna=False)["added"]
    out = grouped.agg(edits="count", added="sum", least="min", most="max").reset_index()
    return out.sort_values(["__time", "channel", "user"], na_position="first").reset_index(
        drop=True
    )


def _actual(lake: Lake, ds: str) -> pd.DataFrame:
    got = lake.read(ds).drop("users").toPandas()
    got["__time"] = pd.to_datetime(got["__time"])
    if got["__time"].dt.tz is not None:
        got["__time"] = got["__time"].dt.tz_convert("UTC").dt.tz_localize(None)
    return got.sort_values(["__time", "channel", "user"], na_position="first").reset_index(
        drop=True
    )[["__time", "channel", "user", "edits", "added", "least", "most"]]


def _assert_rolled_up_exactly(lake: Lake, ds: str, rows: list[tuple[Any, ...]]) -> None:
    expected = _expected(rows)
    actual = _actual(lake, ds)
    for frame in (expected, actual):
        frame["user"] = frame["user"].fillna("<null>")
    pd.testing.assert_frame_equal(actual, expected, check_dtype=False)


def _rows_by_segment(lake: Lake, ds: str, **computed: str) -> dict[str, list[Any]]:
    segments = {s.load_spec["segment"]: s for s in lake.used_segments(ds)}
    table = lake.spark.read.format("delta").load(f"{lake.warehouse}/{ds}")
    table = table.withColumns({name: F.expr(sql) for name, sql in computed.items()})
    found: dict[str, list[Any]] = {}
    for r in table.where(F.col("__segment").isin(list(segments))).collect():
        found.setdefault(r["__segment"], []).append(r)
    return found


def test_hashed_with_num_shards_rolls_up_perfectly(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rows = _rows(3000, seed=1)
    spec = _spec({"type": "hashed", "numShards": 3, "partitionDimensions": ["channel"]})

    report = lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)

    _assert_rolled_up_exactly(lake, ds, rows)
    segments = lake.used_segments(ds)
    assert report.segments == len(segments) == 9  # 3 days x 3 buckets
    assert report.rows.rows_out == len(_expected(rows))
    by_key = {s.load_spec["segment"]: s for s in segments}
    # The documented bucket function, in Spark SQL.
    bucket = "pmod(hash(CAST(channel AS STRING)), 3)"
    for key, seg_rows in _rows_by_segment(lake, ds, bucket=bucket).items():
        shard = by_key[key].shard_spec
        assert isinstance(shard, HashBasedNumberedShardSpec)
        assert (shard.num_buckets, shard.partition_dimensions) == (3, ("channel",))
        assert {r["bucket"] for r in seg_rows} == {shard.bucket_id}
        assert len(seg_rows) == by_key[key].num_rows


def test_every_rolled_up_key_is_in_exactly_one_segment_per_chunk(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rows = _rows(2000, seed=2)
    spec = _spec({"type": "hashed", "targetRowsPerSegment": 150})

    lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)

    keys: Counter[tuple[Any, ...]] = Counter()
    for seg_rows in _rows_by_segment(lake, ds).values():
        keys.update((r["__time"], r["channel"], r["user"]) for r in seg_rows)
    assert keys
    assert max(keys.values()) == 1
    _assert_rolled_up_exactly(lake, ds, rows)


def test_hashed_target_rows_determines_the_shard_count_per_chunk(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rows = _rows(4000, seed=3)
    target = 200
    spec = _spec({"type": "hashed", "targetRowsPerSegment": target})

    lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)

    expected = _expected(rows)
    per_day = expected.groupby(expected["__time"].dt.date).size()
    segments = lake.used_segments(ds)
    for day, keys in per_day.items():
        of_day = [s for s in segments if s.interval.start.date() == day]
        # Exact counts of the rolled-up rows: ceil(keys / target) buckets, none empty here.
        assert len(of_day) == -(-keys // target), (day, keys, len(of_day))
        assert all(s.shard_spec.num_buckets == len(of_day) for s in of_day)
        assert all(s.shard_spec.num_core_partitions == len(of_day) for s in of_day)
    _assert_rolled_up_exactly(lake, ds, rows)


@pytest.mark.parametrize("dims", [["channel"], ["channel", "user"]])
def test_range_partitions_are_contiguous_and_hold_what_they_record(
    spark: SparkSession, lake: Lake, ds: str, dims: list[str]
) -> None:
    ds = f"{ds[:50]}_{len(dims)}"  # the fixture's name is cut before the parameter
    rows = _rows(4000, seed=4, skew=True)
    spec = _spec({"type": "range", "partitionDimensions": dims, "targetRowsPerSegment": 150})

    lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)

    _assert_rolled_up_exactly(lake, ds, rows)
    segments = lake.used_segments(ds)
    by_key = {s.load_spec["segment"]: s for s in segments}
    for key, seg_rows in _rows_by_segment(lake, ds).items():
        shard = by_key[key].shard_spec
        assert isinstance(shard, DimensionRangeShardSpec)
        assert shard.dimensions == tuple(dims)
        for r in seg_rows:
            value = tuple((r[d] is not None, r[d]) for d in dims)
            if shard.start is not None:
                assert value >= tuple((v is not None, v) for v in shard.start)
            if shard.end is not None:
                assert value < tuple((v is not None, v) for v in shard.end)
    chunks: dict[Any, list[Any]] = {}
    for s in segments:
        chunks.setdefault(s.interval, []).append(s.shard_spec)
    for shards in chunks.values():
        shards.sort(key=lambda s: s.partition_num)
        assert shards[0].start is None
        assert shards[-1].end is None
        assert all(a.end == b.start for a, b in itertools.pairwise(shards))


def test_range_segments_are_within_20_percent_of_the_target_on_skewed_data(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rnd = random.Random(5)
    # User activity is Zipf-like: a few users edit most pages, most users edit one or two,
    # so the rolled-up rows per partition value (user) are very uneven.
    rows = []
    for _ in range(60_000):
        user = f"user{int(rnd.paretovariate(0.7)) % 4000:05d}"
        rows.append(("2024-03-01T10:00:00Z", f"#p{rnd.randrange(40)}", user, 1))
    target = 1000
    spec = _spec(
        {"type": "single_dim", "partitionDimension": "user", "targetRowsPerSegment": target},
        queryGranularity="day",
    )
    interval = Interval.parse("2024-03-01/P1D")

    lake.overwrite(_input(spark, rows), ds, spec, interval=interval)

    segments = lake.used_segments(ds)
    assert all(isinstance(s.shard_spec, SingleDimensionShardSpec) for s in segments)
    sizes = sorted(s.num_rows for s in segments)
    assert sum(sizes) == len({(r[1], r[2]) for r in rows})  # perfect rollup
    assert len(sizes) >= 5
    assert all(0.8 * target <= n <= 1.2 * target for n in sizes), sizes


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "numShards": 2, "partitionDimensions": ["user"]},
        {"type": "hashed", "targetRowsPerSegment": 60},
        {"type": "range", "partitionDimensions": ["user"], "targetRowsPerSegment": 60},
    ],
    ids=["num_shards", "hashed_target", "range_target"],
)
def test_rollup_off_still_partitions(
    spark: SparkSession, lake: Lake, ds: str, partitions: dict[str, Any]
) -> None:
    ds = f"{ds[:40]}_{len(partitions)}{partitions['type']}"
    rows = _rows(500, seed=6)
    spec = _spec(partitions, rollup=False)

    report = lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)

    assert report.rows.rows_in == report.rows.rows_out == 500  # each input row counted once
    assert lake.read(ds).count() == 500
    if "targetRowsPerSegment" in partitions:  # rows per chunk, counted exactly
        per_day = Counter(r[0][:10] for r in rows)
        segments = lake.used_segments(ds)
        for day, n in per_day.items():
            of_day = [s for s in segments if str(s.interval.start.date()) == day]
            if partitions["type"] == "hashed":
                assert len(of_day) == -(-n // 60), (day, n)
            assert sum(s.num_rows for s in of_day) == n


def test_hll_sketches_merge_across_segments_without_re_estimating(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    rows = _rows(3000, seed=7)
    spec = _spec({"type": "hashed", "numShards": 4, "partitionDimensions": ["channel"]})
    lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)

    merged = lake.read(ds).agg(F.hll_sketch_estimate(F.hll_union_agg("users")).alias("n"))
    direct = _input(spark, rows).agg(F.hll_sketch_estimate(F.hll_sketch_agg("user")).alias("n"))

    # Union of the stored sketches == one sketch over the raw values (same lgK, lossless merge).
    assert merged.first()["n"] == direct.first()["n"]


def test_perfect_rollup_on_an_append_fails_clearly(
    spark: SparkSession, lake: Lake, ds: str
) -> None:
    spec = _spec({"type": "hashed", "numShards": 2})

    with pytest.raises(SpecError, match=r"perfect rollup.*time-chunk lock.*overwrite"):
        lake.append(_input(spark, _rows(10, seed=8)), ds, spec)


def test_range_on_a_number_fails_clearly(spark: SparkSession, lake: Lake, ds: str) -> None:
    spec = _spec({"type": "range", "partitionDimensions": ["n"], "targetRowsPerSegment": 5})
    spec["dimensionsSpec"]["dimensions"] = ["channel", "n"]
    df = _input(spark, _rows(10, seed=9)).withColumn("n", F.lit(3))

    with pytest.raises(SpecError, match=r"range partitioning needs string dimensions.*'n'"):
        lake.overwrite(df, ds, spec, interval=INTERVAL)
    assert lake.used_segments(ds) == []


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "numShards": 2},
        {"type": "hashed", "targetRowsPerSegment": 100},
        {"type": "range", "partitionDimensions": ["channel", "user"], "targetRowsPerSegment": 100},
    ],
    ids=["num_shards", "hashed", "range"],
)
def test_rejected_rows_are_counted_by_fate_and_change_no_partition(
    spark: SparkSession, lake: Lake, ds: str, partitions: dict[str, Any]
) -> None:
    # The rejected rows are rolled up with the kept ones (into a group per reason) to be
    # counted from the rolled-up rows: they must count exactly, shape no bucket or range, and
    # their values must not be aggregated (50 x 2^62 would overflow a long sum).
    kept = _rows(900, seed=13)
    huge = 2**62
    rejected = [
        *[("garbage", "#a", "u1", 1)] * 40,
        *[(None, "#b", "u2", 1)] * 30,
        *[("2024-04-01T00:00:00Z", "#c", f"u{i}", huge) for i in range(50)],
    ]
    spec = {
        **_spec(partitions),
        "transformSpec": {"filter": "channel <> '#j'"},
        "tuningConfig": {"maxParseExceptions": 70},
    }
    rows = kept + rejected
    random.Random(5).shuffle(rows)

    report = lake.overwrite(_input(spark, rows), ds, spec, interval=INTERVAL)
    alone = f"{ds[:40]}_alone"
    kept_only = [r for r in kept if r[1] != "#j"]
    lake.overwrite(_input(spark, kept_only), alone, spec, interval=INTERVAL)

    assert report.rows.rows_in == len(rows)
    assert report.rows.processed == len(kept_only)
    assert report.rows.filtered == len(kept) - len(kept_only)
    assert report.rows.outside_interval == 50
    assert report.rows.unparseable_by_reason == {
        "unparseable timestamp (iso)": 40,
        "null timestamp": 30,
    }
    _assert_rolled_up_exactly(lake, ds, kept_only)

    def shapes(datasource: str) -> list[tuple[Any, ...]]:
        return sorted(
            (str(s.interval), s.shard_spec.partition_num, repr(s.shard_spec))
            for s in lake.used_segments(datasource)
        )

    assert shapes(ds) == shapes(alone)
    assert len(shapes(ds)) > 3 or partitions.get("numShards") == 2


def test_rows_are_combined_before_the_shuffle(spark: SparkSession) -> None:
    from segmentlake.core.ingest_spec import IngestionSpec
    from segmentlake.ingest.parse import parse_input
    from segmentlake.ingest.rollup import perfect_rollup_rows

    spec = IngestionSpec.from_dict(_spec({"type": "hashed", "numShards": 2}))
    parsed = parse_input(_input(spark, _rows(50, seed=10)), spec, interval=INTERVAL)
    observation = Observation("test-combined")
    rows = perfect_rollup_rows(
        parsed, spec, key_token="t", observation=observation, interval=INTERVAL
    ).frame

    plan = rows._jdf.queryExecution().executedPlan().toString()
    # Map side: partial aggregates below the first exchange; then one more exchange of the
    # rolled-up rows by segment key.
    first_exchange = plan.rindex("Exchange hashpartitioning(__chunk_ms")
    assert "partial_sum" in plan[first_exchange:]
    assert "partial_count" in plan[first_exchange:]
    assert "Exchange hashpartitioning(__segment" in plan[:first_exchange]


def _tagged_rows(
    spark: SparkSession, partitions: dict[str, Any], interval: Interval, rows: list[Any]
) -> DataFrame:
    from segmentlake.core.ingest_spec import IngestionSpec
    from segmentlake.ingest.parse import parse_input
    from segmentlake.ingest.rollup import perfect_rollup_rows

    spec = IngestionSpec.from_dict(_spec(partitions))
    parsed = parse_input(_input(spark, rows), spec, interval=interval)
    observation = Observation(f"test-{random.random()}")
    return perfect_rollup_rows(
        parsed, spec, key_token="t", observation=observation, interval=interval
    ).frame


def _executed_plan(frame: DataFrame) -> str:
    """The plan as adaptive execution finally ran it (run ``frame`` first)."""
    plan = str(frame._jdf.queryExecution().executedPlan().toString())
    assert "isFinalPlan=true" in plan
    return plan.split("== Initial Plan ==")[0]


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "targetRowsPerSegment": 40},
        {"type": "range", "partitionDimensions": ["channel"], "targetRowsPerSegment": 40},
    ],
    ids=["hashed", "range"],
)
def test_determined_partitions_share_one_shuffle_by_chunk(
    spark: SparkSession, partitions: dict[str, Any]
) -> None:
    assert spark.sparkContext.defaultParallelism == 2  # 3 chunks: enough for by chunk
    rows = _tagged_rows(spark, partitions, INTERVAL, _rows(400, seed=14))
    # Every column collected, as the write stores them: a projection would let Spark prune
    # the count's plan and the write's differently.
    placed = rows.withColumn("task", F.spark_partition_id())
    by_chunk: dict[str, set[int]] = {}
    for r in placed.collect():
        by_chunk.setdefault(r["__segment"].split(".")[0], set()).add(r.task)

    # Each chunk is in one task, consecutive chunks in different ones (dealt out in turn).
    assert len(by_chunk) == 3
    assert all(len(tasks) == 1 for tasks in by_chunk.values()), by_chunk
    tasks = [min(by_chunk[c]) for c in sorted(by_chunk, key=int)]
    assert tasks in ([0, 1, 0], [1, 0, 1]), tasks
    # The count and the write read the one shuffle by chunk: planned once, then reused; the
    # count cuts each chunk where its rows are (no exchange of its own: the rollup's and the
    # one by chunk are all), and no shuffle by segment key follows.
    plan = _executed_plan(placed)
    assert plan.count("+- Exchange hashpartitioning(__slot") == 1, plan
    assert plan.count("+- ReusedExchange") == 1, plan
    assert plan.count("+- Exchange hashpartitioning(") == 2, plan
    assert "hashpartitioning(__segment" not in plan


def test_fewer_chunks_than_tasks_shuffle_by_segment_key(spark: SparkSession) -> None:
    one_day = Interval.parse("2024-03-01/P1D")
    one_day_rows = [r for r in _rows(400, seed=15) if r[0].startswith("2024-03-01")]
    partitions = {"type": "hashed", "targetRowsPerSegment": 40}
    rows = _tagged_rows(spark, partitions, one_day, one_day_rows)

    segments = rows.withColumn("task", F.spark_partition_id())
    placed = {(r["__segment"], r.task) for r in segments.collect()}
    found = Counter(segment for segment, _ in placed)
    assert len(found) > 2
    assert set(found.values()) == {1}  # each segment in one task
    assert "hashpartitioning(__segment" in _executed_plan(segments)


@pytest.mark.parametrize(
    ("partitions", "interval"),
    [
        ({"type": "hashed", "targetRowsPerSegment": 150}, INTERVAL),
        (
            {
                "type": "range",
                "partitionDimensions": ["channel", "user"],
                "targetRowsPerSegment": 150,
            },
            INTERVAL,
        ),
        (
            {"type": "single_dim", "partitionDimension": "user", "targetRowsPerSegment": 150},
            INTERVAL,
        ),
        # One chunk for two tasks: shuffled by segment key, counted from the rollup's shuffle.
        ({"type": "hashed", "targetRowsPerSegment": 150}, Interval.parse("2024-03-01/P1D")),
    ],
    ids=["hashed", "range", "single_dim", "hashed_one_chunk"],
)
def test_partitions_are_determined_in_the_write_job_from_one_scan(
    spark: SparkSession,
    lake: Lake,
    ds: str,
    tmp_path: Any,
    partitions: dict[str, Any],
    interval: Interval,
) -> None:
    # The fixture's name is cut before the parameters.
    ds = f"{ds[:40]}_{partitions['type']}_{interval.duration_millis // 86_400_000}"
    rows = [r for r in _rows(3000, seed=12) if interval.contains_millis(_millis(r[0]))]
    source = str(tmp_path / "input")
    _input(spark, rows).write.parquet(source)

    report = lake.overwrite(spark.read.parquet(source), ds, _spec(partitions), interval=interval)

    # Counting the rolled-up rows reuses the write's own scan and shuffles: the input files
    # are read once (Delta's log adds a few records; a second scan would add every row).
    write = report.phase_metrics["write"]
    assert len(rows) <= write["input_records"] < 1.2 * len(rows), write
    assert "determine_partitions" not in report.phases
    assert report.rows.rows_in == len(rows)  # the observed counts saw each row once
    _assert_rolled_up_exactly(lake, ds, rows)


def _millis(iso: str) -> int:
    return int(pd.Timestamp(iso).value // 1_000_000)


# -- pruning over real perfect-rollup ingestion ----------------------------------------------

_VALUES = {"channel": [*CHANNELS, "#zz", ""], "user": [None, "u0", "u1", "u17", "u5", "u59", "x"]}


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@st.composite
def _filters(draw: st.DrawFn, depth: int = 2) -> str:
    """Random Spark SQL filters over the partition dimensions: =, IN, ranges, AND, OR, NOT."""
    column = draw(st.sampled_from(sorted(_VALUES)))
    values = [v for v in _VALUES[column] if v is not None]
    kind = draw(st.sampled_from(["=", "in", "<", "<=", ">", ">=", "null", "and", "or", "not"]))
    if kind in ("and", "or", "not") and depth > 0:
        left = draw(_filters(depth - 1))
        if kind == "not":
            return f"NOT ({left})"
        return f"({left}) {kind.upper()} ({draw(_filters(depth - 1))})"
    if kind == "in":
        chosen = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
        return f"{column} IN ({', '.join(map(_literal, chosen))})"
    if kind == "null":
        return f"{column} IS NULL"
    operator = "=" if kind in ("and", "or", "not") else kind
    return f"{column} {operator} {_literal(draw(st.sampled_from(values)))}"


@pytest.fixture(scope="module")
def partitioned(spark: SparkSession, lake: Lake) -> list[str]:
    """Three datasources over the same rows: hashed on channel, hashed on (channel, user),
    range on (channel, user)."""
    rows = _rows(3000, seed=11)
    specs = {
        "pruned_hash1": {"type": "hashed", "numShards": 4, "partitionDimensions": ["channel"]},
        "pruned_hash2": {
            "type": "hashed",
            "numShards": 3,
            "partitionDimensions": ["channel", "user"],
        },
        "pruned_range": {
            "type": "range",
            "partitionDimensions": ["channel", "user"],
            "targetRowsPerSegment": 120,
        },
    }
    for name, partitions in specs.items():
        lake.overwrite(_input(spark, rows), name, _spec(partitions), interval=INTERVAL)
    return list(specs)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sql=_filters(), which=st.integers(0, 2))
def test_pruning_never_drops_a_matching_row(
    lake: Lake, partitioned: list[str], sql: str, which: int
) -> None:
    ds = partitioned[which]
    pruned = lake.read(ds, filter=sql).agg(F.count(F.lit(1)), F.sum("added")).first()
    # The same filter applied after an unfiltered read, which selects every visible segment.
    everything = lake.read(ds).where(sql).agg(F.count(F.lit(1)), F.sum("added")).first()

    assert tuple(pruned) == tuple(everything), sql


def test_an_equality_filter_reads_one_bucket_per_chunk(lake: Lake, partitioned: list[str]) -> None:
    from segmentlake.read.catalyst_domain import domain_of
    from segmentlake.storage.visible_rows import partitions

    timeline = lake.timeline("pruned_hash1")
    table = lake.spark.read.format("delta").load(f"{lake.warehouse}/pruned_hash1")
    types = {f.name: f.dataType for f in table.schema.fields}
    every, _, _ = partitions(timeline, INTERVAL)
    domain = domain_of("channel = '#c' AND added > 3", types, spark=lake.spark)
    kept, _, _ = partitions(timeline, INTERVAL, domain)

    assert len(every) == 12  # 3 days x 4 buckets
    assert len(kept) == 3  # the bucket of '#c', once per day
