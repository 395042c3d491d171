"""Two identical runs, quiet and beside two CPU burners: what the comparison of them says.

For a blocking and a pipelined tiny engine (8 streams), runs the same prepared workload twice
with no burner, twice beside two ``yes`` processes (started here, killed by their pids), and
again quiet; prints each run's median period, forward and the share of the run its engine
thread waited for a CPU (the trace header's ``host_run``), then ``comparison.compare`` of each
pair of identical runs: the period's verdict with its interval, or why the pair is not valid.
The numbers behind ``HOST_BUSY`` (docs/observability.md, comparing two runs). Never fails on speed.

    python benchmarks/bench_busy_compare.py
"""
from __future__ import annotations

import subprocess
import tempfile

from photon_trace.engine.engine import Engine
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.comparison import compare, runq_share
from photon_trace.telemetry.tracer import TraceLevel
from photon_trace.traced_run import trace_run
from photon_trace.workload import Workload, engine_settings, prepare

WORKLOAD = Workload(streams=8, tokens=64, requests_per_stream=3, seed=5)


def main() -> None:
    folder = tempfile.mkdtemp(prefix="bench-busy-")
    for depth in (1, 2):
        eng = Engine(model="tiny", backend="cpu", depth=depth, **engine_settings(WORKLOAD))
        try:
            prepared = prepare(eng, WORKLOAD)
            for burners in (0, 2, 0):
                procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(burners)]
                try:
                    pair = [trace_run(eng, prepared, f"{folder}/d{depth}-b{burners}-{i}.trace.jsonl", TraceLevel.ON,
                                      analyse=False)[0] for i in range(2)]
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
                reports = [analyze(t) for t in pair]
                for t, r in zip(pair, reports):
                    h = t.header.get("host_run")
                    share = runq_share(h)
                    print(f"depth {depth} burners {burners}: period {r.period_ms:7.2f} ms, forward {r.forward_ms:5.2f} ms, "
                          f"engine thread waited for a CPU {'?' if share is None else f'{share:.1%}'} of the run, "
                          f"load {h['load_avg'][0] if h else '?'}", flush=True)
                c = compare(reports[0], reports[1], band=0.10, host_runs=tuple(t.header.get("host_run") for t in pair))
                p = c.get("period")
                print(f"  compared: {p.verdict if c.valid else 'not valid: ' + c.why_not}; {p.describe()}", flush=True)
        finally:
            eng.close()


if __name__ == "__main__":
    main()
