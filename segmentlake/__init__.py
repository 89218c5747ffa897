"""segmentlake: Apache Druid's segment model on Delta Lake and Spark.

The pure core (intervals, segments, shard specs, the visible timeline, lock rules) imports no
Spark; ``Lake`` and ``spark_session`` load Spark lazily, on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from segmentlake.core.compaction_config import CompactionConfig
from segmentlake.core.compaction_jobs import ChunkView, CompactionJob, CompactionKind, Selection
from segmentlake.core.compaction_planning import (
    CompactionPlanner,
    CompactionSelector,
    FingerprintSelector,
    MaskedRowsSelector,
    PlannedJob,
    RatioPlanner,
)
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import (
    DimensionsSpec,
    DynamicPartitionsSpec,
    ExpressionTransform,
    GranularitySpec,
    IngestionSpec,
    MetricSpec,
    TimestampSpec,
    TransformSpec,
)
from segmentlake.core.interval import ETERNITY, Interval, Period
from segmentlake.core.locks import LockGranularity, LockType, TaskLock
from segmentlake.core.partitions_spec import (
    DimensionRangePartitionsSpec,
    HashedPartitionsSpec,
    SingleDimensionPartitionsSpec,
)
from segmentlake.core.retention_rules import BroadcastRule, DropRule, LoadRule, Rule
from segmentlake.core.segment import DataSegment, SegmentId
from segmentlake.core.segment_schema import SegmentSchema
from segmentlake.core.shard_spec import (
    DimensionRangeShardSpec,
    HashBasedNumberedShardSpec,
    NumberedOverwriteShardSpec,
    NumberedShardSpec,
    ShardSpec,
    SingleDimensionShardSpec,
    TombstoneShardSpec,
)
from segmentlake.core.storage_tiers import CoordinatorConfig, Volume
from segmentlake.core.timeline import TimelineObjectHolder, VersionedIntervalTimeline
from segmentlake.errors import (
    BadRowsError,
    CommitConflict,
    CommitStateUnknown,
    EnvironmentSetupError,
    LockRefused,
    MetadataVersionError,
    SegmentLakeError,
    SpecError,
)
from segmentlake.ingest.report import RowStats, TaskReport

if TYPE_CHECKING:
    from segmentlake.lake import Lake
    from segmentlake.spark.session import spark_session

__all__ = [
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

_LAZY = {"Lake": "segmentlake.lake", "spark_session": "segmentlake.spark.session"}


def __getattr__(name: str) -> Any:
    # Spark-dependent names load on first use so `import segmentlake` stays Spark-free.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'segmentlake' has no attribute {name!r}")
