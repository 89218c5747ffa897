"""The options every task takes (task id, priority, lock timeout), checked before it starts.

An ingestion and a compaction take the same three; both check them here, so a bad value is the
same :class:`SpecError` whichever way the task was asked for, and it comes before any Spark job
or metadata commit (a compaction with nothing to do would otherwise return a skipped report
and never look at them).
"""

from __future__ import annotations

import re

from segmentlake.core.spec_reader import INT32_MAX, check_int, check_number, show
from segmentlake.errors import SpecError

__all__ = ["MAX_LEASE_SECONDS", "check_task_options"]

# The longest lease (of a task's locks, a manager's status) in seconds: its expiry is stored
# in milliseconds as an int64, and 10^9 s (31 years) is far beyond any heartbeat.
MAX_LEASE_SECONDS = 10**9

# A task id names the task's storage partitions, which use '.' as a separator.
_TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def check_task_options(*, task_id: object, priority: object, lock_timeout_s: object) -> None:
    """Refuse a task id that is not 1-200 letters, digits, ``_`` and ``-``, a priority that is
    not a Java int (Druid's task priority) or a lock timeout that is not a finite number of
    seconds >= 0, with a :class:`SpecError` naming the option."""
    if task_id is not None and not (isinstance(task_id, str) and _TASK_ID.fullmatch(task_id)):
        raise SpecError(
            f"task_id must be 1-200 letters, digits, '_' and '-' (it names the task's storage "
            f"partitions, which use '.' as a separator), got {show(task_id)}"
        )
    check_int(priority, "priority (higher wins)", minimum=-INT32_MAX - 1, maximum=INT32_MAX)
    check_number(lock_timeout_s, "lock_timeout_s (seconds)", minimum=0)
