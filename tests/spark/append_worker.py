"""One Spark driver of the multi-process commit test: wait for the others, then append rows.

Run as ``python append_worker.py TABLE BARRIER_DIR WORKER_ID WORKERS APPENDS``. Each append is
one Delta commit of one row ``(worker, seq)``; all drivers start appending at the same moment
(a file barrier), so their commits race for the same log versions.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from segmentlake.spark import spark_session


def main(table: str, barrier: Path, worker: int, workers: int, appends: int) -> None:
    """Start a one-core driver, meet the other workers at the barrier, append ``appends`` rows."""
    spark = spark_session(
        app_name=f"append-worker-{worker}",
        master="local[1]",
        quiet_progress=True,
        extra_conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "spark.driver.memory": "1g",
            # A short-lived driver spends its life warming up: C1 alone starts it much faster.
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
    )
    (barrier / f"ready-{worker}").touch()
    deadline = time.monotonic() + 300
    while len(list(barrier.glob("ready-*"))) < workers:
        if time.monotonic() > deadline:
            raise TimeoutError("the other append workers never became ready")
        time.sleep(0.05)
    for seq in range(appends):
        df = spark.createDataFrame([(worker, seq)], "worker INT, seq INT")
        df.write.format("delta").mode("append").save(table)
    spark.stop()


if __name__ == "__main__":
    table_arg, barrier_arg, worker_arg, workers_arg, appends_arg = sys.argv[1:]
    main(table_arg, Path(barrier_arg), int(worker_arg), int(workers_arg), int(appends_arg))
