"""What tracing costs: the same pipelined workload with tracing off, on, full, on + OTLP
export, and under torch.profiler, interleaved round by round in one process.

Prints tokens/s per mode and the ratio to "off" (median of each round's paired ratio);
never fails on speed. "on"/"full" record into the ring buffers and write a trace file;
"on+otlp" also exports spans over OTLP/HTTP, every step sampled (``--otlp-every``), to a
loopback receiver running in a separate process; "torch.profiler" runs untraced
inside ``torch.profiler.profile`` (CPU activities). One engine serves every mode (its
tracer is swapped between runs) so the device worker, memory and caches are shared.

A second table estimates the same overhead without A/B timing noise: the hot-path
cost of each tracer call (microbenchmarked, minus the no-op tracer's) times the calls
per step seen in the run's trace, against the run's median step period; and the
recorder's measured time (conversion, encoding; how much of it ran inside the engine's
device waits) and the sinks' delivery time per second of run.

A third table measures the cost the way it hurts: the device's idle share inside the
recorder's flush windows (each flush cycle, from its first slice to its last, and each
sink delivery) against outside them, in the run's own steady-state window. Equal
within noise means tracing does not stall the engine. "control" is the idle share in
windows of the same lengths shifted half a flush interval (where no flush runs): the
spread to expect from the run itself. On a shared or busy machine trust these tables
over the first.

    python benchmarks/bench_trace_overhead.py --model tiny --streams 8 --rounds 3
    python benchmarks/bench_trace_overhead.py --model small --streams 8 32 --rounds 3
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import warnings
from pathlib import Path

from photon_trace.engine.engine import Engine
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.analysis import busy_intervals, steady_state_window
from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.tracer import (NULL_TRACER, DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer,
                                           TraceLevel)

MODES = ("off", "on", "full", "on+otlp", "torch.profiler")

_RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def start_receiver() -> tuple[subprocess.Popen, str]:
    """An OTLP/HTTP sink that accepts and discards, in its own process (not our GIL)."""
    proc = subprocess.Popen([sys.executable, "-c", _RECEIVER], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}"


def set_tracer(engine: Engine, tracer: Tracer) -> None:
    engine.set_tracer(tracer)


def make_tracer(mode: str, engine: Engine, out_dir: Path, run: int, otlp_every: int = 1,
                flush_interval: float = 0.5):
    if mode in ("off", "torch.profiler"):
        return NULL_TRACER, None
    from photon_trace.telemetry.export.otlp.sink import OtelSink

    level = TraceLevel.FULL if mode == "full" else TraceLevel.ON
    sinks: list = [TraceFileWriter(out_dir / f"{mode.replace('+', '_')}-{run}.trace.jsonl")]
    otel = None
    if mode == "on+otlp":
        otel = OtelSink(every_n_steps=otlp_every, shutdown_timeout_s=10.0)
        sinks.append(otel)
    tracer = RecordingTracer(level, sinks=sinks, close_timeout_s=15.0, flush_interval_s=flush_interval)
    tracer.describe(settings=dataclasses.asdict(engine.config), model=engine.config.model,
                    backend=engine.device.backend, device={"name": engine.device.device_name})
    return tracer, otel


def call_costs(level: TraceLevel, counters: bool = True) -> dict[str, float]:
    """ns per call on the hot path, over the no-op tracer's cost for calls the engine always makes;
    ``counters=False``: without reading the thread's CPU and run-queue counters (what they cost)."""
    rec = RecordingTracer(level, flush_interval_s=None, nvtx=False)
    if not counters:
        rec._counters = lambda: None
    null = NULL_TRACER
    calls = {
        "span": lambda t: t.end(Phase.LAUNCH, 5, 1, t.begin(Phase.LAUNCH, 5, 1)),
        "device_op": lambda t: t.device_op(Stream.COMPUTE, DeviceOp.FORWARD, 5, 1, 10, 20, 5),
        "wait": lambda t: t.host_wait("commit: copy-back", True, t.begin_wait(), 20, "engine/engine.py:1", 5),
        "step": lambda t: t.step(5, kind=StepKind.DECODE, slot=1, rows=8, zombie_rows=0, constrained_rows=0,
                                 tokens=8),
        "request": lambda t: t.request(3, RequestEvent.FIRST_TOKEN, 10, 1),
    }
    out = {}
    for name, call in calls.items():
        best = {}
        for key, tr in (("rec", rec), ("null", null)):
            best[key] = min(timeit.repeat(lambda: call(tr), number=20_000, repeat=5)) / 20_000 * 1e9
        # With tracing off the engine still calls begin/end of the main phases and begin_wait
        # (the no-op's clock read); the rest it skips.
        out[name] = best["rec"] - (best["null"] if name in ("span", "wait") else 0.0)
        rec.flush()
    rec.close()
    return out


