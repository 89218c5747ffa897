"""Printing metadata for people: segments, locks and the visible timeline as text tables."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from segmentlake.core.interval import format_timestamp
from segmentlake.ingest.report import TaskReport, human_bytes
from segmentlake.lake import Lake

__all__ = [
    "format_columns",
    "format_table",
    "print_locks",
    "print_segments",
    "print_tasks",
    "print_timeline",
]


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain, aligned text table."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_segments(lake: Lake, datasource: str, interval: str | None) -> None:
    # Straight from the Arrow records, column by column: 10^5 segments print in well under a
    # second, where a DataSegment per row and a Python loop per cell would not.
    table = lake.segment_records(datasource, interval).sort_by(
        [("start_ms", "ascending"), ("version", "ascending"), ("partition_num", "ascending")]
    )
    columns = [
        pc.binary_join_element_wise(
            _timestamps(table["start_ms"]), _timestamps(table["end_ms"]), "/"
        ),
        table["version"],
        table["partition_num"],
        table["shard_type"],
        table["num_rows"],
        table["size_bytes"],
    ]
    header = ("interval", "version", "partition", "shard", "rows", "bytes")
    print(format_columns(header, columns))
    print(f"{table.num_rows} used segment(s) in {datasource}")


def _timestamps(millis: pa.ChunkedArray) -> pa.Array:
    """Druid's timestamp text of each value (formatted once per distinct value: a datasource's
    segments share few chunk bounds)."""
    distinct = pc.unique(millis)
    text = pa.array([format_timestamp(int(m)) for m in distinct.to_pylist()], pa.string())
    return pc.take(text, pc.index_in(millis, value_set=distinct))


def format_columns(header: Sequence[str], columns: Sequence[pa.Array | pa.ChunkedArray]) -> str:
    """:func:`format_table` over Arrow columns, padded and joined by Arrow (nulls print empty)."""
    texts = [pc.fill_null(pc.cast(c, pa.string()), "") for c in columns]
    widths = [
        max(len(h), pc.max(pc.utf8_length(t)).as_py() or 0)
        for h, t in zip(header, texts, strict=True)
    ]
    padded = [pc.utf8_rpad(t, width=w) for t, w in zip(texts, widths, strict=True)]
    lines = pc.utf8_rtrim_whitespace(pc.binary_join_element_wise(*padded, "  "))
    head = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([head, rule, *lines.to_pylist()])


def print_locks(lake: Lake, datasource: str) -> None:
    locks = lake.locks(datasource)
    rows = [
        (
            lk.group_id,
            lk.lock_type.value,
            lk.granularity.value,
            lk.interval,
            lk.version,
            "" if lk.partition_num is None else lk.partition_num,
            lk.priority,
            format_timestamp(lk.expires_millis),
        )
        for lk in locks
    ]
    header = (
        "group",
        "type",
        "granularity",
        "interval",
        "version",
        "partition",
        "priority",
        "expires",
    )
    print(format_table(header, rows))
    print(f"{len(locks)} live lock(s) on {datasource}")


def print_timeline(lake: Lake, datasource: str, interval: str | None) -> None:
    # From the visible records, not the timeline: the same pieces with no segment built.
    pieces = lake.visible_pieces(datasource, interval or None)
    rows = [
        (
            p.interval,
            p.chunk.version,
            len(p.chunk.partitions),
            p.chunk.num_rows,
            ",".join(map(str, p.chunk.partitions)),
        )
        for p in pieces
    ]
    print(format_table(("visible interval", "version", "segments", "rows", "partitions"), rows))
    print(f"{len(pieces)} visible piece(s) of {datasource}")


def print_tasks(lake: Lake, datasource: str, task_id: str | None) -> None:
    """The task ledger of a datasource as a table, or one task's whole report."""
    reports = lake.tasks(datasource)
    if task_id is not None:
        found = [r for r in reports if r.task_id == task_id]
        print(found[0].summary() if found else f"no task {task_id!r} in {datasource}")
        return
    rows = [
        (
            r.task_id,
            r.type,
            r.status,
            r.interval or "",
            r.rows.rows_in,
            r.rows.rows_out,
            r.rows.unparseable + r.rows.filtered + r.rows.outside_interval,
            r.segments,
            f"{r.seconds:.1f}",
            *_spark_cells(r),
        )
        for r in reports
    ]
    header = (
        "task",
        "type",
        "status",
        "interval",
        "rows in",
        "rows out",
        "rejected",
        "segments",
        "s",
        "task s",
        "bytes in",
        "shuffled",
    )
    print(format_table(header, rows))
    print(f"{len(reports)} task(s) of {datasource}")


def _spark_cells(report: TaskReport) -> tuple[str, str, str]:
    """Spark task seconds, bytes read and bytes shuffled; blank where not measured."""
    seconds, read, shuffled = report.task_seconds, report.bytes_processed, report.shuffle_bytes
    return (
        "" if seconds is None else f"{seconds:.1f}",
        "" if read is None else human_bytes(read),
        "" if shuffled is None else human_bytes(shuffled),
    )
