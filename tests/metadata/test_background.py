"""Background threads that call into delta-rs are waited for at interpreter exit (a daemon
thread ended inside native code crashes the process: segmentlake/metadata/background.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]


def run(script: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, time.monotonic() - started


def test_the_exit_waits_for_a_background_thread_to_finish(tmp_path: Path) -> None:
    """The thread loads a Delta table through delta-rs after the main thread is done: the
    process exits cleanly once it has (a plain daemon thread would be cut off)."""
    marker = tmp_path / "done"
    done, _ = run(
        f"""
        import time
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake
        from segmentlake.metadata.background import start_daemon

        table = {str(tmp_path / "t")!r}
        write_deltalake(table, pa.table({{"v": [1, 2, 3]}}))

        def late() -> None:
            time.sleep(1.0)
            assert DeltaTable(table).version() == 0
            open({str(marker)!r}, "w").write("ok")

        start_daemon(late, name="late")
        """
    )
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "ok"


def test_the_exit_stops_a_thread_that_waits_on_its_stop_event(tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    done, took = run(
        f"""
        import threading
        from segmentlake.metadata.background import start_daemon

        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(60):
                pass
            open({str(marker)!r}, "w").write("ok")

        start_daemon(beat, name="beat", stop=stop)
        """
    )
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "ok"
    assert took < 30  # told to stop, not waited out


def test_a_finished_thread_is_not_waited_for_again() -> None:
    from segmentlake.metadata import background

    thread = background.start_daemon(lambda: None, name="quick")
    thread.join(10)
    assert thread not in background._running
