"""Blocking vs pipelined decode on the same workload: superseded by ``photon-trace bench``.

Kept as a thin wrapper so this command keeps working; ``photon-trace bench`` runs the
standard workload (stop conditions that make zombies), traces every run, and prints the
cost model's predicted speedup beside the observed one. ``--rounds`` is its ``--repeats``.

    python benchmarks/bench_pipeline.py --model small --streams 1 8 32
"""
from __future__ import annotations

import sys

from photon_trace.bench import main

if __name__ == "__main__":
    sys.exit(main(["--repeats" if a == "--rounds" else a for a in sys.argv[1:]]))
