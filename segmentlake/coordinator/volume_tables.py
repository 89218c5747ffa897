"""A volume's tables: per datasource, one Delta table holding the rows of the segments loaded
on the volume, partitioned by ``__segment`` like deep storage (a drop deletes partitions).

A load copies a batch of segments' rows from deep storage in ONE Spark job, as a Delta
``replaceWhere`` on their ``__segment`` values: a retried or repeated load replaces what an
earlier attempt left instead of doubling it. A volume announces itself with a marker file at
its root; a volume whose marker is gone (disk lost, bucket deleted) is dead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from segmentlake.core.names import SEGMENT_KEY_COLUMN, datasource_table_path, sql_path, sql_string
from segmentlake.core.storage_tiers import Volume
from segmentlake.metadata.table_log import TableLog
from segmentlake.storage.table_files import checkpoint_if_due, new_table_properties
from segmentlake.storage.visible_rows import key_in

__all__ = [
    "MARKER",
    "drop_rows",
    "load_rows",
    "prepare_volume",
    "volume_alive",
    "volume_table_path",
]

logger = logging.getLogger(__name__)

MARKER = "_segmentlake_volume.json"


def volume_table_path(volume: Volume, datasource: str) -> str:
    """Where ``volume`` keeps ``datasource``'s loaded rows (the directory name keeps only
    characters no path or URI escapes; the name rule makes that the name itself today)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in datasource)
    return f"{volume.path.rstrip('/')}/{safe or '_'}"


def _marker(volume: Volume) -> tuple[pafs.FileSystem, str]:
    """The volume's file system (pyarrow's local one, or delta-rs's object store) and the
    path of its marker file on it."""
    root = TableLog(volume.path.rstrip("/"))
    return root.fs, root.full(MARKER)


def prepare_volume(volume: Volume) -> None:
    """Create the volume's root (if needed) and its marker, naming the volume."""
    fs, marker = _marker(volume)
    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(marker.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(marker) as out:
        out.write(json.dumps({"name": volume.name, "tier": volume.tier}).encode())


def volume_alive(volume: Volume) -> bool:
    """Whether the volume's marker is there and names this volume."""
    fs, marker = _marker(volume)
    try:
        with fs.open_input_stream(marker) as stream:
            text = stream.read().decode("utf-8")
        return bool(json.loads(text).get("name") == volume.name)
    except FileNotFoundError:
        return False
    except Exception as e:  # an unreachable volume is a dead one
        logger.warning("volume %s at %s is unreachable: %s", volume.name, volume.path, e)
        return False


def load_rows(
    spark: SparkSession, warehouse: str, volume: Volume, datasource: str, keys: Sequence[str]
) -> int:
    """Copy the rows of ``keys`` (``__segment`` values) from deep storage into the volume's
    table in one Spark job; return the volume table's version that holds them."""
    path = volume_table_path(volume, datasource)
    rows = spark.read.format("delta").load(datasource_table_path(warehouse, datasource))
    rows = rows.where(key_in(keys))
    predicate = f"`{SEGMENT_KEY_COLUMN}` IN ({', '.join(map(sql_string, keys))})"
    log = TableLog(path)
    before = log.version()
    writer = new_table_properties(rows.write.format("delta").option("mergeSchema", "true"), before)
    if before < 0:
        writer.mode("append").partitionBy(SEGMENT_KEY_COLUMN).save(path)
    else:
        writer.mode("overwrite").option("replaceWhere", predicate).save(path)
    after = log.version()
    checkpoint_if_due(log, before, after)
    return after


def drop_rows(spark: SparkSession, volume: Volume, datasource: str, keys: Sequence[str]) -> None:
    """Delete the rows of ``keys`` from the volume's table (nothing if it has none)."""
    if not keys:  # nothing to drop: not even the log's listing (a round trip on object stores)
        return
    path = volume_table_path(volume, datasource)
    log = TableLog(path)
    before = log.version()
    if before < 0:
        return
    predicate = f"`{SEGMENT_KEY_COLUMN}` IN ({', '.join(map(sql_string, keys))})"
    spark.sql(f"DELETE FROM {sql_path(path)} WHERE {predicate}")
    checkpoint_if_due(log, before, log.version())
