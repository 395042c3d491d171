"""The timeline's colours and the words its legend uses.

Every legend entry must be told apart at a glance, by anyone: each pair of colours that can
share a legend differs by at least 7.5 CIEDE2000 units as seen with normal vision and as a
deuteranope or protanope sees it (``tests/test_dashboard_palette.py`` computes it). The
colours were picked with that constraint, each as near as it allowed to the hue that
carries its meaning (the accidental sync red, the host late orange, forward blue), so
several are not the obvious choice: change one and the test says which pair got too close.

Two families share a legend: this engine's traces (phases, device ops, waits, bubbles,
requests) and an imported profiler trace's categories (with the same waits and bubbles).
"""
from __future__ import annotations

from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.tracer import Phase

PHASE_COLOURS = {
    Phase.PLAN: "#9669E1", Phase.LAUNCH: "#F0871E", Phase.COMMIT: "#5AA55A", Phase.FINALIZE: "#B478A5",
    Phase.STAGE: "#4B784B", Phase.MASK_BUILD: "#D26900", Phase.MASK_UPLOAD: "#C300A5",
    Phase.STREAM_OUT: "#B40F2D",
    Phase.NO_WORK: "#E6E6E6",   # neutral: the engine had nothing to run, no fault of anyone's
    Phase.SERVE: "#FFFF96",     # pale yellow: the server's engine loop between ticks, host code
}
"""Every phase's colour (a test fails while a phase has none)."""

DEVICE_COLOURS = {
    "prefill": "#4B5A78", "forward": "#2D69B4", "device stage": "#D27887", "sample": "#5AA596",
    "masked_sample": "#F0C31E", "copy_back": "#967869", "device mask_upload": "#E178FF",
}
WAIT_COLOURS = {"wait: expected": "#696969", "wait: accidental": "#D22D2D"}
IMPORTED_COLOURS = {
    # Imported (PyTorch profiler, Nsight) traces: their hundreds of op names are drawn by category.
    "cpu op": "#6987B4", "annotation": "#A596A5", "python": "#F0E10F", "cuda runtime": "#F0871E",
    "cuda driver": "#F00078", "kernel": "#2D69B4", "memcpy": "#B40F4B", "memset": "#C378FF",
    "nvtx": "#007800", "os runtime": "#877887",
}
OTHER_COLOUR = "#B40087"   # an imported category this table does not know
BUBBLE_COLOURS = {
    Cause.HOST_BOUND: "#FFC387", Cause.COMMIT_WAIT: "#C3A5E1", Cause.ACCIDENTAL_SYNC: "#FF7878",
    Cause.COPY_WAIT: "#D2B4A5", Cause.DISPATCH: "#C3C3C3", Cause.STREAM_WAIT: "#87E1F0",
    Cause.DEVICE_BUSY: "#E1E1C3",
    # the host or the device worker not running: dark, apart from the pastel causes code can fix (the light end is full)
    Cause.HOST_DESCHEDULED: "#5A3C00", Cause.HOST_BLOCKED: "#78004B", Cause.DEVICE_DESCHEDULED: "#2D0000",
}
"""Every cause's colour: the one thing besides its ``Cause`` member that a new cause needs
(a test fails while a cause has none). Opaque: a bubble is drawn where nothing else is."""
REQUEST_COLOURS = {"decode": "#A5B4C3", "prefill": "#4B2DFF", "queued": "#787887"}

# What the legend (and a span's label) calls a category the trace names by an identifier.
LEGEND_NAMES = {
    "host stage": "stage inputs (host)", "host mask_build": "build masks (host)",
    "host mask_upload": "upload masks (host)", "host stream_out": "stream out (host)",
    "device stage": "stage copy (device)", "masked_sample": "masked sample", "copy_back": "copy-back",
    "device mask_upload": "mask upload (device)", "wait: expected": "host wait: expected",
    "wait: accidental": "host wait: accidental", "no_work": "no work (engine idle)",
    "cpu op": "CPU op", "python": "Python", "cuda runtime": "CUDA runtime", "cuda driver": "CUDA driver",
    "memcpy": "memory copy", "memset": "memory set", "nvtx": "NVTX range", "os runtime": "OS runtime",
}


def legend_name(name: str) -> str:
    """The words for a category's set name (``masked_sample`` -> "masked sample"); a set
    split by stream ("copy_back (copy)") keeps its stream."""
    base, sep, rest = name.partition(" (")
    return LEGEND_NAMES.get(name) or (LEGEND_NAMES.get(base, base) + sep + rest)
