"""Input files and the spec of the streaming tests."""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA = "ts STRING, user STRING, n LONG"
SPEC = {
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["user"]},
    "metricsSpec": [{"type": "longSum", "name": "n", "fieldName": "n"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}
LEASE_SECONDS = 4.0


def write_files(source: Path, files: int, rows_per_file: int, *, start: int = 0) -> int:
    """``files`` JSON files of distinct users (one micro-batch each with maxFilesPerTrigger=1),
    spread over two days; the number of rows written."""
    source.mkdir(parents=True, exist_ok=True)
    for f in range(start, start + files):
        lines = [
            json.dumps({"ts": f"2024-01-0{1 + (f + r) % 2}T0{r % 10}:00:00Z",
                        "user": f"u{f}-{r}", "n": 1})
            for r in range(rows_per_file)
        ]  # fmt: skip
        (source / f"part-{f:04d}.json").write_text("\n".join(lines) + "\n")
    return files * rows_per_file
