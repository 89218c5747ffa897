"""Druid's ``compact`` task JSON read without Spark: Druid's own tutorial files as written, the
current ``ioConfig.inputSpec`` form and the deprecated top-level keys, Druid's defaults
(dynamic partitioning, the segments' granularities), the round trip, and every refused key or
bad value reported at once with its JSON path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.partitions_spec import DynamicPartitionsSpec, HashedPartitionsSpec
from segmentlake.druid.compact_task import DruidCompactTask, read_compact_task
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid.tasks import read_druid_task, task_json
from segmentlake.errors import SpecError

SPECS = Path(__file__).parents[1] / "data" / "druid_tutorial" / "specs"
DAY = Interval.parse("2015-09-12/2015-09-13")


def tutorial(name: str) -> Any:
    return json.loads((SPECS / name).read_text())


def test_druid_tutorial_keep_granularity_task_reads_with_druid_defaults() -> None:
    task = read_druid_task(tutorial("compaction-keep-granularity.json"))
    assert task == DruidCompactTask(datasource="compaction-tutorial", interval=DAY)
    assert isinstance(task, DruidCompactTask)
    # Druid's defaults: dynamic partitioning, granularities and rollup of the segments.
    assert task.partitions_spec == DynamicPartitionsSpec()
    assert (task.segment_granularity, task.query_granularity, task.rollup) == (None, None, None)


def test_druid_tutorial_day_granularity_task() -> None:
    task = DruidCompactTask.from_json((SPECS / "compaction-day-granularity.json").read_text())
    assert task.segment_granularity is Granularity.DAY
    assert task.query_granularity is Granularity.NONE
    assert task.interval == DAY


def test_current_form_with_context_partitioning_and_rollup() -> None:
    task = read_compact_task(
        {
            "type": "compact",
            "id": "compact_wiki_1",
            "dataSource": "wiki",
            "ioConfig": {
                "type": "compact",
                "inputSpec": {"type": "interval", "interval": "2024-01-01/2024-02-01"},
                "dropExisting": True,
            },
            "granularitySpec": {"segmentGranularity": "month", "rollup": True},
            "tuningConfig": {
                "type": "index_parallel",
                "forceGuaranteedRollup": True,
                "partitionsSpec": {"type": "hashed", "numShards": 3},
                "maxNumConcurrentSubTasks": 4,
            },
            "context": {"priority": 25, "lockTimeoutMillis": 5000},
            "compactionRunner": {"type": "native"},
        }
    )
    assert task.task_id == "compact_wiki_1"
    assert task.interval == Interval.parse("2024-01-01/2024-02-01")
    assert task.segment_granularity is Granularity.MONTH
    assert task.rollup is True
    assert isinstance(task.partitions_spec, HashedPartitionsSpec)
    assert task.partitions_spec.num_shards == 3
    assert (task.priority, task.lock_timeout_ms) == (25, 5000)
    assert read_compact_task(task.to_dict()) == task


def test_deprecated_forms_build_druids_partitioning() -> None:
    """Druid 0.13-era tasks: a top-level segmentGranularity and maxRowsPerSegment in the
    tuningConfig of an ``index`` task."""
    task = read_compact_task(
        {
            "type": "compact",
            "dataSource": "dl",
            "interval": "2016-01-01/2019-07-01",
            "segmentGranularity": "YEAR",
            "tuningConfig": {
                "type": "index",
                "maxRowsPerSegment": 2_000_000,
                "forceExtendableShardSpecs": True,
            },
        }
    )
    assert task.segment_granularity is Granularity.YEAR
    assert task.partitions_spec == DynamicPartitionsSpec(max_rows_per_segment=2_000_000)


def test_every_problem_is_reported_at_once_with_its_path() -> None:
    with pytest.raises(SpecError) as caught:
        read_compact_task(
            {
                "type": "compact",
                "dataSource": "",
                "ioConfig": {
                    "type": "compact",
                    "inputSpec": {"type": "segments", "segments": ["wiki_2015..."]},
                    "allowNonAlignedInterval": True,
                },
                "metricsSpec": [{"type": "count", "name": "n"}],
                "granularitySpec": {"segmentGranularity": "fortnight"},
                "tuningConfig": {"partitionsSpec": {"type": "hashd"}},
                "keepSegmentGranularity": True,
            }
        )
    message = str(caught.value)
    for expected in (
        "(7 problems)",
        "keepSegmentGranularity: not supported; accepted here:",
        "metricsSpec: a custom metricsSpec is not supported",
        "dataSource: must be a non-empty string",
        "ioConfig.allowNonAlignedInterval: true is not supported",
        "ioConfig.inputSpec.type: 'segments' is not supported: give the segments' umbrella",
        "granularitySpec.segmentGranularity: unknown granularity 'fortnight'",
        "tuningConfig.partitionsSpec: partitionsSpec type 'hashd' is not supported",
    ):
        assert expected in message, message


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ({"type": "compact", "dataSource": "w"}, "ioConfig.inputSpec: is required"),
        (
            {
                "type": "compact",
                "dataSource": "w",
                "interval": "2015-09-12/2015-09-13",
                "ioConfig": {"inputSpec": {"type": "interval", "interval": "2015-09-12/P1D"}},
            },
            "interval: given twice",
        ),
        (
            {"type": "compact", "dataSource": "w", "interval": "2015-09-13/2015-09-12"},
            "interval",
        ),
        (
            {
                "type": "compact",
                "dataSource": "w",
                "interval": "2015-09-12/P1D",
                "segmentGranularity": "HOUR",
                "granularitySpec": {"segmentGranularity": "DAY"},
            },
            'segmentGranularity: "HOUR" contradicts granularitySpec.segmentGranularity',
        ),
        (
            {
                "type": "compact",
                "dataSource": "w",
                "interval": "2015-09-12/P1D",
                "tuningConfig": {"type": "index_parallel", "forceGuaranteedRollup": "yes"},
            },
            "tuningConfig.forceGuaranteedRollup: must be true or false",
        ),
        (
            {"type": "compact", "dataSource": "w", "interval": "2015-09-12/P1D", "id": "a b"},
            "letters, digits",
        ),
        (
            {
                "type": "compact",
                "dataSource": "w",
                "interval": "2015-09-12/P1D",
                "transformSpec": {"filter": {"type": "selector", "dimension": "a", "value": "b"}},
            },
            "transformSpec: a custom transformSpec is not supported",
        ),
    ],
)
def test_bad_tasks_are_refused_with_what_would_be_right(task: dict, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        read_druid_task(task)
    assert expected in str(caught.value), str(caught.value)


def test_ingestion_tasks_still_read_as_ingestion_tasks() -> None:
    task = read_druid_task(tutorial("compaction-init-index.json"))
    assert isinstance(task, DruidIngestTask)
    assert task.datasource == "compaction-tutorial"


def test_an_ingestion_task_reader_points_a_compact_task_to_its_reader() -> None:
    with pytest.raises(SpecError, match=r"'compact' is a compaction task.*read_druid_task"):
        DruidIngestTask.from_dict(tutorial("compaction-day-granularity.json"))


def test_task_json_says_where_the_text_is_not_json() -> None:
    with pytest.raises(SpecError, match=r"not valid JSON: .* line 1, column 2"):
        task_json("{oops")
    with pytest.raises(SpecError, match="must be text"):
        task_json(3)  # type: ignore[arg-type]
