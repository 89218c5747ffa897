"""SegmentId (Druid's string form) and DataSegment (Druid's segment descriptor)."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import MetricSpec
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    TombstoneShardSpec,
)
from segmentlake.errors import SpecError

DAY = Interval.parse("2024-01-01/2024-01-02")
DAY_TEXT = "2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z"
V1 = "2024-06-01T12:34:56.789Z"
V2 = "2024-06-02T00:00:00.000Z"


def seg(
    version: str = V1,
    shard_spec=None,
    *,
    interval: str | Interval = DAY,
    datasource: str = "wiki",
    **more,
) -> DataSegment:
    if isinstance(interval, str):
        interval = Interval.parse(interval)
    return DataSegment(
        datasource,
        interval,
        version,
        shard_spec if shard_spec is not None else NumberedShardSpec(0, 1),
        **more,
    )


# --------------------------------------------------------------------------- SegmentId


def test_segment_id_string_omits_partition_zero():
    assert str(SegmentId("wiki", DAY, "v1")) == f"wiki_{DAY_TEXT}_v1"
    assert str(SegmentId("wiki", DAY, "v1", 0)) == f"wiki_{DAY_TEXT}_v1"
    assert str(SegmentId("wiki", DAY, "v1", 3)) == f"wiki_{DAY_TEXT}_v1_3"
    assert str(SegmentId("wiki", DAY, V1, 32768)) == f"wiki_{DAY_TEXT}_{V1}_32768"


def test_segment_id_is_frozen_value():
    a, b = (
        SegmentId("wiki", DAY, "v1", 2),
        SegmentId("wiki", Interval.parse("2024-01-01/P1D"), "v1", 2),
    )
    assert a == b
    assert hash(a) == hash(b)
    assert a != SegmentId("wiki", DAY, "v1", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.version = "v2"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(a)) == a


@pytest.mark.parametrize(
    "args",
    [
        ("", DAY, "v1", 0),
        ("wiki", DAY, "", 0),
        ("wiki", DAY, "v1", -1),
        (None, DAY, "v1", 0),
        ("wiki", DAY, "v1", 1.5),
    ],
)
def test_segment_id_validation(args):
    with pytest.raises(SpecError):
        SegmentId(*args)


@pytest.mark.parametrize(
    ("datasource", "interval", "version", "partition"),
    [
        ("wiki", DAY, "v1", 0),
        ("wiki", DAY, "v1", 7),
        ("wiki", DAY, V1, 0),
        ("wiki", DAY, V1, 65535),
        ("my_wiki", DAY, V1, 2),
        ("my_very_long_data_source", DAY, "v1", 0),
        ("events_20240101", DAY, V1, 1),
        ("daily_2024-01-01", DAY, V1, 1),
        ("wiki_2024", DAY, "v1", 0),
        ("wiki", DAY, "v_1", 2),
        ("wiki", Interval.parse("2024-01-01T01:02:03.456Z/PT1M"), V2, 4),
        ("wiki", Interval.parse("1969-12-31/1970-01-02"), V1, 0),
        ("wiki", Interval.parse("2024-01-01/2024-01-01"), V1, 1),
        ("w", Interval.parse("0001-01-01/9999-01-01"), "1", 1),
    ],
)
def test_segment_id_parse_round_trips(datasource, interval, version, partition):
    segment_id = SegmentId(datasource, interval, version, partition)
    text = str(segment_id)
    assert SegmentId.parse(text) == segment_id
    assert SegmentId.parse(text, datasource=datasource) == segment_id
    assert SegmentId.parse(text, datasource) == segment_id
    assert str(SegmentId.parse(text)) == text


def test_segment_id_parse_fields():
    parsed = SegmentId.parse(f"my_wiki_{DAY_TEXT}_{V1}_3")
    assert parsed.datasource == "my_wiki"
    assert parsed.interval == DAY
    assert parsed.version == V1
    assert parsed.partition_num == 3


def test_segment_id_parse_explicit_partition_zero():
    assert SegmentId.parse(f"wiki_{DAY_TEXT}_v1_0") == SegmentId("wiki", DAY, "v1", 0)


def test_segment_id_parse_hint_resolves_ambiguous_datasource():
    # The datasource itself ends in a Druid-form timestamp: only the hint can tell.
    tricky = "x_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z"
    segment_id = SegmentId(tricky, DAY, "v1", 1)
    assert SegmentId.parse(str(segment_id), datasource=tricky) == segment_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "wiki",
        "wiki_v1",
        f"wiki_{DAY_TEXT}",
        f"_{DAY_TEXT}_v1",
        "wiki_2024-01-01T00:00:00.000Z_v1_3",
        "wiki_notatime_2024-01-02T00:00:00.000Z_v1",
        "wiki_2024-01-02T00:00:00.000Z_2024-01-01T00:00:00.000Z_v1",
        "wiki_2024-13-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1",
    ],
)
def test_segment_id_parse_malformed(bad):
    with pytest.raises(SpecError, match="malformed segment id"):
        SegmentId.parse(bad)


def test_segment_id_parse_wrong_datasource_hint():
    with pytest.raises(SpecError, match="does not start with 'other_'"):
        SegmentId.parse(f"wiki_{DAY_TEXT}_v1", datasource="other")
    with pytest.raises(SpecError, match="does not start with 'wi_'"):
        SegmentId.parse(f"wiki_{DAY_TEXT}_v1", datasource="wi")
    with pytest.raises(SpecError, match="malformed segment id"):
        SegmentId.parse(f"my_wiki_{DAY_TEXT}_v1", datasource="my")


@pytest.mark.parametrize("bad", [None, 123, b"wiki"])
def test_segment_id_parse_non_string(bad):
    with pytest.raises(SpecError, match="must be a string"):
        SegmentId.parse(bad)  # type: ignore[arg-type]


_name = st.text(alphabet="abcxyz_-.0123456789", min_size=1, max_size=12).filter(
    lambda s: not s.startswith("_")
)
# Druid's string form is ambiguous for a version ending in "_<digits>" (is it the partition?),
# so generated versions have no "_"; versions that are ISO timestamps never do.
_version = st.text(alphabet="abcxyz-.:0123456789TZ", min_size=1, max_size=24)
_day = st.integers(min_value=-3650, max_value=36500)


def test_version_ending_in_underscore_digits_is_ambiguous_as_in_druid():
    parsed = SegmentId.parse(str(SegmentId("wiki", DAY, "v_1", 0)))
    assert (parsed.version, parsed.partition_num) == ("v", 1)


@given(_name, _day, st.integers(min_value=0, max_value=400), _version, st.integers(0, 65535))
def test_segment_id_parse_round_trip_property(datasource, day, days, version, partition):
    start = day * 86_400_000
    segment_id = SegmentId(
        datasource, Interval.of_millis(start, start + days * 86_400_000), version, partition
    )
    assert SegmentId.parse(str(segment_id), datasource=datasource) == segment_id
    # Names here hold no Druid-form timestamp, so the heuristic finds the datasource too.
    assert SegmentId.parse(str(segment_id)) == segment_id


# --------------------------------------------------------------------------- DataSegment basics


def test_data_segment_id_and_defaults():
    segment = DataSegment("wiki", DAY, V1)
    assert segment.id == SegmentId("wiki", DAY, V1, 0)
    assert segment.shard_spec == NumberedShardSpec(0, 0)
    assert segment.shard_spec.partition_num == 0
    assert dict(segment.load_spec) == {}
    assert (segment.dimensions, segment.metrics) == ((), ())
    assert (segment.size, segment.num_rows, segment.binary_version) == (0, 0, 9)
    assert segment.last_compaction_state is None
    assert not segment.is_tombstone
    assert repr(segment) == f"DataSegment(wiki_{DAY_TEXT}_{V1})"


def test_data_segment_partition_from_shard_spec():
    segment = seg(shard_spec=NumberedShardSpec(4, 5))
    assert segment.id.partition_num == 4
    assert str(segment.id) == f"wiki_{DAY_TEXT}_{V1}_4"
    assert seg(shard_spec=TombstoneShardSpec()).is_tombstone


def test_equality_and_hash_by_id():
    a = seg(load_spec={"path": "a"}, size=10, num_rows=5, dimensions=("x",))
    b = seg(load_spec={"path": "b"}, size=99, num_rows=1, metrics=("m",))
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != seg(V2)
    assert a != seg(shard_spec=NumberedShardSpec(1, 1))
    assert a != seg(interval="2024-01-01/P2D")
    assert a != seg(datasource="other")
    assert a != a.id  # a segment is not its id


def test_frozen():
    segment = seg(load_spec={"path": "a"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        segment.version = "v2"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        segment.load_spec = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        segment.load_spec["path"] = "b"  # type: ignore[index]
    state = seg(last_compaction_state={"a": 1}).last_compaction_state
    with pytest.raises(TypeError):
        state["a"] = 2  # type: ignore[index]
    assert isinstance(segment.dimensions, tuple)


def test_load_spec_is_defensively_copied():
    load_spec = {"type": "delta", "path": "/w/wiki", "segment": "s1", "files": ["a.parquet"]}
    segment = seg(load_spec=load_spec)
    load_spec["path"] = "/elsewhere"
    load_spec["new"] = 1
    load_spec["files"].append("b.parquet")
    assert dict(segment.load_spec) == {
        "type": "delta",
        "path": "/w/wiki",
        "segment": "s1",
        "files": ["a.parquet"],
    }


def test_last_compaction_state_is_defensively_copied():
    state = {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5}, "fingerprint": "f1"}
    segment = seg(last_compaction_state=state)
    state["fingerprint"] = "f2"
    state["partitionsSpec"]["maxRowsPerSegment"] = 7
    assert segment.last_compaction_state == {
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5},
        "fingerprint": "f1",
    }


def test_to_json_output_is_a_copy():
    segment = seg(
        load_spec={"type": "delta", "files": ["a"]},
        last_compaction_state={"partitionsSpec": {"type": "dynamic"}},
    )
    data = segment.to_json()
    data["loadSpec"]["files"].append("b")
    data["lastCompactionState"]["partitionsSpec"]["type"] = "hashed"
    assert segment.load_spec["files"] == ["a"]
    assert segment.last_compaction_state["partitionsSpec"] == {"type": "dynamic"}


def test_dimensions_and_metrics_become_tuples():
    dims = ["country", "city"]
    segment = seg(dimensions=dims, metrics=["count"])
    dims.append("x")
    assert segment.dimensions == ("country", "city")
    assert segment.metrics == ("count",)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"datasource": ""},
        {"version": ""},
        {"interval": "2024-01-01/2024-01-02"},
        {"shard_spec": {"type": "numbered", "partitionNum": 0}},
        {"size": -1},
        {"num_rows": -1},
    ],
)
def test_data_segment_validation(kwargs):
    base = {"datasource": "wiki", "interval": DAY, "version": V1}
    with pytest.raises(SpecError):
        DataSegment(**{**base, **kwargs})


def test_replace_creates_a_new_segment():
    segment = seg(load_spec={"path": "p"}, last_compaction_state={"a": {"b": 1}})
    republished = dataclasses.replace(segment, version=V2)
    assert republished.version == V2
    assert republished.load_spec == segment.load_spec
    assert republished.last_compaction_state == segment.last_compaction_state
    assert republished != segment
    assert segment.version == V1


def test_the_hash_made_once_is_the_ids_whatever_made_the_segment():
    """The hash is kept after its first use: it must still follow the id, through
    ``replace``, pickling and the unchecked constructor the metadata uses."""
    segment = seg(load_spec={"type": "delta", "segment": "k"})
    first = hash(segment)
    assert hash(segment) == first
    republished = dataclasses.replace(segment, version=V2)
    assert hash(republished) == hash(seg(version=V2)) != first
    assert hash(pickle.loads(pickle.dumps(segment))) == first
    trusted = DataSegment.trusted(
        datasource="wiki", interval=DAY, version=V1, shard_spec=NumberedShardSpec(0, 1),
        load_spec={"type": "delta", "segment": "other"}, dimensions=(), metrics=(), size=0,
        num_rows=0, last_compaction_state=None, binary_version=9, schema=None,
    )  # fmt: skip
    assert hash(trusted) == first
    assert {segment: 1}[trusted] == 1


def test_pickle_and_deepcopy():
    segment = seg(
        shard_spec=NumberedOverwriteShardSpec(32768, 0, 2, 1, 1),
        load_spec={"type": "delta", "path": "/w"},
        dimensions=("d",),
        metrics=("m",),
        size=3,
        num_rows=2,
        last_compaction_state={"x": {"y": 1}},
    )
    for clone in (pickle.loads(pickle.dumps(segment)), copy.deepcopy(segment), copy.copy(segment)):
        assert clone == segment
        assert clone.to_json() == segment.to_json()
        with pytest.raises(TypeError):
            clone.load_spec["path"] = "x"  # type: ignore[index]


# --------------------------------------------------------------------------- JSON


def full_segment() -> DataSegment:
    return seg(
        shard_spec=NumberedShardSpec(2, 3),
        load_spec={"type": "delta", "path": "s3://bucket/wiki", "segment": "abc"},
        dimensions=("country", "city"),
        metrics=("count", "added"),
        size=12345,
        num_rows=678,
        last_compaction_state={"partitionsSpec": {"type": "dynamic"}, "fingerprint": "f"},
        binary_version=9,
        schema=SegmentSchema(
            (MetricSpec("count", "count"), MetricSpec("longSum", "added", "added")),
            Granularity.HOUR,
            rollup=True,
        ),
    )


def test_to_json_has_druid_descriptor_fields():
    assert full_segment().to_json() == {
        "dataSource": "wiki",
        "interval": "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z",
        "version": V1,
        "loadSpec": {"type": "delta", "path": "s3://bucket/wiki", "segment": "abc"},
        "dimensions": "country,city",
        "metrics": "count,added",
        "shardSpec": {"type": "numbered", "partitionNum": 2, "partitions": 3},
        "binaryVersion": 9,
        "size": 12345,
        "identifier": f"wiki_{DAY_TEXT}_{V1}_2",
        "numRows": 678,
        "lastCompactionState": {"partitionsSpec": {"type": "dynamic"}, "fingerprint": "f"},
        "schema": {
            "aggregators": [
                {"type": "count", "name": "count"},
                {"type": "longSum", "name": "added", "fieldName": "added"},
            ],
            "queryGranularity": "HOUR",
            "rollup": True,
        },
    }


def _same(a: DataSegment, b: DataSegment) -> None:
    assert a == b
    for f in dataclasses.fields(DataSegment):
        if f.compare:  # not the id cached on first use
            assert getattr(a, f.name) == getattr(b, f.name), f.name


@pytest.mark.parametrize(
    "segment",
    [
        full_segment(),
        seg(),
        seg(shard_spec=TombstoneShardSpec(), interval="2024-01-01/P1M"),
        seg(shard_spec=NumberedOverwriteShardSpec(32769, 0, 4, 2, 3), datasource="my_wiki"),
        seg(shard_spec=HashBasedNumberedShardSpec(1, 2, 1, 2, ("country",))),
        seg(shard_spec=DimensionRangeShardSpec(0, 2, ("a", "b"), None, ("x", None))),
    ],
    ids=repr,
)
def test_json_round_trip(segment):
    _same(DataSegment.from_json(segment.to_json()), segment)
    text = json.dumps(segment.to_json())
    _same(DataSegment.from_json(text), segment)
    assert json.loads(text)["identifier"] == str(segment.id)


def test_from_minimal_druid_descriptor():
    segment = DataSegment.from_json(
        {
            "dataSource": "wiki",
            "interval": "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z",
            "version": V1,
            "dimensions": "",
            "metrics": "",
        }
    )
    assert segment.id == SegmentId("wiki", DAY, V1)
    assert segment.dimensions == ()
    assert segment.shard_spec == NumberedShardSpec(0, 0)


def test_from_json_accepts_list_dimensions():
    data = full_segment().to_json()
    data["dimensions"] = ["country", "city"]
    data["metrics"] = ["count"]
    segment = DataSegment.from_json(data)
    assert segment.dimensions == ("country", "city")
    assert segment.metrics == ("count",)


@pytest.mark.parametrize("missing", ["dataSource", "interval", "version"])
def test_from_json_missing_field(missing):
    data = full_segment().to_json()
    del data[missing]
    with pytest.raises(SpecError, match=missing):
        DataSegment.from_json(data)


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", "null", [1, 2], 5])
def test_from_json_not_an_object(bad):
    with pytest.raises(SpecError, match="segment descriptor"):
        DataSegment.from_json(bad)  # type: ignore[arg-type]


def test_from_json_bad_shard_spec_or_interval():
    data = full_segment().to_json()
    with pytest.raises(SpecError, match="unknown shard spec type"):
        DataSegment.from_json({**data, "shardSpec": {"type": "linear"}})
    with pytest.raises(SpecError, match="cannot parse interval"):
        DataSegment.from_json({**data, "interval": "yesterday"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("size", "1234"),  # a string of the same meaning: refused, not read
        ("size", float("inf")),
        ("numRows", -1),
        ("binaryVersion", True),
        ("loadSpec", "s3://bucket/wiki"),
        ("lastCompactionState", ["dynamic"]),
        ("dimensions", 7),
        ("metrics", ["count", 3]),
        ("shardSpec", [{"type": "numbered", "partitionNum": 1}]),
        ("dataSource", [10**5000]),  # its repr alone would raise (Python's digit limit)
    ],
)
def test_from_json_refuses_a_field_of_the_wrong_type_naming_it(field, value):
    # Before: TypeError, ValueError or OverflowError from int(), dict() or tuple().
    data = full_segment().to_json()
    with pytest.raises(SpecError, match=field):
        DataSegment.from_json({**data, field: value})


@pytest.mark.parametrize(
    ("shard", "field"),
    [
        ({"type": "numbered", "partitionNum": "1", "partitions": 2}, "partitionNum"),
        ({"type": "hashed", "partitionNum": 0, "partitions": 1.0}, "partitions"),
        ({"type": "range", "partitionNum": 0, "dimensions": ["a"], "start": [5]}, "start"),
        ({"type": "single", "partitionNum": 0, "dimension": ["a"]}, "dimension"),
    ],
)
def test_a_shard_spec_field_of_the_wrong_type_is_named_as_in_json(shard, field):
    data = full_segment().to_json()
    with pytest.raises(SpecError, match=f"'{field}'"):
        DataSegment.from_json({**data, "shardSpec": shard})


def test_a_wrong_field_of_the_schema_is_named_with_its_place():
    data = full_segment().to_json()
    schema = data["schema"]
    with pytest.raises(SpecError, match=r"schema\.aggregators must be a list"):
        DataSegment.from_json({**data, "schema": {**schema, "aggregators": 3}})
    with pytest.raises(SpecError, match=r"schema\.aggregators\[0\]"):
        DataSegment.from_json({**data, "schema": {**schema, "aggregators": [{"type": "x"}]}})
    with pytest.raises(SpecError, match=r"schema\.queryGranularity"):
        DataSegment.from_json({**data, "schema": {**schema, "queryGranularity": {}}})


@pytest.mark.parametrize(
    ("field", "value"),
    [("size", "5"), ("num_rows", 1.5), ("load_spec", "x"), ("dimensions", "country")],
)
def test_the_constructor_refuses_wrong_types(field, value):
    with pytest.raises(SpecError, match=field):
        seg(**{field: value})


# --------------------------------------------------------------------------- overshadows


def test_higher_version_overshadows_same_interval():
    old, new = seg("v1"), seg("v2")
    assert new.overshadows(old)
    assert not old.overshadows(new)
    assert not old.overshadows(old)


def test_versions_compare_as_iso_timestamps():
    assert seg("2024-06-02T00:00:00.000Z").overshadows(seg("2024-06-01T23:59:59.999Z"))
    assert not seg("2024-06-01T23:59:59.999Z").overshadows(seg("2024-06-02T00:00:00.000Z"))


def test_higher_version_overshadows_contained_interval_across_granularities():
    month = seg("v2", interval="2024-01-01/2024-02-01")
    day = seg("v1", interval="2024-01-15/2024-01-16")
    assert month.overshadows(day)
    assert not day.overshadows(month)
    assert not seg("v1", interval="2024-01-01/2024-02-01").overshadows(
        seg("v2", interval="2024-01-15/P1D")
    )


def test_no_overshadowing_across_datasources_or_disjoint_intervals():
    assert not seg("v2", datasource="other").overshadows(seg("v1"))
    assert not seg("v2", interval="2024-01-02/2024-01-03").overshadows(seg("v1"))


def test_same_version_first_generation_segments_do_not_overshadow():
    a = seg(shard_spec=NumberedShardSpec(0, 2))
    b = seg(shard_spec=NumberedShardSpec(1, 2))
    assert not a.overshadows(b)
    assert not b.overshadows(a)


def test_same_chunk_minor_versions():
    first = [seg(shard_spec=NumberedShardSpec(p, 3)) for p in range(3)]
    compacted = seg(shard_spec=NumberedOverwriteShardSpec(32768, 0, 2, 1, 1))
    assert compacted.overshadows(first[0])
    assert compacted.overshadows(first[1])
    assert not compacted.overshadows(first[2])  # root 2 is outside [0, 2)
    assert not first[0].overshadows(compacted)
    again = seg(shard_spec=NumberedOverwriteShardSpec(32769, 0, 3, 2, 1))
    assert again.overshadows(compacted)
    assert all(again.overshadows(s) for s in first)
    assert not compacted.overshadows(again)


def test_minor_versions_only_matter_within_the_same_interval():
    compacted = seg(
        shard_spec=NumberedOverwriteShardSpec(32768, 0, 2, 1, 1), interval="2024-01-01/P2D"
    )
    assert not compacted.overshadows(seg(shard_spec=NumberedShardSpec(0, 1)))
