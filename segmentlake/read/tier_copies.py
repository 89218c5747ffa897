"""Which loaded copies a tiered read uses: per visible segment, a ``LOADED`` copy on a live
volume of the preferred tier, read at the newest volume-table version among the copies it
uses there (every one of them has its rows at that version; a later drop cannot remove them
from it)."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from segmentlake.coordinator.volume_tables import volume_alive, volume_table_path
from segmentlake.core.storage_tiers import CopyState
from segmentlake.errors import SpecError
from segmentlake.metadata.cluster_records import copies_of, volumes
from segmentlake.metadata.store import MetadataStore

__all__ = ["TIER_CONF", "copy_sources"]

logger = logging.getLogger(__name__)

# The session default tier of reads: spark.conf.set("segmentlake.read.tier", "hot").
TIER_CONF = "segmentlake.read.tier"


def copy_sources(
    spark: SparkSession, store: MetadataStore, datasource: str, tier: str
) -> dict[str, tuple[str, int]]:
    """``__segment`` value → (volume table path, version) for the rows loaded in ``tier``."""
    in_tier = {v.name: v for v in volumes(store) if v.tier == tier}
    if not in_tier:
        tiers = sorted({v.tier for v in volumes(store)})
        raise SpecError(f"no volume is in tier {tier!r}; the registered tiers are {tiers}")
    loaded = [
        c
        for c in copies_of(store, datasource)
        if c.state == CopyState.LOADED and c.volume in in_tier and c.table_version is not None
    ]
    by_volume: dict[str, list[str]] = {}
    # Higher-priority volumes first; a key keeps the first volume that has it.
    ranked = sorted(loaded, key=lambda c: (-in_tier[c.volume].priority, c.volume))
    chosen: dict[str, str] = {}
    for copy in ranked:
        chosen.setdefault(copy.key, copy.volume)
    alive = {name: volume_alive(in_tier[name]) for name in set(chosen.values())}
    versions: dict[str, int] = {}
    for copy in loaded:
        if chosen.get(copy.key) == copy.volume and copy.table_version is not None:
            versions[copy.volume] = max(versions.get(copy.volume, -1), copy.table_version)
    sources: dict[str, tuple[str, int]] = {}
    for key, name in chosen.items():
        if alive[name]:
            path = volume_table_path(in_tier[name], datasource)
            sources[key] = (path, versions[name])
            by_volume.setdefault(name, []).append(key)
    logger.debug(
        "tier %s serves %d segment keys of %s from %s",
        tier,
        len(sources),
        datasource,
        {k: len(v) for k, v in by_volume.items()},
    )
    return sources
