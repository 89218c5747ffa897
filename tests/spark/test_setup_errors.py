"""Preparing Spark fails with a clear EnvironmentSetupError, and never leaves a half cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from segmentlake.errors import EnvironmentSetupError
from segmentlake.spark import jars
from segmentlake.spark._jdk import jdk_tool


def test_missing_javac_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "")

    with pytest.raises(EnvironmentSetupError, match="JDK 17"):
        jdk_tool("javac")


def test_unreachable_repository_fails_clearly_and_caches_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEGMENTLAKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEGMENTLAKE_MAVEN_REPO", (tmp_path / "no-such-repo").as_uri())

    with pytest.raises(EnvironmentSetupError, match="could not resolve delta-spark"):
        jars.delta_jars()

    assert [p.name for p in (tmp_path / "cache" / "jars").iterdir() if p.is_dir()] == []


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("hadoop-client-api-3.5.0.jar", "hadoop-client-api"),
        ("jackson-module-scala_2.13-2.21.2.jar", "jackson-module-scala_2.13"),
        ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
        ("delta-spark_4.2_2.13-4.4.0.jar", "delta-spark_4.2_2.13"),
    ],
)
def test_artifact_names_of_spark_jars(jar: str, artifact: str) -> None:
    assert jars._artifact_of(jar) == artifact


def test_a_missing_spark_jar_is_named_with_its_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(jars, "spark_jars_dir", lambda: tmp_path)
    with pytest.raises(EnvironmentSetupError) as raised:
        jars.hadoop_api_jar()
    assert f"no hadoop-client-api-*.jar in {tmp_path}" in str(raised.value)
    (tmp_path / "hadoop-client-api-3.4.1.jar").touch()
    (tmp_path / "hadoop-client-api-3.5.0.jar").touch()
    assert jars.hadoop_api_jar() == tmp_path / "hadoop-client-api-3.5.0.jar"
