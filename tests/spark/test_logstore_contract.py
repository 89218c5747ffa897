"""The contract of segmentlake's LogStore, tested on the store itself: a log version is
put-if-absent. Whoever publishes version N first keeps it; every later writer of N, in this JVM
or any other process, gets ``java.nio.file.FileAlreadyExistsException`` (Delta's signal "a
concurrent commit took this version": it checks for conflicts and retries at N+1) and never
replaces the file.

Delta's default store for ``file:`` paths (``io.delta.storage.HDFSLogStore``) checks "N exists?"
and then renames its temp file onto N; a commit published in between is silently replaced
(DESIGN §6). ``test_a_version_published_mid_write_is_never_replaced`` makes exactly that
interleaving happen, every time, and fails against the default store; the racing test below
shows that the store decides a real race with exactly one winner, but the default store's window
is microseconds wide, so a race alone rarely catches it. To run these tests against another
store (e.g. to see the default store fail)::

    SEGMENTLAKE_LOGSTORE_UNDER_TEST=io.delta.storage.HDFSLogStore \\
        .venv/bin/pytest tests/spark/test_logstore_contract.py -p no:cacheprovider
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from segmentlake.spark.logstore import LOGSTORE_CLASS

pytestmark = [pytest.mark.spark]

STORE = os.environ.get("SEGMENTLAKE_LOGSTORE_UNDER_TEST", LOGSTORE_CLASS)
TAKEN = "java.nio.file.FileAlreadyExistsException"
RACE_VERSIONS = 250
RACE_WRITERS = 4
# The syscalls a store may publish a log file with; strace delays them in the delayed test.
PUBLISH_CALLS = "rename,renameat,renameat2,link,linkat"
PUBLISH_DELAY_S = 1.0


class Store:
    """The LogStore under test, called as Delta calls it: ``write(path, actions, overwrite,
    hadoopConf)`` with ``overwrite`` false for a commit."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self.jvm = jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        self.store = getattr(jvm, STORE)(self.conf)

    def write(self, path: Path, actions: Any) -> str:
        """Write version file ``path``; "won", or the Java exception's class name."""
        try:
            self.store.write(
                self.jvm.org.apache.hadoop.fs.Path(f"file:{path}"), actions, False, self.conf
            )
        except Py4JJavaError as e:
            return str(e.java_exception.getClass().getName())
        return "won"

    def lines(self, *texts: str) -> Any:
        """A Java iterator over ``texts``, one log line each."""
        array = self.jvm.java.util.ArrayList()
        for text in texts:
            array.add(text)
        return array.iterator()


def version_file(log: Path, version: int) -> Path:
    return log / f"{version:020d}.json"


