"""Telling a Spark Connect session apart, and the typed error for what needs a classic one.

No Spark here: a stand-in whose class lives where pyspark's Connect session does is enough, and
this process must not open a real Connect session (``connect_worker.py`` says why).
"""

from __future__ import annotations

from typing import Any

import pytest

from segmentlake.errors import ClassicSessionRequired, SegmentLakeError
from segmentlake.spark.connect import default_parallelism, is_connect, require_classic


class _RuntimeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class FakeConnectSession:
    """What segmentlake asks of a Connect session here: its class's module and its conf."""

    def __init__(self, **conf: str) -> None:
        self.conf = _RuntimeConf(conf)

    @property
    def sparkContext(self) -> Any:  # as pyspark's Connect session: no JVM behind it
        raise AttributeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] Attribute `sparkContext`")


FakeConnectSession.__module__ = "pyspark.sql.connect.session"


class FakeClassicSession:
    class sparkContext:  # the attribute as pyspark names it
        defaultParallelism = 3


FakeClassicSession.__module__ = "pyspark.sql.session"


def test_a_connect_session_is_told_by_its_class() -> None:
    assert is_connect(FakeConnectSession())
    assert not is_connect(FakeClassicSession())
    assert not is_connect(None)


def test_require_classic_names_the_operation_and_why() -> None:
    require_classic(FakeClassicSession(), "x", "y")  # a classic session passes
    with pytest.raises(ClassicSessionRequired) as raised:
        require_classic(FakeConnectSession(), "reading Druid's skipHeaderRows", "it uses RDDs")
    assert isinstance(raised.value, SegmentLakeError)
    assert raised.value.operation == "reading Druid's skipHeaderRows"
    assert raised.value.reason == "it uses RDDs"
    assert "reading Druid's skipHeaderRows needs a classic SparkSession" in str(raised.value)
    assert str(raised.value).endswith("Spark Connect: it uses RDDs")


def test_parallelism_over_connect_comes_from_the_conf() -> None:
    assert default_parallelism(FakeClassicSession()) == 3  # type: ignore[arg-type]
    with_conf = FakeConnectSession(**{"spark.default.parallelism": "6"})
    assert default_parallelism(with_conf) == 6  # type: ignore[arg-type]
    assert default_parallelism(FakeConnectSession()) == 8  # type: ignore[arg-type]
