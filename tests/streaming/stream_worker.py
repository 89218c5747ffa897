"""A driver running one streaming append until its input is drained (``availableNow``).

``[SEGMENTLAKE_CRASH_AT=<point>] python stream_worker.py WAREHOUSE INPUT CHECKPOINT``: with a
crash point, the driver is SIGKILLed mid-stream; run again without one, it resumes from the
checkpoint. Prints "drained" when the query ended by itself.
"""

from __future__ import annotations

import sys

from segmentlake.lake import Lake
from segmentlake.spark import spark_session
from segmentlake.streaming import append_stream
from tests.multiprocess_support import driver_conf
from tests.streaming.support import LEASE_SECONDS, SCHEMA, SPEC


def main(warehouse: str, source: str, checkpoint: str) -> None:
    spark = spark_session(
        app_name="stream-worker",
        master="local[1]",
        quiet_progress=True,
        extra_conf=driver_conf(),
    )
    lake = Lake(spark, warehouse, lease_seconds=LEASE_SECONDS)
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
    query = append_stream(
        lake, stream, "events", SPEC, checkpoint_location=checkpoint,
        trigger={"availableNow": True},
    )  # fmt: skip
    query.awaitTermination()
    print("drained", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
