"""Hostile input: every reader of user input in the pure core, given ANY input, returns a valid
object or raises a SpecError naming the field; never another exception, never a silent
coercion.

Valid documents (the Druid tutorial's task specs, their dataSchema parts, the README's spec,
rule / volume / coordinator / compaction JSON) are mutated at a random JSON path: a value of a
wrong type (strings for numbers, numbers for strings, lists for objects, null, nested junk,
NaN, huge integers, empty and unicode strings), a deleted key, an unknown key, a list wrapped
or unwrapped. Every outcome must be an object or a SpecError whose message names the mutated
key or one of its parents. And a boolean or number turned into the string of the same meaning
(``false`` -> ``"false"``, ``5`` -> ``"5"``) must be refused, not read: checked for every
bool and number of every seed, and for the random mutations that make one.

``pytest -s`` prints how many inputs each target was given.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_planning import (
    FingerprintSelector,
    MaskedRowsSelector,
    RatioPlanner,
)
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import IngestionSpec, MetricSpec
from segmentlake.core.interval import Interval, Period
from segmentlake.core.locks import LockGranularity, LockRequest, LockType
from segmentlake.core.partitions_spec import partitions_spec_from_dict
from segmentlake.core.retention_rules import rule_from_json, rules_from_json
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import HASH_PARTITION_FUNCTION, DimensionRangeShardSpec
from segmentlake.core.spec_reader import TUNING_NO_EFFECT
from segmentlake.core.storage_tiers import CoordinatorConfig, Volume
from segmentlake.druid.auto_compaction import compaction_config_from_druid
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid.no_effect import CONTEXT_NO_EFFECT
from segmentlake.druid.tasks import read_druid_task
from segmentlake.errors import SpecError

SPECS = Path(__file__).parents[1] / "data" / "druid_tutorial" / "specs"
TASKS = {
    p.relative_to(SPECS).as_posix(): json.loads(p.read_text())
    for p in sorted(SPECS.rglob("*.json"))
}

# The README's "Using it" spec: Druid's dataSchema with tuningConfig next to its keys.
README: dict[str, Any] = {
    "timestampSpec": {"column": "ts", "format": "auto"},
    "dimensionsSpec": {"dimensions": ["channel", "page", "user"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
        {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
    "transformSpec": {"filter": "channel IS NOT NULL"},
    "tuningConfig": {
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5000000},
        "maxParseExceptions": 0,
    },
}

RULES: list[dict[str, Any]] = [
    {
        "type": "loadByPeriod",
        "period": "P1M",
        "includeFuture": True,
        "tieredReplicants": {"hot": 2},
    },
    {"type": "loadByInterval", "interval": "2024-01-01/P1Y", "tieredReplicants": {"cold": 1}},
    {"type": "loadForever", "useDefaultTierForNull": False},
    {"type": "dropByPeriod", "period": "P7D", "includeFuture": False},
    {"type": "dropBeforeByPeriod", "period": "PT36H"},
    {"type": "dropByInterval", "interval": "2020-01-01/2021-01-01"},
    {"type": "broadcastByPeriod", "period": "P1Y2M", "includeFuture": True},
    {"type": "dropForever"},
]
VOLUME = Volume("hot-1", "hot", "/mnt/nvme1", 2**40, priority=10).to_json()
COORDINATOR = CoordinatorConfig(kill_unused_after_seconds=3600.0, seed=7).to_json()
COMPACTION = CompactionConfig(
    planner=RatioPlanner(2.0, 8, 1000, (("small", 10**8), ("large", None))),
    selectors=(FingerprintSelector(1000), MaskedRowsSelector(0.25)),
    max_segments_per_job=16,
    skip_offset_from_latest=Period.parse("PT6H"),
).to_json()
# Druid's automatic compaction configs: its tutorial's, and one with every key it reads.
DRUID_COMPACTION: list[dict[str, Any]] = [
    {"dataSource": "wikipedia_hour", "granularitySpec": {"segmentGranularity": "DAY"}},
    {
        "dataSource": "wikipedia",
        "taskPriority": 25,
        "inputSegmentSizeBytes": 100_000_000_000_000,
        "skipOffsetFromLatest": "PT12H",
        "granularitySpec": {"segmentGranularity": "MONTH"},
        "tuningConfig": {
            "type": "index_parallel",
            "partitionsSpec": {
                "type": "range",
                "partitionDimensions": ["page"],
                "targetRowsPerSegment": 1000,
            },
            "maxRowsInMemory": 25000,
        },
        "ioConfig": {"dropExisting": True},
        "taskContext": {"priority": 30},
        "engine": "native",
    },
]
# Segment descriptors: one as Druid publishes it (its metadata store's payload) and one as
# segmentlake writes it (a range shard spec, a schema, a compaction state).
SEGMENTS: list[dict[str, Any]] = [
    {
        "dataSource": "wikipedia",
        "interval": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
        "version": "2024-03-01T10:00:00.000Z",
        "loadSpec": {"type": "local", "path": "/var/druid/segments/wikipedia/index.zip"},
        "dimensions": "channel,cityName,page,user",
        "metrics": "count,sum_added",
        "shardSpec": {"type": "numbered", "partitionNum": 1, "partitions": 2},
        "binaryVersion": 9,
        "size": 4831234,
        "identifier": "wikipedia_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_"
        "2024-03-01T10:00:00.000Z_1",
    },
    DataSegment(
        "wiki",
        Interval.parse("2024-01-01/2024-01-02"),
        "2024-01-02T00:00:00.000Z",
        DimensionRangeShardSpec(1, 2, ("page", "user"), ("m", None), None),
        {"type": "delta", "path": "/w/wiki", "segment": "1704067200000.1.abc"},
        ("page", "user"),
        ("edits",),
        1200,
        30,
        {"partitionsSpec": {"type": "range", "partitionDimensions": ["page", "user"]}},
        schema=SegmentSchema((MetricSpec("count", "edits"),), Granularity.HOUR, rollup=True),
    ).to_json(),
]

PARTITIONS: list[dict[str, Any]] = [
    {"type": "dynamic", "maxRowsPerSegment": 1000, "maxTotalRows": 5000},
    {"type": "hashed", "numShards": 3, "partitionDimensions": ["a", "b"]},
    {"type": "hashed", "targetRowsPerSegment": 500, "partitionFunction": HASH_PARTITION_FUNCTION},
    {
        "type": "range",
        "partitionDimensions": ["a"],
        "targetRowsPerSegment": 10,
        "maxRowsPerSegment": 20,
    },
    {
        "type": "single_dim",
        "partitionDimension": "a",
        "maxRowsPerSegment": 30,
        "assumeGrouped": False,
    },
]


def _api_forms() -> dict[str, dict[str, Any]]:
    """What IngestionSpec.from_dict reads: each task's dataSchema (bare, wrapped with its
    tuningConfig, and the whole task), and the README's spec."""
    forms = {"README": README}
    for name, task in TASKS.items():
        root = task.get("spec", task)
        schema = root.get("dataSchema")
        if not isinstance(schema, dict):
            continue
        forms[f"{name}:dataSchema"] = schema
        forms[f"{name}:wrapped"] = {"dataSchema": schema, "tuningConfig": root.get("tuningConfig")}
        forms[f"{name}:task"] = {"spec": root}
    return forms


