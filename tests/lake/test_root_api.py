"""The root API: at most 25 exported names plus ``__version__``, every DESIGN §3 name importable
from ``segmentlake``, the names exported before still importable (unlisted), ``segmentlake.read``
the function whatever is imported after it, and the task-action API on ``lake.actions`` with
the old ``Lake`` methods warning while DESIGN §3 methods do not. No Spark needed."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import segmentlake
from segmentlake.actions import TaskActions
from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.errors import SpecError
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest

# DESIGN §3: "importable from segmentlake" (the hash and range shard specs are ours to name).
DESIGN_NAMES = [
    "Interval",
    "DataSegment",
    "SegmentId",
    "NumberedShardSpec",
    "NumberedOverwriteShardSpec",
    "TombstoneShardSpec",
    "HashBasedNumberedShardSpec",
    "DimensionRangeShardSpec",
    "SingleDimensionShardSpec",
    "VersionedIntervalTimeline",
    "spark_session",
    "Lake",
]
# What the root exported before the table handle (0.1): still importable from the root.
EXPORTED_BEFORE = [
    "ETERNITY",
    "BadRowsError",
    "BroadcastRule",
    "ChunkView",
    "CommitConflict",
    "CommitStateUnknown",
    "CompactionConfig",
    "CompactionJob",
    "CompactionKind",
    "CompactionPlanner",
    "CompactionSelector",
    "CoordinatorConfig",
    "DataSegment",
    "DimensionRangePartitionsSpec",
    "DimensionRangeShardSpec",
    "DimensionsSpec",
    "DropRule",
    "DynamicPartitionsSpec",
    "EnvironmentSetupError",
    "ExpressionTransform",
    "FingerprintSelector",
    "Granularity",
    "GranularitySpec",
    "HashBasedNumberedShardSpec",
    "HashedPartitionsSpec",
    "IngestionSpec",
    "Interval",
    "Lake",
    "LoadRule",
    "LockGranularity",
    "LockRefused",
    "LockType",
    "MaskedRowsSelector",
    "MetadataVersionError",
    "MetricSpec",
    "NumberedOverwriteShardSpec",
    "NumberedShardSpec",
    "Period",
    "PlannedJob",
    "RatioPlanner",
    "RowStats",
    "Rule",
    "SegmentId",
    "SegmentLakeError",
    "SegmentSchema",
    "Selection",
    "ShardSpec",
    "SingleDimensionPartitionsSpec",
    "SingleDimensionShardSpec",
    "SpecError",
    "TaskLock",
    "TaskReport",
    "TimelineObjectHolder",
    "TimestampSpec",
    "TombstoneShardSpec",
    "TransformSpec",
    "VersionedIntervalTimeline",
    "Volume",
    "spark_session",
]


def test_the_root_exports_at_most_25_names_and_the_version() -> None:
    assert len(segmentlake.__all__) <= 26
    assert len(set(segmentlake.__all__)) == len(segmentlake.__all__)
    assert "__version__" in segmentlake.__all__
    assert isinstance(segmentlake.__version__, str)
    assert segmentlake.__version__
    for name in segmentlake.__all__:
        assert getattr(segmentlake, name) is not None, name


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_every_design_name_imports_from_the_root(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from segmentlake import {name}", namespace)
    assert namespace[name] is not None


def test_names_exported_before_still_import_from_the_root() -> None:
    assert len(EXPORTED_BEFORE) == 59
    missing = [name for name in EXPORTED_BEFORE if not hasattr(segmentlake, name)]
    assert missing == []
    assert segmentlake.CompactionConfig.__module__ == "segmentlake.core.compaction_config"
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = segmentlake.NoSuchThing  # type: ignore[attr-defined]


def test_read_stays_the_function_after_the_reader_package_is_imported() -> None:
    # A fresh interpreter: the subpackage segmentlake.read (the reader) is first imported
    # after the root, the way Lake.read imports it; the root's `read` must survive that.
    code = (
        "import sys, segmentlake\n"
        "assert 'pyspark' not in sys.modules, 'import segmentlake must not load Spark'\n"
        "from segmentlake.read.reader import read_visible\n"
        "import segmentlake.read.tier_copies\n"
        "assert callable(segmentlake.read), segmentlake.read\n"
        "assert segmentlake.read.__module__ == 'segmentlake.table', segmentlake.read\n"
        "from segmentlake import read\n"
        "assert read is segmentlake.read\n"
    )
    root = Path(segmentlake.__file__).parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _segment(ds: str, interval: Interval, version: str) -> DataSegment:
    return DataSegment(ds, interval, version, NumberedShardSpec(0, 1), num_rows=1)


def test_task_actions_live_on_lake_actions_and_the_old_methods_warn(tmp_path: Path) -> None:
    lake = Lake(None, str(tmp_path / "wh"))
    day = Interval.parse("2024-01-01/P1D")
    assert isinstance(lake.actions, TaskActions)
    assert lake.actions is lake.actions
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        granted = lake.actions.try_lock("wiki", day, group_id="g1")
        assert granted.lock is not None
        assert [lk.lock_id for lk in lake.actions.locks("wiki")] == [granted.lock.lock_id]
        assert lake.actions.heartbeat("wiki", "g1")[0].lock_id == granted.lock.lock_id
        segment = _segment("wiki", day, granted.lock.version)
        lake.actions.publish("wiki", [segment], group_id="g1")
        # DESIGN §3 methods do not warn.
        assert [s.id for s in lake.used_segments("wiki")] == [segment.id]
        assert lake.timeline("wiki").lookup(day)[0].version == granted.lock.version
        assert lake.mark_unused([segment.id]) == 1
        assert lake.mark_used([segment.id]) == 1
    assert lake.actions.locks("wiki") == []  # publish released them

    old_calls = {
        "lock_request": lambda: lake.lock_request("wiki", day, group_id="g2"),
        "try_lock": lambda: lake.try_lock("wiki", day, group_id="g2"),
        "lock": lambda: lake.lock("wiki", day, group_id="g2", timeout_s=1),
        "heartbeat": lambda: lake.heartbeat("wiki", "g2"),
        "allocate": lambda: lake.allocate(
            "wiki", [AllocateRequest(day, "s")], group_id="g2", priority=0
        ),
        "release_locks": lambda: lake.release_locks("wiki", "g2"),
        "publish": lambda: lake.publish("wiki", [], group_id="g2"),
    }
    for name, call in old_calls.items():
        with pytest.warns(DeprecationWarning, match=rf"lake\.actions\.{name}") as caught:
            call()
        # The warning points at the caller's line, not at segmentlake's.
        assert caught[0].filename == __file__, name
    # The old methods are the new ones: same results.
    with pytest.warns(DeprecationWarning, match="lake.actions.try_lock"):
        old = lake.try_lock("wiki", "2024-01-02/P1D", group_id="g3", lock_type="SHARED")
    new = lake.actions.try_lock("wiki", "2024-01-02/P1D", group_id="g3", lock_type="SHARED")
    assert old.lock is not None
    assert new.lock is not None
    assert old.lock.lock_id == new.lock.lock_id
    with pytest.raises(SpecError):
        lake.actions.try_lock("bad/name", day, group_id="g4")
