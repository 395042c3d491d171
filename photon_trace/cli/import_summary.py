"""The console summary ``photon-trace import`` prints: what the trace holds, then its analysis.

Per stream (ours: each stream idle between its own ops) and per device (Nsight's: a device
idle only while none of its streams runs), the syncs by call site, the diagnosis, and
``nsys analyze``'s expert rules under nsys's names beside them.
"""
from __future__ import annotations


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _short(name: str, n: int = 70) -> str:
    return name if len(name) <= n else name[:n - 1] + "…"


NO_DEVICE = {
    "kineto": "no kernel, memcpy or memset in the trace (recorded without ProfilerActivity.CUDA, or where there "
              "was no GPU)",
    "nsys": "runtime calls but no kernel, memcpy or memset in the report (CUDA activity was not traced: profile "
            "with nsys profile --trace=cuda, and let the program reach the GPU)",
}


def source_lines(trace) -> list[str]:
    """What the imported file holds, in its own terms."""
    src = trace.header["source"]
    settings = trace.header["settings"]
    threads = sorted({h.thread for h in trace.host_spans})
    if src.get("format") == "nsys":
        nvtx = ", ".join(f"{d or 'default'} {n:,}" for d, n in sorted(src["nvtx_ranges"].items())) or "none"
        dup = src["duplicate_runtime_rows"]
        head = [f"{src['file']}: Nsight Systems {src['product_version']} export (schema {src['schema_version']}, "
                f"clock resolution 1 ns)",
                f"  device activity: {src['kernels']:,} kernels, {src['memcpys']:,} memcpys, {src['memsets']:,} memsets; "
                f"{src['runtime_calls']:,} runtime/driver calls" + (f" ({dup:,} duplicate rows counted once)" if dup else ""),
                f"  NVTX ranges by domain: {nvtx}; OS runtime calls: {src['osrt_calls']:,}"]
        what = "NVTX range"
    else:
        res = "1 ns" if src["resolution_ns"] == 1 else f"{src['resolution_ns'] / 1000:g} µs"
        head = [f"{src['file']}: {src['events']:,} events (Kineto schema {src['schema_version']}, clock resolution {res})"]
        what = "annotation"
    found = settings["steps_found"]
    from photon_trace.telemetry.analysis.source_notes import unknown_runtime
    waits = (f"host waits on the device: unknown ({unknown_runtime(trace)})" if unknown_runtime(trace)
             else f"{len(trace.waits)} host wait(s) on the device")
    runtime = (src.get("runtime") or {}).get("name")
    return head + [f"  host: {len(trace.host_spans):,} spans on {len(threads)} thread(s); {waits}"
                   + (f" (runtime: {runtime})" if runtime and not unknown_runtime(trace) else ""),
                   f"  steps: {found} '{settings['step_annotation']}' {what}(s)"
                   + ("" if found else " (none: the whole trace is one window)")]


def render_summary(trace, report, rules=()) -> str:
    """The console summary of an imported trace, its analysis (``report`` None: no device
    activity) and nsys's expert rules (``telemetry/analysis/gpu_rules.py:expert_rules``)."""
    from photon_trace.telemetry.analysis.source_notes import source_notes
    out = source_lines(trace) + [f"  note: {n}" for n in source_notes(trace)]
    if report is None:
        why = NO_DEVICE.get(trace.header["source"].get("format"), NO_DEVICE["kineto"])
        out.append(f"  no device activity: {why}; nothing to analyse on a device")
        return "\n".join(out + rule_lines(rules, _origin(trace)))
    out.append(f"  device: {len(trace.device_spans):,} ops on {len(report.streams)} stream(s); "
               f"analysed: {report.stream}")
    width = max([18] + [len(s.stream) for s in report.streams])
    out += ["", "per stream (each over its own span in the window; idle by cause, ms):",
            f"  {'stream':<{width}} {'ops':>6} {'span':>12} {'busy':>12} {'idle':>12} {'idle%':>6} "
            f"{'host late':>11} {'covered':>11}  causes"]
    for s in report.streams:
        causes = ", ".join(f"{k} {v / 1e6:.3f}" for k, v in sorted(s.causes.items(), key=lambda kv: -kv[1]))
        out.append(f"  {s.stream:<{width}} {s.ops:>6} {s.span_ns / 1e6:>12.3f} {s.busy_ns / 1e6:>12.3f} "
                   f"{s.idle_ns / 1e6:>12.3f} {s.idle_fraction:>6.1%} {s.host_idle_ns / 1e6:>11.3f} "
                   f"{s.covered_ns / 1e6:>11.3f}  {causes}")
    out += device_lines(report.devices)
    out += ["", f"{report.stream}: window {_ms(report.window_ns)}, idle {report.idle_fraction:.1%} "
                f"({len(report.bubbles)} bubbles, {_ms(report.bubble_ns)}; host late {_ms(report.host_idle_ns)}, "
                f"launch latency {_ms(report.launch_idle_ns)})"]
    if report.steps:
        out.append(f"  steps in the window: {len(report.steps)} ({report.steps_per_s:,.2f}/s), median period "
                   f"{report.period_ms:.3f} ms, median idle "
                   f"{sorted(s.idle_ns for s in report.steps)[len(report.steps) // 2] / 1e6:.3f} ms; "
                   f"{report.stream} busy {report.busy_fraction:.1%}")
    if report.top_ops:
        out += ["", "top ops by device time (all streams, in the window):"]
        out += [f"  {o.total_ns / 1e6:>10.3f} ms {o.share:>6.1%} {o.count:>7,}x  {_short(o.name, 90)}"
                for o in report.top_ops[:5]]
    if report.syncs:
        out += ["", "syncs by call site (host waited / device idle it cost):"]
        out += [f"  {s.count:>4} x {_short(s.site, 60)}: {_ms(s.wait_ns)} / {_ms(s.idle_ns)}  ({_short(s.reason, 80)})"
                for s in report.syncs]
    out += diagnosis_lines(report.diagnosis)
    covered = sum(b.covered_ns for b in report.bubbles)
    if covered:
        out.append(f"\n  {_ms(covered)} of {report.stream}'s bubble time had another stream busy "
                   f"(the device as a whole was not idle then)")
    return "\n".join(out + rule_lines(rules, _origin(trace)))


