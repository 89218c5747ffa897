"""Run a Druid native batch task (:class:`DruidIngestTask`) on Spark: find the input files, read
them with Spark's readers, type the dimensions as Druid would, and append or overwrite; or a
Druid ``compact`` task (:class:`DruidCompactTask`) as a major compaction, or a ``kill`` task
(:class:`DruidKillTask`) as ``lake.kill``.

* **Files** — ``baseDir`` is walked recursively for names matching ``filter`` (plus ``files``);
  empty files are skipped, as in Druid. Paths are local to the driver; on a cluster the
  executors must see them at the same path (a shared mount). An ``inline`` source's lines go
  to Spark's readers from the driver (a classic session).
* **Reading** — ``json``: newline-delimited objects (``spark.read.json``; a malformed line
  becomes a row with a null timestamp, i.e. unparseable); ``csv``/``tsv``: every column a
  string, named by ``columns`` or the header, after ``skipHeaderRows`` lines of each file;
  ``parquet``: each file's schema merged. A ``flattenSpec`` adds a column per field, read
  from the nested structs, arrays, maps or JSON text Spark read (null where a row lacks the
  path), next to the top-level fields or instead of them. A ``druid`` source's rows are the
  visible rows of its datasource (``lake.read``), ``__time`` as epoch ms; a ``combining``
  source's delegates are put together by column name.
* **Dimension types** — declared types are cast by the ingestion, as for any spec
  (:func:`segmentlake.ingest.parse.cast_dimensions`: ``long``/``float``/``double`` to
  BIGINT/FLOAT/DOUBLE with ``try_cast``, ``string`` to STRING, ``auto`` kept). A task adds only
  Druid's default for the rest: an undeclared or discovered dimension is a ``string`` (JSON
  numbers and booleans become "3" and "true"), or keeps the input's type with
  ``useSchemaDiscovery``. Arrays, maps and structs as string dimensions are refused (no
  multi-value dimensions).
* **Mode** — ``appendToExisting: true``: ``lake.append`` (rows outside the intervals, if any,
  are skipped). Otherwise ``lake.overwrite`` of the intervals' whole chunks: with
  ``dropExisting: true`` every chunk of it is replaced (those without rows by tombstones); with
  ``dropExisting: false`` (Druid's default) only the chunks that get rows are, as in Druid —
  when the interval holds data already, one extra Spark job finds those chunks first. Without
  intervals, likewise: the chunks the rows fall in are found first and replaced.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from segmentlake.core.granularity import Granularity
from segmentlake.core.interval import Interval
from segmentlake.core.names import TIME_COLUMN, quote_identifier
from segmentlake.druid.compact_task import DruidCompactTask
from segmentlake.druid.flatten import FlattenSpec
from segmentlake.druid.ingest_task import DruidIngestTask
from segmentlake.druid.input import (
    DruidInputSource,
    InlineInputSource,
    InputFormat,
    LocalInputSource,
    sources_of,
)
from segmentlake.druid.kill_task import DruidKillTask
from segmentlake.druid.tasks import DruidTask
from segmentlake.errors import BadRowsError, NotFound, SpecError
from segmentlake.ingest.parse import (
    CHUNK,
    FILTERED,
    OUTSIDE_INTERVAL,
    REASON,
    cast_dimensions,
    discovered_dimensions,
    is_parse_exception,
    parse_input,
)
from segmentlake.ingest.report import RowStats, TaskReport
from segmentlake.metadata.store import now_ms
from segmentlake.spark.connect import require_classic

if TYPE_CHECKING:  # annotations only: importing the runner need not load the whole surface
    from segmentlake.compact.kill import KillReport
    from segmentlake.lake import Lake

__all__ = [
    "input_files",
    "read_druid",
    "read_inline",
    "read_input",
    "run_compact_task",
    "run_druid_task",
    "run_kill_task",
    "with_druid_default_types",
    "without_nested_dimensions",
]

logger = logging.getLogger(__name__)

# Hidden (``__``), so it is never a discovered dimension: Spark's raw text of a malformed line.
_CORRUPT = "__corrupt_record"
# Spark reads paths as Hadoop globs; a literal file name must not be one.
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")


@overload
def run_druid_task(
    lake: Lake, task: DruidIngestTask | DruidCompactTask, *, task_id: str | None = None
) -> TaskReport: ...


@overload
def run_druid_task(
    lake: Lake, task: DruidKillTask, *, task_id: str | None = None
) -> KillReport: ...


def run_druid_task(
    lake: Lake, task: DruidTask, *, task_id: str | None = None
) -> TaskReport | KillReport:
    """Run ``task`` on ``lake`` and return its report. ``task_id`` (default: the task's
    ``id``, else generated) names the task in the warehouse's task ledger. A ``compact``
    task is a major compaction (:func:`run_compact_task`), a ``kill`` task a
    ``lake.kill`` (:func:`run_kill_task`, whose report is a ``KillReport``)."""
    if isinstance(task, DruidCompactTask):
        return run_compact_task(lake, task, task_id=task_id)
    if isinstance(task, DruidKillTask):
        return run_kill_task(lake, task)
    raw = _read_rows(lake, task)
    task = without_nested_dimensions(task, raw.schema)
    frame = with_druid_default_types(raw, task)
    options: dict[str, Any] = {
        "task_id": task_id or task.task_id,
        "priority": task.priority or 0,
    }
    if task.lock_timeout_ms is not None:
        options["lock_timeout_s"] = task.lock_timeout_ms / 1000
    if task.append_to_existing:
        return lake.append(frame, task.datasource, task.spec, interval=task.interval, **options)
    interval = task.interval
    if interval is not None and (
        task.drop_existing or not _used_segments(lake, task.datasource, interval)
    ):
        # Nothing to keep in chunks without rows: replacing the whole interval is the same.
        return lake.overwrite(frame, task.datasource, task.spec, interval=interval, **options)
    # Only the chunks that get rows are replaced (dropExisting: false, or no intervals: then
    # Druid finds the chunks from the rows too).
    frame = frame.persist()  # read once for the chunk job and once for the write
    try:
        chunks = _chunks_with_rows(frame, task, interval)
        if chunks is None:
            return _nothing_to_replace(frame, task, interval, options.get("task_id"))
        return lake.overwrite(frame, task.datasource, task.spec, interval=chunks, **options)
    finally:
        frame.unpersist()


def run_compact_task(
    lake: Lake, task: DruidCompactTask, *, task_id: str | None = None
) -> TaskReport:
    """Run a Druid ``compact`` task: ``lake.compact`` of its interval in ``"major"`` mode,
    every visible segment of its chunks rewritten (Druid compacts all of them too) to the
    task's granularities and partitioning. Chunks already in that form are skipped (status
    ``SKIPPED`` when all are); an interval without data fails, as a Druid compaction does."""
    options: dict[str, Any] = {"task_id": task_id or task.task_id, "priority": task.priority or 0}
    if task.lock_timeout_ms is not None:
        options["lock_timeout_s"] = task.lock_timeout_ms / 1000
    return lake.compact(
        task.datasource,
        task.interval,
        mode="major",
        segment_granularity=task.segment_granularity,
        query_granularity=task.query_granularity,
        rollup=task.rollup,
        partitions_spec=task.partitions_spec,
        **options,
    )


def run_kill_task(lake: Lake, task: DruidKillTask) -> KillReport:
    """Run a Druid ``kill`` task: ``lake.kill`` of its interval, every unused segment wholly
    inside it (those marked unused by ``maxUsedStatusLastUpdatedTime``, if given); with
    ``markAsUnused`` the used segments wholly inside it are marked unused first."""
    if task.mark_as_unused:
        inside = [
            s for s in lake.used_segments(task.datasource, task.interval)
            if task.interval.contains(s.interval)
        ]  # fmt: skip
        marked = lake.mark_unused(inside)
        logger.info("%s: marked %d used segment(s) unused", task.datasource, marked)
    older_than = task.older_than_ms(now_ms()) / 1000
    return lake.kill(task.datasource, interval=task.interval, older_than=older_than)


def _used_segments(lake: Lake, datasource: str, interval: Interval) -> list[Any]:
    """The used segments in ``interval``; none for a datasource (or warehouse) not there yet."""
    try:
        return lake.used_segments(datasource, interval)
    except NotFound:
        return []


# -- files ---------------------------------------------------------------------------------


def input_files(source: LocalInputSource) -> list[str]:
    """The absolute paths of the non-empty input files, sorted (Druid's ``local`` source);
    :class:`SpecError` when there are none."""
    found: set[Path] = set()
    if source.base_dir is not None:
        base = Path(source.base_dir).expanduser().absolute()
        if not base.is_dir():
            raise SpecError(
                f"inputSource.baseDir {source.base_dir!r} ({base}) is not a directory; "
                "relative paths are relative to the working directory"
            )
        found.update(p for p in _walk(base) if source.matches(p.name))
    missing = []
    for name in source.files:
        path = Path(name).expanduser().absolute()
        if path.is_file():
            found.add(path)
        else:
            missing.append(name)
    if missing:
        raise SpecError(
            f"inputSource.files {missing} are not files (working directory {os.getcwd()})"
        )
    files = sorted(str(p) for p in found if p.stat().st_size > 0)
    if not files:
        raise SpecError(_no_files_message(source, empty=len(found)))
    return files


def _walk(base: Path) -> Iterator[Path]:
    for folder, _, names in os.walk(base, followlinks=True):
        for name in names:
            path = Path(folder) / name
            if path.is_file():
                yield path


def _no_files_message(source: LocalInputSource, *, empty: int) -> str:
    where = []
    if source.base_dir is not None:
        where.append(f"under baseDir {source.base_dir!r} matching filter {source.filter!r}")
    if source.files:
        where.append(f"in files {list(source.files)}")
    skipped = f" ({empty} empty file(s) skipped, as Druid does)" if empty else ""
    return (
        f"no input files {' or '.join(where)}{skipped}; the filter is a wildcard on file names "
        "('*' and '?'), matched in baseDir and its subdirectories"
    )


def _spark_path(path: str) -> str:
    return "file://" + _GLOB_CHARS.sub(r"\\\1", path)


# -- reading -------------------------------------------------------------------------------


def _read_rows(lake: Lake, task: DruidIngestTask) -> DataFrame:
    """The rows of the task's input source; a combining source's delegates put together by
    column name (a column one lacks is null in its rows)."""
    frames = [_read_source(lake, source, task) for source in sources_of(task.input_source)]
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame, allowMissingColumns=True)
    return rows


def _read_source(
    lake: Lake,
    source: LocalInputSource | InlineInputSource | DruidInputSource,
    task: DruidIngestTask,
) -> DataFrame:
    if isinstance(source, DruidInputSource):
        return read_druid(lake, source, task)
    kind = _format(task).type
    if isinstance(source, InlineInputSource):
        logger.info(
            "%s: reading %d line(s) of inline %s", task.datasource, len(source.lines()), kind
        )
        return read_inline(lake.spark, source, task)
    files = input_files(source)
    logger.info("%s: reading %d %s file(s)", task.datasource, len(files), kind)
    return read_input(lake.spark, files, task)


def _format(task: DruidIngestTask) -> InputFormat:
    """The task's inputFormat, which every source but ``druid`` needs (the task checks it)."""
    assert task.input_format is not None
    return task.input_format


def read_druid(lake: Lake, source: DruidInputSource, task: DruidIngestTask) -> DataFrame:
    """The rows of a ``druid`` input source: the visible rows of its datasource in its
    interval (as visible when the task starts, so the task may overwrite that datasource),
    matching its filter, with ``__time`` a LONG of epoch milliseconds, as Druid gives them.

    A timestampSpec naming a column these rows lack (Druid's tutorial combines them with files
    under ``{"column": "timestamp", "format": "iso"}``) gets that column from ``__time``, in
    its format: Druid's ``ignoreTimestampSpecForDruidInputSource`` mode, which that tutorial's
    result relies on; Druid's default would count every such row unparseable. Logged."""
    frame = lake.read(source.datasource, source.interval)
    frame = frame.withColumn(TIME_COLUMN, F.unix_millis(F.col(TIME_COLUMN)))
    condition = source.filter_sql  # translated from Druid's JSON on each access
    if condition is not None:
        frame = frame.where(F.expr(condition))
    stamp = task.spec.timestamp_spec
    if stamp.column not in frame.columns:
        logger.warning(
            "%s: the druid inputSource's rows have no column %r (timestampSpec.column): their "
            "time is read from %s, as Druid's ignoreTimestampSpecForDruidInputSource mode does; "
            'use {"column": "%s", "format": "millis"} to say so',
            task.datasource, stamp.column, TIME_COLUMN, TIME_COLUMN,
        )  # fmt: skip
        frame = frame.withColumn(stamp.column, _time_as(stamp.format, F.col(TIME_COLUMN)))
    return frame


def _time_as(fmt: str, millis: Column) -> Column:
    """Epoch milliseconds as a timestampSpec of format ``fmt`` reads them back."""
    if fmt in ("auto", "iso"):
        # Built from the numbers: any formatting of a TIMESTAMP goes through the session's
        # zone, and a combining source's other rows are strings this must match.
        day = F.date_from_unix_date(F.floor(millis / 86_400_000).cast("int")).cast("string")
        of_day = F.pmod(millis, F.lit(86_400_000))
        parts = [(3_600_000, 24, 2), (60_000, 60, 2), (1000, 60, 2), (1, 1000, 3)]
        h, m, sec, ms = (
            F.lpad((F.floor(of_day / unit) % span).cast("string"), width, "0")
            for unit, span, width in parts
        )
        return F.concat(
            day, F.lit("T"), h, F.lit(":"), m, F.lit(":"), sec, F.lit("."), ms, F.lit("Z")
        )
    scaled = {
        "millis": millis,
        "posix": F.floor(millis / 1000),
        "micro": millis * 1000,
        "nano": millis * 1_000_000,
        "ruby": millis / 1000.0,
    }
    if fmt in scaled:
        return scaled[fmt]
    raise SpecError(
        f"the druid inputSource's rows carry their time in {TIME_COLUMN} (epoch ms), which a "
        f"timestampSpec format {fmt!r} cannot read; use "
        f'{{"column": "{TIME_COLUMN}", "format": "millis"}}'
    )


def read_inline(spark: SparkSession, source: InlineInputSource, task: DruidIngestTask) -> DataFrame:
    """The rows of an ``inline`` input source as the task's inputFormat reads them: its lines
    handed to Spark's JSON or CSV reader (``skipHeaderRows`` drops the data's first lines)."""
    require_classic(
        spark,
        "a Druid inline inputSource",
        "its lines are handed to Spark's readers as an RDD, which Spark Connect does not offer; "
        "write the data to files and use the local inputSource, or use a classic session",
    )
    fmt = _format(task)
    lines = source.lines()[fmt.skip_header_rows :]
    rows = spark.sparkContext.parallelize(lines, 1)
    if fmt.type == "json":
        return _read_json(spark, rows, task)
    return _read_text(spark, [], fmt, lines=rows)


def read_input(spark: SparkSession, files: Sequence[str], task: DruidIngestTask) -> DataFrame:
    """The rows of ``files`` as the task's inputFormat reads them (no Spark job yet, except
    the schema inference of JSON and the header of CSV)."""
    fmt = _format(task)
    paths = [_spark_path(f) for f in files]
    if fmt.type == "json":
        return _read_json(spark, paths, task)
    if fmt.type == "parquet":
        frame = spark.read.option("mergeSchema", "true").parquet(*paths)
        if fmt.binary_as_string:
            binary = [f.name for f in frame.schema.fields if isinstance(f.dataType, T.BinaryType)]
            frame = frame.withColumns({n: F.col(n).cast("string") for n in binary})
        return _flattened(frame, fmt.flatten)
    return _read_text(spark, paths, fmt)


def _read_json(spark: SparkSession, paths: Any, task: DruidIngestTask) -> DataFrame:
    """JSON lines from ``paths`` (a list of paths, or an RDD of lines)."""
    spec = task.spec
    # Druid without keepNullColumns never discovers a field that is null in every row.
    fmt = _format(task)
    drop_null = not fmt.keep_null_columns and spec.dimensions_spec.dimensions is None
    frame = (
        spark.read.option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .option("dropFieldIfAllNull", str(drop_null).lower())
        .json(paths)
    )
    frame = _flattened(frame, fmt.flatten)
    # Columns the spec names must exist even when null everywhere (Druid reads them as null).
    named = [spec.timestamp_spec.column, *(m.field_name for m in spec.metrics if m.field_name)]
    absent = {n: F.lit(None).cast("string") for n in named if n and n not in frame.columns}
    return frame.withColumns(absent) if absent else frame


def _flattened(frame: DataFrame, flatten: FlattenSpec | None) -> DataFrame:
    """``frame`` with a column per flattenSpec field, next to the top-level fields
    (``useFieldDiscovery``) or instead of them; a field replaces a top-level one of its name.
    A path that the rows' schema does not have reads null, as in Druid."""
    if flatten is None:
        return frame
    taken = {f.name: _nested_value(frame.schema, f.steps).alias(f.name) for f in flatten.fields}
    kept = [c for c in frame.columns if c not in taken]
    if not flatten.use_field_discovery:
        kept = [c for c in kept if c == _CORRUPT]  # a malformed line stays a counted row
    return frame.select(*[F.col(quote_identifier(c)) for c in kept], *taken.values())


def _nested_value(schema: T.StructType, steps: Sequence[str | int]) -> Column:
    """The value at ``steps`` (keys and indexes) of each row, over the schema Spark read: a
    struct's field, a map's key, an array's element (negative from the end; null beyond it,
    as in Druid, where ANSI Spark would fail), a JSON string's path (a field whose rows
    disagree on its type is read as a string); null where the schema has no such path."""
    column: Column | None = None
    dtype: T.DataType = schema
    for i, step in enumerate(steps):
        if isinstance(dtype, T.StructType) and isinstance(step, str):
            field = next((f for f in dtype.fields if f.name == step), None)
            if field is None:
                return F.lit(None)
            column = F.col(quote_identifier(step)) if column is None else column.getField(step)
            dtype = field.dataType
        elif isinstance(dtype, T.MapType) and isinstance(step, str) and column is not None:
            column, dtype = F.try_element_at(column, F.lit(step)), dtype.valueType
        elif isinstance(dtype, T.ArrayType) and isinstance(step, int) and column is not None:
            position = F.lit(step + 1 if step >= 0 else step)  # element_at counts from 1
            column, dtype = F.try_element_at(column, position), dtype.elementType
        elif isinstance(dtype, T.StringType) and column is not None:
            return F.get_json_object(column, _json_path(steps[i:]))
        else:
            return F.lit(None)
    assert column is not None
    return column


def _json_path(steps: Sequence[str | int]) -> str:
    """JsonPath of ``steps`` for ``get_json_object``."""
    parts = [f"[{s}]" if isinstance(s, int) else "['" + s.replace("'", "\\'") + "']" for s in steps]
    return "$" + "".join(parts)


def _read_text(
    spark: SparkSession, paths: list[str], fmt: InputFormat, *, lines: Any = None
) -> DataFrame:
    """CSV or TSV from ``paths``, or from ``lines`` (an RDD, first lines already skipped)."""
    reader = spark.read.option("sep", fmt.delimiter).option("mode", "PERMISSIVE")
    if fmt.type == "tsv":
        reader = reader.option("quote", "")  # Druid's TSV has no quoting
    if fmt.columns:
        reader = reader.schema(
            T.StructType([T.StructField(c, T.StringType()) for c in fmt.columns])
        )
    else:
        # Every file's header must name the same columns in the same order.
        reader = reader.option("header", "true").option("enforceSchema", "false")
    if lines is not None:
        return reader.csv(lines)
    if not fmt.skip_header_rows:
        return reader.csv(paths)
    return reader.csv(_lines_after(spark, paths, fmt.skip_header_rows))


def _lines_after(spark: SparkSession, paths: list[str], skip: int) -> Any:
    """Each file's lines after its first ``skip`` (Spark's CSV reader has no such option)."""
    require_classic(
        spark,
        "a Druid inputFormat with skipHeaderRows",
        "skipping each file's first lines numbers them with the RDD API "
        "(SparkContext.textFile().zipWithIndex()), which Spark Connect does not offer; "
        "drop skipHeaderRows (strip the lines beforehand) or ingest with a classic session",
    )
    context = spark.sparkContext

    def kept(numbered: tuple[str, int]) -> bool:
        return numbered[1] >= skip

    return context.union([context.textFile(p).zipWithIndex().filter(kept).keys() for p in paths])


# -- dimension types -----------------------------------------------------------------------


def without_nested_dimensions(task: DruidIngestTask, schema: T.StructType) -> DruidIngestTask:
    """``task`` with the input's objects (structs and maps) excluded from the dimensions it
    discovers: Druid's field discovery takes only a row's primitive fields (and lists of
    them), so a nested object is no dimension there. With ``useSchemaDiscovery`` Druid would
    keep it as a nested column, which segmentlake does not have: left in, it is refused with
    the transform to use. Transforms can still read the objects (``geo.city``)."""
    dims = task.spec.dimensions_spec
    if dims.dimensions is not None or dims.schema_discovery:
        return task
    nested = [
        f.name
        for f in schema.fields
        if isinstance(f.dataType, T.StructType | T.MapType) and f.name not in dims.exclusions
    ]
    if not nested:
        return task
    logger.info(
        "%s: nested fields %s are not discovered as dimensions (as in Druid); read their "
        "values with a flattenSpec or transforms",
        task.datasource,
        nested,
    )
    excluded = replace(dims, exclusions=(*dims.exclusions, *nested))
    return replace(task, spec=replace(task.spec, dimensions_spec=excluded))


def with_druid_default_types(frame: DataFrame, task: DruidIngestTask) -> DataFrame:
    """Give every dimension whose type the spec does not declare the task's default type
    (:attr:`DruidIngestTask.default_dimension_type`), as Druid does with the values it reads
    from files. Declared types are cast by the ingestion itself (:func:`parse_input`), as for
    every spec; columns a transform makes are left to the transform."""
    return cast_dimensions(frame, _untyped_dimensions(task, frame.columns))


def _untyped_dimensions(task: DruidIngestTask, columns: list[str]) -> dict[str, str]:
    dims = task.spec.dimensions_spec
    declared = dict(dims.types)
    listed = dims.dimensions
    if listed is None:
        listed = discovered_dimensions(task.spec, columns)
    return {name: task.default_dimension_type for name in listed if name not in declared}


# -- dropExisting: false -------------------------------------------------------------------


def _chunks_with_rows(
    frame: DataFrame, task: DruidIngestTask, interval: Interval | None
) -> Interval | None:
    """The chunks (of ``interval``, if given) that get rows, as one interval (None: no chunk
    does). Raises :class:`SpecError` when they are not contiguous."""
    parsed = parse_input(frame, task.spec, interval=interval)
    starts = sorted(
        r[0] for r in parsed.frame.where(F.col(REASON).isNull()).select(CHUNK).distinct().collect()
    )
    if not starts:
        return None
    granularity = task.spec.granularity_spec.segment_granularity
    runs = _runs(starts, granularity)
    if len(runs) > 1:
        instead = (
            "give granularitySpec.intervals spanning them with dropExisting: true (chunks "
            "without rows become empty)"
            if interval is None
            else f"set dropExisting: true to replace all of {interval} (chunks without rows "
            "become empty)"
        )
        raise SpecError(
            f"the rows fall in {len(runs)} separate runs of {granularity.name} chunks "
            f"({', '.join(map(str, runs))}); Druid would replace only those chunks, and "
            f"segmentlake replaces one interval per task: {instead}, or run one task per run"
        )
    logger.info("%s: rows fall in %s; replacing only that", task.datasource, runs[0])
    return runs[0]


def _runs(starts: Sequence[int], granularity: Granularity) -> list[Interval]:
    runs: list[Interval] = []
    for start in starts:
        end = granularity.next_bucket_start_millis(start)
        if runs and runs[-1].end_millis == start:
            runs[-1] = Interval.of_millis(runs[-1].start_millis, end)
        else:
            runs.append(Interval.of_millis(start, end))
    return runs


def _nothing_to_replace(
    frame: DataFrame, task: DruidIngestTask, interval: Interval | None, task_id: str | None
) -> TaskReport:
    """No row lands in the interval: with dropExisting: false Druid publishes nothing and
    leaves the data as it is. The rows are still counted by fate (too many unparseable ones
    fail as in any ingestion); as nothing is published, the task ledger does not record it."""
    parsed = parse_input(frame, task.spec, interval=interval)
    counts = {r[0]: r[1] for r in parsed.frame.groupBy(REASON).count().collect()}
    unparseable = {k: n for k, n in counts.items() if is_parse_exception(k)}
    rows = RowStats(
        rows_in=sum(counts.values()),
        unparseable=sum(unparseable.values()),
        filtered=counts.get(FILTERED, 0),
        outside_interval=counts.get(OUTSIDE_INTERVAL, 0),
        unparseable_by_reason=unparseable,
    )
    report = TaskReport(
        task_id=task_id or f"overwrite_druid_{uuid.uuid4().hex[:12]}",
        type="overwrite",
        datasource=task.datasource,
        status="SUCCESS",
        interval=None if interval is None else str(interval),
        rows=rows,
    )
    if rows.unparseable > task.spec.max_parse_exceptions:
        report = replace(report, status="FAILED", error="too many unparseable rows")
        raise BadRowsError(
            f"{rows.unparseable} unparseable row(s) ({unparseable}) exceed maxParseExceptions="
            f"{task.spec.max_parse_exceptions}; nothing was published",
            report=report,
        )
    logger.warning(
        "%s: no row falls in %s; nothing is replaced or published",
        task.datasource,
        interval or "any chunk",
    )
    return report
