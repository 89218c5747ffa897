"""``segmentlake quickstart``: a sample datasource's life, end to end on the local warehouse.

It generates a deterministic stream of wiki edits, ingests it by DAY with rollup by HOUR
(``lake.append``), appends late data into two existing days, overwrites one day with a new
version (``lake.overwrite``), and prints each task's report, the visible timeline and a few
SQL queries over the datasource's view. Everything a reader sees comes from the visible
timeline: the overwritten day's old rows stay in storage but are never read.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from segmentlake.cli.text_tables import format_table, print_timeline
from segmentlake.core.interval import Interval
from segmentlake.lake import Lake

__all__ = ["DATASOURCE", "SPEC", "run", "sample_edits"]

logger = logging.getLogger(__name__)

DATASOURCE = "wikipedia"
START = datetime(2024, 1, 1, tzinfo=UTC)
_CHANNELS = ["#en.wikipedia", "#de.wikipedia", "#fr.wikipedia", "#ja.wikipedia", "#es.wikipedia"]
_COUNTRIES = ["US", "DE", "FR", "JP", "ES", "GB", "IN", "BR"]

# Druid's dataSchema for the sample, as a data engineer would write it.
SPEC = {
    "timestampSpec": {"column": "timestamp", "format": "auto"},
    "dimensionsSpec": {"dimensions": ["channel", "page", "user", "country"]},
    "metricsSpec": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
        {"type": "longSum", "name": "deleted", "fieldName": "deleted"},
        {"type": "HLLSketchBuild", "name": "unique_users", "fieldName": "user"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
}

QUERIES = {
    "edits per day": """
        SELECT CAST(__time AS DATE) AS day, SUM(edits) AS edits, SUM(added) AS added
        FROM {view} GROUP BY 1 ORDER BY 1""",
    "top channels": """
        SELECT channel, SUM(edits) AS edits, SUM(added) - SUM(deleted) AS net_added
        FROM {view} GROUP BY channel ORDER BY edits DESC LIMIT 5""",
    "unique users per country (HLL sketches merged across segments)": """
        SELECT country, hll_sketch_estimate(hll_union_agg(unique_users)) AS unique_users
        FROM {view} GROUP BY country ORDER BY unique_users DESC LIMIT 5""",
}


def sample_edits(spark: SparkSession, day: datetime, rows: int, *, seed: int) -> DataFrame:
    """``rows`` deterministic wiki edits during ``day``. As on the real wikis, a few pages and
    users make most edits (skewed draws), so rows roll up; each user edits from one country."""
    day_ms = int(day.timestamp() * 1000)

    def draw(salt: int) -> Column:  # uniform in [0, 1), fixed by (seed, day, row, salt)
        return (F.abs(F.hash("id", F.lit(seed), F.lit(day_ms), F.lit(salt))) % 1_000_000) / 1e6

    user = F.floor(F.pow(draw(1), 3) * 300).cast("int")
    page = F.floor(F.pow(draw(3), 4) * 1000).cast("int")  # a page lives on one channel
    return spark.range(rows).select(
        F.timestamp_millis(F.lit(day_ms) + F.floor(draw(0) * 86_400_000)).alias("timestamp"),
        F.element_at(F.array(*map(F.lit, _CHANNELS)), page % 5 + 1).alias("channel"),
        F.concat(F.lit("Page_"), page.cast("string")).alias("page"),
        F.concat(F.lit("user"), user.cast("string")).alias("user"),
        F.element_at(F.array(*map(F.lit, _COUNTRIES)), user % 8 + 1).alias("country"),
        F.floor(draw(4) * 500).cast("long").alias("added"),
        F.floor(draw(5) * 50).cast("long").alias("deleted"),
    )


def edits_of_days(spark: SparkSession, days: list[datetime], rows: int, *, seed: int) -> DataFrame:
    """Sample edits of several days as one DataFrame (one ingestion writes them all)."""
    return reduce(DataFrame.unionByName, [sample_edits(spark, d, rows, seed=seed) for d in days])


def run(lake: Lake, *, days: int, rows_per_day: int) -> int:
    """The quickstart story; returns the process exit code."""
    spark = lake.spark
    if lake.exists() and DATASOURCE in lake.datasources():
        print(f"{DATASOURCE} already exists in {lake.warehouse}: showing it as it is")
    else:
        all_days = [START + timedelta(days=d) for d in range(days)]
        _step("1. batch ingestion of every day (lake.append: new DAY chunks)")
        print(
            lake.append(
                edits_of_days(spark, all_days, rows_per_day, seed=1), DATASOURCE, SPEC
            ).summary()
        )
        late = [START + timedelta(days=1), START + timedelta(days=3)]
        _step("2. late data for two days (lake.append: more segments in the existing chunks)")
        print(
            lake.append(
                edits_of_days(spark, late, rows_per_day // 10, seed=7), DATASOURCE, SPEC
            ).summary()
        )
        day = START + timedelta(days=2)
        _step(f"3. {day.date()} re-ingested (lake.overwrite: a new version replaces the day)")
        interval = Interval(day, day + timedelta(days=1))
        fixed = sample_edits(spark, day, rows_per_day // 2, seed=42)
        print(lake.overwrite(fixed, DATASOURCE, SPEC, interval=interval).summary())
    _step("visible timeline")
    print_timeline(lake, DATASOURCE, None)
    view = lake.register_view(DATASOURCE)
    for title, sql in QUERIES.items():
        _step(f"SQL: {title}")
        result = spark.sql(sql.format(view=view)).collect()
        if result:
            print(format_table(result[0].__fields__, [tuple(r) for r in result]))
    print(f"\nwarehouse: {lake.warehouse}  (try: segmentlake tasks {DATASOURCE})")
    return 0


def _step(title: str) -> None:
    print(f"\n== {title}")
