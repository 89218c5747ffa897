"""Fixtures for the metadata tests: one warehouse (and ``Lake``) per module, one datasource per
test.

Each metadata commit costs seconds, and creating a warehouse costs a commit plus table setup,
so tests of a module share a warehouse and keep apart by datasource — which is itself a
guarantee under test: datasources never see each other's rows or locks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from segmentlake.lake import Lake


@pytest.fixture(scope="module")
def module_warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("warehouse")
    return str(path)


@pytest.fixture(scope="module")
def lake(spark: SparkSession, module_warehouse: str) -> Lake:
    """A lake on the module's warehouse. Its lease is long: on a loaded 2-core machine one test
    (a handful of commits) can outlast the default minute."""
    return Lake(spark, module_warehouse, lease_seconds=600)


@pytest.fixture
def ds(request: pytest.FixtureRequest) -> str:
    """A datasource name of this test only."""
    return "ds_" + re.sub(r"\W+", "_", request.node.name).strip("_")


@pytest.fixture(scope="module")
def short_lake(spark: SparkSession, module_warehouse: str, lake: Lake) -> Lake:
    """The same warehouse with a 1 s lease, to watch leases run out."""
    return Lake(spark, module_warehouse, lease_seconds=1)
