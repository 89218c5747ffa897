"""Resolve Delta Lake's jars once per machine into segmentlake's cache.

Spark's own ``spark.jars.packages`` re-runs Ivy at every start and uses Ivy's default resolver
chain, which consults ``~/.m2`` first and fails outright when that holds POMs without jars
(DESIGN §6). Instead we run the Ivy that ships inside pyspark once, with settings that name only
Maven Central, retrieve into ``<cache>/jars/<artifact>-<version>/`` and hand Spark plain paths via
``spark.jars``. Dependencies whose artifact Spark already ships (Hadoop, Parquet, Jackson,
log4j, Scala, ...) are excluded from the resolution: Spark's copies win on the classpath anyway,
older duplicates only invite mixed-version class loading, and skipping them cuts most of the
download.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from xml.sax.saxutils import escape

from segmentlake.errors import EnvironmentSetupError
from segmentlake.spark._cache import cache_root, file_lock
from segmentlake.spark._jdk import jdk_tool

__all__ = ["DeltaCoordinate", "delta_coordinate", "delta_jars", "hadoop_api_jar", "spark_jars_dir"]

logger = logging.getLogger(__name__)

MAVEN_REPO_ENV = "SEGMENTLAKE_MAVEN_REPO"
_MARKER = ".complete"
_RESOLVE_TIMEOUT_S = 900
# "<artifact>-<revision>.jar": the revision is the first "-" followed by a digit.
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<revision>\d[^/]*)\.jar$")


@dataclass(frozen=True, slots=True)
class DeltaCoordinate:
    """The Maven coordinate of the Delta Spark jar matching the installed Python packages."""

    organisation: str
    artifact: str
    revision: str

    @property
    def key(self) -> str:
        """Cache directory name: artifact (which names the Spark line) plus Delta version."""
        return f"{self.artifact}-{self.revision}"


def delta_coordinate() -> DeltaCoordinate:
    """Derive the Delta jar coordinate from the installed delta-spark and pyspark, as
    ``delta.configure_spark_with_delta_pip`` does (e.g. ``io.delta:delta-spark_4.2_2.13:4.4.0``).
    """
    import pyspark

    spark_line = ".".join(pyspark.__version__.split(".")[:2])
    return DeltaCoordinate(
        "io.delta", f"delta-spark_{spark_line}_2.13", metadata.version("delta-spark")
    )


def spark_jars_dir() -> Path:
    """Return the directory of the jars Spark itself runs with (``$SPARK_HOME/jars``)."""
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        return Path(spark_home) / "jars"
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def hadoop_api_jar() -> Path:
    """Spark's own ``hadoop-client-api`` jar, which segmentlake's Java sources compile against;
    raises :class:`EnvironmentSetupError` naming the directory searched when it is missing."""
    return _newest_spark_jar(
        "hadoop-client-api-*.jar",
        "segmentlake's Java sources compile against Spark's own Hadoop (reinstall pyspark, or "
        "point $SPARK_HOME at a full Spark)",
    )


def _newest_spark_jar(pattern: str, why: str) -> Path:
    """The newest jar matching ``pattern`` among Spark's own jars; if there is none, an
    :class:`EnvironmentSetupError` naming the pattern, the directory and ``why`` it matters."""
    found = sorted(spark_jars_dir().glob(pattern))
    if not found:
        raise EnvironmentSetupError(f"no {pattern} in {spark_jars_dir()}: {why}")
    return found[-1]


def delta_jars() -> list[Path]:
    """Return the jars to put on ``spark.jars`` for Delta, resolving them on first call.

    Safe to call from many processes at once: one resolves under a file lock, the others wait
    and then reuse its result.
    """
    coordinate = delta_coordinate()
    target = cache_root() / "jars" / coordinate.key
    if not (target / _MARKER).exists():
        with file_lock(target.with_name(coordinate.key + ".lock")):
            if not (target / _MARKER).exists():
                _resolve(coordinate, target)
    return sorted(target.glob("*.jar"))


def _resolve(coordinate: DeltaCoordinate, target: Path) -> None:
    """Retrieve ``coordinate`` and its runtime dependencies into ``target`` atomically."""
    staging = target.with_name(f"{target.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    ivy_jar = _ivy_jar()
    logger.info(
        "resolving %s:%s:%s from Maven Central (once per machine)",
        coordinate.organisation,
        coordinate.artifact,
        coordinate.revision,
    )
    command = [
        jdk_tool("java"),
        *_repo_override(),
        "-cp", str(ivy_jar), "org.apache.ivy.Main",
        "-settings", str(Path(__file__).parent / "conf" / "ivysettings.xml"),
        "-cache", str(cache_root() / "ivy"),
        "-ivy", str(_write_ivy_module(coordinate, staging / "ivy.xml")),
        "-confs", "default",
        "-retrieve", f"{staging}/[organisation]_[artifact]-[revision](-[classifier]).[ext]",
    ]  # fmt: skip
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise EnvironmentSetupError(
            f"resolving {coordinate.artifact}:{coordinate.revision} took over "
            f"{_RESOLVE_TIMEOUT_S} s; is the Maven registry reachable?"
        ) from e
    logger.debug("ivy output:\n%s", completed.stdout)
    (staging / "ivy.xml").unlink()
    jars = list(staging.glob("*.jar"))
    # Ivy can exit 0 with unresolved modules; the Delta jar itself is what must be there.
    got_delta = any(
        j.name.startswith(f"{coordinate.organisation}_{coordinate.artifact}") for j in jars
    )
    if completed.returncode != 0 or not got_delta:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((completed.stdout + completed.stderr).splitlines()[-25:])
        raise EnvironmentSetupError(
            f"could not resolve {coordinate.artifact}:{coordinate.revision} from Maven "
            f"(ivy exit {completed.returncode}). Is the Maven registry reachable, and does it "
            f"serve this Delta version? Last ivy output:\n{tail}"
        )
    (staging / _MARKER).write_text(f"{coordinate.key}\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    logger.info("resolved %d jars into %s", len(jars), target)


def _ivy_jar() -> Path:
    return _newest_spark_jar(
        "ivy-*.jar",
        "pyspark's installation looks incomplete; reinstall it with "
        "'pip install --force-reinstall pyspark'",
    )


def _repo_override() -> list[str]:
    """Let a site point at its own Maven Central mirror (read by ivysettings.xml)."""
    repo = os.environ.get(MAVEN_REPO_ENV)
    return [f"-Dsegmentlake.maven.root={repo}"] if repo else []


def _write_ivy_module(coordinate: DeltaCoordinate, path: Path) -> Path:
    """Write an Ivy module that depends on Delta minus every artifact Spark already ships."""
    shipped = sorted({a for j in spark_jars_dir().glob("*.jar") if (a := _artifact_of(j.name))})
    excludes = "\n".join(f'    <exclude module="{escape(a)}"/>' for a in shipped)
    path.write_text(
        f"""<ivy-module version="2.0">
  <info organisation="io.segmentlake" module="delta-jars"/>
  <configurations><conf name="default"/></configurations>
  <dependencies>
    <dependency org="{coordinate.organisation}" name="{coordinate.artifact}"
                rev="{coordinate.revision}" conf="default->default"/>
{excludes}
  </dependencies>
</ivy-module>
"""
    )
    return path


def _artifact_of(jar_name: str) -> str | None:
    match = _JAR_NAME.match(jar_name)
    return match.group("artifact") if match else None
