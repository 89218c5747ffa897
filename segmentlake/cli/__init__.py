"""The ``segmentlake`` command line (a surface: it prints, the library logs)."""

from segmentlake.cli.main import main, run

__all__ = ["main", "run"]
