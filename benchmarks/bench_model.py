"""Decode step time of a preset next to its memory-bandwidth floor, and prefill tokens/s.

Prints numbers; never fails on speed. The floor is weight bytes / bandwidth, the
bandwidth measured in this run by copying a large tensor (bytes read + written
per second). "floor+KV" adds every row's KV bytes, which a decode step must also
read.

    .venv/bin/python benchmarks/bench_model.py [--model small] [--threads 1] [--dtypes float32,bfloat16]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.pages import pages_needed
from photon_trace.engine.model.loader import load_model
from photon_trace.engine.model.batch import make_forward_batch


def median_seconds(fn, steps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_bandwidth(nbytes: int = 256 * 2**20) -> float:
    """Bytes per second moved (read + write) by a large tensor copy."""
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    return 2 * nbytes / median_seconds(lambda: dst.copy_(src), steps=10)


def decode_row(model, kv: KVPool, batch_size: int, context: int):
    """A decode batch: every row at ``context`` tokens, each on its own pages."""
    per_row = pages_needed(context, kv.page_size)
    rows = [([1], context - 1, list(range(1 + r * per_row, 1 + (r + 1) * per_row))) for r in range(batch_size)]
    return make_forward_batch(rows, kv.page_size, device=model.device)


def bench_dtype(name: str, dtype: str, batches: list[int], context: int, steps: int,
                prefill_tokens: int, bandwidth: float) -> list[tuple]:
    loaded = load_model(name, dtype=dtype)
    model, config = loaded.model, loaded.config
    page_size = 16
    max_pages = max(batches) * pages_needed(max(context, prefill_tokens), page_size) + 1
    kv = KVPool(config, max_pages, page_size, model.dtype)
    rows = []
    with torch.inference_mode():
        for b in batches:
            batch = decode_row(model, kv, b, context)
            out = torch.empty(b, config.vocab_size, dtype=torch.float32)
            step = median_seconds(lambda: model(batch, kv, out_logits=out), steps)
            floor = model.weight_bytes / bandwidth
            floor_kv = model.decode_step_bytes(b, context) / bandwidth
            rows.append((dtype, f"decode B={b}", step * 1e3, b / step, floor * 1e3, step / floor, step / floor_kv))
        pages = list(range(1, 1 + pages_needed(prefill_tokens, page_size)))
        batch = make_forward_batch([(list(range(prefill_tokens)), 0, pages)], page_size)
        seconds = median_seconds(lambda: model(batch, kv), max(3, steps // 10), warmup=1)
        rows.append((dtype, f"prefill {prefill_tokens}", seconds * 1e3, prefill_tokens / seconds, None, None, None))
        # causal prefill: token i attends to i + 1 keys, (n + 1) / 2 on average
        flops = model.forward_flops(prefill_tokens, (prefill_tokens + 1) // 2)
        print(f"{dtype} prefill of {prefill_tokens} tokens: {flops / seconds / 1e9:.1f} GFLOP/s "
              f"({flops / 1e9:.2f} GFLOP, model.forward_flops)")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (the device worker uses 1)")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--context", type=int, default=192, help="KV tokens per row during decode")
    parser.add_argument("--steps", type=int, default=60, help="decode steps per measurement (median)")
    parser.add_argument("--prefill-tokens", type=int, default=512)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    bandwidth = copy_bandwidth()
    loaded = load_model(args.model)
    print(f"model {args.model}: {loaded.config.describe()}")
    print(f"threads {args.threads}, context {args.context} tokens/row, median of {args.steps} steps")
    print(f"memory bandwidth (256 MiB copy, read+write): {bandwidth / 1e9:.1f} GB/s")
    del loaded
    rows = []
    for dtype in args.dtypes.split(","):
        rows += bench_dtype(args.model, dtype, [int(b) for b in args.batches.split(",")], args.context,
                            args.steps, args.prefill_tokens, bandwidth)
    header = f"{'dtype':<9} {'phase':<13} {'ms/step':>8} {'tokens/s':>9} {'floor ms':>9} {'x floor':>8} {'x floor+KV':>10}"
    print(header)
    print("-" * len(header))
    for dtype, phase, ms, tps, floor, ratio, ratio_kv in rows:
        tail = (f"{floor:>9.2f} {ratio:>8.2f} {ratio_kv:>10.2f}" if floor is not None
                else f"{'':>9} {'':>8} {'':>10}")
        print(f"{dtype:<9} {phase:<13} {ms:>8.2f} {tps:>9.0f} {tail}")


if __name__ == "__main__":
    main()