def temp_files(log: Path) -> list[str]:
    return sorted(p.name for p in log.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "_delta_log"
    path.mkdir()
    return path


def test_a_taken_version_is_refused_and_kept(spark: SparkSession, log: Path) -> None:
    store = Store(spark)
    target = version_file(log, 0)

    assert store.write(target, store.lines('{"first":1}')) == "won"
    assert store.write(target, store.lines('{"second":2}')) == TAKEN

    assert target.read_text() == '{"first":1}\n'
    assert temp_files(log) == []


# -- a real race --------------------------------------------------------------------------------


class HeldWriter(threading.Thread):
    """One writer of the race. For each version it calls ``write`` with actions read from a
    FIFO that the test holds open: the store has started (checked the version is free, created
    its temp file) and blocks reading its actions until the test closes every writer's FIFO at
    once, so all writers publish the same version at the same moment."""

    def __init__(
        self, store: Store, writer: int, start: threading.Barrier, done: threading.Barrier
    ) -> None:
        super().__init__(name=f"logstore-race-{writer}", daemon=True)
        self.store, self.writer, self.start_, self.done = store, writer, start, done
        self.fifo: Path | None = None
        self.target: Path | None = None
        self.outcome = ""

    def run(self) -> None:
        jvm = self.store.jvm
        try:
            while True:
                self.start_.wait()
                if self.target is None or self.fifo is None:
                    return
                actions = jvm.java.util.Scanner(jvm.java.io.FileInputStream(str(self.fifo)))
                try:
                    self.outcome = self.store.write(self.target, actions)
                finally:
                    actions.close()
                self.done.wait()
        except threading.BrokenBarrierError:
            return


def line_of(writer: int, version: int) -> str:
    # No whitespace: the store reads the FIFO through a java.util.Scanner (one token a line).
    return json.dumps({"writer": writer, "version": version}, separators=(",", ":"))


def test_racing_writers_publish_each_version_exactly_once(
    spark: SparkSession, log: Path, tmp_path: Path
) -> None:
    store = Store(spark)
    start = threading.Barrier(RACE_WRITERS + 1, timeout=60)
    done = threading.Barrier(RACE_WRITERS + 1, timeout=60)
    writers = [HeldWriter(store, w, start, done) for w in range(RACE_WRITERS)]
    for writer in writers:
        writer.start()
    fifos = tmp_path / "fifos"
    fifos.mkdir()
    wrong: list[str] = []
    held: list[int] = []
    finished = False
    try:
        for version in range(RACE_VERSIONS):
            for writer in writers:
                writer.target = version_file(log, version)
                writer.fifo = fifos / f"{version}-{writer.writer}"
                os.mkfifo(writer.fifo)
                fd = os.open(writer.fifo, os.O_RDWR)  # never blocks; the store reads the rest
                os.write(fd, (line_of(writer.writer, version) + "\n").encode())
                held.append(fd)
            start.wait()
            _wait_until_all_started(log, version, len(writers))
            while held:  # the end of every writer's actions, at once
                os.close(held.pop())
            done.wait()
            outcomes = [w.outcome for w in writers]
            winners = [w.writer for w in writers if w.outcome == "won"]
            published = _writer_of(version_file(log, version))
            if len(winners) != 1 or published != winners[0] or set(outcomes) - {"won", TAKEN}:
                wrong.append(f"v{version}: {outcomes}, file written by {published}")
        finished = True
    finally:
        for fd in held:
            os.close(fd)
        for writer in writers:
            writer.target = None  # the next start lets them go
        if finished:
            start.wait()
        else:  # a writer or the test failed mid-version: break every wait
            start.abort()
            done.abort()
    print(f"{STORE}: {RACE_VERSIONS} versions raced by {RACE_WRITERS} writers, {len(wrong)} wrong")
    assert wrong == [], f"{len(wrong)} of {RACE_VERSIONS} versions: {wrong[:10]}"
    assert temp_files(log) == []


def _writer_of(path: Path) -> int | None:
    return json.loads(path.read_text())["writer"] if path.exists() else None


def _wait_until_all_started(log: Path, version: int, writers: int) -> None:
    """Until every writer's temp file for ``version`` exists: each is past its own "is the
    version free?" check and is reading its actions."""
    prefix = f".{version:020d}.json."
    deadline = time.monotonic() + 30
    while sum(p.name.startswith(prefix) for p in map(Path, temp_files(log))) < writers:
        if time.monotonic() > deadline:
            break  # the assertions report what each writer saw
        time.sleep(0.001)
    time.sleep(0.005)  # let each writer block on its FIFO


# -- the default store's window, made to happen -------------------------------------------------


def test_a_version_published_mid_write_is_never_replaced(spark: SparkSession, log: Path) -> None:
    """Another driver publishes version N while the store is between "N is free" and its own
    publish: strace holds the store's publishing syscall (rename, link) for a second on the
    one JVM thread that writes. A put-if-absent store is refused; a check-then-rename store
    replaces the other commit and reports success: a lost commit."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("needs strace to hold the store's publishing syscall")
    store = Store(spark)
    target = version_file(log, 7)
    with _traced_writer(store, strace, target) as (trace, write):
        deadline = time.monotonic() + 30
        while _publishing(trace, target) is None:
            assert write.is_alive(), f"the store finished before publishing: {write.outcome}"
            assert time.monotonic() < deadline, f"the store never published: {_lines(trace)}"
            time.sleep(0.001)
        # The store checked that N is free and is now publishing: another commit takes N.
        other = log.parent / "other-driver.json"
        other.write_text('{"other":1}\n')
        os.link(other, target)  # put-if-absent: succeeds only because N is still free
        held = _publishing(trace, target)
        assert held is not None, "the trace lost the store's publishing call"
        assert " = " not in held, f"the store published before the other driver: {held}"
        write.join(timeout=30)
    assert write.outcome == TAKEN, (
        f"{STORE} answered {write.outcome!r} for a version taken meanwhile"
    )
    assert target.read_text() == '{"other":1}\n', "the other driver's commit was replaced"


def _publishing(trace: Path, target: Path) -> str | None:
    """The traced thread's call publishing ``target`` (unfinished while strace holds it)."""
    calls = tuple(f"{call}(" for call in PUBLISH_CALLS.split(","))
    for line in _lines(trace):
        if line.startswith(calls) and f'{target.name}"' in line:
            return line
    return None


class _Write(threading.Thread):
    def __init__(
        self, store: Store, target: Path, named: threading.Event, go: threading.Event
    ) -> None:
        super().__init__(daemon=True)
        self.store, self.target, self.named, self.go = store, target, named, go
        self.name_in_jvm = "slr-" + uuid.uuid4().hex[:10]  # a Linux thread name: 15 chars
        self.outcome = ""

    def run(self) -> None:
        thread = self.store.jvm.java.lang.Thread.currentThread()  # this thread's own JVM thread
        original = thread.getName()
        thread.setName(self.name_in_jvm)
        try:
            self.named.set()
            self.go.wait(60)
            self.outcome = self.store.write(self.target, self.store.lines('{"store":1}'))
        finally:
            thread.setName(original)


@contextlib.contextmanager
def _traced_writer(store: Store, strace: str, target: Path) -> Iterator[tuple[Path, _Write]]:
    """Start a writer thread for ``target``, attach strace to its JVM thread only, with the
    publishing syscalls delayed; yield (strace output, writer); detach strace on exit."""
    named, go = threading.Event(), threading.Event()
    write = _Write(store, target, named, go)
    write.start()
    assert named.wait(60), "the writer thread never started"
    out = target.parent.parent / "strace.out"
    delay_us = int(PUBLISH_DELAY_S * 1e6)
    proc = subprocess.Popen(
        [strace, "-p", _native_thread(write.name_in_jvm), "-e", f"trace={PUBLISH_CALLS}",
         "-e", "signal=none", "-e", f"inject={PUBLISH_CALLS}:delay_enter={delay_us}",
         "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        first = proc.stderr.readline() if proc.stderr else ""
        if "attached" not in first:
            pytest.skip(f"strace cannot attach to the JVM thread: {first.strip()}")
        go.set()
        yield out, write
    finally:
        go.set()
        proc.terminate()  # strace detaches; the thread goes on untraced
        proc.wait(timeout=30)
        write.join(timeout=30)


def _native_thread(name: str) -> str:
    """The Linux thread id of the JVM thread named ``name`` (in whatever JVM process)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for comm in Path("/proc").glob("[0-9]*/task/[0-9]*/comm"):
            try:
                if comm.read_text().strip() == name:
                    return comm.parent.name
            except OSError:
                continue
        time.sleep(0.05)
    pytest.skip(f"no native thread named {name}: cannot tell which thread to trace")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
