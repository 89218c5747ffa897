"""``TableLog.version()`` reads a local table's latest version from its log's directory: it
must say what a snapshot load says, through checkpoints, cleaned-up history and the files
writers leave next to the entries."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from segmentlake.metadata.table_log import TableLog


def _append(path: Path, i: int) -> None:
    write_deltalake(str(path), pa.table({"x": [i]}), mode="append")


def test_no_table_is_version_minus_one(tmp_path: Path) -> None:
    assert TableLog(str(tmp_path / "absent")).version() == -1
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)  # a create not yet committed
    assert TableLog(str(tmp_path / "empty")).version() == -1


def test_the_listed_version_is_the_snapshot_version(tmp_path: Path) -> None:
    path = tmp_path / "t"
    log = TableLog(str(path))
    _append(path, 0)
    assert log.version() == 0  # version 0 counts (it is falsy)
    for i in range(1, 12):
        _append(path, i)
        if i == 6:
            DeltaTable(str(path)).create_checkpoint()
        assert log.version() == DeltaTable(str(path)).version() == i
    # History before the checkpoint cleaned up, and what writers leave beside the entries:
    # a temporary entry being linked, a checksum, the last-checkpoint pointer.
    log_dir = path / "_delta_log"
    for old in range(6):
        (log_dir / f"{old:020d}.json").unlink()
    (log_dir / f".{12:020d}.json.0c4f.tmp").write_text("{}")
    (log_dir / f"{11:020d}.crc").write_text("{}")
    assert (log_dir / "_last_checkpoint").exists()
    assert log.version() == DeltaTable(str(path)).version() == 11


def test_file_uris_are_listed_like_paths(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, 0)
    _append(path, 1)
    assert TableLog(f"file://{path}").version() == 1
    assert TableLog(f"file:{path}").version() == 1
