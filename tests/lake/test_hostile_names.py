"""Arbitrary datasource names through every entry (append, read, register_view, kill, the CLI):
each is refused with a SpecError stating the name rule and changes no file at all, or it lands
exactly at ``<warehouse>/<name>`` and changes nothing outside that directory and the
warehouse's own metadata."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from segmentlake.cli.main import main
from segmentlake.core.names import NAME_RULE, check_datasource_name, quote_identifier
from segmentlake.errors import SpecError
from segmentlake.lake import Lake

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "count", "name": "edits"}],
    "granularitySpec": {"segmentGranularity": "day", "rollup": False},
}
ROWS = [("2024-01-01T01:00:00Z", "a"), ("2024-01-01T02:00:00Z", "b")]
# Characters that paths, Hadoop globs, shells and SQL read specially, and plain ones.
ALPHABET = "ab0_-. /\\`'\"*?[]{},:%\t\n\x00é$;"
TRIED: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def report_tried() -> Iterator[None]:
    """How many names took each path (seen with ``pytest -s``)."""
    yield
    print(f"\nnames tried: {dict(TRIED)}")


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time, and every directory
    (a directory's own mtime changes with its entries, which are listed themselves)."""
    found: dict[str, tuple[int, int]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(directory, name), root)] = (0, 0)
        for name in files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            found[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
    return found


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def outside(paths: set[str], *allowed: str) -> set[str]:
    """The paths not inside one of the ``allowed`` directories (relative to the root)."""
    return {p for p in paths if not any(p == a or p.startswith(a + os.sep) for a in allowed)}


def cli(*argv: str) -> int:
    """The CLI's exit code (argparse exits 2 itself on a usage error, e.g. a name like -x)."""
    try:
        return main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)


def run_refused(lake: Lake, root: Path, name: str, spark: SparkSession) -> None:
    before = listing(root)
    df = spark.createDataFrame(ROWS, "ts STRING, user STRING")
    attempts = {
        "append": lambda: lake.append(df, name, SPEC),
        "overwrite": lambda: lake.overwrite(df, name, SPEC, interval="2024-01-01/P1D"),
        "read": lambda: lake.read(name),
        "register_view": lambda: lake.register_view(name),
        "kill": lambda: lake.kill(name, older_than=0, vacuum=False),
        "timeline": lambda: lake.timeline(name),
        "compact": lambda: lake.compact(name),
    }
    for what, attempt in attempts.items():
        with pytest.raises(SpecError) as info:
            attempt()
        assert NAME_RULE in str(info.value), (what, str(info.value))
    for command in (["segments", name], ["kill", name], ["timeline", name]):
        assert cli("--warehouse", lake.warehouse, *command) == 2
    assert changed(before, listing(root)) == set(), name


def run_allowed(lake: Lake, root: Path, name: str, spark: SparkSession) -> None:
    warehouse = Path(lake.warehouse).relative_to(root)
    own = (str(warehouse / name), str(warehouse / "_segmentlake"))
    before = listing(root)
    report = lake.append(spark.createDataFrame(ROWS, "ts STRING, user STRING"), name, SPEC)
    assert report.status == "SUCCESS"
    after = listing(root)
    assert outside(changed(before, after), *own) == set(), name
    assert (root / warehouse / name / "_delta_log").is_dir()

    assert sorted(r.user for r in lake.read(name).collect()) == ["a", "b"]
    view = lake.register_view(name)
    assert view == name
    assert spark.sql(f"SELECT count(*) AS n FROM {quote_identifier(name)}").first().n == 2
    assert cli("--warehouse", lake.warehouse, "segments", name) == 0

    before = listing(root)
    lake.mark_unused(lake.used_segments(name))
    killed = lake.kill(name, older_than=0, vacuum=False)
    assert len(killed.killed) == 1
    assert outside(changed(before, listing(root)), *own) == set(), name
    assert lake.read(name).count() == 0


@settings(
    # CI runs a slice; SEGMENTLAKE_FUZZ_EXAMPLES=200 runs a longer one (about 5 s a name).
    max_examples=int(os.environ.get("SEGMENTLAKE_FUZZ_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    name=st.text(alphabet=ALPHABET, max_size=10)
    | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\- ]{0,8}", fullmatch=True)
)
@example(name="..")
@example(name=".")
@example(name="../escape")
@example(name="_segmentlake")
@example(name="wiki`; DROP")
@example(name="{a,b}*")
@example(name="nul\x00")
@example(name="Wiki Edits.v2-x_0")
@example(name="L" + "o" * 253 + "g")  # the longest name allowed (it failed on "File name too long")
@example(name="L" + "o" * 254 + "g")  # one character too long
def test_every_name_is_refused_or_lands_in_its_directory(spark: SparkSession, name: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="names-"))
    try:
        (root / "warehouse").mkdir()
        (root / "neighbour.txt").write_text("must never change")
        lake = Lake(spark, str(root / "warehouse"))
        try:
            check_datasource_name(name)
        except SpecError:
            TRIED["refused"] += 1
            run_refused(lake, root, name, spark)
        else:
            TRIED["allowed"] += 1
            run_allowed(lake, root, name, spark)
    finally:
        shutil.rmtree(root, ignore_errors=True)