def trace_stats(path: Path) -> dict[str, float]:
    """Records per step and the median step period (commit to commit) of a run's trace."""
    t = load_trace(path)
    steps = max(len(t.steps), 1)
    commits = sorted(h.t0 for h in t.host_spans if h.phase == "commit")
    gaps = [b - a for a, b in zip(commits, commits[1:])]
    steady = gaps[len(gaps) // 5: len(gaps) - len(gaps) // 10] or gaps or [0]
    return {"span": len(t.host_spans) / steps, "device_op": len(t.device_spans) / steps,
            "wait": len(t.waits) / steps, "step": 1.0, "request": len(t.requests) / steps,
            "period_ns": statistics.median(steady)}


def _union(windows, lo: int, hi: int) -> list[tuple[int, int]]:
    """``windows`` clipped to [lo, hi], merged into disjoint runs."""
    out: list[tuple[int, int]] = []
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in windows if min(b, hi) > max(a, lo)):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out


def _covered(runs, busy) -> int:
    """How much of the disjoint ``runs`` the disjoint, sorted ``busy`` intervals cover."""
    total, j = 0, 0
    for a, b in runs:
        while j < len(busy) and busy[j][1] <= a:
            j += 1
        k = j
        while k < len(busy) and busy[k][0] < b:
            total += min(b, busy[k][1]) - max(a, busy[k][0])
            k += 1
    return total


def _idle(runs, busy) -> float:
    n = sum(b - a for a, b in runs)
    return 1 - _covered(runs, busy) / n if n else float("nan")


