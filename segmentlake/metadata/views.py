"""SQL views over the metadata table, like Druid's ``sys`` tables.

Views are temporary views over the Delta table, so they always show its latest version. The
table holds row versions (see :mod:`segmentlake.metadata.state`); every view reads the current
ones — the highest ``rev`` per row, deletions dropped — with each held row's expiry extended
to its group's lease, exactly what the store reads in Python.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from segmentlake.core.names import quote_identifier, sql_path
from segmentlake.errors import SpecError
from segmentlake.metadata.compaction_records import RUNNING, SELECTION, USER
from segmentlake.metadata.records import (
    COLUMNS,
    LEASE,
    LEASED_KINDS,
    LOCK,
    PENDING,
    SEGMENT,
    TASK,
)
from segmentlake.metadata.store import MetadataStore

__all__ = ["SYSTEM_VIEWS", "register_system_views", "system_view_sql"]

_TS = "CAST(timestamp_millis({col}) AS TIMESTAMP)"
# A sum over the phases of a task report's ``phase_metrics``; NULL when the report has none
# (reports older than them, or Spark without a JVM), so unknown never reads as zero.
_PHASE_SUM = (
    "aggregate(map_values(phase_metrics), CAST(NULL AS BIGINT), "
    "(total, phase) -> coalesce(total, 0) + coalesce(phase['{key}'], 0))"
)

_VIEWS = {
    "segments": f"""
        SELECT id AS segment_id, datasource, {_TS.format(col="start_ms")} AS start,
               {_TS.format(col="end_ms")} AS `end`, version, partition_num, used,
               visibility, (used AND visibility = 'visible') AS is_visible,
               shard_type, core_partitions, root_start, root_end, minor_version,
               aug_size AS atomic_update_group_size, load_key,
               num_rows, size_bytes AS size,
               coalesce(get_json_object(payload, '$.shardSpec'),
                        CASE shard_type WHEN 'numbered_overwrite'
                          THEN to_json(named_struct('type', shard_type,
                                 'partitionId', partition_num,
                                 'startRootPartitionId', root_start,
                                 'endRootPartitionId', root_end, 'minorVersion', minor_version,
                                 'atomicUpdateGroupSize', aug_size))
                          ELSE to_json(named_struct('type', shard_type,
                                 'partitionNum', partition_num, 'partitions', core_partitions))
                        END) AS shard_spec,
               get_json_object(shared, '$.lastCompactionState') AS last_compaction_state,
               coalesce(get_json_object(payload, '$.loadSpec'),
                        to_json(named_struct('type', 'delta',
                                             'path', get_json_object(shared, '$.loadPath'),
                                             'segment', load_key))) AS load_spec,
               {_TS.format(col="updated_ms")} AS used_status_last_updated
        FROM {{table}} WHERE kind = '{SEGMENT}'""",
    "locks": f"""
        SELECT id AS lock_id, datasource, group_id, task_id, lock_type,
               lock_granularity AS granularity, priority,
               {_TS.format(col="start_ms")} AS start, {_TS.format(col="end_ms")} AS `end`,
               version, partition_num, revoked, {_TS.format(col="expires_ms")} AS expires,
               (NOT revoked AND expires_ms > unix_millis(current_timestamp())) AS live
        FROM {{table}} WHERE kind = '{LOCK}'""",
    "pending_segments": f"""
        SELECT payload AS segment_id, datasource, sequence_name, previous_id AS
               sequence_prev_id, group_id, {_TS.format(col="start_ms")} AS start,
               {_TS.format(col="end_ms")} AS `end`, version, partition_num,
               {_TS.format(col="updated_ms")} AS created
        FROM {{table}} WHERE kind = '{PENDING}'""",
    "tasks": f"""
        SELECT id AS task_id, datasource, group_id, get_json_object(payload, '$.type') AS type,
               get_json_object(payload, '$.status') AS status,
               {_TS.format(col="updated_ms")} AS updated,
               {_PHASE_SUM.format(key="executor_run_ms")} / 1000 AS task_seconds,
               {_PHASE_SUM.format(key="input_bytes")} AS bytes_processed,
               {_PHASE_SUM.format(key="shuffle_write_bytes")} AS shuffle_bytes,
               payload AS report
        FROM (SELECT *, from_json(get_json_object(payload, '$.phase_metrics'),
                                  'map<string, map<string, bigint>>') AS phase_metrics
              FROM {{table}} WHERE kind = '{TASK}')""",
    # The compaction manager's picture: holds, selections, running and queued jobs (as live
    # managers last reported them), user compactions. One row each.
    "compaction": f"""
        SELECT datasource, IF(get_json_object(payload, '$.state') = 'held', 'hold',
                              'selection') AS entry,
               id, get_json_object(payload, '$.kind') AS type, group_id AS owner,
               {_TS.format(col="start_ms")} AS start, {_TS.format(col="end_ms")} AS `end`,
               version, size(from_json(get_json_object(payload, '$.segments'),
                                       'array<string>')) AS segments,
               CAST(NULL AS STRING) AS compactor, CAST(NULL AS TIMESTAMP) AS expires,
               get_json_object(payload, '$.state') AS status
        FROM {{table}} WHERE kind = '{SELECTION}'
        UNION ALL
        SELECT datasource, 'running', id, get_json_object(payload, '$.job.kind'),
               get_json_object(payload, '$.job.owner'),
               {_TS.format(col="start_ms")}, {_TS.format(col="end_ms")}, version,
               size(from_json(get_json_object(payload, '$.job.segments'), 'array<string>')),
               get_json_object(payload, '$.compactor'), {_TS.format(col="expires_ms")},
               IF(expires_ms > unix_millis(current_timestamp()), 'live', 'expired')
        FROM {{table}} WHERE kind = '{RUNNING}'
        UNION ALL
        SELECT datasource, 'user', id, 'user', id,
               {_TS.format(col="start_ms")}, {_TS.format(col="end_ms")}, NULL,
               size(from_json(get_json_object(payload, '$.chunks'), 'array<string>')),
               NULL, NULL, get_json_object(payload, '$.status')
        FROM {{table}} WHERE kind = '{USER}'
        UNION ALL
        SELECT job.datasource, 'queued', job.jobId, job.kind, job.owner,
               CAST(timestamp_millis(job.start) AS TIMESTAMP),
               CAST(timestamp_millis(job.`end`) AS TIMESTAMP), job.version, size(job.segments),
               manager, expires, 'queued'
        FROM (SELECT id AS manager, {_TS.format(col="expires_ms")} AS expires,
                     explode(from_json(get_json_object(payload, '$.top'),
                       'array<struct<jobId: string, datasource: string, start: bigint,
                        `end`: bigint, version: string, kind: string, owner: string,
                        segments: array<string>>>')) AS job
              FROM {{table}}
              WHERE kind = 'compaction_manager'
                AND expires_ms > unix_millis(current_timestamp()))""",
    # Retention rules (stored chains; a never-set default chain is Druid's loadForever) and
    # their audit trail.
    "rules": """
        SELECT id AS datasource, seq AS revision, pos AS position,
               get_json_object(payload, concat('$[', pos, ']')) AS rule,
               get_json_object(get_json_object(payload, concat('$[', pos, ']')), '$.type')
                 AS type
        FROM (SELECT *, explode(sequence(0, json_array_length(payload) - 1)) AS pos
              FROM {table}
              WHERE kind = 'rule_chain' AND json_array_length(payload) > 0)""",
    "rule_history": f"""
        SELECT get_json_object(payload, '$.datasource') AS datasource, seq AS revision,
               get_json_object(payload, '$.author') AS author,
               get_json_object(payload, '$.comment') AS comment,
               {_TS.format(col="updated_ms")} AS changed,
               get_json_object(payload, '$.old') AS old_rules,
               get_json_object(payload, '$.new') AS new_rules
        FROM {{table}} WHERE kind = 'rule_audit'""",
    # Volumes with what is loaded on them, and every copy of a segment on a volume.
    "volumes": """
        SELECT v.id AS volume, get_json_object(v.payload, '$.tier') AS tier,
               get_json_object(v.payload, '$.path') AS path,
               CAST(get_json_object(v.payload, '$.capacityBytes') AS BIGINT) AS capacity,
               CAST(get_json_object(v.payload, '$.decommissioning') AS BOOLEAN)
                 AS decommissioning,
               CAST(get_json_object(v.payload, '$.priority') AS INT) AS priority,
               coalesce(c.segments, 0) AS segments, coalesce(c.used, 0) AS used
        FROM (SELECT * FROM {table} WHERE kind = 'volume') v
        LEFT JOIN (SELECT group_id, count(*) AS segments, sum(size_bytes) AS used
                   FROM {table}
                   WHERE kind = 'segment_copy' AND sequence_name = 'LOADED'
                   GROUP BY group_id) c
        ON c.group_id = v.id""",
    "segment_copies": f"""
        SELECT substring(datasource, 9) AS datasource, previous_id AS segment_id,
               group_id AS volume, sequence_name AS state,
               get_json_object(payload, '$.reason') AS reason,
               get_json_object(payload, '$.moveFrom') AS move_from,
               {_TS.format(col="start_ms")} AS start, {_TS.format(col="end_ms")} AS `end`,
               size_bytes AS size, seq AS table_version, {_TS.format(col="updated_ms")} AS updated
        FROM {{table}} WHERE kind = 'segment_copy'""",
}


def current_rows_sql(path: str) -> str:
    """A subquery of the metadata table's current rows (see the module)."""
    held = ", ".join(f"'{k}'" for k in sorted(LEASED_KINDS))
    columns = ", ".join(
        f"CASE WHEN r.kind IN ({held}) AND l.expires_ms IS NOT NULL "
        "THEN greatest(coalesce(r.expires_ms, 0), l.expires_ms) ELSE r.expires_ms END "
        "AS expires_ms"
        if c == "expires_ms"
        else f"r.{c}"
        for c in COLUMNS
    )
    versions = (
        f"SELECT *, row_number() OVER (PARTITION BY datasource, kind, id ORDER BY rev DESC) "
        f"AS rn FROM {sql_path(path)}"
    )
    current = f"SELECT * FROM ({versions}) WHERE rn = 1 AND NOT coalesce(deleted, false)"
    return (
        f"(WITH cur AS ({current}) SELECT {columns} FROM cur r LEFT JOIN "
        f"(SELECT datasource, id, expires_ms FROM cur WHERE kind = '{LEASE}') l "
        "ON r.datasource = l.datasource AND r.group_id = l.id)"
    )


SYSTEM_VIEWS: tuple[str, ...] = tuple(_VIEWS)


def system_view_sql(store: MetadataStore, view: str) -> str:
    """The query of the system view ``view`` (one of :data:`SYSTEM_VIEWS`, e.g. ``"segments"``)
    over ``store``'s current rows, for ``spark.sql`` without registering a view."""
    if view not in _VIEWS:
        raise SpecError(f"no system view {view!r}; there are {', '.join(_VIEWS)}")
    return _VIEWS[view].format(table=current_rows_sql(store.path))


def register_system_views(
    spark: SparkSession, store: MetadataStore, *, prefix: str = "segmentlake_"
) -> list[str]:
    """Create or replace the temp views ``<prefix>segments``, ``<prefix>locks``,
    ``<prefix>pending_segments``, ``<prefix>tasks``, ``<prefix>compaction``, ``<prefix>rules``,
    ``<prefix>rule_history``, ``<prefix>volumes`` and ``<prefix>segment_copies``; return their
    names."""
    names = []
    for suffix in _VIEWS:
        name = f"{prefix}{suffix}"
        query = system_view_sql(store, suffix)
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {quote_identifier(name)} AS {query}")
        names.append(name)
    return names
