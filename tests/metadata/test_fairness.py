"""A writer that keeps losing on a hot chunk says so in the log, and the others give way.

The winner of a race starts its next transaction before the losers learn they lost, so it
would keep winning; a loser's announcement (a commit of no rows, see
``MetadataStore.announce_waiting``) makes every other process pause before transactions on
the same scope for a while. The multi-process figures are in bench/metadata.py contention.
"""

from __future__ import annotations

from pathlib import Path

from segmentlake.metadata.records import LOCK, metadata_row
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, now_ms

from .support import DAY, NEXT_DAY

DS = "fair"


def test_an_announced_loser_makes_others_pause_on_its_scope_only(tmp_path: Path) -> None:
    loser = MetadataStore(str(tmp_path / "wh"))
    winner = MetadataStore(str(tmp_path / "wh"))
    loser.create()
    winner.read(DS, scope=Scope.of([DAY.key]))
    assert winner.courtesy(DS, Scope.of([DAY.key]), 0.05) == 0.0

    loser.announce_waiting(DS, Scope.of([DAY.key]), "allocate:1")
    winner.read(DS, scope=Scope.of([DAY.key]))  # follows the log: sees the announcement

    assert 0.05 <= winner.courtesy(DS, Scope.of([DAY.key]), 0.05) <= 0.15
    assert winner.courtesy(DS, Scope.of([NEXT_DAY.key]), 0.05) == 0.0
    loser.read(DS, scope=Scope.of([DAY.key]))
    assert loser.courtesy(DS, Scope.of([DAY.key]), 0.05) == 0.0  # not to itself


def test_an_announcement_changes_no_row_and_conflicts_with_nothing(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path / "wh"))
    store.create()
    state = store.read(DS, scope=Scope.of([DAY.key]))
    other = MetadataStore(str(tmp_path / "wh"))

    other.announce_waiting(DS, Scope.of([DAY.key]), "t:1")

    assert store.rows(DS) == []
    # A transaction that read DAY before the announcement still commits on top of it.
    row = metadata_row(
        DS, LOCK, "l", now_ms(), start_ms=DAY.start_millis, end_ms=DAY.end_millis,
        group_id="g", revoked=False, expires_ms=now_ms() + 60_000,
    )  # fmt: skip
    assert store.commit(state, [Change("upsert", row)], commit_id="c", operation="t")