API_FORMS = _api_forms()


def _refused(read: Callable[[Any], Any], docs: dict[str, Any]) -> set[str]:
    refused = set()
    for name, doc in docs.items():
        try:
            read(doc)
        except SpecError:
            refused.add(name)
    return refused


# Tutorial tasks segmentlake refuses on purpose (MSQ-derived specs without an ioConfig): their
# mutations must still fail cleanly, but may fail for that reason.
REFUSED_TASKS = _refused(read_druid_task, TASKS)

# Keys whose value is read nowhere (logged as without effect): a string there is not coerced.
IGNORED = {*TUNING_NO_EFFECT, *CONTEXT_NO_EFFECT, "resource", "filterTuning"}
DRUID_IGNORED = {"taskPriority", "inputSegmentSizeBytes", "taskContext", "engine"}
API_IGNORED = {*IGNORED, "ioConfig", "context", "id", "parseSpec"}
# Druid's filter JSON compares values as strings or numbers alike ("value": 3 is "3").
EITHER = {"filter"}

COUNTS: Counter[str] = Counter()  # inputs tried, per target
REFUSED: Counter[str] = Counter()  # ... of which refused with a SpecError
SAME: Counter[str] = Counter()  # ... of which a bool or number turned into its string


@pytest.fixture(scope="module", autouse=True)
def _print_counts() -> Iterator[None]:
    yield
    width = max((len(k) for k in COUNTS), default=0)
    print(f"\nhostile inputs tried per target ({sum(COUNTS.values())} in all):")
    for target, count in sorted(COUNTS.items()):
        same = f", {SAME[target]:5d} same-meaning strings" if SAME[target] else ""
        print(f"  {target:<{width}}  {count:6d} tried, {REFUSED[target]:6d} refused{same}")


