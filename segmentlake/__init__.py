"""segmentlake: Apache Druid's segment model on Delta Lake and Spark.

The root exports the facades (``Lake``, its per-datasource handle ``Datasource``, the one-call
``read`` and ``spark_session``), the contract's core types, the specs, the task report and the
errors. Everything else lives in its submodule (``segmentlake.core.*``, ``segmentlake.actions``,
...); names the root exported before 0.2 still import from here, unlisted.

The pure core (intervals, segments, shard specs, the visible timeline, lock rules) imports no
Spark; ``Lake`` and ``spark_session`` load Spark lazily, on first use.

>>> import segmentlake
>>> wiki = segmentlake.Lake(spark, "/data/warehouse").table("wiki")  # doctest: +SKIP
>>> segmentlake.read(spark, "/data/warehouse", "wiki", interval="2024-01-01/P1D")
... # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The subpackage ``segmentlake.read`` (the reader) shares its name with the function ``read``:
# importing a subpackage the first time sets the parent's attribute to it, so it is imported
# here, before ``read`` is bound below, and later imports of its modules leave ``read`` alone.
import segmentlake.read as _reader_package
from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.interval import Interval
from segmentlake.core.partitions_spec import DimensionRangePartitionsSpec, HashedPartitionsSpec
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.shard_spec import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    TombstoneShardSpec,
)
from segmentlake.core.timeline import VersionedIntervalTimeline
from segmentlake.errors import (
    BadRowsError,
    CommitConflict,
    CommitStateUnknown,
    DatasourceNotFound,
    LockRefused,
    SegmentLakeError,
    SpecError,
    WarehouseNotFound,
)
from segmentlake.ingest.report import TaskReport
from segmentlake.table import Datasource
from segmentlake.table import read as _read

if TYPE_CHECKING:
    from segmentlake.lake import Lake
    from segmentlake.spark.session import spark_session

read = _read
del _reader_package, _read

__all__ = [
    "BadRowsError",
    "CommitConflict",
    "CommitStateUnknown",
    "DataSegment",
    "Datasource",
    "DatasourceNotFound",
    "DimensionRangePartitionsSpec",
    "DimensionRangeShardSpec",
    "HashBasedNumberedShardSpec",
    "HashedPartitionsSpec",
    "IngestionSpec",
    "Interval",
    "Lake",
    "LockRefused",
    "NumberedOverwriteShardSpec",
    "NumberedShardSpec",
    "SegmentId",
    "SegmentLakeError",
    "SpecError",
    "TaskReport",
    "TombstoneShardSpec",
    "VersionedIntervalTimeline",
    "WarehouseNotFound",
    "__version__",
    "read",
    "spark_session",
]

# Loaded on first use: the Spark-dependent facades (``import segmentlake`` stays Spark-free),
# and the names the root exported before 0.2, which now live in their submodules only.
_LAZY = {
    "Lake": "segmentlake.lake",
    "spark_session": "segmentlake.spark.session",
    "ETERNITY": "segmentlake.core.interval",
    "Period": "segmentlake.core.interval",
    "BroadcastRule": "segmentlake.core.retention_rules",
    "DropRule": "segmentlake.core.retention_rules",
    "LoadRule": "segmentlake.core.retention_rules",
    "Rule": "segmentlake.core.retention_rules",
    "ChunkView": "segmentlake.core.compaction_jobs",
    "CompactionJob": "segmentlake.core.compaction_jobs",
    "CompactionKind": "segmentlake.core.compaction_jobs",
    "Selection": "segmentlake.core.compaction_jobs",
    "CompactionConfig": "segmentlake.core.compaction_config",
    "CompactionPlanner": "segmentlake.core.compaction_planning",
    "CompactionSelector": "segmentlake.core.compaction_planning",
    "FingerprintSelector": "segmentlake.core.compaction_planning",
    "MaskedRowsSelector": "segmentlake.core.compaction_planning",
    "PlannedJob": "segmentlake.core.compaction_planning",
    "RatioPlanner": "segmentlake.core.compaction_planning",
    "CoordinatorConfig": "segmentlake.core.storage_tiers",
    "Volume": "segmentlake.core.storage_tiers",
    "DimensionsSpec": "segmentlake.core.ingest_spec",
    "DynamicPartitionsSpec": "segmentlake.core.partitions_spec",
    "ExpressionTransform": "segmentlake.core.ingest_spec",
    "GranularitySpec": "segmentlake.core.ingest_spec",
    "MetricSpec": "segmentlake.core.ingest_spec",
    "TimestampSpec": "segmentlake.core.ingest_spec",
    "TransformSpec": "segmentlake.core.ingest_spec",
    "SingleDimensionPartitionsSpec": "segmentlake.core.partitions_spec",
    "Granularity": "segmentlake.core.granularity",
    "LockGranularity": "segmentlake.core.locks",
    "LockType": "segmentlake.core.locks",
    "TaskLock": "segmentlake.core.locks",
    "SegmentSchema": "segmentlake.core.segment_schema",
    "ShardSpec": "segmentlake.core.shard_spec",
    "SingleDimensionShardSpec": "segmentlake.core.shard_spec",
    "TimelineObjectHolder": "segmentlake.core.timeline",
    "EnvironmentSetupError": "segmentlake.errors",
    "MetadataVersionError": "segmentlake.errors",
    "NotFound": "segmentlake.errors",
    "RowStats": "segmentlake.ingest.report",
    "TaskActions": "segmentlake.actions",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":  # importlib.metadata imports many modules: only when asked
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("segmentlake")
        except PackageNotFoundError:  # a source tree that is not installed
            return "0+unknown"
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'segmentlake' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The listed surface (and the module's dunders); submodules and older names still resolve.
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})


if TYPE_CHECKING:
    __version__: str
