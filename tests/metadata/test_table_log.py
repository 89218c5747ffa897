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


def test_following_hands_over_each_new_entry_or_says_to_load_whole(tmp_path: Path) -> None:
    """``follow`` gives a follower each entry after the one it read last, in order, and
    returns None (load the table whole) when following cannot be trusted: its entry changed
    (the table was created again), the next entry is missing below a checkpoint, the follower
    refused an entry, or more than ``limit`` entries were new."""
    import shutil

    path = tmp_path / "t"
    log = TableLog(str(path))
    for i in range(3):
        _append(path, i)
    seen: list[int] = []

    def take(version: int, actions: list[dict]) -> bool:
        seen.append(version)
        return any("add" in a for a in actions)

    stamp = log.entry_stamp(0)
    assert log.follow(0, stamp, take) == (2, log.entry_stamp(2))
    assert seen == [1, 2]
    assert log.follow(2, log.entry_stamp(2), take) == (2, log.entry_stamp(2))  # nothing new
    assert log.follow(0, stamp, take, limit=1) is None  # two new: more than the limit
    assert log.follow(0, (1, 1), take) is None  # not the entry it read: another table
    DeltaTable(str(path)).alter.set_table_properties({"delta.appendOnly": "false"})
    assert log.follow(2, log.entry_stamp(2), take) is None  # refused: no add in entry 3
    for i in range(3):
        _append(path, 10 + i)
    DeltaTable(str(path)).create_checkpoint()
    (path / "_delta_log" / f"{4:020d}.json").unlink()  # a cleanup behind the checkpoint
    stamp = log.entry_stamp(3)
    assert log.follow(3, stamp, take) is None
    shutil.rmtree(path)
    _append(path, 99)  # created again: only version 0
    assert log.follow(3, stamp, take) is None
    assert log.follow(3, None, take) is None  # a stamp never taken proves nothing


def test_a_checkpoint_is_written_only_where_the_property_says_so(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for path, interval in ((ours, "1000"), (theirs, "10")):
        for i in range(3):
            config = {"delta.checkpointInterval": interval} if i == 0 else None
            write_deltalake(str(path), pa.table({"x": [i]}), mode="append", configuration=config)
    wanted = ("delta.checkpointInterval", "1000")
    assert not TableLog(str(theirs)).checkpoint(2, if_property=wanted)
    assert TableLog(str(theirs)).last_checkpoint() is None
    assert TableLog(str(ours)).checkpoint(2, if_property=wanted)
    assert TableLog(str(ours)).last_checkpoint() == 2
    assert DeltaTable(str(ours)).to_pyarrow_table().num_rows == 3
    # A version that is not there: logged, nothing written, no exception.
    assert not TableLog(str(ours)).checkpoint(7)
    assert TableLog(str(ours)).last_checkpoint() == 2