# -- junk ------------------------------------------------------------------------------------

_UNICODE = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=0, max_size=12)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 2**31, 2**64 - 1]),
    # Too long for str() (Python refuses more than 4300 digits); built late, as hypothesis
    # would fail to print it in a strategy's repr.
    st.just(None).map(lambda _: 10**5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.5, -0.0, 1e308]),
    st.sampled_from(["", " ", "\x00", "٣", "\u200b", "null", "true", "false", "0", "-1", "1e999"]),
    _UNICODE,
)
JUNK = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(_UNICODE, st.sampled_from(["type", "name", "fieldName"])), inner, max_size=3
        ),
    ),
    max_leaves=8,
)
UNKNOWN_KEYS = st.one_of(
    st.sampled_from(["formt", "typ", "dimension", "lgk", "", " ", "__x"]), _UNICODE
)

Path_ = tuple[Any, ...]


def json_paths(doc: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every path below ``doc`` (keys and list indexes), parents first."""
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for key, value in items:
        yield (*prefix, key)
        yield from json_paths(value, (*prefix, key))


def container_paths(doc: Any) -> list[Path_]:
    """The paths of every object (where a key can be added)."""
    top = [()] if isinstance(doc, dict) else []
    return [*top, *(p for p in json_paths(doc) if isinstance(_get(doc, p), dict))]


def _get(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def render(path: Path_) -> str:
    """A path as the readers print it: ``spec.dataSchema.metricsSpec[1].lgK``."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def names_path(message: str, path: Path_) -> bool:
    """Whether ``message`` names ``path`` or a parent of it: some run of its keys (starting at
    a key, not an index; not the wrappers alone) as the readers print paths."""
    for start in range(len(path)):
        if not isinstance(path[start], str) and start > 0:  # an index names nothing alone
            continue
        for end in range(start + 1, len(path) + 1):
            part = path[start:end]
            if part != path and all(k in ("spec", "dataSchema") for k in part):
                continue
            text = render(part)
            # Messages print odd keys escaped, as repr or JSON does ('\x1f', "\u001f").
            if any(v in message for v in (text, repr(text)[1:-1], json.dumps(text)[1:-1])):
                return True
    return False


# -- mutations -------------------------------------------------------------------------------


class Mutation:
    """One change at ``path``; ``same_meaning`` when a bool or number became its string."""

    def __init__(self, kind: str, path: Path_, same_meaning: bool = False) -> None:
        self.kind, self.path, self.same_meaning = kind, path, same_meaning

    def __repr__(self) -> str:
        return f"{self.kind} at {render(self.path) or '(top)'}"


KINDS = ("junk", "junk", "junk", "delete", "add", "wrap", "unwrap", "same")


@st.composite
def mutated(draw: st.DrawFn, seed: Any, kinds: tuple[str, ...] = KINDS) -> tuple[Any, Mutation]:
    doc = copy.deepcopy(seed)
    paths = list(json_paths(doc))
    kind = draw(st.sampled_from(kinds))
    if kind == "add" or not paths:
        parent = draw(st.sampled_from(container_paths(doc)))
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in _get(doc, parent)))
        _get(doc, parent)[key] = draw(JUNK)
        return doc, Mutation("add", (*parent, key))
    scalars = [p for p in paths if isinstance(_get(doc, p), bool | int | float)]
    path = draw(st.sampled_from(scalars if kind == "same" and scalars else paths))
    parent, key = _get(doc, path[:-1]), path[-1]
    value = parent[key]
    if kind == "delete":
        del parent[key]
        return doc, Mutation("delete", path)
    if kind == "wrap":
        parent[key] = [value]
        return doc, Mutation("wrap", path)
    if kind == "unwrap" and isinstance(value, list) and value:
        parent[key] = value[0]
        return doc, Mutation("unwrap", path)
    if kind == "same" and isinstance(value, bool | int | float):
        parent[key] = json.dumps(value)  # true -> "true", 5 -> "5", 0.5 -> "0.5"
        return doc, Mutation("same", path, same_meaning=True)
    parent[key] = draw(JUNK.filter(lambda v: type(v) is not type(value)))
    return doc, Mutation("junk", path)


