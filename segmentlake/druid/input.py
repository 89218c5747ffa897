"""Where a Druid task's rows are and how they are parsed: the ``local``, ``inline``, ``druid``
and ``combining`` input sources (:class:`LocalInputSource`, :class:`InlineInputSource`,
:class:`DruidInputSource`, :class:`CombiningInputSource`) and the input formats
(:class:`InputFormat`) a task may name.

Both are frozen and check their fields; :mod:`segmentlake.druid.ingest_task_reader` reads them from
the task's ``ioConfig`` and :mod:`segmentlake.druid_runner` reads the files with Spark.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from segmentlake.core.druid_filter import druid_filter_sql
from segmentlake.core.interval import Interval
from segmentlake.core.spec_reader import check_flag, check_int, check_text, safe_repr, spec_error
from segmentlake.druid.flatten import FlattenSpec
from segmentlake.errors import SpecError

__all__ = [
    "INPUT_FORMATS",
    "CombiningInputSource",
    "DruidInputSource",
    "InlineInputSource",
    "InputFormat",
    "InputSource",
    "LocalInputSource",
    "reads_files",
    "sources_of",
]

INPUT_FORMATS = ("json", "csv", "tsv", "parquet")


@functools.lru_cache(maxsize=64)
def _wildcard(pattern: str) -> re.Pattern[str]:
    # Druid's filter is a commons-io wildcard: '*' and '?' only, case-sensitive.
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


@dataclass(frozen=True, slots=True)
class LocalInputSource:
    """Druid's ``local`` input source: the files under ``base_dir`` (recursively) whose names
    match the wildcard ``filter`` (``*`` and ``?``; default ``*``), and the listed ``files``.
    Relative paths are relative to the working directory, as in Druid."""

    base_dir: str | None = None
    filter: str | None = None
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.files, list | tuple):
            raise SpecError(
                f"inputSource.files must be a list of paths, got {safe_repr(self.files)}"
            )
        object.__setattr__(self, "files", tuple(self.files))
        named = [("baseDir", self.base_dir), ("filter", self.filter)]
        for key, value in [*named, *(("files", f) for f in self.files)]:
            if value is not None and (not isinstance(value, str) or not value):
                raise SpecError(
                    f"inputSource.{key} must be a non-empty path, got {safe_repr(value)}"
                )
        if self.base_dir is None and not self.files:
            raise SpecError(
                'the local inputSource needs "baseDir" (with a "filter" such as "*.json") '
                'or "files"'
            )
        if self.base_dir is None and self.filter is not None:
            raise SpecError('inputSource.filter selects files under "baseDir"; give baseDir too')
        if self.base_dir is not None and self.filter is None:
            object.__setattr__(self, "filter", "*")

    def matches(self, file_name: str) -> bool:
        """Whether a file name (not a path) matches ``filter``."""
        return _wildcard(self.filter or "*").fullmatch(file_name) is not None

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": "local"}
        if self.base_dir is not None:
            obj["baseDir"] = self.base_dir
            obj["filter"] = self.filter
        if self.files:
            obj["files"] = list(self.files)
        return obj


@dataclass(frozen=True, slots=True)
class InlineInputSource:
    """Druid's ``inline`` input source: the rows are ``data``, text in the task itself (JSON
    lines, CSV or TSV), as Druid's console and examples write them."""

    data: str

    def __post_init__(self) -> None:
        if not isinstance(self.data, str) or not self.data.strip():
            raise SpecError(
                'the inline inputSource needs the rows as text in "data", got '
                + safe_repr(self.data)
            )

    def lines(self) -> list[str]:
        """The data's lines (Druid splits inline data at line ends)."""
        return self.data.splitlines()

    def to_dict(self) -> dict[str, Any]:
        return {"type": "inline", "data": self.data}


@dataclass(frozen=True, slots=True)
class DruidInputSource:
    """Druid's ``druid`` input source: the visible rows of ``datasource`` in ``interval``
    (read with ``lake.read``, so a task may overwrite the datasource it reads: it reads the
    rows visible when it starts), matching ``filter`` (Druid's filter JSON, translated to
    Spark SQL as a transformSpec filter is). As in Druid, each row's time is a LONG of epoch
    milliseconds in ``__time``, next to its dimensions and metrics."""

    datasource: str
    interval: Interval
    filter: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_text(self.datasource, "inputSource.dataSource", what="a datasource name")
        if not isinstance(self.interval, Interval):
            object.__setattr__(self, "interval", Interval.parse(self.interval))
        if self.filter is not None:
            _ = self.filter_sql  # a SpecError listing what does not translate

    @property
    def filter_sql(self) -> str | None:
        """The filter as a Spark SQL condition over the rows (None: every row)."""
        if self.filter is None:
            return None
        if not isinstance(self.filter, Mapping):
            raise SpecError(f"inputSource.filter must be Druid's filter JSON, got {self.filter!r}")
        sql, problems = druid_filter_sql(self.filter, "inputSource.filter")
        if problems:
            raise spec_error("the druid inputSource's filter has no Spark SQL form", problems)
        return sql

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "type": "druid",
            "dataSource": self.datasource,
            "interval": str(self.interval),
        }
        if self.filter is not None:
            obj["filter"] = dict(self.filter)
        return obj


