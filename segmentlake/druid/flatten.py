"""Druid's ``flattenSpec`` (json and parquet input formats): named columns taken from nested
fields by ``root``, ``path`` (JsonPath), ``jq`` and ``tree`` fields, and whether the top-level
fields are discovered too (``useFieldDiscovery``).

A field's location is kept as :attr:`FlattenField.steps`, object keys and array indexes from
the row's top level, which :mod:`segmentlake.druid_runner` turns into Spark expressions over
the schema Spark read. The expressions Druid's material uses are a path of keys and indexes:
``$.geo.city``, ``$['user agent'][0]``, ``.geo.city`` (jq), ``["geo", "city"]`` (tree).
Wildcards, filters, slices, recursive descent and functions select several values or compute
one; they are refused with what would work (a transform over the nested column).

    >>> parse_json_path("$.geo['city name'][0]")
    ('geo', 'city name', 0)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from segmentlake.core.spec_reader import check_flag, safe_repr
from segmentlake.errors import SpecError

__all__ = ["FLATTEN_FIELD_TYPES", "FlattenField", "FlattenSpec", "parse_jq", "parse_json_path"]

FLATTEN_FIELD_TYPES = ("root", "path", "jq", "tree")
Step = str | int

_NAME = r"[A-Za-z_$@][\w$@-]*"
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_INDEX = r"-?\d+"
# One step of JsonPath: .name, ['name'] / ["name"], [index].
_PATH_STEP = re.compile(rf"\.({_NAME})|\[\s*({_QUOTED}|{_INDEX})\s*\]")
# One step of jq: .name, .["name"], [index], ."name".
_JQ_STEP = re.compile(rf"\.({_NAME})|\.?\[\s*({_QUOTED}|{_INDEX})\s*\]|\.({_QUOTED})")
_UNSUPPORTED = (
    "only keys and array indexes are supported ($.a.b, $.a[0], $['a b'] in JsonPath; .a.b, "
    '.a[0], .["a b"] in jq); wildcards, filters, slices, recursive descent and functions are '
    'not: flatten the nested column and pick from it with a transform, e.g. "a.b[0]"'
)


def parse_json_path(expr: object) -> tuple[Step, ...]:
    """The keys and indexes of a JsonPath expression such as ``$.a['b c'][0]``."""
    if not isinstance(expr, str) or not expr.startswith("$"):
        raise SpecError(f"JsonPath {safe_repr(expr)} must start with '$'; {_UNSUPPORTED}")
    return _steps(expr, 1, _PATH_STEP, "JsonPath")


def parse_jq(expr: object) -> tuple[Step, ...]:
    """The keys and indexes of a jq path such as ``.a["b c"][0]``."""
    if not isinstance(expr, str) or not expr.startswith("."):
        raise SpecError(f"jq expression {safe_repr(expr)} must start with '.'; {_UNSUPPORTED}")
    if expr == ".":
        raise SpecError(f"jq expression '.' is the whole row, not a field; {_UNSUPPORTED}")
    return _steps(expr, 0, _JQ_STEP, "jq expression")


def _steps(expr: str, at: int, step: re.Pattern[str], what: str) -> tuple[Step, ...]:
    steps: list[Step] = []
    while at < len(expr):
        found = step.match(expr, at)
        if found is None:
            raise SpecError(f"{what} {expr!r} at {expr[at:]!r}: {_UNSUPPORTED}")
        steps.append(_step(next(g for g in found.groups() if g is not None)))
        at = found.end()
    if not steps:
        raise SpecError(f"{what} {expr!r} names no field; {_UNSUPPORTED}")
    return tuple(steps)


def _step(token: str) -> Step:
    if token[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    if re.fullmatch(_INDEX, token):
        return int(token)
    return token


@dataclass(frozen=True, slots=True)
class FlattenField:
    """A column ``name`` holding the value at ``steps`` (keys and indexes) of each row; ``type``
    and ``expr`` are the Druid field it was read from (written back by :meth:`to_dict`)."""

    name: str
    steps: tuple[Step, ...]
    type: str = "path"
    expr: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"a flattenSpec field needs a name, got {safe_repr(self.name)}")
        if self.name.startswith("__"):
            raise SpecError(
                f"flattenSpec field {self.name!r}: names starting with '__' are reserved"
            )
        if not self.steps or not all(isinstance(s, str | int) for s in self.steps):
            raise SpecError(f"flattenSpec field {self.name!r} names no field to read")

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> FlattenField:
        """Druid's JSON of one field: ``{"type": "path", "name": ..., "expr": "$.a.b"}``."""
        kind, name, expr = obj.get("type", "path"), obj.get("name"), obj.get("expr")
        where = f"flattenSpec field {safe_repr(name)}"
        if kind not in FLATTEN_FIELD_TYPES:
            accepted = ", ".join(FLATTEN_FIELD_TYPES)
            raise SpecError(
                f"{where}: type {safe_repr(kind)} is not supported; accepted: {accepted}"
            )
        if kind == "root":
            source = name if expr is None else expr
            if not isinstance(source, str) or not source:
                raise SpecError(f"{where}: a root field reads the top-level field it names")
            steps: tuple[Step, ...] = (source,)
        elif kind == "tree":
            nodes = obj.get("nodes")
            if (
                not isinstance(nodes, list)
                or not nodes
                or not all(isinstance(n, str) and n for n in nodes)
            ):
                raise SpecError(f"{where}: a tree field needs nodes, a list of keys")
            steps, expr = tuple(nodes), nodes
        elif kind == "path":
            steps = parse_json_path(expr)
        else:
            steps = parse_jq(expr)
        if not isinstance(name, str) or not name:
            raise SpecError(f"a flattenSpec field needs a name, got {safe_repr(name)}")
        return cls(name, steps, kind, expr)

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.type == "tree":
            obj["nodes"] = list(self.steps)
        elif self.expr is not None:
            obj["expr"] = self.expr
        return obj


@dataclass(frozen=True, slots=True)
class FlattenSpec:
    """Druid's flattenSpec: the ``fields`` to take from nested data, and whether the top-level
    fields are columns too (``use_field_discovery``, Druid's default)."""

    use_field_discovery: bool = True
    fields: tuple[FlattenField, ...] = ()

    def __post_init__(self) -> None:
        check_flag(self.use_field_discovery, "flattenSpec.useFieldDiscovery")
        object.__setattr__(self, "fields", tuple(self.fields))
        names = [f.name for f in self.fields]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SpecError(f"flattenSpec names {twice} twice; each field names one column")
        if not self.use_field_discovery and not self.fields:
            raise SpecError(
                "flattenSpec with useFieldDiscovery false and no fields reads no column; list "
                "the fields, or set useFieldDiscovery true"
            )

    @property
    def flattens(self) -> bool:
        """Whether it changes what the rows' top level holds."""
        return bool(self.fields) or not self.use_field_discovery

    def to_dict(self) -> dict[str, Any]:
        return {
            "useFieldDiscovery": self.use_field_discovery,
            "fields": [f.to_dict() for f in self.fields],
        }
