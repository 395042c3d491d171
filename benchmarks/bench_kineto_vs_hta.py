"""Holistic Trace Analysis (HTA) and photon_trace on the same PyTorch profiler traces, per stream.

For each trace: HTA's ``get_idle_time_breakdown`` (idle per stream split into host_wait,
kernel_wait and other) beside ours over the same ops (HTA drops the ops launched from the
last ProfilerStep on when there are two or more; we apply that cut for the comparison), the
difference as a share of the stream's span, the idle in gaps the host opened (HTA's
host_wait), and our finer causes: host-bound (with what the host was doing), accidental
sync (with its call site), a wait on another stream, launch latency (queued, started late),
short gaps, and how much of the idle another stream covered. Then ours over our own window
(every step) where that differs. The two tools' times are ``bench_scale.py``'s (each in a
process of its own, medians, peak RSS).

    python benchmarks/bench_kineto_vs_hta.py [TRACE.json[.gz] ...]

Without arguments: the two real GPU traces in tests/data/kineto and a synthetic 30-step
training trace (tests/helpers/kineto_builder.py). Needs ``holistictraceanalysis`` (the
``test`` extra); without it, prints ours alone.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.hta_compare import hta_idle, hta_window, ours, stream_number  # noqa: E402
from helpers.kineto_builder import training_trace  # noqa: E402
from photon_trace.telemetry.analysis import analyze  # noqa: E402
from photon_trace.telemetry.analysis.streams import SHORT_GAPS  # noqa: E402
from photon_trace.telemetry.trace.importers import load_any  # noqa: E402

CAUSE_COLUMNS = (("host_bound", "host"), ("accidental_sync", "sync"), ("stream_wait", "strm"),
                 ("dispatch", "lat"), (SHORT_GAPS, "short"))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def compare(path: Path, have_hta: bool) -> list[str]:
    trace = load_any(path)
    report = analyze(trace)
    theirs = hta_idle(path) if have_hta else {}
    windowed = hta_window(trace)
    mine = ours(windowed)
    cut = len(windowed.device_spans) < len(trace.device_spans)
    out = [f"\n## {path.name}: {len(trace.device_spans):,} device ops on {len(mine)} streams"
           + (f" (HTA's window: {len(windowed.device_spans):,} ops launched before the last ProfilerStep)" if cut else ""),
           "",
           "| stream | ops | span ms | HTA idle ms (host_wait / kernel_wait / other) | ours idle ms | diff % of span "
           "| gaps the host opened: HTA / ours ms | ours by cause ms (" + " / ".join(c for _, c in CAUSE_COLUMNS)
           + ") | covered by other streams ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, (s, late) in mine.items():
        h = theirs.get(stream_number(name))
        if h is not None:
            total = sum(h.values()) * 1000
            hta = f"{_ms(total)} ({_ms(h['host_wait'] * 1000)} / {_ms(h['kernel_wait'] * 1000)} / {_ms(h['other'] * 1000)})"
            diff = f"{abs(total - s.idle_ns) / s.span_ns:.3%}" if s.span_ns else "-"
            host = f"{_ms(h['host_wait'] * 1000)} / {_ms(late)}"
        else:
            hta, diff, host = "-", "-", f"- / {_ms(late)}"
        causes = " / ".join(_ms(s.causes.get(c, 0)) for c, _ in CAUSE_COLUMNS)
        out.append(f"| {name} | {s.ops} | {_ms(s.span_ns)} | {hta} | {_ms(s.idle_ns)} | {diff} | {host} | {causes} "
                   f"| {_ms(s.covered_ns)} |")
    if cut:
        out += ["", f"ours over our window (every step; {report.stream} {_ms(report.window_ns)} ms): "
                + "; ".join(f"{s.stream} idle {_ms(s.idle_ns)} of {_ms(s.span_ns)} ms" for s in report.streams)]
    top = report.diagnosis[:3]
    if top:
        out += ["", "top of our diagnosis (" + report.stream + "): " + "; ".join(
            f"{d.cause} at {d.site_or_phase[:60]} {_ms(d.idle_ns)} ms -> {d.predicted_speedup:.3f}x" for d in top)]
    if not have_hta:
        out += ["", "HTA not installed: ours only"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path)
    args = ap.parse_args()
    try:
        import hta  # noqa: F401
        have_hta = True
    except ImportError:
        have_hta = False
        print("holistictraceanalysis is not installed (pip install -e '.[test]'): ours only")
    with tempfile.TemporaryDirectory() as tmp:
        paths = args.traces
        if not paths:
            data = ROOT / "tests" / "data" / "kineto"
            synth = training_trace(30, kernels_per_step=60).write(Path(tmp) / "synthetic_training.json.gz")
            paths = sorted(data.glob("*.json.gz")) + [synth]
        for p in paths:
            # HTA reads every trace in a folder it is given: each trace gets a folder of its own
            own = Path(tmp) / p.name.replace(".", "_")
            own.mkdir(exist_ok=True)
            shutil.copy(p, own / p.name)
            print("\n".join(compare(own / p.name, have_hta)))


if __name__ == "__main__":
    main()
