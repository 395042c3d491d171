"""What part of a timeline is shown: the View a figure is drawn for, and the zoom
events (plotly relayouts) that change it."""
from __future__ import annotations

from dataclasses import dataclass, replace

AXES = ("window", "trace", "step")
"""x axis modes: time from the analysis window's start, time from the trace's first record
(the Perfetto export's ts), or step numbers (ticks where steps begin)."""


@dataclass(frozen=True, slots=True)
class View:
    """What to draw: an x range in seconds from the axis origin (None: everything) and how
    dense it may get."""
    x_range: tuple[float, float] | None = None
    axis: str = "window"
    width_px: int = 1600
    max_spans: int = 6000        # more visible spans than this: every category drawn per pixel column
    column_px: float = 1.0       # the columns narrow spans are summed into
    max_step_lines: int = 400    # step boundaries drawn only when this few are visible
    min_exact_px: float = 1.0    # spans at least this wide are drawn as themselves; narrower ones
    #                              add their share to their pixel column (nothing is widened)
    pad: float = 0.0             # also drawn: this share of the range's width either side, so
    #                              the page pans that far on its own (assets/keys.js)

    def with_range(self, x_range: tuple[float, float] | None) -> View:
        return replace(self, x_range=x_range)


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