def check(
    target: str,
    read: Callable[[Any], Any],
    doc: Any,
    change: Mutation,
    ignored: set[str],
    *,
    valid_seed: bool = True,
) -> None:
    """``read(doc)`` is an object or a SpecError naming the changed path (when the document
    was valid before the change); a value turned into a string of the same meaning is refused
    (unless it is one nobody reads)."""
    COUNTS[target] += 1
    SAME[target] += change.same_meaning
    try:
        read(doc)
    except SpecError as e:
        REFUSED[target] += 1
        message = str(e)
        if valid_seed:
            assert names_path(message, change.path), f"{change}: not named in:\n{message}"
        return
    if change.same_meaning and not any(k in ignored or k in EITHER for k in change.path):
        pytest.fail(f"{change}: a string of the same meaning was accepted (silent coercion)")


# SEGMENTLAKE_FUZZ_SCALE=10 runs ten times as many examples (a deeper, slower search).
_SCALE = float(os.environ.get("SEGMENTLAKE_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, round(n * _SCALE))


FUZZ = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)


# -- the ingestion spec readers ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TASKS))
@settings(FUZZ, max_examples=examples(80))
@given(data=st.data())
def test_druid_tasks_under_mutation(name: str, data: st.DataObject) -> None:
    doc, change = data.draw(mutated(TASKS[name]))
    valid = name not in REFUSED_TASKS
    check(
        "read_druid_task",
        read_druid_task,
        doc,
        change,
        IGNORED,
        valid_seed=valid,
    )


@pytest.mark.parametrize("name", sorted(API_FORMS))
@settings(FUZZ, max_examples=examples(20))
@given(data=st.data())
def test_ingestion_specs_under_mutation(name: str, data: st.DataObject) -> None:
    doc, change = data.draw(mutated(API_FORMS[name]))
    check("IngestionSpec.from_dict", IngestionSpec.from_dict, doc, change, API_IGNORED)


@settings(FUZZ, max_examples=examples(400))
@given(data=st.data())
def test_the_readme_spec_under_mutation(data: st.DataObject) -> None:
    doc, change = data.draw(mutated(README))
    check("IngestionSpec.from_dict (README)", IngestionSpec.from_dict, doc, change, API_IGNORED)


# Every reader with a document it must read strictly: (target, read, seed, keys nobody reads).
STRICT_READERS: list[tuple[str, Callable[[Any], Any], Any, set[str]]] = [
    *(
        ("read_druid_task", read_druid_task, task, IGNORED)
        for name, task in TASKS.items()
        if name not in REFUSED_TASKS
    ),
    *(
        ("IngestionSpec.from_dict", IngestionSpec.from_dict, f, API_IGNORED)
        for f in API_FORMS.values()
    ),
    *(("partitions_spec_from_dict", partitions_spec_from_dict, p, set()) for p in PARTITIONS),
    ("CompactionConfig.from_json", CompactionConfig.from_json, COMPACTION, set()),
    *(
        ("compaction_config_from_druid", compaction_config_from_druid, c, IGNORED | DRUID_IGNORED)
        for c in DRUID_COMPACTION
    ),
    ("rules_from_json", rules_from_json, RULES, set()),
    ("CoordinatorConfig.from_json", CoordinatorConfig.from_json, COORDINATOR, set()),
    ("Volume.from_json", Volume.from_json, VOLUME, set()),
]


def test_strings_of_the_same_meaning_are_refused_everywhere() -> None:
    """Every bool and number of every seed document, turned into its string (``false`` ->
    ``"false"``, ``5`` -> ``"5"``), one at a time: refused, never read as the value (all of
    them, so no search is needed)."""
    for target, read, seed, ignored in STRICT_READERS:
        for path in json_paths(seed):
            value = _get(seed, path)
            if not isinstance(value, bool | int | float):
                continue
            doc = copy.deepcopy(seed)
            _get(doc, path[:-1])[path[-1]] = json.dumps(value)
            check(f"{target} (same)", read, doc, Mutation("same", path, True), ignored)


@settings(FUZZ, max_examples=examples(250))
@given(JUNK)
def test_any_json_is_a_spec_or_a_spec_error(value: Any) -> None:
    for target, read in (
        ("IngestionSpec.from_dict (junk)", IngestionSpec.from_dict),
        ("DruidIngestTask.from_dict (junk)", DruidIngestTask.from_dict),
    ):
        COUNTS[target] += 1
        try:
            read(value)
        except SpecError:
            REFUSED[target] += 1


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    deep: Any = {"type": "selector", "dimension": "a", "value": "x"}
    for _ in range(5000):
        deep = {"type": "not", "field": deep}
    with pytest.raises(SpecError, match="nested deeper than"):
        IngestionSpec.from_dict({"transformSpec": {"filter": deep}})
    nested: Any = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(SpecError, match=r"dimensionsSpec\.dimensions"):
        IngestionSpec.from_dict({"dimensionsSpec": {"dimensions": nested}})
    with pytest.raises(SpecError, match="not valid JSON"):
        rules_from_json("[" * 100_000)
    with pytest.raises(SpecError, match="not valid JSON"):
        DruidIngestTask.from_json("[" * 100_000)


# -- the other readers -----------------------------------------------------------------------


_TIMESTAMPS = st.sampled_from(
    [
        "2024-01-01",
        "2024-01-01T05:00:00Z",
        "0001-01-01",
        "9999-12-31T23:59:59.999Z",
        "2024-02-30",
        "2024-01-01T00:00:00+14:00",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:00:00-05:00",
    ]
)
_PERIODS = st.sampled_from(
    [
        "P1D",
        "PT1H",
        "P1M",
        "P9999Y",
        "P10000Y",
        "PT0S",
        "P1Y2M3W4DT5H6M7.891S",
        "P99999999999999999999D",
        "P" + "9" * 5000 + "D",
        "p1d",
        "P٣D",
    ]
)
INTERVAL_TEXT = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda a, b: f"{a}/{b}",
        st.one_of(_TIMESTAMPS, _PERIODS, _UNICODE),
        st.one_of(_TIMESTAMPS, _PERIODS, _UNICODE),
    ),
    st.from_regex(
        r"\A\d{1,5}-\d{1,2}-\d{1,2}(T\d{1,2}:\d{1,2}(:\d{1,2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?/P\d{1,6}[YMWD]\Z"
    ),
    JUNK,
)


