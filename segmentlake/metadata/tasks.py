"""The task ledger: one metadata row per ingestion or compaction task, holding its report.

A successful task's row is written in its publish commit, so a report exists exactly when
the task's segments do; a failed task's row is written on its own afterwards, unless a run
with the same task id succeeded (:func:`record_task`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow.compute as pc

from segmentlake.core.interval import Interval
from segmentlake.metadata.records import TASK, Row, metadata_row, rows_scope
from segmentlake.metadata.store import Change, MetadataStore, PartitionState
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact

__all__ = ["published_report", "record_task", "succeeded_in", "task_reports", "task_row"]


def task_row(
    datasource: str,
    task_id: str,
    report: Mapping[str, Any],
    *,
    interval: Interval | None,
    now_ms: int,
) -> Row:
    """The ledger row of a task: its id, interval and JSON report (``type`` and ``status``
    are read from the report by the ``tasks`` view)."""
    return metadata_row(
        datasource,
        TASK,
        task_id,
        now_ms,
        group_id=task_id,
        task_id=task_id,
        start_ms=None if interval is None else interval.start_millis,
        end_ms=None if interval is None else interval.end_millis,
        num_rows=(report.get("rows") or {}).get("rows_out"),
        size_bytes=report.get("bytes"),
        payload=json.dumps(report, separators=(",", ":"), default=str),
    )


def record_task(store: MetadataStore, row: Row, *, policy: RetryPolicy) -> bool:
    """Write (or replace) one task row in its own commit, unless it would replace the record
    of a run that succeeded with that of one that did not; whether it was written.

    A task id names one run: once a run with it published, its record is what keeps a retry
    from ingesting the rows again (:func:`published_report`). Another run with the same id,
    racing it, passes the published checks before the first publishes and may then fail (its
    write did): that must not make the id look unpublished. The commit reads only this row,
    so it never retries over other tasks' commits on the datasource."""
    a_success = json.loads(row["payload"]).get("status") == "SUCCESS"

    def decide(state: PartitionState) -> Decision[bool]:
        if not a_success and succeeded_in(state, row["id"]) is not None:
            return Decision([], False)
        return Decision([Change("upsert", row)], True)

    return transact(
        store,
        row["datasource"],
        decide,
        operation="task",
        condition=(pc.field("kind") == TASK) & (pc.field("id") == row["id"]),
        scope=rows_scope([row]),
        policy=policy,
    )


def task_reports(store: MetadataStore, datasource: str) -> list[dict[str, Any]]:
    """Every recorded task report of ``datasource``, oldest first."""
    rows = store.rows(datasource, pc.field("kind") == TASK, columns=("payload", "updated_ms"))
    rows.sort(key=lambda r: r["updated_ms"])
    return [json.loads(r["payload"]) for r in rows]


def succeeded_in(state: PartitionState, task_id: str) -> dict[str, Any] | None:
    """The report of task ``task_id`` in ``state`` if that task succeeded (its segments are
    published), else None."""
    for row in state.of(TASK):
        if row["id"] == task_id:
            report = json.loads(row["payload"])
            return report if report.get("status") == "SUCCESS" else None
    return None


def published_report(store: MetadataStore, datasource: str, task_id: str) -> dict[str, Any] | None:
    """The report of task ``task_id`` if it succeeded (its segments are published), else
    None: what makes an ingestion with an explicit task id run at most once."""
    rows = store.rows(
        datasource, pc.field("id") == task_id, kinds=[TASK], columns=("id", "payload")
    )
    for row in rows:
        report = json.loads(row["payload"])
        return report if report.get("status") == "SUCCESS" else None
    return None
