"""The metadata API is the only way in: no code outside ``segmentlake/metadata/`` builds raw
predicates over metadata columns, talks to delta-rs, or runs its own commit retry loop."""

from __future__ import annotations

import re
from pathlib import Path

import segmentlake

PACKAGE = Path(segmentlake.__file__).parent
FORBIDDEN = {
    "a raw predicate over metadata columns (use segmentlake.metadata.queries)": re.compile(
        r"\b(pc|compute|ds)\.field\("
    ),
    "delta-rs outside the metadata store": re.compile(r"^\s*(from|import) deltalake\b", re.M),
    "a retry loop of its own (use transact or retrying_table_commit)": re.compile(
        r"for attempt in range\("
    ),
}


def offenders() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "metadata":
            continue
        text = path.read_text()
        for what, pattern in FORBIDDEN.items():
            if pattern.search(text):
                found.append(f"{relative}: {what}")
    return found


def test_nothing_outside_metadata_reaches_into_it() -> None:
    assert offenders() == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    # The patterns must match what they forbid, or the test above could never fail.
    sample = 'import pyarrow.compute as pc\ncond = pc.field("kind") == "x"\nimport deltalake\n'
    hits = [what for what, pattern in FORBIDDEN.items() if pattern.search(sample)]
    assert len(hits) == 2
    assert FORBIDDEN[next(k for k in FORBIDDEN if "retry" in k)].search("for attempt in range(3):")