@settings(FUZZ, max_examples=examples(800))
@given(INTERVAL_TEXT)
def test_interval_parse_takes_any_text(text: Any) -> None:
    COUNTS["Interval.parse"] += 1
    try:
        interval = Interval.parse(text)
    except SpecError:
        REFUSED["Interval.parse"] += 1
        return
    assert interval.start_millis <= interval.end_millis
    assert Interval.parse(str(interval)) == interval


@settings(FUZZ, max_examples=examples(300))
@given(
    st.one_of(
        _PERIODS,
        st.text(max_size=20),
        st.from_regex(r"\AP(\d{1,20}[YMWD])*(T(\d{1,20}[HMS])*)?\Z"),
        JUNK,
    )
)
def test_period_and_granularity_parse_take_anything(value: Any) -> None:
    for target, read in (("Period.parse", Period.parse), ("Granularity.parse", Granularity.parse)):
        COUNTS[target] += 1
        try:
            read(value)
        except SpecError:
            REFUSED[target] += 1


_DAY = Interval.parse("2024-01-01/P1D")
_VALID_LOCK = {
    "group_id": "g",
    "task_id": "t",
    "datasource": "wiki",
    "interval": _DAY,
    "lock_type": LockType.APPEND,
    "granularity": LockGranularity.SEGMENT,
    "priority": 5,
    "version": "2024-01-01T00:00:00.000Z",
    "partition_num": 3,
}
_NEAR_LOCK_VALUES = st.sampled_from(
    ["EXCLUSIVE", "SEGMENT", "2024-01-01/P1D", "5", 5.0, True, -1, 65536, 2**31, "", None]
)


