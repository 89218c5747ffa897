"""A table's files kept current by following its log (``SegmentFiles``) must equal a fresh
snapshot load after every kind of commit — appends, partition deletes, a schema change, an
application transaction — and load whole again when following cannot be trusted (history
cleaned up behind a checkpoint). Spark-free: delta-rs writes the tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from segmentlake.metadata import segment_files
from segmentlake.metadata.segment_files import SegmentFiles, follow_gap_s, same_schema
from segmentlake.metadata.table_log import TableLog

KEY = "__segment"


def _rows(keys: list[str], value: int, *, extra: bool = False) -> pa.Table:
    columns: dict[str, list[object]] = {
        KEY: keys,
        "__time": [1_000 * value + i for i in range(len(keys))],
        "v": [value] * len(keys),
    }
    if extra:
        columns["page"] = [f"p{value}"] * len(keys)
    return pa.table(columns)


def _append(path: Path, table: pa.Table, **kwargs: object) -> None:
    write_deltalake(str(path), table, partition_by=[KEY], mode="append", **kwargs)  # type: ignore[arg-type]


def _assert_same(followed: SegmentFiles, path: Path) -> None:
    fresh = SegmentFiles(TableLog(str(path)))
    assert followed.version == fresh.version
    assert followed.file_count == fresh.file_count
    # Keys looked up before every file is indexed (in the loaded columns), then after.
    keys = {k for _, k in SegmentFiles(TableLog(str(path))).files.values() if k is not None}
    for key in keys:
        assert followed.paths_of(key) == fresh.paths_of(key)
        assert followed.files_of(key) == fresh.files_of(key)
    assert followed.files == fresh.files
    for key in keys:
        assert followed.paths_of(key) == fresh.paths_of(key)
    assert same_schema(followed.schema_json, fresh.schema_json)
    assert followed.metadata["id"] == fresh.metadata["id"]
    pairs = [(p, "file:///x/" + p) for p in sorted(fresh.files)]
    mine = {a["path"]: a for a in followed.add_actions(pairs)}
    theirs = {a["path"]: a for a in fresh.add_actions(pairs)}
    assert mine.keys() == theirs.keys()
    for uri, add in mine.items():
        other = theirs[uri]
        assert (add["size"], add["partitionValues"]) == (other["size"], other["partitionValues"])
        # The followed stats are the writer's text, the loaded ones rebuilt: same facts.
        got, expected = json.loads(add["stats"]), json.loads(other["stats"])
        assert got["numRecords"] == expected["numRecords"]
        assert got["minValues"]["v"] == expected["minValues"]["v"]
        assert got["maxValues"]["__time"] == expected["maxValues"]["__time"]


def test_following_equals_loading_after_every_kind_of_commit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, _rows(["a", "b"], 0))
    followed = SegmentFiles(TableLog(str(path)))
    _assert_same(followed, path)

    _append(path, _rows(["c", "c", "d"], 1))  # new keys, two rows in one file
    _assert_same(followed.refresh(), path)
    _append(path, _rows(["a"], 2))  # a second file of an existing key
    _assert_same(followed.refresh(), path)
    assert len(followed.paths_of("a")) == 2

    DeltaTable(str(path)).delete(f"{KEY} = 'b'")  # remove actions only
    _assert_same(followed.refresh(), path)
    assert not followed.paths_of("b")

    # A new column (a metaData action) and an application transaction in one commit.
    _append(
        path,
        _rows(["e"], 3, extra=True),
        schema_mode="merge",
        commit_properties=CommitProperties(app_transactions=[Transaction("app", 7)]),
    )
    _assert_same(followed.refresh(), path)
    assert "page" in followed.schema_json
    assert followed.transaction_version("app") == 7
    assert followed.transaction_version("other") is None

    # Several commits at once, then nothing new.
    for i in range(4, 9):
        _append(path, _rows([f"k{i}"], i, extra=True))
    _assert_same(followed.refresh(), path)
    _assert_same(followed.refresh(), path)
    assert followed.loads == 1  # every step above was followed, none loaded whole


def test_loaded_add_actions_found_by_a_scan_equal_those_found_through_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync's few files are found by scanning the loaded add actions, a whole diff's many
    through an index of them: the same add actions, in the order asked, either way."""
    path = tmp_path / "t"
    _append(path, _rows(["a", "b", "c"], 0))
    _append(path, _rows(["a", "d", "e"], 1))
    scanned = SegmentFiles(TableLog(str(path)))
    pairs = [(p, "file:///x/" + p) for p in sorted(scanned.files, reverse=True)]
    asked = [pairs[3], pairs[0], pairs[4]]
    few, every = scanned.add_actions(asked), scanned.add_actions(pairs)
    assert [a["path"] for a in few] == [uri for _, uri in asked]
    monkeypatch.setattr(segment_files, "_SCANNED", 0)
    indexed = SegmentFiles(TableLog(str(path)))
    assert indexed.add_actions(asked) == few
    assert indexed.add_actions(pairs) == every
    assert {a["partitionValues"][KEY] for a in every} == {"a", "b", "c", "d", "e"}


