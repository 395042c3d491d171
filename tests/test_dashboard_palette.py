"""Issue 33 item 1: every legend entry of the timeline is told apart by colour, with normal
vision and as a deuteranope or protanope sees it, and the legend speaks words, not
identifiers.

The distances are CIEDE2000 (``helpers/colours.py``, checked here against Sharma, Wu and
Dalal's published test pairs); the colour-blind views are Machado et al. 2009 at severity 1,
checked against colorspacious 1.1.2's ``sRGB1+CVD`` (its figures copied below, computed
outside this project)."""
from __future__ import annotations

from pathlib import Path

import pytest

from photon_trace.dashboard.sources.store import TraceStore
from photon_trace.dashboard.timeline.data import COLOURS, bubble_name, phase_set_name
from photon_trace.dashboard.timeline.figure import timeline_figure
from photon_trace.dashboard.timeline.palette import (
    BUBBLE_COLOURS, DEVICE_COLOURS, IMPORTED_COLOURS, OTHER_COLOUR, PHASE_COLOURS, REQUEST_COLOURS, WAIT_COLOURS)
from helpers.colours import ciede2000, closest_pair, lab, parse

MIN_DE2000 = 7.5   # the least difference between two legend entries, in every vision below
VISIONS = ("normal", "deuteranopia", "protanopia")
DEMO = Path(__file__).resolve().parents[1] / "traces" / "tiny-point-s8-mask-sync-pipelined.trace.jsonl"

SHARED = {**WAIT_COLOURS, **{bubble_name(c): v for c, v in BUBBLE_COLOURS.items()}}
ENGINE = {**{phase_set_name(p.span_name, p.sub): c for p, c in PHASE_COLOURS.items()}, **DEVICE_COLOURS,
          **{f"requests: {k}": v for k, v in REQUEST_COLOURS.items()}, **SHARED}
IMPORTED = {**IMPORTED_COLOURS, "other": OTHER_COLOUR, **SHARED}


@pytest.mark.parametrize("lab1, lab2, expected", [
    ((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
    ((50, 3.1571, -77.2803), (50, 0, -82.7485), 2.8615),
    ((50, 0, 0), (50, -1, 2), 2.3669),
    ((50, 2.5, 0), (73, 25, -18), 27.1492),
    ((50, 2.5, 0), (61, -5, 29), 22.8977),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
])
def test_ciede2000_gives_sharmas_published_differences(lab1, lab2, expected):
    assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("colour, vision, expected", [
    ("#2D69B4", "deuteranopia", (42.28, 10.58, -47.51)), ("#2D69B4", "protanopia", (47.07, 8.09, -42.41)),
    ("#FF7878", "deuteranopia", (70.40, -3.70, 30.15)), ("#FF7878", "protanopia", (59.92, -1.77, 14.44)),
    ("#F0C31E", "deuteranopia", (82.19, -7.14, 75.44)), ("#F0C31E", "protanopia", (77.81, -6.16, 79.11)),
])
def test_the_colour_blind_views_agree_with_colorspacious(colour, vision, expected):
    assert tuple(lab(parse(colour), vision)) == pytest.approx(expected, abs=0.03)


@pytest.mark.parametrize("vision", VISIONS)
@pytest.mark.parametrize("family", ["engine", "imported"])
def test_every_pair_of_legend_colours_is_far_apart(family, vision):
    colours = ENGINE if family == "engine" else IMPORTED
    d, a, b = closest_pair(colours, vision)
    assert d >= MIN_DE2000, f"{a!r} and {b!r} are {d:.2f} apart ({vision}); at least {MIN_DE2000} needed"


def test_the_palette_tables_cover_what_the_timeline_draws():
    assert set(COLOURS) <= set(ENGINE) | set(IMPORTED)
    assert all(parse(c) is not None for c in {**ENGINE, **IMPORTED}.values())


@pytest.mark.skipif(not DEMO.exists(), reason="traces/ has no engine sample (scripts/sample_traces.sh makes it)")
def test_the_demo_timelines_legend_is_words_in_distinct_colours():
    loaded = TraceStore([DEMO.parent]).get(DEMO)
    fig = timeline_figure(loaded.timeline)
    areas = {t.name: t.fillcolor for t in fig.data if t.showlegend is not False and t.fill == "toself"}
    assert {"forward", "plan", "masked sample", "copy-back", "mask upload (device)"} <= set(areas)
    assert not [n for n in areas if "_" in n], "identifiers in the legend"
    for vision in VISIONS:
        d, a, b = closest_pair(areas, vision)
        assert d >= MIN_DE2000, f"{a!r} and {b!r} are {d:.2f} apart ({vision})"


def test_the_help_overlay_says_what_every_legend_entry_means():
    from photon_trace.dashboard.help import MEANINGS
    from photon_trace.dashboard.timeline.draw_marks import REQUEST_END_NAMES, REQUEST_NAMES
    from photon_trace.dashboard.timeline.marks import SYNC_NAME, SYNC_OUTSIDE_NAME
    from photon_trace.dashboard.timeline.palette import legend_name
    entries = {legend_name(n) for n in {**ENGINE, **IMPORTED} if not n.startswith("requests: ") and n != "other"}
    entries |= {*REQUEST_NAMES.values(), *REQUEST_END_NAMES.values(), SYNC_NAME, SYNC_OUTSIDE_NAME}
    assert entries - set(MEANINGS) == set()
