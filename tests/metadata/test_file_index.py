"""``FileIndex`` answers from a load's Arrow columns and the changes followed since, and from
dicts once they are built: every answer must equal a plain dict's of the same files, before,
while and after the dicts are built. Spark-free."""

from __future__ import annotations

import random
from collections.abc import Set as AbstractSet

import pyarrow as pa
import pytest

from segmentlake.metadata import file_index
from segmentlake.metadata.file_index import File, FileIndex

ROOT = "file:///wh/t/"
KEYS = [None, "a", "b", "b2", "c", "é", "z"]  # None: a file with no __segment value


def _loaded(rng: random.Random, n: int) -> dict[str, File]:
    files: dict[str, File] = {}
    for i in range(n):
        key = rng.choice(KEYS)
        path = f"s3://other/{i}.parquet" if rng.random() < 0.1 else f"k={key}/part-{i}.parquet"
        files[path] = (rng.randrange(1, 1000), key)
    return files


def _index(files: dict[str, File]) -> FileIndex:
    paths = list(files)
    return FileIndex(
        ROOT,
        pa.array(paths, pa.string()),
        pa.array([files[p][0] for p in paths], pa.int64()),
        pa.array([files[p][1] for p in paths], pa.string()),
    )


def _uri(path: str) -> str:
    return path if ":" in path else ROOT + path


def _assert_same(
    index: FileIndex,
    model: dict[str, File],
    *,
    build: bool,
    dropped: AbstractSet[str] = frozenset(),
) -> None:
    assert len(index) == len(model)
    for key in KEYS:
        mine = {p: f for p, f in model.items() if f[1] == key}
        assert dict(index.paths_of(key)) == {p: _uri(p) for p in mine}, key
        assert index.files_of(key) == mine, key
    for path, file in model.items():
        assert index.find(path, key=file[1]) == file
        assert index.find(path, key=None, keyed=False) == file
    for path in dropped - model.keys():  # a loaded file dropped is gone
        assert index.find(path, key=path.split("/")[0].removeprefix("k=")) is None
        assert index.find(path, key=None, keyed=False) is None
    assert index.find("k=a/never.parquet", key="a") is None
    assert index.find("k=a/never.parquet", key=None, keyed=False) is None
    if build:
        assert index.as_dict() == model


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("lookups", [0, 40, 10_000])  # dicts built at once, midway, never
def test_the_index_answers_as_a_dict_of_the_same_files_would(
    seed: int, lookups: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_index, "_LOOKUPS", lookups)
    rng = random.Random(seed)
    model = _loaded(rng, rng.randrange(0, 40))
    index = _index(model)
    _assert_same(index, model, build=False)
    dropped: set[str] = set()
    for step in range(60):
        path = rng.choice([*model, f"k=new/{step}.parquet"])
        found = index.find(path, key=model[path][1] if path in model else None)
        assert found == model.get(path)
        if found is not None and rng.random() < 0.5:  # removed, or added again (a new DV)
            index.drop(path, found[1])
            del model[path]
            dropped.add(path)
            if rng.random() < 0.5:
                continue
        elif found is not None:
            continue
        size, key = rng.randrange(1, 1000), found[1] if found else rng.choice(KEYS)
        index.add(path, size, key)
        model[path] = (size, key)
        if step % 10 == 0:
            _assert_same(index, model, build=False, dropped=dropped)
    _assert_same(index, model, build=True, dropped=dropped)
    # Built, it is kept current in its dicts.
    gone = next(iter(model), None)
    if gone is not None:
        index.drop(gone, model.pop(gone)[1])
    index.add("k=late/x.parquet", 5, "late")
    model["k=late/x.parquet"] = (5, "late")
    assert index.as_dict() == model
    assert dict(index.paths_of("late")) == {"k=late/x.parquet": ROOT + "k=late/x.parquet"}


def test_a_large_load_is_looked_up_without_building_the_dicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = {f"k=k{i:05d}/{i}.parquet": (i, f"k{i:05d}") for i in range(20_000)}
    index = _index(model)
    assert index.files_of("k01234") == {"k=k01234/1234.parquet": (1234, "k01234")}
    assert index.find("k=k00007/7.parquet", key="k00007") == (7, "k00007")
    assert index._files is None  # the point: a few lookups build nothing
    assert len(index) == 20_000
    # Many (a large entry followed add by add) build them once, rather than search each time.
    monkeypatch.setattr(file_index, "_LOOKUPS", 10)
    for i in range(10):
        assert index.find(f"k=k{i:05d}/{i}.parquet", key=f"k{i:05d}") == (i, f"k{i:05d}")
    assert index._files is not None
    assert index.as_dict() == model
