"""One draw of the timeline: the visible range and its pixel columns (``Frame``), and the
geometry every layer drawn on it shares (lane bands, rectangles, occupancy, trace ids).

The spans (``draw.py``), the marks (``draw_marks.py``), the overview strip and the
selection's outlines all place themselves with these, so they line up at every zoom.
"""
from __future__ import annotations

import re

import numpy as np

from photon_trace.dashboard.timeline.data import TimelineData
from photon_trace.dashboard.timeline.view import View

HALF = 0.36
BANDS = {
    "phase": (-HALF, HALF), "device": (-HALF, HALF), "bubble": (-HALF, HALF),
    "subphase": (-HALF, -0.02),   # nested inside launch/finalize: lower half, drawn on top
    "wait": (0.04, HALF),         # nested inside a phase: upper half, drawn on top
    "requests": (-HALF, HALF),
}
HEIGHT_STEPS = 64
SYNC_DY = HALF + 0.1              # markers sit just above the host lane they happened on


class Frame:
    """One draw: the visible range (``lo``, ``hi`` in seconds), the range drawn (``a``, ``b`` in
    ns: the visible one and ``view.pad`` of its width either side, within the trace, so the
    page can pan that far without asking the server), and the pixel columns over it, each a
    pixel of the visible range."""

    def __init__(self, data: TimelineData, view: View):
        self.data, self.view = data, view
        lo, hi = view.x_range if view.x_range else data.full_range(view.axis)
        if hi <= lo:
            hi = lo + 1e-9
        self.lo, self.hi = lo, hi
        self.origin = data.origin_for(view.axis)
        self.va = int(np.floor(lo * 1e9 + self.origin))
        self.vb = int(np.ceil(hi * 1e9 + self.origin))
        pad = int((self.vb - self.va) * view.pad)
        self.a = min(self.va, max(self.va - pad, data.t_min))
        self.b = max(self.vb, min(self.vb + pad, data.t_max))
        self.px_ns = (self.vb - self.va) / max(view.width_px, 1)
        self.span_px = max(int(round((self.b - self.a) / self.px_ns)), 1) if self.px_ns > 0 else view.width_px
        self.n_cols = max(int(self.span_px / view.column_px), 1)
        self.edges = np.linspace(self.a, self.b, self.n_cols + 1)
        self.col_ns = self.edges[1] - self.edges[0]

    def x(self, t) -> np.ndarray:
        return (np.asarray(t, dtype=np.float64) - self.origin) / 1e9


def uid(name: str) -> str:
    """A stable trace id (plotly keeps a trace's UI state by it, and uses it as a CSS class)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def shown(show_legend: bool | set[str], name: str) -> bool:
    """Whether ``name`` is in the legend: ``show_legend`` is all or nothing, or a set of names."""
    return name in show_legend if isinstance(show_legend, set) else bool(show_legend)


def rects(x0, x1, y0, y1) -> tuple[np.ndarray, np.ndarray]:
    """Closed rectangles separated by NaN gaps: six points each (four corners, close, gap)."""
    n = len(x0)
    nan = np.full(n, np.nan)
    x = np.column_stack([x0, x1, x1, x0, x0, nan]).ravel()
    y = np.column_stack([y0, y0, y1, y1, y0, nan]).ravel()
    return x[:-1], y[:-1]


def visible(t0: np.ndarray, t1: np.ndarray, a: int, b: int) -> np.ndarray:
    """Indices of the spans that overlap ``[a, b]``."""
    return np.flatnonzero((t0 <= b) & (t1 >= a))


def occupancy(t0: np.ndarray, t1: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Busy ns of the spans in each interval between ``edges``, exact even when they overlap."""
    t0s, t1s = np.sort(t0).astype(np.float64), np.sort(t1).astype(np.float64)
    cum0 = np.concatenate([[0.0], np.cumsum(t0s)])
    cum1 = np.concatenate([[0.0], np.cumsum(t1s)])
    k0 = np.searchsorted(t0s, edges, side="right")
    k1 = np.searchsorted(t1s, edges, side="right")
    before = (k0 * edges - cum0[k0]) - (k1 * edges - cum1[k1])
    return np.diff(before)
