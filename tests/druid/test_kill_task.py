"""Druid's ``kill`` task JSON read without Spark: the deletion tutorial's file as written, the
optional keys Druid has, the round trip, and refused keys reported at once with their paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segmentlake.core.interval import Interval, parse_timestamp, to_millis
from segmentlake.druid.kill_task import DruidKillTask, read_kill_task
from segmentlake.druid.tasks import read_druid_task
from segmentlake.errors import SpecError

SPECS = Path(__file__).parents[1] / "data" / "druid_tutorial" / "specs"


def test_druid_deletion_tutorial_kill_task() -> None:
    task = read_druid_task(json.loads((SPECS / "deletion-kill.json").read_text()))
    assert task == DruidKillTask(
        datasource="deletion-tutorial", interval=Interval.parse("2015-09-12/2015-09-13")
    )
    assert isinstance(task, DruidKillTask)
    assert task.older_than_ms(now_ms=10**12) == 0  # every unused segment, as in Druid


def test_optional_keys_and_round_trip() -> None:
    task = read_kill_task(
        {
            "type": "kill",
            "id": "kill_wiki_1",
            "dataSource": "wiki",
            "interval": "2024-01-01/P1M",
            "markAsUnused": True,
            "maxUsedStatusLastUpdatedTime": "2024-06-01T00:00:00Z",
            "batchSize": 100,
            "context": {"priority": 25},
        }
    )
    cutoff = to_millis(parse_timestamp("2024-06-01"))
    assert task.max_used_status_last_updated_ms == cutoff
    assert task.mark_as_unused is True
    assert task.task_id == "kill_wiki_1"
    # Segments marked unused at or before the cutoff: at least (now - cutoff) ago.
    assert task.older_than_ms(now_ms=cutoff + 5_000) == 5_000
    assert task.older_than_ms(now_ms=cutoff - 5_000) == 0
    assert read_kill_task(task.to_dict()) == task


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SpecError) as caught:
        read_kill_task(
            {
                "type": "kill",
                "dataSource": 3,
                "interval": "2015-09-13/2015-09-12",
                "versions": ["2024-01-01T00:00:00.000Z"],
                "limit": 10,
                "markAsUnused": "yes",
                "maxUsedStatusLastUpdatedTime": "last tuesday",
                "killEverything": True,
            }
        )
    message = str(caught.value)
    for expected in (
        "this Druid kill task cannot run on segmentlake (7 problems)",
        "killEverything: not supported; accepted here:",
        "versions: not supported: segmentlake kills every unused segment",
        "limit: not supported",
        "interval: ",
        "dataSource: must be a non-empty string",
        "markAsUnused: must be true or false",
        "maxUsedStatusLastUpdatedTime: cannot parse timestamp 'last tuesday'",
    ):
        assert expected in message, message


def test_an_interval_is_required() -> None:
    with pytest.raises(SpecError, match="interval: must be a non-empty string; it is missing"):
        read_druid_task({"type": "kill", "dataSource": "wiki"})