@settings(FUZZ, max_examples=examples(800))
@given(
    st.lists(st.sampled_from(sorted(_VALID_LOCK)), max_size=2, unique=True),
    st.data(),
    JUNK,
)
def test_lock_requests_take_any_values(fields: list[str], data: st.DataObject, value: Any) -> None:
    for target, read in (("LockType(...)", LockType), ("LockGranularity(...)", LockGranularity)):
        COUNTS[target] += 1
        try:
            read(value)
        except SpecError:
            REFUSED[target] += 1
    args = dict(_VALID_LOCK)
    for name in fields:  # a valid request with up to two fields of a wrong value
        args[name] = data.draw(st.one_of(_NEAR_LOCK_VALUES, JUNK), label=name)
    COUNTS["LockRequest"] += 1
    try:
        request = LockRequest(**args)
    except SpecError:
        REFUSED["LockRequest"] += 1
        return
    assert isinstance(request.lock_type, LockType)
    assert isinstance(request.granularity, LockGranularity)
    assert type(request.priority) is int
    assert request.partition_num is None or type(request.partition_num) is int


def _mutations(
    target: str,
    seeds: list[Any],
    read: Callable[[Any], Any],
    count: int,
    ignored: frozenset[str] = frozenset(),
) -> Any:
    @settings(FUZZ, max_examples=examples(count))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        seed = data.draw(st.sampled_from(seeds))
        doc, change = data.draw(mutated(seed))
        check(target, read, doc, change, set(ignored))

    return run


test_partitions_specs_under_mutation = _mutations(
    "partitions_spec_from_dict", PARTITIONS, partitions_spec_from_dict, 800
)
test_compaction_configs_under_mutation = _mutations(
    "CompactionConfig.from_json", [COMPACTION], CompactionConfig.from_json, 600
)
test_druid_compaction_configs_under_mutation = _mutations(
    "compaction_config_from_druid",
    DRUID_COMPACTION,
    compaction_config_from_druid,
    600,
    frozenset(IGNORED | DRUID_IGNORED),
)
test_rules_under_mutation = _mutations("rule_from_json", RULES, rule_from_json, 800)
test_rule_chains_under_mutation = _mutations("rules_from_json", [RULES], rules_from_json, 250)
test_coordinator_configs_under_mutation = _mutations(
    "CoordinatorConfig.from_json", [COORDINATOR], CoordinatorConfig.from_json, 500
)
test_volumes_under_mutation = _mutations("Volume.from_json", [VOLUME], Volume.from_json, 500)
test_segment_descriptors_under_mutation = _mutations(
    "DataSegment.from_json", SEGMENTS, DataSegment.from_json, 800
)


