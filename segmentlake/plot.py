"""A picture of a datasource's timeline: chunks, versions, partitions, what is overshadowed.

Time runs left to right; each version of the datasource is a lane (oldest at the bottom), and
each used segment a bar over its interval in its version's lane, split into its chunk's
partitions. Visible segments are filled, overshadowed ones grey and hatched, standby ones
(an incomplete newer generation) outlined. Drawn from the segments' typed metadata records
(``Lake.segment_records``): no timeline is built.
Needs matplotlib (``pip install 'segmentlake[notebook]'``).

>>> plot_timeline(lake, "wikipedia")  # doctest: +SKIP
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from segmentlake.core.interval import Interval
from segmentlake.errors import EnvironmentSetupError

if TYPE_CHECKING:
    from segmentlake.lake import Lake

__all__ = ["plot_timeline"]

_STYLE: dict[str, dict[str, Any]] = {
    "visible": {"facecolor": "#4C72B0", "edgecolor": "white", "hatch": None},
    "overshadowed": {"facecolor": "#D0D0D0", "edgecolor": "#909090", "hatch": "//"},
    "standby": {"facecolor": "white", "edgecolor": "#DD8452", "hatch": None},
}
_LANE = 0.8  # height of a version's lane; the rest is the gap between lanes


def plot_timeline(
    lake: Lake,
    datasource: str,
    interval: Interval | str | None = None,
    *,
    ax: Any = None,
    title: str | None = None,
) -> Any:
    """Draw ``datasource``'s used segments (overlapping ``interval``) on ``ax`` (a new figure
    when None) and return the axes; see the module for what the picture shows."""
    try:
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch, Rectangle
    except ImportError as e:
        raise EnvironmentSetupError(
            "plot_timeline needs matplotlib: pip install 'segmentlake[notebook]'"
        ) from e
    records = lake.segment_records(datasource, interval).to_pylist()
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3 + 0.15 * len({r["version"] for r in records})))
    versions = sorted({r["version"] for r in records})
    lane = {v: i for i, v in enumerate(versions)}
    groups: dict[tuple[int, int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["start_ms"], r["end_ms"], r["version"])].append(r)
    for (start, end, version), members in groups.items():
        members.sort(key=lambda r: r["partition_num"])
        x0, x1 = _days(start), _days(end)
        height = _LANE / len(members)
        for k, r in enumerate(members):
            style = _STYLE.get(r["visibility"] or "overshadowed", _STYLE["overshadowed"])
            ax.add_patch(
                Rectangle((x0, lane[version] + k * height), x1 - x0, height, linewidth=0.8, **style)
            )
    if records:
        ax.set_xlim(
            _days(min(r["start_ms"] for r in records)), _days(max(r["end_ms"] for r in records))
        )
    ax.set_ylim(-0.2, max(1, len(versions)))
    ax.set_yticks([i + _LANE / 2 for i in range(len(versions))])
    ax.set_yticklabels([_short(v) for v in versions])
    ax.set_ylabel("version")
    ax.xaxis_date()
    concise: Any = mdates.ConciseDateFormatter  # untyped in matplotlib's stubs
    ax.xaxis.set_major_formatter(concise(ax.xaxis.get_major_locator()))
    ax.legend(
        handles=[Patch(label=state, **style) for state, style in _STYLE.items()],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        frameon=False,
    )
    ax.set_title(
        title or f"{datasource}: {len(records)} used segment(s), {len(versions)} version(s)"
    )
    return ax


def _days(millis: int) -> float:
    """Matplotlib's date number (days since its default epoch, 1970-01-01 UTC)."""
    return millis / 86_400_000


def _short(version: str) -> str:
    """A version label short enough for an axis (versions are ISO timestamps)."""
    return version.replace("T", " ").removesuffix("Z")[:23]
