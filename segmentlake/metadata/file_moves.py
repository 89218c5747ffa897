"""Moving files of a Delta table to another partition value without rewriting them: a hard
link (a server-side copy on object stores) under the new value's directory, then one commit
removing the old path and adding the new one with the same stats."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from urllib.parse import unquote

from deltalake import CommitProperties, PostCommitHookProperties
from deltalake.transaction import AddAction, RemoveAction

from segmentlake.core.names import SEGMENT_KEY_COLUMN as SEGMENT_KEY
from segmentlake.metadata.table_log import TableLog

__all__ = ["rekey_files"]

logger = logging.getLogger(__name__)


def rekey_files(log: TableLog, versions: tuple[int, int], moves: Mapping[str, str]) -> None:
    """Move each file of ``moves`` (path -> new ``__segment`` value), added in ``versions``,
    to its new key: a hard link (a server-side copy on object stores) under the new key's
    directory, then one Delta commit removing the old path and adding the new one with the
    new partition value and the same stats. No row is decoded or encoded again; the old
    path is left to ``VACUUM`` like any removed file."""
    adds = {}
    for version in range(versions[0] + 1, versions[1] + 1):
        for action in log.commit_actions(version):
            add = action.get("add")
            if add is not None and add["path"] in moves:
                adds[add["path"]] = add
    missing = set(moves) - set(adds)
    if missing:
        raise RuntimeError(f"files {sorted(missing)[:3]} were not added by {log.uri} {versions}")
    stamp = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = []
    for path, add in adds.items():
        moved = f"{SEGMENT_KEY}={moves[path]}/{path.rsplit('/', 1)[-1]}"
        _link(log, path, moved)
        actions.append(RemoveAction(path, True, stamp, add["size"], add["partitionValues"]))
        values = {**add["partitionValues"], SEGMENT_KEY: moves[path]}
        stats = add.get("stats") or ""
        actions.append(AddAction(moved, add["size"], values, stamp, True, stats))
    table = log.table()
    table.create_write_transaction(
        actions,
        "append",
        table.schema(),
        partition_by=[SEGMENT_KEY],
        commit_properties=CommitProperties(max_commit_retries=20),
        post_commithook_properties=PostCommitHookProperties(
            create_checkpoint=False, cleanup_expired_logs=False
        ),
    )


def _link(log: TableLog, path: str, moved: str) -> None:
    """``moved`` holds the bytes of ``path`` (both relative to the table): a hard link where
    the file system has them, else a copy (server-side on object stores)."""
    source, target = log.full(unquote(path)), log.full(unquote(moved))
    if log.local:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.link(source, target)
            return
        except FileExistsError:  # a retried split linked it already
            return
        except OSError:
            logger.debug("no hard link %s -> %s; copying", source, target)
    log.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    log.fs.copy_file(source, target)
