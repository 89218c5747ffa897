"""Benchmark of the visible table's commit on an object store (moto's S3 server on localhost).

Run from the repository root:

    .venv/bin/python bench/object_store_sync.py                    # 10^4 and 10^5 files
    .venv/bin/python bench/object_store_sync.py --files 100000 --commits 9 --latency-ms 30

On an object store the visible table's sync commits through delta-rs (its conditional PUT).
This builds a table partitioned by ``__segment`` holding ``--files`` add actions (one commit,
then a checkpoint, as the visible table keeps them) and times, alternating, ``--commits``
commits of one file each made two ways:

- ``fresh``: the plain delta-rs way, a snapshot loaded at the version read and a write
  transaction on it (what the sync did before);
- ``followed``: the sync's way, ``SegmentFiles.delta_table`` bringing the follower's
  handle forward by the entries since (what it does now), then the same transaction.

Also times, once per round, how the latest version is found: a delta-rs snapshot load (what
``TableLog.version`` did on an object store) against ``TableLog.version`` now (probes for the
entries after the checkpoint, in concurrent rounds). Moto answers in about a millisecond from
a Python server sharing the machine's cores; a real store takes 10-50 ms a request and serves
many at once. ``--latency-ms`` puts a proxy in front of moto that holds each request that
long (both ways pay it).

Last, a follower 0, 1 and 4 log entries behind catches up three ways: delta-rs's
``update_incremental`` (the plain way), the entries read one after the other (what
``TableLog.follow`` did on an object store) and ``TableLog.follow`` now (the stamps asked for
while the entries are read). Prints JSON: medians in ms.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BUCKET = "segmentlake-bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--commits", type=int, default=7, help="commits each way (odd)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="held per request")
    parser.add_argument("--proxy", nargs=3, metavar=("PORT", "UPSTREAM", "MS"), help="internal")
    args = parser.parse_args()
    if args.proxy:
        _serve_proxy(int(args.proxy[0]), int(args.proxy[1]), float(args.proxy[2]) / 1000)
        return
    port = _free_port()
    servers = [
        subprocess.Popen(
            [str(Path(sys.executable).with_name("moto_server")), "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        options = _bucket(f"http://127.0.0.1:{port}", create=True)
        if args.latency_ms:
            upstream, port = port, _free_port()
            proxy = [sys.executable, __file__, "--proxy", str(port), str(upstream)]
            servers.append(subprocess.Popen([*proxy, str(args.latency_ms)]))
            options = _bucket(f"http://127.0.0.1:{port}", create=False)
        results: list[dict[str, Any]] = [
            {"latency_ms": args.latency_ms, **_measure(options, n, args.commits)}
            for n in args.files
        ]
        results.append({"latency_ms": args.latency_ms, **_measure_follows(options, args.commits)})
    finally:
        for server in servers:
            server.kill()
            server.wait()
    print(json.dumps(results, indent=2))


def _measure(options: dict[str, str], files: int, commits: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    from segmentlake.metadata.segment_files import SegmentFiles
    from segmentlake.metadata.table_log import TableLog

    uri = f"s3://{BUCKET}/visible-{files}"
    started = time.perf_counter()
    _build(uri, options, files)
    built_s = time.perf_counter() - started
    log = TableLog(uri, storage_options=options)
    followed = SegmentFiles(log)
    times: dict[str, list[float]] = {"fresh": [], "followed": [], "version": [], "latest": []}
    for round_ in range(commits):
        ways = ("fresh", "followed") if round_ % 2 == 0 else ("followed", "fresh")
        for way in ways:
            base = followed.refresh().version
            started = time.perf_counter()
            if way == "fresh":
                table = DeltaTable(uri, version=base, storage_options=options)
            else:
                table = followed.delta_table()
            _commit_one(table, f"{way}-{round_}")
            times[way].append(time.perf_counter() - started)
        found = []
        for name, find in (
            ("version", lambda: DeltaTable(uri, storage_options=options).version()),
            ("latest", log.version),
        ):
            started = time.perf_counter()
            found.append(find())
            times[name].append(time.perf_counter() - started)
        assert found[0] == found[1], found
    medians = {k: round(statistics.median(v) * 1000, 1) for k, v in times.items()}
    return {
        "files": files,
        "build_s": round(built_s, 1),
        "commit_fresh_load_ms": medians["fresh"],
        "commit_followed_handle_ms": medians["followed"],
        "ratio_followed_to_fresh": round(medians["followed"] / medians["fresh"], 2),
        "version_by_snapshot_ms": medians["version"],
        "version_by_probes_ms": medians["latest"],
        "ratio_probes_to_snapshot": round(medians["latest"] / medians["version"], 2),
        "entries_since_checkpoint": log.version() - (log.last_checkpoint() or 0),
    }


def _measure_follows(options: dict[str, str], rounds: int) -> dict[str, Any]:
    """A follower 0, 1 and 4 entries behind catching up, three ways, alternating: delta-rs's
    ``update_incremental`` on a handle at the follower's version (the plain way), every
    request one after the other (how ``TableLog.follow`` asked before) and ``follow`` now
    (the stamps asked for while the entries are read)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from segmentlake.metadata.table_log import TableLog

    uri = f"s3://{BUCKET}/followed"
    write_deltalake(uri, pa.table({"value": pa.array([1], pa.int64())}), storage_options=options)
    log = TableLog(uri, storage_options=options)
    writer = DeltaTable(uri, storage_options=options)
    figures: dict[str, Any] = {"follow": "entries behind -> median ms"}
    for behind in (0, 1, 4):
        times: dict[str, list[float]] = {"delta_rs": [], "one_by_one": [], "follow": []}
        for round_ in range(rounds):
            ways = list(times) if round_ % 2 == 0 else list(reversed(times))
            for way in ways:
                version = log.version()
                stamp = log.entry_stamp(version)
                plain = DeltaTable(uri, version=version, storage_options=options)
                for _ in range(behind):
                    writer.update_incremental()
                    writer.create_write_transaction([], "append", writer.schema())
                started = time.perf_counter()
                if way == "delta_rs":
                    plain.update_incremental()
                    reached = plain.version()
                elif way == "one_by_one":
                    reached = _follow_one_by_one(log, version, stamp)
                else:
                    followed = log.follow(version, stamp, lambda _version, _actions: True)
                    reached = followed[0] if followed else -1
                times[way].append(time.perf_counter() - started)
                assert reached == version + behind, (way, reached, version, behind)
        medians = {k: round(statistics.median(v) * 1000, 1) for k, v in times.items()}
        figures[f"behind_{behind}"] = {
            **medians,
            "ratio_follow_to_delta_rs": round(medians["follow"] / medians["delta_rs"], 2),
            "ratio_follow_to_one_by_one": round(medians["follow"] / medians["one_by_one"], 2),
        }
    return figures


