"""What part of a timeline is shown: the View a figure is drawn for, and the zoom
events (plotly relayouts) that change it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class View:
    """What to draw: an x range in ms (None: everything) and how dense it may get."""
    x_range: tuple[float, float] | None = None
    width_px: int = 1600
    max_spans: int = 6000        # more visible spans than this: aggregate
    bucket_px: float = 3.0       # aggregated bucket width
    max_step_lines: int = 400    # step boundaries drawn only when this few are visible
    min_bubble_px: float = 3.0   # bubbles narrower than this are widened (centred) so they show


def x_range_from_relayout(relayout: dict | None) -> tuple[str | None, tuple[float, float] | None]:
    """What a plotly relayout event asks of the x axis: ("range", (lo, hi)), ("reset", None)
    or (None, None) when it is about something else (legend, y axis, resize)."""
    if not relayout:
        return None, None
    for ax in ("xaxis", "xaxis2"):
        if f"{ax}.range[0]" in relayout and f"{ax}.range[1]" in relayout:
            lo, hi = float(relayout[f"{ax}.range[0]"]), float(relayout[f"{ax}.range[1]"])
            return "range", (min(lo, hi), max(lo, hi))
        if isinstance(relayout.get(f"{ax}.range"), (list, tuple)) and len(relayout[f"{ax}.range"]) == 2:
            lo, hi = map(float, relayout[f"{ax}.range"])
            return "range", (min(lo, hi), max(lo, hi))
        if relayout.get(f"{ax}.autorange") is True:
            return "reset", None
    return None, None
