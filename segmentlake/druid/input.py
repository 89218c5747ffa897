"""Where a Druid task's rows are and how they are parsed: the ``local`` and ``inline`` input
sources (:class:`LocalInputSource`, :class:`InlineInputSource`) and the input formats
(:class:`InputFormat`) a task may name.

Both are frozen and check their fields; :mod:`segmentlake.druid.ingest_task_reader` reads them from
the task's ``ioConfig`` and :mod:`segmentlake.druid_runner` reads the files with Spark.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from segmentlake.core.spec_reader import check_flag, check_int, safe_repr
from segmentlake.druid.flatten import FlattenSpec
from segmentlake.errors import SpecError

__all__ = ["INPUT_FORMATS", "InlineInputSource", "InputFormat", "LocalInputSource"]

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
