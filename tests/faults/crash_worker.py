"""A driver that runs one operation of the kill matrix until its crash point kills it.

``SEGMENTLAKE_CRASH_AT=<point> python crash_worker.py WAREHOUSE OPERATION VOLUME_ROOT``; its
locks live ``scenarios.LEASE_SECONDS`` without a heartbeat, so the next driver waits little.
Printing "finished" means the point was never reached.
"""

from __future__ import annotations

import sys

from segmentlake.lake import Lake
from segmentlake.spark import spark_session
from tests.faults.scenarios import LEASE_SECONDS, run_operation
from tests.multiprocess_support import driver_conf


def main(warehouse: str, operation: str, volume_root: str) -> None:
    spark = spark_session(
        app_name=f"crash-worker-{operation}",
        master="local[1]",
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    lake = Lake.open(spark, warehouse, lease_seconds=LEASE_SECONDS)
    status = run_operation(lake, operation, volume_root, lock_timeout_s=60)
    print(f"finished: {status} (the crash point was never reached)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
