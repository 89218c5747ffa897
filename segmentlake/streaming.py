"""Structured Streaming into a datasource, each micro-batch one append, exactly once.

Spark's ``foreachBatch`` gives at-least-once: after a crash, the query restarts from its
checkpoint and hands the last unfinished batch to the sink again, with the same batch id. Each
batch here is an append whose task id is derived from the stream and the batch id, and an
append's segments, its lock release and its task report land in one metadata commit. So a
replayed batch whose append was published finds its report and is skipped; one whose driver
died before the publish left only rows no segment references (invisible; ``kill`` reclaims
them) and runs again. Nothing the stream wrote is seen twice or lost.

>>> query = append_stream(lake, events, "events", spec,
...                       checkpoint_location="/chk/events")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from segmentlake.core.ingest_spec import IngestionSpec
from segmentlake.core.names import check_datasource_name
from segmentlake.core.spec_reader import check_text, safe_repr
from segmentlake.core.task_options import check_task_options
from segmentlake.errors import SpecError, TaskAlreadyPublished
from segmentlake.metadata.transaction import RetryPolicy
from segmentlake.spark.connect import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from segmentlake.lake import Lake

__all__ = ["append_stream", "batch_task_id", "batch_writer"]

logger = logging.getLogger(__name__)

_STREAM_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def batch_task_id(stream_id: str, batch_id: int) -> str:
    """The task id of micro-batch ``batch_id`` of stream ``stream_id``: the same on every
    replay of the batch, different for every batch and stream."""
    return f"stream_{stream_id}_{int(batch_id)}"


def stream_id_of(checkpoint_location: str) -> str:
    """A stream's id from its checkpoint location (one checkpoint is one stream to Spark)."""
    return hashlib.sha256(checkpoint_location.encode()).hexdigest()[:16]


