"""The timeline loaded lazily from Arrow records equals the one built from their segments
(no Spark: the records are made in memory, as the metadata table returns them)."""

from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from segmentlake.core.interval import ETERNITY, Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import (
    HashBasedNumberedShardSpec,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    TombstoneShardSpec,
)
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.metadata.records import (
    SEGMENT_COLUMNS,
    TABLE_SCHEMA,
    segment_records,
    segment_row,
    segment_table,
    segments_from_table,
)
from tests.core.test_timeline_properties import (
    SETTINGS,
    History,
    histories,
    queries,
    whole_domain,
)
from tests.metadata.support import segment


def records_table(segments: list, *, dictionary: bool = True) -> pa.Table:
    rows = [segment_row(s, used=True, now_ms=0) for s in segments]
    table = pa.Table.from_pylist(rows, schema=TABLE_SCHEMA).select(list(SEGMENT_COLUMNS))
    if dictionary:  # as the store returns it
        index = table.schema.get_field_index("shared")
        table = table.set_column(index, "shared", table.column("shared").dictionary_encode())
    return table


@SETTINGS
@given(histories(), queries, st.integers(0, 2**16))
def test_lazy_record_timeline_matches_segments(history: History, query: Interval, seed: int):
    used = list(history.used)
    random.Random(seed).shuffle(used)
    table = records_table(used, dictionary=seed % 2 == 0)
    eager = VersionedIntervalTimeline(segments_from_table("wiki", table))
    loaded = VersionedIntervalTimeline.from_records(segment_records("wiki", table))
    assert len(loaded) == len(eager)
    for q in (query, whole_domain(), ETERNITY):
        assert loaded.lookup(q) == eager.lookup(q)
    assert list(loaded) == list(eager)
    assert loaded.visibility_states() == eager.visibility_states()


def test_built_segments_keep_every_field():
    day = Interval.parse("2024-01-01/P1D")
    segments = [
        segment("wiki", day, "v1", 0, 2),
        segment("wiki", day, "v1", 1, 2),
        segment("wiki", day, "v2", shard_spec=HashBasedNumberedShardSpec(0, 1, 0, 1, ("page",))),
    ]
    table = records_table(segments)
    loaded = VersionedIntervalTimeline.from_records(segment_records("wiki", table))
    built = list(loaded)
    assert (
        built
        == segments_from_table("wiki", table)
        == sorted(segments, key=lambda s: (s.version, s.shard_spec.partition_num))
    )
    for got, want in zip(built, sorted(segments, key=lambda s: s.version), strict=True):
        assert got.load_spec == want.load_spec
        assert (got.num_rows, got.size, got.shard_spec) == (
            want.num_rows,
            want.size,
            want.shard_spec,
        )
    assert [h.version for h in loaded.lookup(day)] == ["v2"]
    assert isinstance(built[0].shard_spec, NumberedShardSpec)


def test_segment_table_holds_what_segment_row_makes():
    """A bulk publish writes its records column by column, sharing one ``shared`` text per
    kind of segment: every value must be what the row of each segment holds, whatever the
    shard spec, load spec, schema or compaction state."""
    day = Interval.parse("2024-01-01/P1D")
    plain = segment("wiki", day, "v1", 0, 2)
    kinds = [
        plain,
        segment("wiki", day, "v1", 1, 2),
        segment("wiki", day, "v2", shard_spec=HashBasedNumberedShardSpec(0, 1, 0, 1, ("page",))),
        segment("wiki", day, "v3", shard_spec=TombstoneShardSpec()),
        segment("wiki", day, "v1", shard_spec=NumberedOverwriteShardSpec(32768, 0, 2, 1, 1)),
    ]

    def variant(base: DataSegment, **changes: object) -> DataSegment:
        values = {
            "load_spec": base.load_spec,
            "dimensions": base.dimensions,
            "metrics": base.metrics,
            "schema": base.schema,
            "last_compaction_state": base.last_compaction_state,
        }
        values.update(changes)
        return DataSegment(
            base.datasource, base.interval, base.version, base.shard_spec, num_rows=7, size=9,
            **values,  # type: ignore[arg-type]
        )  # fmt: skip

    # Equal parts in distinct objects, and parts that differ in one field each.
    kinds += [
        variant(plain, load_spec={"type": "delta", "segment": "k", "path": "/wh/t"}),
        variant(plain, load_spec={"type": "delta", "segment": "k", "extra": 1}),
        variant(plain, dimensions=("a", "b"), metrics=("m",)),
        variant(plain, dimensions=("a", "c")),
        variant(plain, schema=SegmentSchema(rollup=False)),
        variant(plain, schema=SegmentSchema(rollup=True)),
        variant(plain, last_compaction_state={"partitionsSpec": {"type": "dynamic"}}),
        variant(plain, last_compaction_state={"partitionsSpec": {"type": "hashed"}}),
    ]
    states = {str(s.id): ("visible", "standby")[i % 2] for i, s in enumerate(kinds)}
    for used in (True, False):
        table = segment_table(kinds, used=used, now_ms=5, visibility=states)
        rows = [
            segment_row(s, used=used, now_ms=5, visibility=states.get(str(s.id))) for s in kinds
        ]
        expected = [{k: v for k, v in row.items() if k != "datasource"} for row in rows]
        assert table.to_pylist() == expected
    assert segment_table([], used=True, now_ms=5).num_rows == 0
