"""The session builder: adopts a running session, and a built one has Delta and our LogStore."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from segmentlake.errors import SpecError
from segmentlake.spark import spark_session
from segmentlake.spark.logstore import LOGSTORE_CLASS, LOGSTORE_CONF
from segmentlake.spark.session import _checked_options, read_spark_defaults

pytestmark = pytest.mark.spark


def test_returns_the_running_session_untouched(spark: SparkSession) -> None:
    before = dict(spark.sparkContext.getConf().getAll())

    again = spark_session(app_name="other", master="local[1]", extra_conf={"spark.x.y": "z"})

    assert again is spark
    assert dict(again.sparkContext.getConf().getAll()) == before


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"extra_conf": "spark.ui.enabled=false"}, "extra_conf must be a mapping"),
        ({"extra_conf": {"spark.ui.enabled": None}}, r"extra_conf\['spark.ui.enabled'\] must be"),
        ({"extra_conf": {5: "x"}}, "extra_conf keys must be Spark option names"),
        ({"app_name": ""}, "app_name must be a non-empty string"),
        ({"master": 2}, "master must be a Spark master URL"),
        ({"quiet_progress": "yes"}, "quiet_progress must be true or false"),
    ],
)
def test_a_bad_argument_is_refused_even_with_a_session_running(
    spark: SparkSession, arguments: dict[str, Any], message: str
) -> None:
    """Refused before the running session is looked up, so a call that works in a notebook
    with Spark up fails the same way where it would start one (it used to fail there only,
    with an AttributeError)."""
    with pytest.raises(SpecError, match=message):
        spark_session(**arguments)


def test_extra_conf_numbers_and_bools_are_written_as_spark_writes_them() -> None:
    options = {"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False}
    conf = _checked_options(app_name="a", master=None, extra_conf=options, quiet_progress=True)
    assert conf == {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}


def test_returns_the_default_session_from_another_thread(spark: SparkSession) -> None:
    found: list[SparkSession] = []
    thread = threading.Thread(target=lambda: found.append(spark_session(master="local[1]")))
    thread.start()
    thread.join(timeout=60)

    assert found == [spark]
    assert found[0] is spark


def test_defaults_from_spark_conf_are_applied(spark: SparkSession) -> None:
    defaults = read_spark_defaults()

    assert defaults["spark.sql.session.timeZone"] == "UTC"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.extensions") == defaults["spark.sql.extensions"]
    # Test-session overrides win over the file.
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_delta_write_and_read(spark: SparkSession, warehouse: str) -> None:
    table = f"{warehouse}/t"
    spark.range(5).write.format("delta").save(table)
    spark.range(5, 8).write.format("delta").mode("append").save(table)

    rows = sorted(r.id for r in spark.read.format("delta").load(table).collect())

    assert rows == list(range(8))
    assert sorted(p.name for p in Path(table, "_delta_log").glob("*.json")) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]


def test_delta_uses_the_put_if_absent_logstore(spark: SparkSession, warehouse: str) -> None:
    table = f"{warehouse}/t"
    spark.range(1).write.format("delta").save(table)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log_path = jvm.org.apache.hadoop.fs.Path(f"file:{table}/_delta_log/00000000000000000000.json")

    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    store = delta_log.store().getDelegate(log_path).logStoreImpl()

    assert spark.conf.get(LOGSTORE_CONF) == LOGSTORE_CLASS
    assert store.getClass().getName() == LOGSTORE_CLASS


def _write(spark: SparkSession, path: str, line: str, *, overwrite: bool) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    store = getattr(jvm, LOGSTORE_CLASS)(hadoop_conf)
    lines = jvm.java.util.ArrayList()
    lines.add(line)
    store.write(jvm.org.apache.hadoop.fs.Path(path), lines.iterator(), overwrite, hadoop_conf)


def test_logstore_refuses_a_taken_version(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    version = log / "00000000000000000007.json"
    _write(spark, str(version), '{"first":1}', overwrite=False)

    with pytest.raises(Py4JJavaError, match=r"java\.nio\.file\.FileAlreadyExistsException"):
        _write(spark, str(version), '{"second":2}', overwrite=False)

    assert version.read_text() == '{"first":1}\n'
    assert [p.name for p in log.iterdir()] == [version.name], "temp files must be cleaned up"


def test_logstore_overwrite_replaces_atomically(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    target = log / "_last_checkpoint"
    _write(spark, str(target), "old", overwrite=True)
    _write(spark, str(target), "new", overwrite=True)

    assert target.read_text() == "new\n"
    assert [p.name for p in log.iterdir()] == [target.name]


def test_logstore_reports_a_missing_log_dir(spark: SparkSession, tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "_delta_log" / "00000000000000000000.json"

    with pytest.raises(Py4JJavaError, match=r"java\.io\.FileNotFoundException"):
        _write(spark, str(missing), "{}", overwrite=False)


def test_python_workers_run_the_drivers_interpreter(spark: SparkSession) -> None:
    """UDFs need the driver's packages (pyarrow, segmentlake): a worker started from whatever
    ``python3`` is on PATH would not have them."""
    import sys

    from pyspark.sql import functions as F

    # No type hints on the function: pyspark would read them as a pandas UDF's.
    interpreter = F.udf(lambda _: __import__("sys").executable, "string")

    assert spark.range(1).select(interpreter("id")).first()[0] == sys.executable
