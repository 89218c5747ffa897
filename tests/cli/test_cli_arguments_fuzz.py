"""Hostile CLI arguments: every metadata command (no Spark) given arbitrary option values
either succeeds or exits 2 with one ``segmentlake: error:`` line; never a traceback.

``pytest -s`` prints how many argument lists were tried per command.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentlake.cli.main import main
from segmentlake.lake import Lake
from segmentlake.metadata.allocation import AllocateRequest
from tests.metadata.support import day_after, pending_segment

TRIED: Counter[str] = Counter()
EXAMPLES = int(os.environ.get("SEGMENTLAKE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(f"\nCLI argument lists tried: {dict(TRIED)} ({sum(TRIED.values())} in all)")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    lake = Lake(None, str(tmp_path_factory.mktemp("cli-fuzz") / "wh"), lease_seconds=600)
    pending = lake.actions.allocate("wiki", [AllocateRequest(day_after(0), "s")], group_id="g")
    lake.actions.publish("wiki", [pending_segment(p) for p in pending], group_id="g")
    return lake.warehouse


def run(*argv: str) -> tuple[int, str]:
    """Exit code and stderr of one CLI call (argparse's own usage errors exit 2)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = int(e.code or 0) if not isinstance(e.code, str) else 2
    return code, err.getvalue()


def check(command: str, code: int, err: str) -> None:
    TRIED[command] += 1
    assert code in (0, 2), f"{command}: exit {code}: {err}"
    if code == 2:
        assert "error" in err, err
        assert "Traceback" not in err, err


# Text that looks almost right: interval pieces, ISO periods, numbers, JSON fragments.
NEAR = st.sampled_from([
    "2020-01-01/P1D", "2020-01-01/2020-01-02", "P1D/2020-01-02", "2020-13-01/P1D", "2020-01-01/",
    "/", "", " ", "2020-01-01T25:00/P1D", "1e309", "-1", "0", "NaN", "{}", "[]", "null", "true",
    '{"type": "loadForever"}', '[{"type": "dropForever"}]', '{"maxSegmentsToMove": -5}',
    '{"maxSegmentsToMove": "50"}', '{"skipOffsetFromLatest": "P1D"}', "500G", "2T", "1.5X",
    "\x00", "2020-01-01/P1000000000Y", "99999999999999999999",
])  # fmt: skip
TEXT = st.one_of(NEAR, st.text(max_size=40), st.from_regex(r"[0-9PTYMDHS/:.\-Z]{0,30}"))
JSONISH = st.one_of(
    NEAR,
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "type",
                        "tieredReplicants",
                        "period",
                        "maxSegmentsToMove",
                        "seed",
                        "skipOffsetFromLatest",
                        "inputSegmentSizeBytes",
                        "x",
                    ]
                ),
                inner,
                max_size=3,
            )
        ),
        max_leaves=6,
    ).map(json.dumps),
)


@FUZZ
@given(command=st.sampled_from(["segments", "timeline"]), value=TEXT)
def test_interval_options(warehouse: str, command: str, value: str) -> None:
    check(f"{command} --interval", *run("--warehouse", warehouse, command, "wiki",
                                        "--interval", value))  # fmt: skip


@FUZZ
@given(value=JSONISH)
def test_rules_set(warehouse: str, value: str) -> None:
    check("rules --set", *run("--warehouse", warehouse, "rules", "wiki", "--set", value))


@FUZZ
@given(value=JSONISH)
def test_compaction_config_set(warehouse: str, value: str) -> None:
    check("compaction-config --set",
          *run("--warehouse", warehouse, "compaction-config", "wiki", "--set", value))  # fmt: skip


@FUZZ
@given(value=JSONISH)
def test_coordinator_config_set(warehouse: str, value: str) -> None:
    check("coordinator-config --set",
          *run("--warehouse", warehouse, "coordinator-config", "--set", value))  # fmt: skip


@FUZZ
@given(tier=TEXT, capacity=TEXT, priority=TEXT, path=TEXT)
def test_volume_add(warehouse: str, tier: str, capacity: str, priority: str, path: str) -> None:
    argv = ["volume", "add", "v1", "--tier", tier, "--path", path or "/tmp/x"]
    argv += ["--capacity", capacity, "--priority", priority]
    code, err = run("--warehouse", warehouse, *argv)
    check("volume add", code, err)
    if code == 0:
        run("--warehouse", warehouse, "volume", "remove", "v1")


@FUZZ
@given(task_id=TEXT)
def test_tasks_id(warehouse: str, task_id: str) -> None:
    check("tasks --id", *run("--warehouse", warehouse, "tasks", "wiki", "--id", task_id))


def test_the_check_can_fail() -> None:
    with pytest.raises(AssertionError):
        check("self-test", 1, "Traceback (most recent call last)")
    with pytest.raises(AssertionError):
        check("self-test", 2, "Traceback (most recent call last):\n  ...")
    TRIED.pop("self-test", None)


def test_a_known_bad_value_is_named(warehouse: str) -> None:
    code, err = run("--warehouse", warehouse, "segments", "wiki", "--interval", "2020-13-01/P1D")
    assert code == 2
    assert "2020-13-01" in err


def test_unused_path_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    code, _ = run("--warehouse", str(missing), "segments", "wiki")
    assert code == 2
    assert not missing.exists()
