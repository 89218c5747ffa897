"""Fixtures shared by the whole suite: one Spark session for every Spark test, fresh warehouses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One small local session for the whole run: starting Spark costs seconds, tests don't.
    ``SEGMENTLAKE_TEST_MASTER`` runs it on another master instead, e.g.
    ``local-cluster[2,1,1536]`` for executors in JVMs of their own (docs/development.md)."""
    from segmentlake.spark import spark_session
    from tests.multiprocess_support import driver_conf

    session = spark_session(
        app_name="segmentlake-tests",
        master=os.environ.get("SEGMENTLAKE_TEST_MASTER", "local[2]"),
        quiet_progress=True,
        extra_conf=driver_conf(
            {
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
                "spark.ui.enabled": "false",
                "spark.driver.memory": "2g",
                # As many as the session's cores: Delta rebuilds every table's state in this many
                # tasks, and the shipped 8 ran in four waves here (a Spark-heavy slice of the
                # suite, 21 tests: 97-118 s with 8, 79-101 s with 2).
                "spark.databricks.delta.snapshotPartitions": "2",
            }
        ),
    )
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """A fresh, empty warehouse directory for one test, as the path string Spark expects."""
    path = tmp_path / "warehouse"
    path.mkdir()
    return str(path)
