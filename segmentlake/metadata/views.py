"""SQL views over the metadata table, like Druid's ``sys`` tables.

Views are temporary views over the Delta table, so they always show its latest version.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from segmentlake.metadata.records import LOCK, PENDING, SEGMENT, TASK
from segmentlake.metadata.store import MetadataStore

__all__ = ["register_system_views"]

_TS = "CAST(timestamp_millis({col}) AS TIMESTAMP)"

_VIEWS = {
    "segments": f"""
        SELECT id AS segment_id, datasource, {_TS.format(col="start_ms")} AS start,
               {_TS.format(col="end_ms")} AS `end`, version, partition_num, used,
               num_rows, size_bytes AS size,
               get_json_object(payload, '$.shardSpec') AS shard_spec,
               get_json_object(payload, '$.lastCompactionState') AS last_compaction_state,
               get_json_object(payload, '$.loadSpec') AS load_spec,
               {_TS.format(col="updated_ms")} AS used_status_last_updated
        FROM delta.`{{path}}` WHERE kind = '{SEGMENT}'""",
    "locks": f"""
        SELECT id AS lock_id, datasource, group_id, task_id, lock_type,
               lock_granularity AS granularity, priority,
               {_TS.format(col="start_ms")} AS start, {_TS.format(col="end_ms")} AS `end`,
               version, partition_num, revoked, {_TS.format(col="expires_ms")} AS expires,
               (NOT revoked AND expires_ms > unix_millis(current_timestamp())) AS live
        FROM delta.`{{path}}` WHERE kind = '{LOCK}'""",
    "pending_segments": f"""
        SELECT payload AS segment_id, datasource, sequence_name, previous_id AS
               sequence_prev_id, group_id, {_TS.format(col="start_ms")} AS start,
               {_TS.format(col="end_ms")} AS `end`, version, partition_num,
               {_TS.format(col="updated_ms")} AS created
        FROM delta.`{{path}}` WHERE kind = '{PENDING}'""",
    "tasks": f"""
        SELECT id AS task_id, datasource, group_id, get_json_object(payload, '$.type') AS type,
               get_json_object(payload, '$.status') AS status,
               {_TS.format(col="updated_ms")} AS updated, payload AS report
        FROM delta.`{{path}}` WHERE kind = '{TASK}'""",
}


def register_system_views(
    spark: SparkSession, store: MetadataStore, *, prefix: str = "segmentlake_"
) -> list[str]:
    """Create or replace the temp views ``<prefix>segments``, ``<prefix>locks``,
    ``<prefix>pending_segments`` and ``<prefix>tasks``; return their names."""
    names = []
    for suffix, sql in _VIEWS.items():
        name = f"{prefix}{suffix}"
        spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS {sql.format(path=store.path)}")
        names.append(name)
    return names
