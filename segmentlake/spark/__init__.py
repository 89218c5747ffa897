"""Spark integration: the session builder and what it needs (Delta jars, the local LogStore)."""

from segmentlake.spark.session import prepare, spark_session

__all__ = ["prepare", "spark_session"]
