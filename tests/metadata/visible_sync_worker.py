"""One process of the visible-table race: publishes its share of segments (each publish syncs
the visible table), no Spark. Run as ``python visible_sync_worker.py WAREHOUSE RACE_DIR NAME
FIRST COUNT [STORAGE_OPTIONS_JSON]``: it publishes the HOUR segments ``FIRST .. FIRST + COUNT -
1`` (on an object store when the options are given)."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from segmentlake.core.interval import Interval
from segmentlake.core.segment import DataSegment
from segmentlake.core.shard_spec import NumberedShardSpec
from segmentlake.lake import Lake
from tests.multiprocess_support import OpTimes, signal_ready, wait_for_go

DS = "raced"
START = datetime(2024, 1, 1, tzinfo=UTC)


def hour(i: int) -> Interval:
    return Interval(START + timedelta(hours=i), START + timedelta(hours=i + 1))


def main() -> None:
    warehouse, race, name, first, count = sys.argv[1:6]
    options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    directory = Path(race)
    lake = Lake(None, warehouse, storage_options=options)
    lake.metadata.table.refresh()  # warm: the table loaded once before the go
    times = OpTimes(directory, name)
    signal_ready(directory, name)
    wait_for_go(directory)
    for i in range(int(first), int(first) + int(count)):
        with times.op("publish", hour=i):
            group = f"{name}-{i}"
            lock = lake.actions.try_lock(DS, hour(i), group_id=group).lock
            assert lock is not None
            segment = DataSegment(
                DS,
                hour(i),
                lock.version,
                NumberedShardSpec(0, 1),
                load_spec={"type": "delta", "path": f"{warehouse}/{DS}", "segment": f"k{i}"},
                num_rows=10,
            )
            lake.actions.publish(DS, [segment], group_id=group)


if __name__ == "__main__":
    main()
    # As the CLI does (segmentlake.cli.main.run): delta-rs's runtime threads can crash a
    # short process in the interpreter's shutdown, after all its work is done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
