"""What the host-process worker pays to unpickle a decode step's batch, warm and cold.

The worker reads a step queued early right after the previous forward, which streamed
the model's weights through the caches; "cold" here streams 64 MB through them before
each unpickle. The batch is a decode step's commands (stage+forward, sample, records,
copy-back) with its launch shape and sampling mode as objects (what was sent before
``engine/device/wire.py``) and as their wire tuples. Prints medians; never fails on speed.

    python benchmarks/bench_wire_unpickle.py
"""
from __future__ import annotations

import pickle
import statistics
import time

import numpy as np

import photon_trace.engine.device.commands as P
from photon_trace.engine.device.base import LaunchShape
from photon_trace.engine.device.sampling import SamplePath, SamplingMode
from photon_trace.engine.device.wire import mode_to_wire, shape_to_wire


def batch(shape, mode) -> list[tuple]:
    return [(0, P.STAGE_FORWARD, 0, shape, 1), (0, P.SAMPLE, 0, 0, 16, False, mode, 2), (0, P.RECORD, 0, 5),
            (1, P.WAIT, 0, 5), (1, P.COPY_BACK, 0, 16, False), (1, P.RECORD, 1, 5)]


def main(rounds: int = 300) -> None:
    shape = LaunchShape(num_tokens=16, num_rows=16, max_pages=4, max_query_len=1, prefill=False)
    mode = SamplingMode(SamplePath.PLAIN)
    evict = np.ones(64 << 20, dtype=np.uint8)
    for name, b in (("objects", batch(shape, mode)), ("wire tuples", batch(shape_to_wire(shape), mode_to_wire(mode)))):
        data = pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL)
        warm, cold = [], []
        for _ in range(rounds):
            t = time.perf_counter_ns()
            pickle.loads(data)
            warm.append(time.perf_counter_ns() - t)
            evict += 1
            t = time.perf_counter_ns()
            pickle.loads(data)
            cold.append(time.perf_counter_ns() - t)
        print(f"{name:12} {len(data):4d} bytes: unpickle warm {statistics.median(warm) / 1e3:5.1f} us, "
              f"cold {statistics.median(cold) / 1e3:5.1f} us (medians of {rounds})")


if __name__ == "__main__":
    main()
