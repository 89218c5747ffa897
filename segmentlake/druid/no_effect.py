"""Why the keys of a Druid task that only steer Druid's own processes have no effect on Spark.

Each table maps a key to the reason logged at INFO ("<path> has no effect on Spark: <reason>")
when a task gives it. The tables of the dataSchema and tuningConfig keys live with the core's
reader (:mod:`segmentlake.core.spec_reader`): ``IngestionSpec.from_dict`` reads those too.
"""

from __future__ import annotations

from collections.abc import Mapping

from segmentlake.core.spec_reader import AVAILABLE

__all__ = ["CONTEXT_NO_EFFECT", "JSON_NO_EFFECT", "TASK_NO_EFFECT"]

# The task's "context".
CONTEXT_NO_EFFECT: Mapping[str, str] = {
    "forceTimeChunkLock": (
        "segmentlake overwrites under time-chunk locks and appends under segment locks, "
        "whatever this says"
    ),
    "useLineageBasedSegmentAllocation": (
        "appends allocate segment ids centrally, in one metadata commit"
    ),
}
# The task's top level.
TASK_NO_EFFECT: Mapping[str, str] = {
    "resource": "Druid's worker slots and availability groups; the Spark application runs it",
    "awaitSegmentAvailabilityTimeoutMillis": AVAILABLE,
}
# A json inputFormat.
JSON_NO_EFFECT: Mapping[str, str] = {
    "useJsonNodeReader": "Spark reads each line on its own, so a bad line never hides good ones",
}