def diagnosis_lines(diagnosis, rows: int = 8) -> list[str]:
    """The diagnosis in the order every report ranks it (``telemetry/analysis/diagnosis.py:ranked``):
    what host code can fix, then, apart, the host not running and the device's own."""
    from photon_trace.telemetry.analysis.causes import ANOTHER_THREAD, DEPLOYMENT, DEVICE_SIDE, HOST_CODE, who_fixes
    from photon_trace.telemetry.analysis.diagnosis import ranked
    order = ranked(diagnosis)
    out = []
    for title, who in (("diagnosis (what to fix first): what host code can fix", HOST_CODE),
                       ("host blocked: another thread, a lock or I/O, not the phase's code", ANOTHER_THREAD),
                       ("host descheduled: the machine ran something else (the deployment's)", DEPLOYMENT),
                       ("device-side: what host code cannot fix", DEVICE_SIDE)):
        part = [d for d in order if who_fixes(d.cause) == who][:rows]
        if part:
            out += ["", title]
            out += [f"  {d.cause:<16} {_short(d.site_or_phase, 60):<60} {_ms(d.idle_ns):>12} "
                    f"{d.share:>6.1%}  -> {d.predicted_speedup:.3f}x" for d in part]
    return out


def _origin(trace) -> int:
    """Rule rows' starts are on nsys's clock (ns since the session start) for an Nsight export, as
    nsys prints them; on any other trace, from its first record."""
    if trace.header.get("source", {}).get("format") == "nsys":
        return 0
    from photon_trace.telemetry.trace.time import trace_origin_ns
    return trace_origin_ns(trace)


def device_lines(devices) -> list[str]:
    """Idle per device, all streams together (Nsight's view)."""
    if not devices:
        return []
    width = max([10] + [len(d.device) for d in devices])
    out = ["", "per device (all its streams together, as Nsight counts GPU idle; ms):",
           f"  {'device':<{width}} {'streams':>7} {'ops':>6} {'span':>12} {'busy':>12} {'idle':>12} {'idle%':>6} "
           f"{'gaps':>6} {'longest gap':>12}"]
    out += [f"  {d.device:<{width}} {d.streams:>7} {d.ops:>6} {d.span_ns / 1e6:>12.3f} {d.busy_ns / 1e6:>12.3f} "
            f"{d.idle_ns / 1e6:>12.3f} {d.idle_fraction:>6.1%} {d.gaps:>6} {d.longest_gap_ns / 1e6:>12.3f}"
            for d in devices]
    return out


def rule_lines(rules, origin_ns: int = 0, rows: int = 3) -> list[str]:
    """nsys analyze's rules: per rule its count and total, and its first ``rows`` rows (starts
    from ``origin_ns``)."""
    if not rules:
        return []
    out = ["", "nsys analyze's expert rules (nsys's names and defaults; rows longest first):"]
    for r in rules:
        total = f", {_ms(r.total_ns)} in all" if r.count else ""
        out.append(f"  {r.name} ({r.title}): {r.count:,} found{total}")
        for row in r.rows[:rows]:
            out.append("      " + ", ".join(f"{c} {_cell(c, v - origin_ns if c == 'Start' else v)}"
                                            for c, v in zip(r.columns, row)))
    return out


def _cell(column: str, value) -> str:
    if column in ("Duration", "Start") and isinstance(value, int):
        return _ms(value)
    if column == "In-Use (%)":
        return f"{value:.1f}%"
    return str(value)
