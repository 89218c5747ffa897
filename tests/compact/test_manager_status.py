"""The compaction managers' status rows: each manager's commit reads its own row and the
expired rows it deletes, so managers reporting at once do not undo each other's commits, and a
manager never deletes the row it refreshes. Metadata only (delta-rs), no Spark."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

from segmentlake.compact.control import (
    ManagerSnapshot,
    manager_snapshots,
    publish_manager_snapshot,
)
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import recording_commits
from tests.multiprocess_support import (
    OpTimes,
    assert_overlapped,
    go,
    read_all_times,
    signal_ready,
    wait_for_go,
)

REPORTS = 20  # per worker


def snapshot(manager: str, at: int, *, lease_ms: int = 120_000, queued: int = 0) -> ManagerSnapshot:
    return ManagerSnapshot(manager, {"minor": queued}, (), {}, at, at + lease_ms)


class _Interleaved(MetadataStore):
    """A store whose first transaction read is followed at once by another manager's report:
    the race two managers run when both report in the same instant, made deterministic."""

    def __init__(self, warehouse: str, other: MetadataStore, report: ManagerSnapshot) -> None:
        super().__init__(warehouse)
        self._other, self._report = other, report

    def read(self, *args: Any, **kwargs: Any) -> PartitionState:
        state = super().read(*args, **kwargs)
        if self._report is not None:
            report, self._report = self._report, None  # type: ignore[assignment]
            publish_manager_snapshot(self._other, report)
        return state


def test_a_report_committed_meanwhile_by_another_manager_is_no_conflict(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    MetadataStore(warehouse).create()
    other = MetadataStore(warehouse)
    at = now_ms()
    store = _Interleaved(warehouse, other, snapshot("b", at))
    with recording_commits() as log:
        publish_manager_snapshot(store, snapshot("a", at))
    assert log.commits == {"manager_status": 2}  # b's report, then a's
    assert log.retries == {}  # before: every manager's status conflicted with every other's
    assert sorted(s.manager_id for s in manager_snapshots(MetadataStore(warehouse))) == ["a", "b"]


def test_expired_rows_of_other_managers_go_and_a_late_own_report_refreshes_its_row(
    tmp_path: Path,
) -> None:
    store = MetadataStore(str(tmp_path))
    at = now_ms()
    publish_manager_snapshot(store, snapshot("gone", at - 10_000, lease_ms=1_000))
    publish_manager_snapshot(store, snapshot("slow", at - 5_000, lease_ms=1_000))
    # "slow" reports again after its own row expired (a pass longer than its lease): its row
    # is refreshed, not deleted; "gone" expired and is deleted.
    publish_manager_snapshot(store, snapshot("slow", at, queued=3))
    (row,) = manager_snapshots(store)
    assert (row.manager_id, row.queued, row.reported_ms) == ("slow", {"minor": 3}, at)


def test_the_scope_of_a_report_is_its_own_row_and_the_expired_rows(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path))
    at = now_ms()
    publish_manager_snapshot(store, snapshot("live", at))
    publish_manager_snapshot(store, snapshot("gone", at - 10_000, lease_ms=1_000))
    seen: list[Scope] = []
    original = store.read

    def read(*args: Any, **kwargs: Any) -> PartitionState:
        state = original(*args, **kwargs)
        seen.append(state.scope)
        return state

    store.read = read  # type: ignore[method-assign]
    publish_manager_snapshot(store, snapshot("mine", at))
    assert not seen[0].everything
    assert {k.split(":", 1)[1] for k in seen[0].keys} == {"mine", "gone"}
    assert sorted(s.manager_id for s in manager_snapshots(store)) == ["live", "mine"]


def _report(warehouse: str, directory: str, worker: str) -> None:
    """A manager process: reports its status REPORTS times once released; records each report's
    time and the commits and retries its reports took."""
    store = MetadataStore(warehouse)
    store.create()
    times = OpTimes(Path(directory), worker)
    signal_ready(Path(directory), worker)
    wait_for_go(Path(directory))
    with recording_commits() as log:
        for i in range(REPORTS):
            with times.op("report"):
                publish_manager_snapshot(store, snapshot(worker, now_ms(), queued=i))
    write_log = Path(directory) / f"log-{worker}.json"
    write_log.write_text(json.dumps({"commits": log.commits, "retries": log.retries}))


def test_managers_in_separate_processes_report_at_once_without_retrying(tmp_path: Path) -> None:
    warehouse, directory = str(tmp_path / "warehouse"), tmp_path / "race"
    directory.mkdir()
    MetadataStore(warehouse).create()
    workers = ["m0", "m1", "m2"]
    context = multiprocessing.get_context("spawn")  # delta-rs's runtime does not survive fork
    procs = [context.Process(target=_report, args=(warehouse, str(directory), w)) for w in workers]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 120
    while not all((directory / f"ready-{w}").exists() for w in workers):
        assert time.monotonic() < deadline, "the workers did not start"
        assert all(p.exitcode in (None, 0) for p in procs), "a worker died"
        time.sleep(0.05)
    go(directory)
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert_overlapped(read_all_times(directory, workers), together=True)
    logs = {w: json.loads((directory / f"log-{w}.json").read_text()) for w in workers}
    # Before, 3 managers reporting 50 times each back to back retried 64-80 of 150 reports.
    assert all(
        log == {"commits": {"manager_status": REPORTS}, "retries": {}} for log in logs.values()
    ), logs
    found = {s.manager_id: s.queued for s in manager_snapshots(MetadataStore(warehouse))}
    assert found == {w: {"minor": REPORTS - 1} for w in workers}
