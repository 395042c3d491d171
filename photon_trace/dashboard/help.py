"""The ``?`` overlay: the keys, and what each colour on the timeline means.

Its colour table lists every legend entry the timeline can have, in the legend's words; the
page shows the rows of the entries the drawn timeline has, each with the colour it was drawn
in (``assets/keys.js``), so the overlay and the legend cannot disagree.
"""
from __future__ import annotations

from dash import html

from photon_trace.dashboard.timeline.data import bubble_name
from photon_trace.telemetry.analysis.causes import Cause

KEYS = (
    ("W / S", "zoom in / out around the mouse (or the centre)"),
    ("A / D", "pan left / right"),
    ("drag", "zoom to a time range (x only); scroll zooms too"),
    ("double-click", "the whole trace again"),
    ("click", "a span, bubble or ▼ sync: its details, the host span that enqueued it, the bubble a sync caused"),
    ("box select", "(toolbar) statistics of a time range: per name and lane, and its idle by cause"),
    ("?", "this help; Esc or ? closes it"),
)

_CAUSES = {
    Cause.HOST_BOUND: "the host had not yet enqueued the next op (its launch was late): host code",
    Cause.COMMIT_WAIT: "the loop waited for a step's tokens by design (a blocking loop): pipeline it",
    Cause.ACCIDENTAL_SYNC: "a host wait the design did not expect drained the device: remove the wait",
    Cause.COPY_WAIT: "the op waited for a copy: issue it earlier, from pinned memory",
    Cause.STREAM_WAIT: "the op waited for another stream (NCCL, a side stream): the program's own ordering",
    Cause.DEVICE_BUSY: "a device running one op at a time was still on another stream's work",
    Cause.DISPATCH: "the op was queued but started late: the device's launch latency, not host code",
    Cause.HOST_DESCHEDULED: "the host thread was runnable but the machine ran something else: pin it to a core, "
                            "run fewer processes per core (no code change in the phase removes it)",
    Cause.HOST_BLOCKED: "the host thread was off the CPU, not waiting on the device: the GIL another thread "
                        "held, a lock, I/O or a sleep (that thread or call is what to change)",
    Cause.DEVICE_DESCHEDULED: "the host-process device's worker had the op queued but waited for a CPU, or "
                              "for the machine to wake it after a stretch with no work: the machine ran "
                              "something else or slept (pin it to a core, run fewer processes per core)",
}
MEANINGS: dict[str, str] = {
    "plan": "host: the scheduler picks the step's rows", "launch": "host: stages the step and enqueues its device work",
    "commit": "host: waits for a step's tokens and accepts them",
    "finalize": "host: constrained rows' masks, then their masked sampling",
    "stage inputs (host)": "host: writes the step's inputs into the staging buffers",
    "build masks (host)": "host: fills constrained rows' allowed-token bitmasks",
    "upload masks (host)": "host: enqueues the masks' copy to the device",
    "stream out (host)": "host: appends tokens, detokenises, answers callers",
    "prefill": "device: forward over prompt tokens", "forward": "device: one decode step's forward",
    "stage copy (device)": "device: the staged inputs copied in", "sample": "device: sampling unconstrained rows",
    "masked sample": "device: sampling constrained rows under their masks",
    "copy-back": "device: sampled tokens copied to the host (copy stream)",
    "mask upload (device)": "device: masks copied in (copy stream)",
    "host wait: expected": "the host waited on the device where the design does (the commit's copy-back)",
    "host wait: accidental": "the host waited where the design does not: a sync to remove",
    "no work (engine idle)": "the engine had no request to run and waited for one: its device idle is no bubble",
    "serve": "host: the server's engine loop between ticks: hands out tokens, takes new requests",
    "requests: decoding": "requests generating tokens", "requests: prefill": "requests in prefill",
    "requests: queued": "requests waiting for a row", "requests: finished": "a request finished (◆)",
    "requests: aborted": "a request aborted (✕)",
    "accidental sync": "▼ where an accidental sync happened; the dotted line leads to the bubble it caused",
    "accidental sync (outside window)": "▽ the same, outside the analysis window (not counted)",
    "CPU op": "host: an operator (aten op) the profiler recorded", "annotation": "host: a user annotation (record_function)",
    "Python": "host: a Python function", "CUDA runtime": "host: a CUDA runtime call (a launch, a copy, a sync)",
    "CUDA driver": "host: a CUDA driver call", "NVTX range": "host: an NVTX range",
    "OS runtime": "host: an operating-system call (a lock, a sleep, I/O)",
    "kernel": "device: a kernel", "memory copy": "device: a copy", "memory set": "device: a memset",
    **{bubble_name(c): f"device idle: {words}" for c, words in _CAUSES.items()},
}
"""Each legend entry, in its own words (a test checks every legend entry has one)."""

OVERLAY = {"display": "none", "position": "fixed", "zIndex": 1000, "top": "60px", "right": "40px",
           "width": "620px", "maxHeight": "80vh", "overflowY": "auto", "background": "white",
           "border": "1px solid #bbb", "borderRadius": "6px", "boxShadow": "0 4px 24px rgba(0,0,0,0.25)",
           "padding": "10px 16px", "fontSize": "13px"}
SWATCH = {"display": "inline-block", "width": "14px", "height": "14px", "borderRadius": "2px",
          "verticalAlign": "middle", "border": "1px solid rgba(0,0,0,0.2)"}


def help_overlay() -> html.Div:
    """Hidden until ``?``; keys.js shows it and fills each colour row's swatch from the timeline."""
    cell = {"padding": "2px 8px", "verticalAlign": "top"}
    keys = html.Table([html.Tr([html.Td(html.B(k), style={**cell, "whiteSpace": "nowrap"}), html.Td(v, style=cell)])
                       for k, v in KEYS])
    colours = html.Table([html.Tr([html.Td(html.Span(className="pt-swatch", style=SWATCH), style=cell),
                                   html.Td(name, style={**cell, "whiteSpace": "nowrap"}), html.Td(words, style=cell)],
                                  className="pt-help-colour", **{"data-name": name}, style={"display": "none"})
                          for name, words in MEANINGS.items()], id="help-colours")
    return html.Div(id="help-overlay", role="dialog", style=OVERLAY, children=[
        html.Div([html.B("Keys and colours"), html.Span("  (? or Esc to close)", style={"color": "#777"}),
                  html.Button("close", id="help-close", n_clicks=0, style={"float": "right"})]),
        keys, html.Div("What each colour on this timeline means", style={"fontWeight": 600, "margin": "10px 0 4px"}),
        colours])
