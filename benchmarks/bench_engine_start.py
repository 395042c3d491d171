"""What an engine start and close cost on the host-process device: a worker forked by the
zygote (the default) against a fresh interpreter per worker (``PHOTON_TRACE_FRESH_WORKER=1``).

Both modes in one process, alternating engine by engine, so that load on the machine falls on
both alike. The first engine of the zygote mode pays for starting the zygote (its torch
import): it is printed on its own and not in the medians. Each engine is the tests' tiny
one (``depth`` 2, pinned as a user's would be); a start ends when the device is ready to take
launches, a close when the worker has gone and the shared memory is unlinked. Never fails on
speed: prints the median, min and max of each.

    python benchmarks/bench_engine_start.py --engines 10
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from photon_trace.engine.device.spawn import FRESH_ENV
from photon_trace.engine.engine import Engine

TINY = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
            kv_tokens=2048, page_size=8, max_context=256, depth=2)
MODES = {"zygote": None, "fresh": "1"}


def one(mode: str) -> tuple[float, float, int]:
    """(start s, close s, the worker's pid) of one engine in ``mode``."""
    value = MODES[mode]
    if value is None:
        os.environ.pop(FRESH_ENV, None)
    else:
        os.environ[FRESH_ENV] = value
    t0 = time.perf_counter()
    engine = Engine(**TINY)
    t1 = time.perf_counter()
    pid = engine.device._proc.pid
    engine.close()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, pid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", type=int, default=10, help="engines per mode")
    args = ap.parse_args()
    first = one("zygote")
    print(f"first zygote engine (starts the zygote): start {first[0]:.3f} s, close {first[1]:.3f} s")
    times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.engines):
        for mode in MODES:
            start, close, pid = one(mode)
            assert not os.path.exists(f"/proc/{pid}"), f"worker {pid} left behind"
            times[mode].append((start, close))
    print(f"{args.engines} engines a mode, alternating; load {os.getloadavg()[0]:.2f}")
    print(f"{'mode':8} {'start median':>13} {'(min-max)':>15} {'close median':>13} {'(min-max)':>15} {'total':>8}")
    for mode, rows in times.items():
        starts, closes = [r[0] for r in rows], [r[1] for r in rows]
        total = statistics.median(s + c for s, c in rows)
        print(f"{mode:8} {statistics.median(starts):12.3f}s {min(starts):6.3f}-{max(starts):6.3f}s "
              f"{statistics.median(closes):12.3f}s {min(closes):6.3f}-{max(closes):6.3f}s {total:7.3f}s")


if __name__ == "__main__":
    main()
