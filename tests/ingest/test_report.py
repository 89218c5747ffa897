"""The task report's JSON form, its Spark totals and its summary (no Spark needed)."""

from __future__ import annotations

import json

import pytest

from segmentlake.ingest.report import RowStats, TaskReport, human_bytes
from segmentlake.spark.job_metrics import JobMetrics

WRITE = JobMetrics(
    jobs=2,
    stages=3,
    tasks=6,
    executor_run_ms=4200,
    input_bytes=3 * 1024 * 1024,
    input_records=100,
    shuffle_read_bytes=2048,
    shuffle_write_bytes=2048,
    output_bytes=1536,
    output_records=40,
)
SPLIT = JobMetrics(jobs=1, stages=1, tasks=1, executor_run_ms=300, input_bytes=1536)


def report(**values: object) -> TaskReport:
    return TaskReport(
        task_id="append_wiki_1",
        type="append",
        datasource="wiki",
        status="SUCCESS",
        interval=None,
        rows=RowStats(rows_in=100, processed=100, rows_out=40),
        phases={"parse": 0.01, "write": 2.5, "split": 0.7, "publish": 0.2},
        **values,  # type: ignore[arg-type]
    )


MEASURED = report(
    phase_metrics={
        "parse": JobMetrics().to_json(),
        "write": WRITE.to_json(),
        "split": SPLIT.to_json(),
        "publish": JobMetrics().to_json(),
    }
)


def test_phase_metrics_survive_json() -> None:
    stored = json.loads(json.dumps(MEASURED.to_json()))

    assert TaskReport.from_json(stored) == MEASURED
    assert stored["phase_metrics"]["write"] == WRITE.to_json()


def test_reports_stored_before_phase_metrics_still_load() -> None:
    old = {k: v for k, v in MEASURED.to_json().items() if k != "phase_metrics"}

    loaded = TaskReport.from_json(old)

    assert loaded.phase_metrics == {}
    assert loaded.spark_metrics is None
    assert (loaded.task_seconds, loaded.bytes_processed, loaded.shuffle_bytes) == (None,) * 3
    assert "spark" not in loaded.summary()


def test_totals_add_up_the_phases() -> None:
    assert MEASURED.spark_metrics == WRITE + SPLIT
    assert MEASURED.task_seconds == pytest.approx(4.5)
    assert MEASURED.bytes_processed == 3 * 1024 * 1024 + 1536
    assert MEASURED.shuffle_bytes == 2048  # the map side only: each byte counted once


def test_summary_has_a_line_per_phase_that_ran_spark_jobs() -> None:
    lines = [line for line in MEASURED.summary().splitlines() if line.startswith("  spark")]

    assert lines == [
        "  spark write: 2.50s, 2 job(s), 4.2s task time, 3.0 MiB in, 2.0 KiB shuffled, 1.5 KiB out",
        "  spark split: 0.70s, 1 job(s), 0.3s task time, 1.5 KiB in, 0 B shuffled, 0 B out",
    ]


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1,023 B"), (1024, "1.0 KiB"), (5 * 1024**3 // 2, "2.5 GiB")],
)
def test_human_bytes(count: int, text: str) -> None:
    assert human_bytes(count) == text
