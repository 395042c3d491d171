"""A real distributed job on the CPU, profiled per rank: the test data for reading ranks.

Two processes join a ``torch.distributed`` gloo group and train a small MLP with
DistributedDataParallel; each records its own ``torch.profiler`` trace (one file per rank,
as ``tensorboard_trace_handler`` names them). Rank 1 gets a batch ``--straggle`` times
larger, so it reaches every all-reduce last and rank 0 waits for it there: the straggler the
cross-rank analysis must find. The imbalance is in the work, not in a sleep, so the trace
says the same thing on a fast or a slow machine.

    python scripts/profile_gloo_ranks.py --out tests/data/ranks/gloo_ddp_cpu

Writes ``rank0.*.pt.trace.json.gz`` and ``rank1.*.pt.trace.json.gz`` there (a few hundred
KB together) and prints their names.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_rank(rank: int, world: int, port: int, out: str, steps: int, straggle: int, hidden: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 8)), bucket_cap_mb=0.25)   # a bucket per layer: 3 all-reduces a step
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = 64 * (straggle if rank == 1 else 1)       # rank 1 does more work per step
    x, y = torch.randn(batch, hidden), torch.randn(batch, 8)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=steps),
                 on_trace_ready=tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=True)) as prof:
        for _ in range(steps + 2):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()                              # DDP all-reduces the gradient buckets here
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="tests/data/ranks/gloo_ddp_cpu", help="folder for the per-rank traces")
    p.add_argument("--steps", type=int, default=6, help="profiled steps (after one wait and one warm-up step)")
    p.add_argument("--straggle", type=int, default=8, help="rank 1's batch as a multiple of rank 0's")
    p.add_argument("--hidden", type=int, default=512, help="the MLP's width")
    args = p.parse_args(argv)
    import torch.multiprocessing as mp

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("rank*.pt.trace.json.gz"):
        old.unlink()
    port = _free_port()
    mp.start_processes(run_rank, args=(2, port, str(out), args.steps, args.straggle, args.hidden), nprocs=2,
                       join=True, start_method="spawn")
    for f in sorted(out.glob("rank*.pt.trace.json.gz")):
        print(f"{f} ({f.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    sys.exit(main())
