"""The Druid adapter sits just above the pure core: it imports the core and the errors only,
the core never imports it, and no engine module imports the surface the runner lives in."""

from __future__ import annotations

import ast
from pathlib import Path

import segmentlake

PACKAGE = Path(segmentlake.__file__).parent
# What the adapter may import of segmentlake (it imports no Spark at all).
DRUID_MAY_IMPORT = ("segmentlake.core", "segmentlake.errors", "segmentlake.druid")
# What the core and the engines must not import; a trailing "_" is a prefix of module names.
FORBIDDEN = {"core": ("segmentlake.druid",), "ingest": ("segmentlake.lake", "segmentlake.druid_")}


def imported(source: str) -> set[str]:
    """Every module ``source`` imports, wherever the import is (functions and TYPE_CHECKING
    blocks included: a lazy import is still a dependency)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p if p.endswith("_") else p + ".") for p in prefixes)


def _refused(package: str, name: str) -> bool:
    if package == "druid":
        foreign = name.startswith("segmentlake") and not _under(name, DRUID_MAY_IMPORT)
        return foreign or name.split(".")[0] == "pyspark"
    return _under(name, FORBIDDEN[package])


def offenders(package: str) -> list[str]:
    found = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        names = sorted(imported(path.read_text()))
        found += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if _refused(package, n)]
    return found


def test_the_druid_package_imports_only_the_core_and_the_errors() -> None:
    assert offenders("druid") == []


def test_the_core_never_imports_the_druid_package() -> None:
    assert offenders("core") == []


def test_no_engine_module_imports_the_surface() -> None:
    assert offenders("ingest") == []


def test_the_check_sees_lazy_and_type_checking_imports() -> None:
    # The walk must reach nested imports, or the tests above could never fail.
    sample = (
        "if TYPE_CHECKING:\n    from segmentlake.lake import Lake\n"
        "def f():\n    import segmentlake.druid.ingest_task\n"
    )
    assert imported(sample) == {"segmentlake.lake", "segmentlake.druid.ingest_task"}
    assert _under("segmentlake.druid_runner", FORBIDDEN["ingest"])
    assert _refused("druid", "segmentlake.druidish")
    assert _refused("druid", "pyspark.sql")
