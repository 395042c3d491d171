"""What one command send costs the host on the host-process device (its kernel launch).

Each flush puts the commands issued since the last one in the command ring and rings the
worker's doorbell (``engine/device/ring.py``). Times RECORD commands on a spare event, one
and four per flush, in rounds; prints the median per call. Never fails on speed.

    python benchmarks/bench_command_send.py
"""
from __future__ import annotations

import statistics
import time

import photon_trace.engine.device.commands as P
from photon_trace.engine.engine import Engine
from photon_trace.telemetry.tracer import Stream


def per_call_us(dev, event: int, commands: int, n: int = 5000, rounds: int = 5) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for _ in range(commands):
                dev._record(event, Stream.COPY)
            dev._flush()
        out.append((time.perf_counter_ns() - t0) / n / 1e3)
        dev._wait_event(event, dev._gen[event])  # let the worker drain before the next round
    return out


def main() -> None:
    with Engine(model="tiny", backend="cpu", max_rows=8, max_seqs=16, kv_tokens=1024, max_context=256) as eng:
        dev = eng.device
        event = dev.state.global_event(P.EV_READ)
        for k in (1, 4):
            runs = per_call_us(dev, event, k)
            print(f"{k} command(s) per flush: median {statistics.median(runs):.1f} us per call "
                  f"(rounds: {', '.join(f'{r:.1f}' for r in runs)})")


if __name__ == "__main__":
    main()