@dataclass(frozen=True, slots=True)
class CombiningInputSource:
    """Druid's ``combining`` input source: the rows of every delegate (``local``, ``inline``
    or ``druid``), read with the task's one inputFormat and put together by column name (a
    column one delegate lacks is null in its rows)."""

    delegates: tuple[LocalInputSource | InlineInputSource | DruidInputSource, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.delegates, list | tuple) or not self.delegates:
            raise SpecError(
                "the combining inputSource needs a non-empty list of delegates, got "
                + safe_repr(self.delegates)
            )
        object.__setattr__(self, "delegates", tuple(self.delegates))
        for delegate in self.delegates:
            if not isinstance(delegate, LocalInputSource | InlineInputSource | DruidInputSource):
                raise SpecError(
                    "a combining inputSource's delegates are local, inline or druid input "
                    f"sources, got {safe_repr(delegate)}"
                )

    def to_dict(self) -> dict[str, Any]:
        return {"type": "combining", "delegates": [d.to_dict() for d in self.delegates]}


InputSource = LocalInputSource | InlineInputSource | DruidInputSource | CombiningInputSource


def reads_files(source: InputSource) -> bool:
    """Whether ``source`` (or one of its delegates) has rows an inputFormat parses: a
    ``druid`` source's rows come typed from the segments."""
    if isinstance(source, CombiningInputSource):
        return any(reads_files(d) for d in source.delegates)
    return not isinstance(source, DruidInputSource)


def sources_of(
    source: InputSource,
) -> tuple[LocalInputSource | InlineInputSource | DruidInputSource, ...]:
    """``source`` itself, or a combining source's delegates."""
    return source.delegates if isinstance(source, CombiningInputSource) else (source,)


@dataclass(frozen=True, slots=True)
class InputFormat:
    """How input files are parsed: ``json`` (one object per line), ``csv``/``tsv`` with
    ``columns`` or ``find_columns_from_header`` (after ``skip_header_rows`` lines) and a
    ``delimiter`` (tsv; csv's is ``,``), or ``parquet``. ``keep_null_columns`` (json) makes a
    column null in every row a discovered dimension; ``binary_as_string`` (parquet) reads
    binary columns as UTF-8 strings; ``flatten`` (json, parquet) the columns taken from
    nested fields (Druid's flattenSpec), None when it flattens nothing."""

    type: str
    columns: tuple[str, ...] = ()
    find_columns_from_header: bool = False
    skip_header_rows: int = 0
    delimiter: str | None = None
    keep_null_columns: bool = False
    binary_as_string: bool = False
    flatten: FlattenSpec | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or self.type not in INPUT_FORMATS:
            raise SpecError(
                f"inputFormat type {safe_repr(self.type)} is not supported; accepted: "
                + ", ".join(INPUT_FORMATS)
            )
        if not isinstance(self.columns, list | tuple):
            raise SpecError(f"inputFormat.columns must be a list, got {safe_repr(self.columns)}")
        object.__setattr__(self, "columns", tuple(self.columns))
        check_flag(self.find_columns_from_header, "inputFormat.findColumnsFromHeader")
        check_flag(self.keep_null_columns, "inputFormat.keepNullColumns")
        check_flag(self.binary_as_string, "inputFormat.binaryAsString")
        check_int(self.skip_header_rows, "inputFormat.skipHeaderRows", minimum=0)
        if self.type in ("csv", "tsv"):
            self._check_text()
        elif self.columns or self.find_columns_from_header or self.skip_header_rows:
            raise SpecError(
                "inputFormat columns, findColumnsFromHeader and skipHeaderRows apply to csv and "
                f"tsv, not {self.type}"
            )
        elif self.delimiter is not None:
            raise SpecError(f"inputFormat.delimiter applies to tsv, not {self.type}")
        if self.keep_null_columns and self.type != "json":
            raise SpecError(f"inputFormat.keepNullColumns applies to json, not {self.type}")
        if self.binary_as_string and self.type != "parquet":
            raise SpecError(f"inputFormat.binaryAsString applies to parquet, not {self.type}")
        if self.flatten is not None and not isinstance(self.flatten, FlattenSpec):
            raise SpecError(f"inputFormat.flattenSpec must be a FlattenSpec, got {self.flatten!r}")
        if self.flatten is not None and self.type not in ("json", "parquet"):
            raise SpecError(f"inputFormat.flattenSpec applies to json and parquet, not {self.type}")
        if self.flatten is not None and not self.flatten.flattens:
            object.__setattr__(self, "flatten", None)  # top-level fields: as without it

    def _check_text(self) -> None:
        if bool(self.columns) == bool(self.find_columns_from_header):
            raise SpecError(
                f'inputFormat ({self.type}): give the column names in "columns" or set '
                '"findColumnsFromHeader": true — exactly one of them'
            )
        if any(not isinstance(c, str) or not c for c in self.columns):
            raise SpecError(
                f"inputFormat.columns must be non-empty names, got {safe_repr(self.columns)}"
            )
        if len(set(self.columns)) != len(self.columns):
            raise SpecError(f"inputFormat.columns names a column twice: {list(self.columns)}")
        if self.type == "csv":
            if self.delimiter not in (None, ","):
                raise SpecError('csv is comma-separated; for another delimiter use "type": "tsv"')
            object.__setattr__(self, "delimiter", ",")
        elif self.delimiter is None:
            object.__setattr__(self, "delimiter", "\t")
        elif not isinstance(self.delimiter, str) or not self.delimiter:
            raise SpecError(
                f"inputFormat.delimiter must be non-empty, got {safe_repr(self.delimiter)}"
            )

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": self.type}
        if self.type in ("csv", "tsv"):
            if self.columns:
                obj["columns"] = list(self.columns)
            else:
                obj["findColumnsFromHeader"] = True
            if self.skip_header_rows:
                obj["skipHeaderRows"] = self.skip_header_rows
            if self.type == "tsv":
                obj["delimiter"] = self.delimiter
        if self.keep_null_columns:
            obj["keepNullColumns"] = True
        if self.binary_as_string:
            obj["binaryAsString"] = True
        if self.flatten is not None:
            obj["flattenSpec"] = self.flatten.to_dict()
        return obj
