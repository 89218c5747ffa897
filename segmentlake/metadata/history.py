"""A datasource's history: the metadata commits that changed it, newest first.

Every metadata commit carries a record (``op``, ``ds``, ``id``; see :mod:`.metadata_table`) in its
``commitInfo``, so the log itself is the history — the counterpart of Delta's ``DESCRIBE
HISTORY`` and pyiceberg's ``inspect.history()``, but of what readers see (publishes, marks,
compactions), not of the rows' files. It reaches back as far as the log keeps entries (log
cleanup drops old ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from segmentlake.core.spec_reader import check_int
from segmentlake.metadata.metadata_table import COMMIT_RECORD_KEY, _commit_record
from segmentlake.metadata.store import MetadataStore

__all__ = ["HISTORY_SCHEMA", "datasource_history"]

# Commits that change no row: coordination notes and the store's own file upkeep.
_NOT_CHANGES = frozenset({"waiting", "upkeep_claim", "upkeep"})

HISTORY_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("operation", pa.string()),
        ("commit_id", pa.string()),
    ]
)


def datasource_history(
    store: MetadataStore, datasource: str, *, limit: int = 100, max_versions: int | None = None
) -> pa.Table:
    """The newest ``limit`` metadata commits that changed ``datasource``: ``version`` (of the
    metadata table), ``timestamp``, ``operation`` (``publish``, ``mark_unused``, ``lock``,
    ``allocate``, ``task``, ...) and ``commit_id``, newest first. Reads one log entry per
    version walking back from the latest, at most ``max_versions`` of them (default: all the
    log keeps); an empty table when there is no metadata yet."""
    check_int(limit, "limit (of commits)", minimum=0)
    rows: list[dict[str, Any]] = []
    latest = store.table.log.version() if store.exists() else -1
    oldest = -1 if max_versions is None else max(-1, latest - max_versions)
    version = latest
    while version > oldest and len(rows) < limit:
        info = _commit_info(store, version)
        if info is None:  # cleaned up: nothing older is left either
            break
        record = _commit_record(info) if COMMIT_RECORD_KEY in info else None
        if record and record.get("ds") == datasource and record.get("op") not in _NOT_CHANGES:
            rows.append(
                {
                    "version": version,
                    "timestamp": info.get("timestamp"),
                    "operation": record.get("op"),
                    "commit_id": record.get("id"),
                }
            )
        version -= 1
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)


def _commit_info(store: MetadataStore, version: int) -> Mapping[str, Any] | None:
    actions = store.table.log.commit_actions(version)
    if not actions:
        return None
    for action in actions:
        info = action.get("commitInfo")
        if info is not None:
            return dict(info)
    return {}
