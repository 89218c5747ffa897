"""Views registered once stay exact through appends, an overwrite of finer granularity (a
segment then served only in part), a compaction, a fallback to an older generation and a
kill: from the registering session, a second session, the visible table read as plain Delta,
and a ``spark-sql`` process that never imports segmentlake."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyspark
import pytest
from pyspark.sql import DataFrame, SparkSession

from segmentlake.cli.main import main
from segmentlake.lake import Lake
from segmentlake.spark.jars import delta_jars

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DS = "live"
START = datetime(2024, 1, 1, tzinfo=UTC)
DAY = {"segmentGranularity": "DAY", "queryGranularity": "NONE", "rollup": False}
HOUR = {"segmentGranularity": "HOUR", "queryGranularity": "NONE", "rollup": False}

DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

Row = tuple[datetime, str, int]


def spec(granularity: dict[str, Any]) -> dict[str, Any]:
    return {
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel"]},
        "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
        "granularitySpec": granularity,
    }


def frame(spark: SparkSession, rows: list[Row]) -> DataFrame:
    return spark.createDataFrame(
        [(t.strftime("%Y-%m-%dT%H:%M:%SZ"), c, a) for t, c, a in rows],
        "ts string, channel string, added long",
    )


def hours(day: int, hour_range: range, channel: str, added: int) -> list[Row]:
    return [(START + timedelta(days=day, hours=h), channel, added) for h in hour_range]


def counted(df: DataFrame) -> Counter[Row]:
    return Counter(
        (r["__time"].astimezone(UTC) if r["__time"].tzinfo else r["__time"].replace(tzinfo=UTC),
         r["channel"], r["added"])
        for r in df.select("__time", "channel", "added").collect()
    )  # fmt: skip


def test_views_stay_exact_through_every_change(
    spark: SparkSession, warehouse: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake(spark, warehouse)
    first = hours(0, range(24), "a", 1) + hours(1, range(24), "a", 2)
    lake.append(frame(spark, first), DS, spec(DAY))
    expected = Counter(first)
    temp = lake.register_view(DS, "live_temp")
    persistent = lake.register_view(DS, "live_persistent", temporary=False)
    other = spark.newSession()

    def check(step: str) -> None:
        readers = {
            "temp view": spark.table(temp),
            "persistent view": spark.table(persistent),
            "persistent view, second session": other.table(persistent),
            "plain Delta": other.read.format("delta").load(lake.visible_table_path(DS)),
            "lake.read": lake.read(DS),
        }
        for who, df in readers.items():
            assert counted(df) == expected, f"{who} after {step}"

    check("the first append")

    late = hours(0, range(3), "b", 10)
    lake.append(frame(spark, late), DS, spec(DAY))
    expected += Counter(late)
    check("a late append")

    # An HOUR overwrite inside DAY segments: those are now served only in part.
    replaced = [
        r for r in expected if START + timedelta(hours=5) <= r[0] < START + timedelta(hours=6)
    ]
    assert replaced
    lake.overwrite(
        frame(spark, hours(0, range(5, 6), "c", 100)),
        DS,
        spec(HOUR),
        interval="2024-01-01T05:00:00Z/PT1H",
    )
    for row in replaced:
        del expected[row]
    expected += Counter(hours(0, range(5, 6), "c", 100))
    check("an overwrite of one hour")
    assert list((tmp_path / "warehouse").rglob("clip-*.parquet"))

    lake.compact(DS, "2024-01-01/P2D", mode="major", segment_granularity="DAY")
    check("a major compaction")

    compacted = [s for s in lake.timeline(DS).visible_segments() if s.interval.start.day == 2]
    assert compacted
    lake.mark_unused([s.id for s in compacted])  # day 2 falls back to the first append
    check("marking the compacted day unused")
    lake.mark_used([s.id for s in compacted])
    check("marking it used again")

    lake.mark_overshadowed_unused(DS)
    spark.sql(
        f"ALTER TABLE delta.`{warehouse}/{DS}` SET TBLPROPERTIES "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    report = lake.kill(DS, older_than=0, vacuum_retention_hours=0)
    assert report.killed
    assert report.clips_removed >= 1  # the hour's clips went with the compaction
    check("a kill")

    assert main(["--warehouse", warehouse, "view", DS, "--name", "from_cli"]) == 0
    ddl = capsys.readouterr().out.strip()
    assert ddl == lake.view_sql(DS, "from_cli") + ";"
    assert spark_sql(tmp_path, ddl, "from_cli") == (
        sum(expected.values()),
        sum(r[2] * n for r, n in expected.items()),
    )


def spark_sql(cwd: Path, ddl: str, view: str) -> tuple[int, int]:
    """Create the view and query it in a ``spark-sql`` process (its own JVM and metastore,
    no Python, no segmentlake): the rows and the sum of ``added`` it sees."""
    home = os.path.dirname(pyspark.__file__)
    query = f"{ddl}; SELECT concat('rows=', count(*), ' added=', sum(added)) FROM {view};"
    result = subprocess.run(
        [
            f"{home}/bin/spark-sql",
            "--master", "local[1]",
            "--jars", ",".join(map(str, delta_jars())),
            "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
            "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
            "--conf", "spark.ui.enabled=false",
            "-e", query,
        ],
        cwd=cwd,
        env={**os.environ, "SPARK_HOME": home},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith("rows=")]
    assert result.returncode == 0, result.stderr[-3000:]
    assert lines, result.stdout[-3000:]
    rows, added = lines[-1].removeprefix("rows=").split(" added=")
    return int(rows), int(added)
