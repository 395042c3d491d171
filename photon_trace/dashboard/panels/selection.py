"""Selection: what a click (or a search hit, a table row, the guided first view) selects,
every field of it, and the marks drawn for it on the timeline.

A selection is a small JSON-able dict the page keeps:

* ``{"kind": "span", "set": NAME, "i": I}``: span I of the category NAME (a host phase,
  device op, wait or bubble);
* ``{"kind": "sync", "k": K}``: accidental-sync marker K;
* ``{"kind": "range", "a": NS, "b": NS}``: a time range (its statistics: ``stats.py``);
* ``{"kind": "requests", "t": NS}``: the requests in flight at a time;
* ``{"kind": "request", "i": I}``: request I (``RequestStates`` order) from its end mark.

``details`` returns what the details panel shows; ``marks`` the shapes and arrows: an
outline on the selection, the flow arrow from the host span that enqueued a device op
to the op (as the Perfetto export's flows), and the link from a sync to the bubbles it
caused.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from photon_trace.dashboard.panels.figures import fmt_duration
from photon_trace.dashboard.timeline.data import TimelineData
from photon_trace.dashboard.timeline.frame import BANDS, HALF, SYNC_DY
from photon_trace.dashboard.timeline.marks import SYNC_NAME
from photon_trace.telemetry.analysis.causes import cause_label, who_fixes
from photon_trace.telemetry.trace.columns import column
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.trace.time import issuer

OUTLINE = dict(color="#111", width=2)
FLOW = "#1565C0"
LINK = "#B00020"


def _times(data: TimelineData, trace: Trace, t: int) -> list[tuple[str, str]]:
    """One instant on every clock the user may hold it against."""
    clock = trace.header.get("clock") or {}
    out = [("from window start", fmt_duration(t - data.origin)),
           ("Perfetto ts (µs from the trace's first record)", f"{(t - data.trace_origin) / 1e3:,.3f}"),
           ("monotonic ns", f"{t:,}")]
    if isinstance(clock.get("wall_ns"), int) and isinstance(clock.get("mono_ns"), int):
        import datetime as dt
        wall = (clock["wall_ns"] + t - clock["mono_ns"]) / 1e9
        out.append(("wall clock", dt.datetime.fromtimestamp(wall).isoformat(timespec="microseconds")))
    return out


def find_span(data: TimelineData, name: str, i: int):
    st = data.set_named(name)
    if st is None or not (0 <= i < len(st)):
        return None, None
    return st, i


def details(data: TimelineData, trace: Trace, report: Any, sel: dict | None) -> dict | None:
    """``{"title", "fields": [(k, v)], "step": [(k, v)], "ops": [row], "related": [text]}`` or None."""
    if not sel:
        return None
    kind = sel.get("kind")
    if kind == "span":
        st, i = find_span(data, sel.get("set", ""), int(sel.get("i", -1)))
        return _span_details(data, trace, st, i) if st is not None else None
    if kind == "sync" and 0 <= int(sel.get("k", -1)) < len(data.syncs):
        return _sync_details(data, trace, int(sel["k"]))
    if kind == "requests" and data.requests is not None:
        return _request_details(data, int(sel["t"]))
    if kind == "request" and data.requests is not None and 0 <= int(sel.get("i", -1)) < len(data.requests.req_id):
        return _one_request(data, trace, int(sel["i"]))
    return None


def _span_details(data: TimelineData, trace: Trace, st, i: int) -> dict:
    t0, t1 = int(st.t0[i]), int(st.t1[i])
    step = int(st.info[i, 0])
    fields: list[tuple[str, str]] = [("category", st.name), ("lane", data.lanes[int(st.lane[i])].label),
                                     ("duration", fmt_duration(t1 - t0))]
    related: list[str] = []
    if st.source == "bubbles":
        b = data.bubbles[int(st.index[i])]
        counted = bool(st.in_window[i]) if st.in_window is not None else True
        fields += [("cause", cause_label(b.cause)), ("detail", str(b.detail)), ("who can fix it", who_fixes(b.cause)),
                   ("step (the op after the gap)", str(b.step)),
                   ("counted", "yes (inside the analysis window)" if counted
                    else "no: outside the analysis window (warm-up or drain)")]
        syncs = data.syncs.link_marker[data.syncs.link_bubble == int(st.index[i])]
        related += [f"caused by the {SYNC_NAME} at {data.syncs.site[k]} ({data.syncs.reason[k]}), "
                    f"{fmt_duration(t0 - int(data.syncs.t0[k]))} after the host began waiting" for k in syncs]
    else:
        rec = getattr(trace, st.source)[int(st.index[i])]
        fields += [(k, str(v)) for k, v in rec._asdict().items()]
        if st.source == "device_spans":
            fields.append(("launch delay (start − enqueued)", fmt_duration(rec.t0 - rec.enqueued)))
            src = issuer(_host_spans_of(trace, rec.step), rec.enqueued)
            if src is not None:
                related.append(f"enqueued by the host's {src.phase} of step {src.step} on {src.thread} "
                               f"(arrow), {fmt_duration(rec.t0 - rec.enqueued)} before it started")
        if st.source == "waits" and not rec.expected:
            k = int(np.searchsorted(data.syncs.index, int(st.index[i])))
            if k < len(data.syncs) and data.syncs.index[k] == int(st.index[i]):
                related += _caused(data, k)
    fields += _times(data, trace, t0)
    return {"title": f"{st.name} · step {step}", "fields": fields, "step": _step_record(trace, step),
            "ops": step_ops(data, trace, step), "related": related}


def _caused(data: TimelineData, k: int) -> list[str]:
    bubbles = [data.bubbles[j] for j in data.syncs.bubbles_of(k)]
    if not bubbles:
        return ["no bubble attributed to this wait (the device had other work queued)"]
    return [f"caused {len(bubbles)} bubble(s), {fmt_duration(sum(b.t1 - b.t0 for b in bubbles))} of device idle, "
            f"the first {fmt_duration(bubbles[0].t0 - int(data.syncs.t0[k]))} after the wait began (dotted link)"]


def _sync_details(data: TimelineData, trace: Trace, k: int) -> dict:
    sm = data.syncs
    w = trace.waits[int(sm.index[k])]
    fields = [("call site", w.site), ("reason", w.reason), ("step", str(w.step)),
              ("host waited", fmt_duration(w.t1 - w.t0)),
              ("device idle caused (counted)", fmt_duration(float(sm.idle_ns[k]))),
              ("counted", "yes" if sm.in_window[k] else "no: outside the analysis window")]
    fields += _times(data, trace, w.t0)
    return {"title": f"{SYNC_NAME} · {w.site}", "fields": fields, "step": _step_record(trace, w.step),
            "ops": step_ops(data, trace, w.step), "related": _caused(data, k)}


def _request_details(data: TimelineData, t: int) -> dict:
    rs = data.requests
    idx = rs.in_flight_at(t)
    names = REQUEST_EVENTS
    rows = []
    for i in idx[:200]:
        row = {"request": str(int(rs.req_id[i])), "prompt tokens": str(int(rs.prompt_tokens[i])),
               "output tokens": str(int(rs.output_tokens[i]))}
        for j, nm in enumerate(names):
            v = int(rs.times[i, j])
            row[nm] = fmt_duration(v - data.origin) if v >= 0 else "–"
        rows.append(row)
    return {"title": f"requests in flight at {fmt_duration(t - data.origin)}: {len(idx)}",
            "fields": [], "step": [], "ops": rows, "related": []}


REQUEST_EVENTS = ("arrival", "admitted", "first token", "finalized", "freed")


def _one_request(data: TimelineData, trace: Trace, i: int) -> dict:
    """One request's lifecycle: each event's time, how long it queued, waited for its first
    token and ran, and how it ended."""
    rs = data.requests
    t = [int(v) for v in rs.times[i]]
    end = "aborted" if rs.aborted[i] else "finalized"
    fields = [("request", str(int(rs.req_id[i]))), ("ended", end if t[3] >= 0 else "not in the trace"),
              ("prompt tokens", str(int(rs.prompt_tokens[i]))), ("output tokens", str(int(rs.output_tokens[i])))]
    names = [*REQUEST_EVENTS[:3], end, REQUEST_EVENTS[4]]
    fields += [(nm, fmt_duration(v - data.origin) if v >= 0 else "–") for nm, v in zip(names, t)]
    for label, a, b in (("queued for", 0, 1), ("time to first token", 0, 2), ("arrival to end", 0, 3)):
        if t[a] >= 0 and t[b] >= 0:
            fields.append((label, fmt_duration(t[b] - t[a])))
    if t[3] >= 0:
        fields += _times(data, trace, t[3])
    return {"title": f"request {int(rs.req_id[i])} · {end if t[3] >= 0 else 'in flight'}", "fields": fields,
            "step": [], "ops": [], "related": []}


def _step_record(trace: Trace, step: int) -> list[tuple[str, str]]:
    hit = np.flatnonzero(column(trace.steps, "step") == step) if len(trace.steps) else []
    rec = trace.steps[int(hit[0])] if len(hit) else None
    return [(k, str(v)) for k, v in rec._asdict().items()] if rec else []


def _host_spans_of(trace: Trace, step: int) -> list:
    """The host spans of ``step``, found in the step column (a click on a 10M-span trace
    reads the few records it shows, not every one)."""
    if not len(trace.host_spans):
        return []
    return [trace.host_spans[int(i)] for i in np.flatnonzero(column(trace.host_spans, "step") == step)]


def step_ops(data: TimelineData, trace: Trace, step: int) -> list[dict[str, str]]:
    """Every record of ``step`` in time order: host phases, device ops and waits."""
    rows = []
    for st in data.sets:
        if st.group == "bubble":
            continue
        for i in np.flatnonzero(st.info[:, 0] == step):
            rows.append((int(st.t0[i]), {"name": st.name, "lane": data.lanes[int(st.lane[i])].label,
                                         "start": fmt_duration(int(st.t0[i]) - data.origin),
                                         "duration": fmt_duration(int(st.t1[i] - st.t0[i]))}))
    return [r for _, r in sorted(rows, key=lambda r: r[0])]


def target_ns(data: TimelineData, sel: dict) -> tuple[int, int] | None:
    """The time span a selection covers (to bring it into view)."""
    if sel.get("kind") == "span":
        st, i = find_span(data, sel.get("set", ""), int(sel.get("i", -1)))
        return (int(st.t0[i]), int(st.t1[i])) if st is not None else None
    if sel.get("kind") == "sync" and 0 <= int(sel.get("k", -1)) < len(data.syncs):
        k = int(sel["k"])
        ends = [data.bubbles[j].t1 for j in data.syncs.bubbles_of(k)]
        return int(data.syncs.t0[k]), int(max([data.syncs.t1[k], *ends]))
    if sel.get("kind") == "range":
        return int(sel["a"]), int(sel["b"])
    if sel.get("kind") == "request" and data.requests is not None and 0 <= int(sel.get("i", -1)) < len(
            data.requests.req_id):
        t = data.requests.times[int(sel["i"])]
        known = t[t >= 0]
        return (int(known.min()), int(known.max())) if len(known) else None
    return None


def marks(data: TimelineData, trace: Trace, sel: dict | None, axis: str = "window") -> dict:
    """Shapes and annotations that show ``sel`` on the timeline (empty without one)."""
    out: dict[str, list] = {"shapes": [], "annotations": []}
    if not sel:
        return out
    x = lambda t: float(data.to_x(t, axis))   # noqa: E731
    if sel.get("kind") == "range":
        out["shapes"].append(dict(type="rect", xref="x", yref="paper", x0=x(sel["a"]), x1=x(sel["b"]), y0=0, y1=1,
                                  fillcolor="rgba(21,101,192,0.10)", line=dict(color=FLOW, width=1),
                                  layer="below", name="selected range"))
        return out
    if sel.get("kind") == "span":
        st, i = find_span(data, sel.get("set", ""), int(sel.get("i", -1)))
        if st is None:
            return out
        lo, hi = BANDS[st.group]
        c = -float(st.lane[i])
        out["shapes"].append(dict(type="rect", xref="x", yref="y", x0=x(st.t0[i]), x1=x(st.t1[i]), y0=c + lo - 0.04,
                                  y1=c + hi + 0.04, line=OUTLINE, fillcolor="rgba(0,0,0,0)", name="selected"))
        if st.source == "device_spans":
            rec = trace.device_spans[int(st.index[i])]
            src = issuer(_host_spans_of(trace, rec.step), rec.enqueued)
            host_lane = next((k for k, ln in enumerate(data.lanes) if ln.kind == "host" and src is not None
                              and ln.name == src.thread), None)
            if host_lane is not None:
                at = min(max(rec.enqueued, src.t0), src.t1)
                out["annotations"].append(_arrow(x(at), -host_lane, x(rec.t0), c + HALF, FLOW, "enqueued by"))
        if st.source == "bubbles":
            for k in data.syncs.link_marker[data.syncs.link_bubble == int(st.index[i])]:
                out["annotations"].append(_arrow(x(data.syncs.t0[k]), -float(data.syncs.lane[k]) + SYNC_DY,
                                                 x((st.t0[i] + st.t1[i]) / 2), c + HALF, LINK, "caused by"))
        return out
    if sel.get("kind") == "request" and data.requests is not None and 0 <= int(sel.get("i", -1)) < len(
            data.requests.req_id):
        rs, i = data.requests, int(sel["i"])
        known = rs.times[i][rs.times[i] >= 0]
        if len(known):   # its lifetime outlined on the requests lane
            c = -float(rs.lane)
            out["shapes"].append(dict(type="rect", xref="x", yref="y", x0=x(known.min()), x1=x(known.max()),
                                      y0=c - HALF - 0.04, y1=c + HALF + 0.04, line=OUTLINE,
                                      fillcolor="rgba(0,0,0,0)", name="selected"))
        return out
    if sel.get("kind") == "sync" and 0 <= int(sel.get("k", -1)) < len(data.syncs):
        k = int(sel["k"])
        y = -float(data.syncs.lane[k]) + SYNC_DY
        out["shapes"].append(dict(type="circle", xref="x", yref="y", xsizemode="pixel", ysizemode="pixel",
                                  xanchor=x(data.syncs.t0[k]), yanchor=y, x0=-10, x1=10, y0=-10, y1=10,
                                  line=OUTLINE, name="selected"))
        for j in data.syncs.bubbles_of(k):
            b = data.bubbles[j]
            out["annotations"].append(_arrow(x(data.syncs.t0[k]), y, x((b.t0 + b.t1) / 2),
                                             -float(data.compute_lane) + HALF, LINK, "idle it caused"))
    return out


def _arrow(x0: float, y0: float, x1: float, y1: float, colour: str, label: str) -> dict:
    """An arrow in data coordinates from (x0, y0) to (x1, y1)."""
    return dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                arrowhead=3, arrowsize=1.2, arrowwidth=2, arrowcolor=colour, text="", hovertext=label,
                name=label)
