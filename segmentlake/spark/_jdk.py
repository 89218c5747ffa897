"""Locate the JDK tools segmentlake runs itself (``java`` for Ivy, ``javac`` for the LogStore)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from segmentlake.errors import EnvironmentSetupError

__all__ = ["jdk_tool"]


def jdk_tool(name: str) -> str:
    """Return the path of JDK tool ``name``, preferring ``$JAVA_HOME/bin`` like Spark does.

    Raises :class:`EnvironmentSetupError` naming the fix when the tool is missing: a JRE alone
    runs Spark but cannot compile segmentlake's LogStore.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise EnvironmentSetupError(
        f"'{name}' was not found (looked in $JAVA_HOME/bin and on PATH). segmentlake needs a "
        "JDK 17 (not just a JRE), e.g. 'apt-get install openjdk-17-jdk-headless', then set "
        "JAVA_HOME or put its bin/ on PATH."
    )