def test_the_seeds_are_valid() -> None:
    """Mutations start from valid documents (or a tutorial task refused on purpose)."""
    for form in API_FORMS.values():
        assert isinstance(IngestionSpec.from_dict(form), IngestionSpec)
    for seed in PARTITIONS:
        partitions_spec_from_dict(seed)
    CompactionConfig.from_json(COMPACTION)
    for config in DRUID_COMPACTION:
        compaction_config_from_druid(config)
    assert rules_from_json(RULES)
    CoordinatorConfig.from_json(COORDINATOR)
    Volume.from_json(VOLUME)
    for seed in SEGMENTS:
        assert DataSegment.from_json(seed).to_json()["identifier"] == seed["identifier"]


@pytest.mark.parametrize(
    ("read", "doc", "field"),
    [
        (
            IngestionSpec.from_dict,
            {"granularitySpec": {"rollup": "false"}},
            "granularitySpec.rollup",
        ),
        (
            IngestionSpec.from_dict,
            {"dimensionsSpec": {"dimensions": "abc"}},
            "dimensionsSpec.dimensions",
        ),
        (
            IngestionSpec.from_dict,
            {"tuningConfig": {"maxParseExceptions": "abc"}},
            "tuningConfig.maxParseExceptions",
        ),
        (
            IngestionSpec.from_dict,
            {
                "metricsSpec": [
                    {"type": "HLLSketchBuild", "name": "u", "fieldName": "u", "lgK": "12"}
                ]
            },
            "metricsSpec[0].lgK",
        ),
        (IngestionSpec.from_dict, {"timestampSpec": {"formt": "iso"}}, "timestampSpec.formt"),
        (partitions_spec_from_dict, {"maxRowsPerSegment": "5"}, "maxRowsPerSegment"),
        (
            partitions_spec_from_dict,
            {"type": "hashed", "partitionDimensions": ""},
            "partitionDimensions",
        ),
        (
            rule_from_json,
            {"type": "loadForever", "useDefaultTierForNull": "false"},
            "useDefaultTierForNull",
        ),
        (
            CoordinatorConfig.from_json,
            {"killUnusedAfterSeconds": math.nan},
            "killUnusedAfterSeconds",
        ),
        (CoordinatorConfig.from_json, {"seed": -1}, "seed"),
        (Volume.from_json, {**VOLUME, "name": "hot-1\n"}, "name"),
        (CompactionConfig.from_json, {"planner": {"type": "ratio", "ratio": math.nan}}, "ratio"),
        (CompactionConfig.from_json, {"maxRowsPerSegmnt": 5}, "maxRowsPerSegmnt"),
    ],
)
def test_the_reported_bugs_are_refused_naming_the_field(read: Any, doc: Any, field: str) -> None:
    with pytest.raises(SpecError, match=re.escape(field)):
        read(doc)


@pytest.mark.parametrize(
    "call",
    [
        lambda: LockType("bogus"),
        lambda: LockGranularity("bogus"),
        lambda: Granularity("bogus"),
        lambda: LockRequest("g", "t", "ds", _DAY, priority="high"),  # type: ignore[arg-type]
        lambda: LockRequest("g", "t", "ds", _DAY, priority=True),
        lambda: LockRequest("g", "t", "ds", _DAY, lock_type="EXCLUSIVE"),  # type: ignore[arg-type]
    ],
)
def test_lock_values_of_the_wrong_type_are_spec_errors(call: Callable[[], Any]) -> None:
    with pytest.raises(SpecError):
        call()
