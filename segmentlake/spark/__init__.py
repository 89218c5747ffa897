"""Spark integration: the session builder and what it needs (Delta jars, the local LogStore).

The names load on first use, so importing a module of this package that needs no Spark (job
metrics) does not import pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from segmentlake.spark.session import prepare, spark_session

__all__ = ["prepare", "spark_session"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from segmentlake.spark import session

        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