def batch_writer(
    lake: Lake,
    datasource: str,
    spec: IngestionSpec | Mapping[str, Any],
    *,
    stream_id: str,
    lock_timeout_s: float = 600.0,
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function appending each micro-batch to ``datasource`` exactly once
    (see the module); use it with your own ``writeStream`` settings, or :func:`append_stream`.

    Args:
        lake: The warehouse appended to.
        datasource: The datasource appended to.
        spec: Druid's ``dataSchema`` JSON or an :class:`IngestionSpec`, read once here.
        stream_id: Names the stream in each batch's task id (1-100 letters, digits, ``_``,
            ``-``): keep it for as long as the checkpoint, or replays are not recognised.
        lock_timeout_s: How long each batch's publish waits while an overwrite holds a chunk.

    Returns:
        The function to give ``foreachBatch``.

    >>> stream.writeStream.foreachBatch(batch_writer(lake, "events", spec,
    ...     stream_id="events")).option("checkpointLocation", chk).start()  # doctest: +SKIP
    """
    check_datasource_name(datasource)
    if (
        not isinstance(stream_id, str)
        or not stream_id
        or not set(stream_id) <= _STREAM_ID_CHARS
        or len(stream_id) > 100
    ):
        raise SpecError(
            f"stream_id {safe_repr(stream_id)} must be 1-100 letters, digits, '_' or '-' (it "
            "becomes part of each batch's task id)"
        )
    # Checked now, not in the first micro-batch: a bad value fails the call, not the query.
    check_task_options(task_id=None, priority=0, lock_timeout_s=lock_timeout_s)
    parsed = spec if isinstance(spec, IngestionSpec) else IngestionSpec.from_dict(spec)
    # Over Spark Connect the function is pickled to the server and runs in its Python worker:
    # it cannot carry this process's session, nor a Lake holding one. It carries how to open
    # the warehouse instead and opens it on each batch's own session.
    target: Callable[[DataFrame], Lake] = (
        _LakeOpener.of(lake) if is_connect(lake.spark) else (lambda _batch: lake)
    )

    def write(batch: DataFrame, batch_id: int) -> None:
        task_id = batch_task_id(stream_id, batch_id)
        if batch.isEmpty():
            logger.info("%s: empty micro-batch, nothing to append", task_id)
            return
        try:
            report = target(batch).append(
                batch, datasource, parsed, task_id=task_id, lock_timeout_s=lock_timeout_s
            )
        except TaskAlreadyPublished:
            logger.info("%s: replayed micro-batch already published; skipped", task_id)
            return
        logger.info("%s: %s", task_id, report.summary().splitlines()[0])

    return write


@dataclass(frozen=True, slots=True)
class _LakeOpener:
    """What a Spark Connect server's Python worker needs to open the caller's warehouse on a
    micro-batch's session (segmentlake must be importable by that worker's interpreter)."""

    warehouse: str
    lease_seconds: float
    retry: RetryPolicy
    storage_options: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, lake: Lake) -> _LakeOpener:
        options = lake.metadata.table.storage_options or {}
        return cls(
            lake.warehouse, lake.lockbox.lease_ms / 1000, lake.lockbox.retry, tuple(options.items())
        )

    def __call__(self, batch: DataFrame) -> Lake:
        from segmentlake.lake import Lake

        return Lake(
            batch.sparkSession,
            self.warehouse,
            lease_seconds=self.lease_seconds,
            retry=self.retry,
            storage_options=dict(self.storage_options) or None,
        )


# DataStreamWriter.trigger's keywords; it takes exactly one.
_TRIGGERS = ("processingTime", "once", "continuous", "availableNow")


def _check_trigger(trigger: object) -> None:
    if trigger is None:
        return
    if not (isinstance(trigger, Mapping) and len(trigger) == 1 and set(trigger) <= set(_TRIGGERS)):
        raise SpecError(
            f"trigger must be one of {', '.join(_TRIGGERS)} as a one-key dict (e.g. "
            f"{{'processingTime': '10 seconds'}} or {{'availableNow': True}}), got "
            f"{safe_repr(trigger)}"
        )


def append_stream(
    lake: Lake,
    stream: DataFrame,
    datasource: str,
    spec: IngestionSpec | Mapping[str, Any],
    *,
    checkpoint_location: str,
    stream_id: str | None = None,
    trigger: Mapping[str, Any] | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start a streaming query appending ``stream`` (a streaming DataFrame) to ``datasource``,
    one append per micro-batch, exactly once across driver crashes (see the module).
    ``stream_id`` names the stream in task ids (default: derived from
    ``checkpoint_location``); ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g.
    ``{"processingTime": "10 seconds"}`` or ``{"availableNow": True}``).

    Args:
        lake: The warehouse appended to.
        stream: A streaming DataFrame (``spark.readStream...``).
        datasource: The datasource appended to.
        spec: Druid's ``dataSchema`` JSON or an :class:`IngestionSpec`.
        checkpoint_location: The query's checkpoint directory (what makes it exactly once).
        stream_id: See above (default: derived from ``checkpoint_location``).
        trigger: Keyword arguments of ``DataStreamWriter.trigger`` (default: Spark's).
        query_name: The query's name in the Spark UI and ``spark.streams``.

    Returns:
        The started query.
    """
    from pyspark.sql import DataFrame

    if not isinstance(stream, DataFrame) or not stream.isStreaming:
        raise SpecError(
            "append_stream needs a streaming DataFrame (spark.readStream...), got "
            f"{safe_repr(stream) if not isinstance(stream, DataFrame) else 'a batch DataFrame'}"
        )
    if not isinstance(checkpoint_location, str) or not checkpoint_location.strip():
        raise SpecError(
            "append_stream needs a checkpoint_location (a directory path), got "
            f"{safe_repr(checkpoint_location)}"
        )
    _check_trigger(trigger)
    if query_name is not None:
        check_text(query_name, "query_name", what="a non-empty query name or None")
    writer = batch_writer(
        lake, datasource, spec, stream_id=stream_id or stream_id_of(checkpoint_location)
    )
    out = stream.writeStream.foreachBatch(writer).option("checkpointLocation", checkpoint_location)
    if trigger:
        out = out.trigger(**dict(trigger))
    if query_name:
        out = out.queryName(query_name)
    return out.start()
