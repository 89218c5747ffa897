"""The in-process local file system: a local session writes through it, and it sets the very
permission bits Hadoop's own would, without forking ``chmod``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from segmentlake.spark.local_fs import LOCAL_FS_CLASS, executors_in_driver, local_fs_conf

pytestmark = pytest.mark.spark


def _in_driver(spark: SparkSession) -> bool:
    """Whether the suite's session (tests/conftest.py) runs its executors in the driver: on
    local-cluster[...] it keeps Hadoop's own file system."""
    return executors_in_driver(spark.sparkContext.master)


def _needs_the_class(spark: SparkSession) -> None:
    if not _in_driver(spark):
        pytest.skip("the session's executors run in JVMs of their own, without the class")


def _fs(spark: SparkSession, path: str) -> object:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return jvm.org.apache.hadoop.fs.Path(f"file:{path}").getFileSystem(conf)


def test_a_local_session_writes_through_it(spark: SparkSession, warehouse: str) -> None:
    table = f"{warehouse}/t"
    spark.range(10).selectExpr("id", "id * 2 AS v").write.format("delta").partitionBy("id").save(
        table
    )

    # Elsewhere the session keeps whatever Hadoop itself picks for file:.
    name = _fs(spark, table).getClass().getName()  # type: ignore[attr-defined]
    assert (name == LOCAL_FS_CLASS) == _in_driver(spark)
    assert spark.read.format("delta").load(table).count() == 10
    files = list(Path(table).rglob("*.parquet"))
    assert len(files) == 10
    # Hadoop creates files 0666 & ~umask (its fs.permissions.umask-mode, 022 by default).
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o666 & ~0o022}


@pytest.mark.parametrize("mode", [0o640, 0o700, 0o604, 0o000, 0o777])
def test_it_sets_the_permission_asked_for(spark: SparkSession, tmp_path: Path, mode: int) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"file:{target}")

    _fs(spark, str(target)).setPermission(  # type: ignore[attr-defined]
        path, jvm.org.apache.hadoop.fs.permission.FsPermission(mode)
    )

    assert stat.S_IMODE(target.stat().st_mode) == mode
    target.chmod(0o644)


def test_a_missing_file_is_reported_as_missing(spark: SparkSession, tmp_path: Path) -> None:
    _needs_the_class(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"file:{tmp_path}/absent")
    raw = _fs(spark, str(tmp_path)).getRawFileSystem()  # type: ignore[attr-defined]

    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        raw.setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission(0o644))


def test_only_a_local_master_without_its_own_file_system_gets_it() -> None:
    assert local_fs_conf("local[2]", {})["spark.hadoop.fs.file.impl"] == LOCAL_FS_CLASS
    assert local_fs_conf("spark://host:7077", {}) == {}
    assert local_fs_conf("yarn", {}) == {}
    assert local_fs_conf("local-cluster[2,1,1024]", {}) == {}  # executors in their own JVMs
    assert executors_in_driver("local")
    assert executors_in_driver("local[*]")
    assert not executors_in_driver("local-cluster[2,1,1024]")
    own = {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}
    assert local_fs_conf("local[*]", own) == {}
    kept = local_fs_conf("local", {"spark.driver.extraClassPath": "/opt/a.jar"})
    assert kept["spark.driver.extraClassPath"].startswith(f"/opt/a.jar{os.pathsep}")


def test_a_running_jvm_is_asked_whether_it_can_load_the_class(spark: SparkSession) -> None:
    from segmentlake.spark.session import _jvm_can_load

    _needs_the_class(spark)
    # The session's JVM started with the jar on its classpath; one that did not would not
    # find the class, and a new session in it keeps Hadoop's file system.
    assert _jvm_can_load(LOCAL_FS_CLASS)
    assert not _jvm_can_load("io.segmentlake.storage.NoSuchFileSystem")
