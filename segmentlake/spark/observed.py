"""A Spark observation's metrics, or None where Spark reported none.

Adaptive query execution replaces a plan whose shuffle came out empty (every input row
filtered, or no input at all) with an empty relation, and the ``CollectMetrics`` node inside
it goes with it: the query then reports no metrics for the observation. pyspark's
``Observation.get`` fails on that with an assertion deep in the JVM (classic) or a
``NO_OBSERVE_BEFORE_GET`` error (Connect); callers here get ``None`` and decide.
"""

from __future__ import annotations

from typing import Any

from pyspark.errors import PySparkAssertionError
from pyspark.sql import Observation

__all__ = ["observed_metrics"]


def observed_metrics(observation: Observation) -> dict[str, Any] | None:
    """The metrics ``observation`` collected in the action that ran its DataFrame, or
    ``None`` when the query reported none (see the module). Call it after that action."""
    java_observation = getattr(observation, "_jo", None)
    if java_observation is not None and java_observation.getRow().length() == 0:
        return None  # classic: the JVM completed the observation with an empty row
    try:
        return observation.get
    except PySparkAssertionError:
        return None  # Connect: the server sent no metrics for it