def idle_split(path: Path, windows, interval_ns: int) -> dict[str, float]:
    """Over the trace's steady-state window: the device's idle share inside ``windows`` and
    outside them; the control, idle in the same windows shifted by 1/8 .. 7/8 of the flush
    interval (median and range: the spread of windows that shape, where no flush runs); and
    how late commit waits return after their copy-back ended (median, p90; with tracer work
    in the wait and without): the one way the recorder's slices could delay the engine."""
    trace = load_trace(path)
    lo, hi = steady_state_window(trace)
    busy = busy_intervals(trace, (lo, hi))
    inside = _union(windows, lo, hi)
    outside = [(a, b) for a, b in zip([lo] + [b for _, b in inside], [a for a, _ in inside] + [hi]) if b > a]
    control = sorted(_idle(_union([(a + k * interval_ns // 8, b + k * interval_ns // 8) for a, b in windows],
                                  lo, hi), busy) for k in range(1, 8))
    copied = {d.step: d.t1 for d in trace.device_spans if d.op == "copy_back"}
    late: dict[bool, list[int]] = {True: [], False: []}
    for w in trace.waits:
        if w.reason.startswith("commit") and w.step in copied and lo <= w.t0 and w.t1 <= hi:
            worked = _covered([(w.t0, w.t1)], inside) > 0
            late[worked].append(max(0, w.t1 - copied[w.step]))

    def pct(v: list[int], q: float) -> float:
        return sorted(v)[min(len(v) - 1, int(q * len(v)))] / 1e3 if v else float("nan")
    return {"inside": _idle(inside, busy), "outside": _idle(outside, busy), "control": control[3],
            "control_lo": control[0], "control_hi": control[-1], "share": sum(b - a for a, b in inside) / (hi - lo),
            "late_in": pct(late[True], 0.5), "late_in90": pct(late[True], 0.9),
            "late_out": pct(late[False], 0.5), "late_out90": pct(late[False], 0.9)}


def workload(streams: int, tokens: int, prompt_len: int, salt: int):
    prompts = [[(7 * i + 3 * salt + j) % 250 + 1 for j in range(prompt_len)] for i in range(streams)]
    params = [SamplingParams(max_tokens=tokens, ignore_eos=True, temperature=0.0) for _ in range(streams)]
    return prompts, params


def run_once(engine: Engine, mode: str, streams: int, args, out_dir: Path, run: int) -> tuple[float, dict]:
    tracer, otel = make_tracer(mode, engine, out_dir, run, args.otlp_every, args.flush_interval)
    set_tracer(engine, tracer)
    prompts, params = workload(streams, args.tokens, args.prompt_len, run)
    if mode == "torch.profiler":
        import torch.profiler as tp
        prof = tp.profile(activities=[tp.ProfilerActivity.CPU])
        prof.__enter__()
    t0 = time.perf_counter()
    outs = engine.generate(prompts, params)
    dt = time.perf_counter() - t0
    if mode == "torch.profiler":
        prof.__exit__(None, None, None)
    set_tracer(engine, NULL_TRACER)
    tracer.close()  # final flush and exporter shutdown: after the timed part, as at server shutdown
    info = {}
    if isinstance(tracer, RecordingTracer):
        info["dropped"] = sum(tracer.dropped.values()) + sum(tracer.sink_dropped.values())
        info["flush_ms_per_s"] = tracer.flush_ns / 1e6 / dt
        info["in_waits"] = tracer.wait_work_ns / max(tracer.flush_ns, 1)
        info["trace"] = trace = out_dir / f"{mode.replace('+', '_')}-{run}.trace.jsonl"
        ports = tracer.sink_ports
        info["deliver_ms_per_s"] = sum(p.busy_ns for p in ports) / 1e6 / dt
        windows = list(tracer.windows) + [w for p in ports for w in p.windows]
        info["idle"] = idle_split(trace, windows, int(args.flush_interval * 1e9))
    if otel is not None:
        info["step_spans"] = otel.steps_exported
    return sum(len(o.token_ids) for o in outs) / dt, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="small")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--streams", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--tokens", type=int, default=110)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--otlp-every", type=int, default=1, help="on+otlp: export every n-th step (1: all)")
    ap.add_argument("--flush-interval", type=float, default=0.5, help="the recorder's flush interval, s")
    args = ap.parse_args()

    warnings.simplefilter("ignore", UserWarning)
    top = max(args.streams)
    engine = Engine(model=args.model, backend=args.backend, depth=2, max_rows=top, max_seqs=top * 2,
                    kv_tokens=top * 512, max_context=1024)
    # after the engine: it inherits the host's CPUs, not the device worker's (a collector runs elsewhere)
    receiver, endpoint = start_receiver()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    out_dir = Path(tempfile.mkdtemp(prefix="photon-bench-"))
    print(f"model={args.model} backend={args.backend} device={engine.device.device_name!r} "
          f"tokens/stream={args.tokens} rounds={args.rounds} cpus={os.cpu_count()} "
          f"python={platform.python_version()}")
    print(f"{'streams':>7} {'mode':>15} {'tok/s':>9} {'vs off':>8} {'range':>15}  notes")
    try:
        engine.generate(*workload(4, 8, args.prompt_len, 0))  # warm-up
        if "on+otlp" in args.modes:  # a server pays the OTel import (~0.2 s) once, not per run
            from photon_trace.telemetry.export.otlp.http import preload
            preload()
        costs = {lvl: call_costs(lvl) for lvl in (TraceLevel.ON, TraceLevel.FULL)}
        bare = call_costs(TraceLevel.ON, counters=False)
        estimates, idles = [], []
        run = 0
        for s in args.streams:
            tps: dict[str, list[float]] = {m: [] for m in args.modes}
            infos: dict[str, list[dict]] = {m: [] for m in args.modes}
            for r in range(args.rounds):
                order = args.modes[r % len(args.modes):] + args.modes[:r % len(args.modes)]
                for mode in order:  # rotated each round so no mode always follows another
                    run += 1
                    value, info = run_once(engine, mode, s, args, out_dir, run)
                    tps[mode].append(value)
                    infos[mode].append(info)
            for mode in args.modes:
                med = statistics.median(tps[mode])
                if "off" in tps:
                    ratios = [a / b for a, b in zip(tps[mode], tps["off"])]
                    ratio = f"{statistics.median(ratios):>7.3f}x"
                    spread = f"{min(ratios):.3f}..{max(ratios):.3f}"
                else:
                    ratio, spread = "", ""
                notes = []
                if infos[mode] and "dropped" in infos[mode][0]:
                    notes.append(f"dropped={sum(i['dropped'] for i in infos[mode])}")
                if infos[mode] and "step_spans" in infos[mode][0]:
                    notes.append(f"step_spans/run={statistics.median(i['step_spans'] for i in infos[mode]):.0f}")
                print(f"{s:>7} {mode:>15} {med:>9.1f} {ratio:>8} {spread:>15}  {' '.join(notes)}")
                if infos[mode] and infos[mode][0].get("trace"):
                    level = TraceLevel.FULL if mode == "full" else TraceLevel.ON
                    st = trace_stats(infos[mode][-1]["trace"])
                    hot = sum(st[k] * costs[level][k] for k in costs[level])
                    med_of = lambda key: statistics.median(i[key] for i in infos[mode])  # noqa: E731
                    estimates.append((s, mode, st, hot, med_of("flush_ms_per_s"), med_of("in_waits"),
                                      med_of("deliver_ms_per_s")))
                    idles.append((s, mode, [i["idle"] for i in infos[mode]]))
        print()
        print("estimated from costs (noise-free): hot path = calls/step x ns/call over the no-op tracer")
        print("recorder = conversion and encoding (file lines, OTel spans), in the engine's device waits "
              "or on the fallback thread; delivery = file writes, HTTP (the sinks' threads)")
        print(f"{'streams':>7} {'mode':>15} {'period ms':>9} {'calls/step':>10} {'hot us/step':>11} "
              f"{'hot %':>6} {'recorder ms/s':>13} {'in waits':>8} {'delivery ms/s':>13}")
        for s, mode, st, hot, flush, in_waits, deliver in estimates:
            calls = st["span"] + st["device_op"] + st["wait"] + st["step"] + st["request"]
            pct = 100 * hot / st["period_ns"] if st["period_ns"] else float("nan")
            print(f"{s:>7} {mode:>15} {st['period_ns'] / 1e6:>9.2f} {calls:>10.1f} {hot / 1e3:>11.2f} "
                  f"{pct:>5.2f}% {flush:>13.2f} {100 * in_waits:>7.0f}% {deliver:>13.2f}")
        print("ns/call:", "  ".join(f"{lvl.name.lower()}: " + ", ".join(f"{k}={v:.0f}" for k, v in c.items())
                                     for lvl, c in costs.items()))
        # the thread's CPU and run-queue counters (recording/thread_clock.py): two reads per span and wait
        extra = {k: costs[TraceLevel.ON][k] - bare[k] for k in ("span", "wait")}
        print(f"thread counters ({RecordingTracer(flush_interval_s=None, nvtx=False).header['host']['thread_clock']}):"
              f" +{extra['span']:.0f} ns per span, +{extra['wait']:.0f} ns per wait")
        for s, mode, st, *_ in estimates:
            if mode == "on":
                per_step = st["span"] * extra["span"] + st["wait"] * extra["wait"]
                print(f"{s:>7} streams, on: {st['span']:.1f} spans + {st['wait']:.1f} waits a step -> "
                      f"{per_step / 1e3:.2f} us/step, {100 * per_step / st['period_ns']:.2f}% of this run's "
                      f"{st['period_ns'] / 1e6:.2f} ms step, {100 * per_step / 2.6e6:.2f}% of a 2.6 ms step")
        print()
        print("device idle inside vs outside the recorder's flush windows (cycles and sink deliveries), "
              "steady state, median over rounds [min..max];")
        print("control: the same windows shifted 1/8..7/8 of the flush interval (median [range], median "
              "over rounds); late: commit wait's return after its copy-back ended, us, median/p90,")
        print("in waits where the recorder worked / in the others")
        print(f"{'streams':>7} {'mode':>15} {'inside':>18} {'outside':>18} {'control':>18} {'windows':>7} "
              f"{'late (work)':>13} {'late (none)':>13}")
        for s, mode, rows in idles:
            def med(key: str, scale: float = 100) -> float:
                return statistics.median(scale * r[key] for r in rows)

            def col(key: str) -> str:
                v = [100 * r[key] for r in rows]
                return f"{statistics.median(v):5.1f}% [{min(v):4.1f}..{max(v):4.1f}]"
            ctl = f"{med('control'):5.1f}% [{med('control_lo'):4.1f}..{med('control_hi'):4.1f}]"
            print(f"{s:>7} {mode:>15} {col('inside'):>18} {col('outside'):>18} {ctl:>18} {med('share'):>6.1f}% "
                  f"{med('late_in', 1):>6.0f}/{med('late_in90', 1):<6.0f} {med('late_out', 1):>6.0f}/"
                  f"{med('late_out90', 1):<6.0f}")
    finally:
        engine.close()
        receiver.terminate()
        receiver.wait()


if __name__ == "__main__":
    main()