def test_a_transaction_from_the_loaded_snapshot_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(
        path,
        _rows(["a"], 0),
        commit_properties=CommitProperties(app_transactions=[Transaction("app", 3)]),
    )
    followed = SegmentFiles(TableLog(str(path)))
    _append(path, _rows(["b"], 1))
    assert followed.refresh().transaction_version("app") == 3


def test_history_cleaned_up_behind_a_checkpoint_loads_whole(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, _rows(["a"], 0))
    followed = SegmentFiles(TableLog(str(path)))
    for i in range(1, 6):
        _append(path, _rows([f"k{i}"], i))
    DeltaTable(str(path)).create_checkpoint()
    for old in range(1, 5):  # the entries this reader would follow are gone
        (path / "_delta_log" / f"{old:020d}.json").unlink()
    _assert_same(followed.refresh(), path)
    assert followed.loads == 2
    _append(path, _rows(["z"], 9))  # and it follows again from there
    _assert_same(followed.refresh(), path)
    assert followed.loads == 2


def test_schema_texts_are_compared_as_schemas() -> None:
    a = '{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]}'
    b = json.dumps(json.loads(a), indent=2)
    c = a.replace('"long"', '"string"')
    assert same_schema(a, b)
    assert not same_schema(a, c)


def _followed_at_version_2(path: Path) -> SegmentFiles:
    for i in range(3):
        _append(path, _rows([f"old{i}"], i))
    followed = SegmentFiles(TableLog(str(path)))
    assert followed.version == 2
    shutil.rmtree(path)
    return followed


def test_a_table_created_again_with_fewer_versions_is_loaded_whole(tmp_path: Path) -> None:
    followed = _followed_at_version_2(tmp_path / "t")
    _append(tmp_path / "t", _rows(["new"], 0))
    _assert_same(followed.refresh(), tmp_path / "t")
    assert followed.loads == 2
    assert {k for _, k in followed.files.values()} == {"new"}


def test_a_table_created_again_past_the_followed_version_is_loaded_whole(tmp_path: Path) -> None:
    followed = _followed_at_version_2(tmp_path / "t")
    for i in range(5):  # entry 2 is there again, but it is another table's
        _append(tmp_path / "t", _rows([f"new{i}"], i))
    _assert_same(followed.refresh(), tmp_path / "t")
    assert followed.loads == 2
    assert {k for _, k in followed.files.values()} == {f"new{i}" for i in range(5)}


def test_touched_since_names_each_followed_change_until_a_load(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, _rows(["a", "b"], 0))
    followed = SegmentFiles(TableLog(str(path)))
    start = followed.mark
    assert followed.touched_since(start) == {}
    _append(path, _rows(["c"], 1))
    middle = followed.refresh().mark
    DeltaTable(str(path)).delete(f"{KEY} = 'a'")
    followed.refresh()
    touched = followed.touched_since(start)
    assert touched is not None
    assert sorted(touched.values()) == ["a", "c"]  # c's new file, a's removed one
    assert followed.touched_since(followed.mark) == {}
    assert followed.touched_since(middle) == {p: k for p, k in touched.items() if k == "a"}
    generation, version = start
    assert followed.touched_since((generation, version - 1)) is None  # before it followed
    assert followed.touched_since((generation, followed.version + 1)) is None  # not yet
    shutil.rmtree(path)  # created again: its versions start over
    _append(path, _rows(["z"], 9))
    followed.refresh()
    assert followed.loads == 2
    assert followed.version == start[1]  # the same number, another table
    assert followed.touched_since(start) is None


def test_a_pause_follows_within_half_the_log_retention(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, _rows(["a"], 0), configuration={"delta.logRetentionDuration": "interval 2 days"})
    followed = SegmentFiles(TableLog(str(path)))
    assert follow_gap_s(followed.metadata) == 3600.0
    followed._followed -= 600  # a stream triggered every 10 minutes
    _append(path, _rows(["b"], 1))
    _assert_same(followed.refresh(), path)
    assert followed.loads == 1  # followed, not loaded
    followed._followed -= 4000  # past the gap: loaded whole
    _assert_same(followed.refresh(), path)
    assert followed.loads == 2


@pytest.mark.parametrize(
    ("retention", "gap"),
    [
        (None, 3600.0),  # Delta's default, 30 days
        ("interval 2 days", 3600.0),
        ("interval 30 minutes", 900.0),
        ("interval 3 minutes", 120.0),  # never below the metadata table's
        ("1 hour 30 minutes", 2700.0),
        ("interval a while", 120.0),  # unreadable: the short gap
    ],
)
def test_the_follow_gap_is_half_the_log_retention_within_bounds(
    retention: str | None, gap: float
) -> None:
    configuration = {} if retention is None else {"delta.logRetentionDuration": retention}
    assert follow_gap_s({"configuration": configuration}) == gap
