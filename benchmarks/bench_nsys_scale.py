"""An Nsight Systems export of ``--kernels`` kernels: how long import, analysis and the gate take, and
at what peak memory, against the scale issue's limits (5M kernels in 120 s and 4 GB).

The generator writes the export nsys would make of a training-like loop (tests/helpers/
nsys_builder.py): steps marked by an NVTX ``step`` range, each launching kernels on a compute
stream (one ``cudaLaunchKernel`` each) and a copy on a second stream, a pageable
``cudaMemcpyAsync`` and a ``cudaStreamSynchronize`` per step, with host-late gaps between steps.
Each measurement runs in a fresh process (``--stage``), so its peak RSS is its own: the import
alone, the import and ``analyze``, and ``run_check`` of the file (import, analysis and every gate:
what ``photon-trace check`` does, the figure the limits are for). Prints the numbers; never fails
on speed.

    python benchmarks/bench_nsys_scale.py [--kernels 200000] [--per-step 100] [--cache .bench-cache]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

LIMIT_S, LIMIT_GB = 120, 4


def generate(path: Path, kernels: int, per_step: int) -> Path:
    """The export: ``kernels`` kernels in steps of ``per_step``, written in batches."""
    from helpers.nsys_builder import ExportWriter
    w = ExportWriter(path)
    names = [w.string(f"void gemm_kernel<{i}>(float const*, float*, int)") for i in range(16)]
    launch, copy, sync, step_name = (w.string("cudaLaunchKernel_v7000"), w.string("cudaMemcpyAsync_v3020"),
                                     w.string("cudaStreamSynchronize_v3020"), w.string("step"))
    t, corr = 1_000_000, 0
    for s in range(0, (kernels + per_step - 1) // per_step):
        step_t0 = t
        ks, calls, copies = [], [], []
        dev = t + 20_000
        for k in range(min(per_step, kernels - s * per_step)):
            corr += 1
            calls.append((t, t + 3_000, corr, launch))
            dev = max(dev, t + 8_000)
            ks.append((dev, dev + 5_000, 7, corr, names[k % 16]))
            dev += 5_500
            t += 4_000
        corr += 1                                   # a pageable upload that blocks, on the copy stream
        calls.append((t, dev + 2_000, corr, copy))
        copies.append((dev, dev + 2_000, 8, corr, 65_536, 1, 0, 2))
        t = dev + 2_500
        corr += 1
        calls.append((t, t + 30_000, corr, sync))
        t += 80_000                                 # the host's own work between steps: a gap
        w.add_kernels(ks)
        w.add_memcpys(copies)
        w.add_calls(calls)
        w.add_ranges([(step_t0, t, step_name, None)])
    return w.close()


def stage(path: str, what: str) -> dict:
    """One measurement in this process: ``import`` (``load_any``), ``analyse`` (import, then
    ``analyze``) or ``check`` (``run_check`` of the file: import, analysis and every gate, as
    ``photon-trace check`` runs them); seconds and peak RSS."""
    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.analysis.gate import run_check
    from photon_trace.telemetry.trace.importers import load_any
    out = {}
    t0 = time.perf_counter()
    if what == "check":
        result = run_check(path, step_annotation="step")
        out["seconds"] = time.perf_counter() - t0
        out["exit"] = result.exit_code
    else:
        trace = load_any(path, step_annotation="step")
        out["import_s"] = time.perf_counter() - t0
        out["records"] = len(trace.device_spans) + len(trace.host_spans) + len(trace.waits)
        out["columns"] = type(trace.device_spans).__name__
        if what == "analyse":
            t1 = time.perf_counter()
            analyze(trace)
            out["analyse_s"] = time.perf_counter() - t1
        out["seconds"] = time.perf_counter() - t0
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=200_000)
    ap.add_argument("--per-step", type=int, default=100)
    ap.add_argument("--cache", type=Path, help="keep the export in this folder (made once per size) "
                                               "instead of a temporary one")
    ap.add_argument("--stage", nargs=2, metavar=("EXPORT", "WHAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage:
        print(json.dumps(stage(*args.stage)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = (args.cache or Path(tmp)).resolve()     # the stages run from the repository root
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"nsys-{args.kernels}-{args.per_step}.sqlite"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path.with_suffix(".tmp"), args.kernels, args.per_step).rename(path)
            print(f"generated {args.kernels:,} kernels in {time.perf_counter() - t0:.1f} s")
        print(f"export: {path} ({path.stat().st_size / 1e6:,.0f} MB)")
        rows = {}
        for what in ("import", "analyse", "check"):
            run = subprocess.run([sys.executable, __file__, "--stage", str(path), what], capture_output=True,
                                 text=True, cwd=ROOT)
            if run.returncode:
                print(f"{what}: failed (exit {run.returncode}): {run.stderr.strip()[-400:]}")
                continue
            rows[what] = r = json.loads(run.stdout)
            parts = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v:,}" if isinstance(v, int)
                              else f"{k} {v}" for k, v in r.items())
            print(f"{what:>8}: {parts}")
        if rows.get("check", {}).get("exit") == 2:
            print("check: bad input (exit 2), no figure")
        elif "check" in rows:
            c = rows["check"]
            verdict = ("PASS" if c["seconds"] <= LIMIT_S and c["peak_rss_gb"] <= LIMIT_GB else "MISS") \
                if args.kernels >= 5_000_000 else "not judged: the limits are for 5M kernels"
            print(f"import + analysis + gate (photon-trace check): {c['seconds']:.1f} s, peak RSS "
                  f"{c['peak_rss_gb']:.2f} GB; limits {LIMIT_S} s, {LIMIT_GB} GB: {verdict}")


if __name__ == "__main__":
    main()
