"""One Spark driver of the multi-process commit test: get warm, wait for the go, append rows.

Run as ``python append_worker.py TABLE DIR WORKER_ID APPENDS`` (``PYTHONPATH`` = the repository
root). The worker starts a one-core driver, loads the table's log once, builds its DataFrames,
and says ``DIR/ready-<WORKER_ID>`` with the LogStore its session uses for ``file:`` paths (the
conf and the class Delta resolves for the table's log). On ``DIR/go`` it appends ``APPENDS``
rows ``(worker, seq)``, one Delta commit each, tagged ``userMetadata = "<worker>:<seq>"``, and
records each commit's wall-clock start and end in ``DIR/times-<WORKER_ID>.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from segmentlake.spark import spark_session
from segmentlake.spark.logstore import LOGSTORE_CONF
from tests.multiprocess_support import OpTimes, driver_conf, signal_ready, wait_for_go


def main(table: str, directory: Path, worker: int, appends: int) -> None:
    spark = spark_session(
        app_name=f"append-worker-{worker}",
        master="local[1]",
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    log_file = jvm.org.apache.hadoop.fs.Path(f"file:{table}/_delta_log/{0:020d}.json")
    resolved = delta_log.store().getDelegate(log_file).logStoreImpl().getClass().getName()
    spark.read.format("delta").load(table).count()  # the first Delta read of a JVM is slow
    frames = [
        spark.createDataFrame([(worker, seq)], "worker INT, seq INT") for seq in range(appends)
    ]
    times = OpTimes(directory, str(worker))
    signal_ready(
        directory,
        str(worker),
        logstore_conf=spark.conf.get(LOGSTORE_CONF, None),
        logstore_class=resolved,
    )
    wait_for_go(directory)
    for seq, frame in enumerate(frames):
        with times.op("append", seq=seq):
            writer = frame.write.format("delta").mode("append")
            writer.option("userMetadata", f"{worker}:{seq}").save(table)
    spark.stop()


if __name__ == "__main__":
    table_arg, dir_arg, worker_arg, appends_arg = sys.argv[1:]
    main(table_arg, Path(dir_arg), int(worker_arg), int(appends_arg))
