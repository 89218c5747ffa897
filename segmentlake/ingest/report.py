"""The task report: what an ingestion read, kept, threw away, wrote and published, and how
long each phase took (Druid's ingestion report with its ``rowStats``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RowStats", "TaskReport"]


@dataclass(frozen=True, slots=True)
class RowStats:
    """Input rows by fate. ``rows_in`` = ``processed`` + ``unparseable`` + ``filtered`` +
    ``outside_interval``; ``rows_out`` is the number of rows written after rollup."""

    rows_in: int = 0
    processed: int = 0
    unparseable: int = 0
    filtered: int = 0
    outside_interval: int = 0
    rows_out: int = 0
    unparseable_by_reason: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskReport:
    """The outcome of one ``append`` or ``overwrite`` call.

    ``status`` is ``SUCCESS`` or ``FAILED`` (with ``error``); ``phases`` maps each phase
    (``parse``, ``lock``, ``write``, ``allocate``, ``publish``) to seconds.
    """

    task_id: str
    type: str
    datasource: str
    status: str
    interval: str | None
    rows: RowStats
    segments: int = 0
    tombstones: int = 0
    bytes: int = 0
    files: int = 0
    version: str | None = None
    largest_segment_rows: int = 0
    phases: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rows"]["unparseable_by_reason"] = dict(self.rows.unparseable_by_reason)
        data["phases"] = {k: round(v, 3) for k, v in self.phases.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskReport:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["rows"] = RowStats(**data.get("rows", {}))
        return cls(**fields)

    def summary(self) -> str:
        """A few human lines, as the CLI prints them."""
        r = self.rows
        lines = [
            f"{self.type} {self.datasource} [{self.task_id}]: {self.status}"
            + (f" in {self.seconds:.1f}s" if self.phases else ""),
            f"  rows: {r.rows_in:,} in, {r.processed:,} processed, {r.rows_out:,} out after "
            f"rollup; {r.unparseable:,} unparseable, {r.filtered:,} filtered, "
            f"{r.outside_interval:,} outside the interval",
            f"  segments: {self.segments:,} written ({self.bytes:,} bytes, {self.files:,} files)"
            + (f", {self.tombstones:,} tombstones" if self.tombstones else "")
            + (f", version {self.version}" if self.version else ""),
        ]
        if self.phases:
            lines.append("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.phases.items()))
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)
