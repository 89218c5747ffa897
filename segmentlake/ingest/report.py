"""The task report: what an ingestion read, kept, threw away, wrote and published, how long
each phase took and what Spark did in it (Druid's ingestion report with its ``rowStats``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from segmentlake.spark.job_metrics import JobMetrics

__all__ = ["RowStats", "TaskReport", "human_bytes"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


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
    (``parse``, ``lock``, ``write``, ``allocate``, ``publish``) to seconds, and
    ``phase_metrics`` each phase whose Spark jobs could be measured to their
    ``JobMetrics.to_json()`` (empty in reports older than it, or where Spark has no JVM).
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
    phase_metrics: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    error: str | None = None
    # Compaction: the segments it read, and the appended segments it re-published under its
    # version (concurrent append and replace).
    input_segments: int = 0
    input_bytes: int = 0
    upgraded: int = 0
    skipped_chunks: int = 0
    # Metadata commits that landed, and lost races retried, per operation.
    commits: Mapping[str, int] = field(default_factory=dict)
    retries: Mapping[str, int] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())

    @property
    def spark_metrics(self) -> JobMetrics | None:
        """The Spark work of every measured phase, ``None`` if none was measured."""
        if not self.phase_metrics:
            return None
        return sum(map(JobMetrics.from_json, self.phase_metrics.values()), JobMetrics())

    @property
    def task_seconds(self) -> float | None:
        """Seconds of Spark task time (tasks running in parallel add up)."""
        metrics = self.spark_metrics
        return None if metrics is None else metrics.executor_run_ms / 1000

    @property
    def bytes_processed(self) -> int | None:
        """Bytes Spark read from storage (inputs given as DataFrames of local rows read
        none)."""
        metrics = self.spark_metrics
        return None if metrics is None else metrics.input_bytes

    @property
    def shuffle_bytes(self) -> int | None:
        """Bytes the shuffles moved: those written by their map side. Every one of them is
        read back once, so adding the read side would count each twice."""
        metrics = self.spark_metrics
        return None if metrics is None else metrics.shuffle_write_bytes

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rows"]["unparseable_by_reason"] = dict(self.rows.unparseable_by_reason)
        data["phases"] = {k: round(v, 3) for k, v in self.phases.items()}
        data["phase_metrics"] = {k: dict(v) for k, v in self.phase_metrics.items()}
        data["commits"] = dict(self.commits)
        data["retries"] = dict(self.retries)
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
        if self.input_segments or self.type.startswith("compact"):
            lines.append(
                f"  compaction: {self.input_segments:,} input segment(s) "
                f"({self.input_bytes:,} bytes, {r.rows_in:,} rows) -> {self.segments:,} "
                f"({self.bytes:,} bytes, {r.rows_out:,} rows); {self.upgraded:,} appended "
                f"segment(s) upgraded; {self.skipped_chunks:,} chunk(s) already compacted"
            )
        if self.commits or self.retries:
            lines.append(
                "  commits: "
                + ", ".join(f"{k} {v}" for k, v in self.commits.items())
                + (
                    "; retried: " + ", ".join(f"{k} {v}" for k, v in self.retries.items())
                    if self.retries
                    else ""
                )
            )
        if self.phases:
            lines.append("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.phases.items()))
        lines.extend(self._spark_lines())
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)

    def _spark_lines(self) -> list[str]:
        """One line per phase that ran Spark jobs."""
        lines = []
        for name, data in self.phase_metrics.items():
            m = JobMetrics.from_json(data)
            if m.jobs:
                lines.append(
                    f"  spark {name}: {self.phases.get(name, 0.0):.2f}s, {m.jobs:,} job(s), "
                    f"{m.executor_run_ms / 1000:.1f}s task time, {human_bytes(m.input_bytes)} "
                    f"in, {human_bytes(m.shuffle_write_bytes)} shuffled, "
                    f"{human_bytes(m.output_bytes)} out"
                )
        return lines


def human_bytes(count: int) -> str:
    """``count`` bytes in binary units, e.g. ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    size = float(count)
    for unit in _UNITS[:-1]:
        if abs(size) < 1024:
            return f"{count:,} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} {_UNITS[-1]}"