def _follow_one_by_one(log: Any, version: int, stamp: Any) -> int:
    """The follow of an object store's log as it was, every request after the one before:
    the followed entry's stamp, each next entry until one is missing, the checkpoint hint,
    the reached entry's stamp."""
    if log.entry_stamp(version) != stamp:
        return -1
    reached = version
    while log.entry(reached + 1) is not None:
        reached += 1
    if (log.last_checkpoint() or -1) > reached:
        return -1
    if reached != version:
        log.entry_stamp(reached)
    return reached


def _build(uri: str, options: dict[str, str], files: int) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction

    rows = pa.table({"value": pa.array([1], pa.int64()), "__segment": pa.array(["k"])})
    write_deltalake(uri, rows, partition_by=["__segment"], storage_options=options)
    table = DeltaTable(uri, storage_options=options)
    stats = '{"numRecords":3}'
    adds = [
        AddAction(f"__segment=k{i}/part-{i}.parquet", 1000, {"__segment": f"k{i}"}, 1, True, stats)
        for i in range(files)
    ]
    table.create_write_transaction(adds, "append", table.schema(), partition_by=["__segment"])
    DeltaTable(uri, storage_options=options).create_checkpoint()


def _commit_one(table: Any, name: str) -> None:
    from deltalake import CommitProperties, PostCommitHookProperties
    from deltalake.transaction import AddAction

    add = AddAction(f"__segment={name}/part.parquet", 1000, {"__segment": name}, 1, True, "")
    table.create_write_transaction(
        [add],
        "append",
        table.schema(),
        partition_by=["__segment"],
        commit_properties=CommitProperties(max_commit_retries=0),
        post_commithook_properties=PostCommitHookProperties(
            create_checkpoint=False, cleanup_expired_logs=False
        ),
    )


def _serve_proxy(port: int, upstream: int, delay_s: float) -> None:
    """An HTTP proxy to ``upstream`` on localhost that holds each request ``delay_s``."""
    import http.client
    import socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Held(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()  # no Nagle: a reply's header and body go out at once
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: Any) -> None:
            pass

        def forward(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else None
            time.sleep(delay_s)
            connection = http.client.HTTPConnection("127.0.0.1", upstream)
            connection.request(self.command, self.path, body=body, headers=dict(self.headers))
            reply = connection.getresponse()
            data = reply.read()
            self.send_response(reply.status)
            for name, value in reply.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            length = reply.getheader("Content-Length") or "0"
            self.send_header("Content-Length", length if self.command == "HEAD" else str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            connection.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

    ThreadingHTTPServer(("127.0.0.1", port), Held).serve_forever()


def _bucket(endpoint: str, *, create: bool) -> dict[str, str]:
    """Storage options for the server at ``endpoint`` once it answers (the bucket made
    there when ``create``)."""
    import boto3

    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench",
        aws_secret_access_key="bench", region_name="us-east-1",
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            client.create_bucket(Bucket=BUCKET) if create else client.head_bucket(Bucket=BUCKET)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
