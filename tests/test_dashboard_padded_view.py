"""Zooming in the page (issue 33): the figure builder draws beyond the view when asked
(``View.pad``) and says what it drew, for the page to pan and zoom over on its own."""
from __future__ import annotations

import pytest

from photon_trace.dashboard.timeline.data import prepare_timeline
from photon_trace.dashboard.timeline.figure import timeline_figure
from photon_trace.dashboard.timeline.view import View
from helpers.dashboard_samples import report, sample


@pytest.fixture(scope="module")
def mask_sync():
    tr, rep = sample("mask_sync"), report("mask_sync")
    return tr, rep, prepare_timeline(tr, rep)


def hover_points(fig, prefix: str) -> int:
    return sum(len(t.x) for t in fig.data if t.name and t.name.startswith(prefix) and t.name.endswith("(hover)"))


def test_a_padded_view_draws_beyond_its_edges_for_the_page_to_pan_over(mask_sync):
    """Issue 33: the page pans and zooms on its own over what was drawn; the figure says what
    that is (the range drawn, the pixel it was drawn for) and counts only the view as visible."""
    _, _, data = mask_sync
    lo, hi = data.full_range()
    w = (hi - lo) / 10
    a, b = lo + 4 * w, lo + 5 * w
    plain_fig = timeline_figure(data, View(x_range=(a, b)))
    padded = timeline_figure(data, View(x_range=(a, b), pad=1.0))
    m0, m1 = plain_fig.layout.meta, padded.layout.meta
    assert m1["x_range"] == [a, b] and list(padded.layout.xaxis.range) == [a, b]
    assert m1["data_range"][0] == pytest.approx(a - w, abs=1e-9) and m1["data_range"][1] == pytest.approx(b + w, abs=1e-9)
    assert m0["data_range"] == pytest.approx([a, b], abs=1e-9)
    assert m1["px_s"] == pytest.approx(m0["px_s"]) == pytest.approx(w / 1600, rel=1e-6)
    assert m1["spans_visible"] == m0["spans_visible"]
    assert hover_points(padded, "forward") > 2 * hover_points(plain_fig, "forward")
    # at the trace's ends there is nothing to pad
    edge = timeline_figure(data, View(x_range=(lo, lo + w), pad=1.0)).layout.meta
    assert edge["data_range"][0] == pytest.approx(lo, abs=1e-9) == edge["full_range"][0]
