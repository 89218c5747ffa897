"""Druid's automatic compaction config read into the manager's config without Spark: the
tutorial's config as written, Druid's defaults (dynamic partitioning, ``skipOffsetFromLatest``
P1D), every key it reads, the round trip through segmentlake's own JSON, and what is refused."""

from __future__ import annotations

import pytest

from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Period, parse_timestamp, to_millis
from segmentlake.core.partitions_spec import DimensionRangePartitionsSpec, DynamicPartitionsSpec
from segmentlake.druid.auto_compaction import (
    compaction_config_from_druid,
    is_druid_compaction_config,
)
from segmentlake.errors import SpecError

TUTORIAL = {"dataSource": "wikipedia_hour", "granularitySpec": {"segmentGranularity": "DAY"}}


def test_the_tutorials_config_with_druids_defaults() -> None:
    config = compaction_config_from_druid(TUTORIAL, datasource="wikipedia_hour")
    assert config.segment_granularity is Granularity.DAY
    assert config.partitions_spec == DynamicPartitionsSpec()  # majors cut to 5,000,000 rows
    assert config.skip_offset_from_latest == Period.parse("P1D")
    assert config.max_rows_per_segment == 5_000_000
    assert CompactionConfig.from_json(config.to_json()) == config
    assert is_druid_compaction_config(TUTORIAL)
    assert not is_druid_compaction_config(config.to_json())


def test_every_key_druid_reads() -> None:
    config = compaction_config_from_druid(
        {
            "dataSource": "wiki",
            "taskPriority": 25,
            "inputSegmentSizeBytes": 100_000_000_000_000,
            "skipOffsetFromLatest": "PT6H",
            "granularitySpec": {"segmentGranularity": "MONTH"},
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": {
                    "type": "range",
                    "partitionDimensions": ["page"],
                    "targetRowsPerSegment": 1000,
                },
                "maxNumConcurrentSubTasks": 4,
            },
            "ioConfig": {"dropExisting": True},
            "taskContext": {"priority": 30},
            "engine": "native",
        }
    )
    assert isinstance(config.partitions_spec, DimensionRangePartitionsSpec)
    assert config.segment_granularity is Granularity.MONTH
    assert config.skip_offset_from_latest == Period.parse("PT6H")


def test_dynamic_partitioning_without_a_granularity_sizes_the_minor_compactions() -> None:
    config = compaction_config_from_druid(
        {
            "dataSource": "w",
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 1000}},
        }
    )
    assert (config.partitions_spec, config.segment_granularity) == (None, None)
    assert not config.major_target
    assert config.max_rows_per_segment == 1000
    old = compaction_config_from_druid({"dataSource": "w", "maxRowsPerSegment": 2000})
    assert old.max_rows_per_segment == 2000


def test_skip_offset_cutoff() -> None:
    day = Period.parse("P1D")
    latest = to_millis(parse_timestamp("2024-03-03"))
    config = CompactionConfig(skip_offset_from_latest=day)
    assert config.skip_cutoff(latest) == to_millis(parse_timestamp("2024-03-02"))
    assert CompactionConfig().skip_cutoff(latest) is None
    none = compaction_config_from_druid({"dataSource": "w", "skipOffsetFromLatest": "P0D"})
    assert none.skip_offset_from_latest is None
    month = CompactionConfig(skip_offset_from_latest=Period.parse("P1M"))
    assert month.skip_cutoff(to_millis(parse_timestamp("2024-03-31"))) == to_millis(
        parse_timestamp("2024-02-29")
    )


def test_refusals_are_listed_together_with_their_paths() -> None:
    with pytest.raises(SpecError) as caught:
        compaction_config_from_druid(
            {
                "dataSource": "other",
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": True},
                "dimensionsSpec": {"dimensions": ["page"]},
                "transformSpec": {"filter": {"type": "selector", "dimension": "a", "value": "b"}},
                "skipOffsetFromLatest": "one day",
                "tuningConfig": {"partitionsSpec": {"type": "hashed", "numShards": 0}},
                "maxSegmentsPerTask": 3,
            },
            datasource="wiki",
        )
    message = str(caught.value)
    for expected in (
        "(7 problems)",
        "maxSegmentsPerTask: not supported; accepted here:",
        "dataSource: \"other\" is not the datasource being configured, 'wiki'",
        "granularitySpec.rollup: not supported by the compaction manager",
        "dimensionsSpec: a custom dimensionsSpec is not supported",
        "transformSpec: a custom transformSpec is not supported",
        "skipOffsetFromLatest: cannot parse period 'one day'",
        "tuningConfig.partitionsSpec:",
    ):
        assert expected in message, message


def test_a_dynamic_target_needs_a_granularity_in_segmentlakes_own_config() -> None:
    with pytest.raises(SpecError, match="next to a segmentGranularity"):
        CompactionConfig(partitions_spec=DynamicPartitionsSpec())
    assert CompactionConfig(segment_granularity="DAY", partitions_spec=DynamicPartitionsSpec())
