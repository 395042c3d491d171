"""Traces other programs wrote, as our records: ``load_any`` reads ours, a PyTorch profiler
trace or an Nsight Systems SQLite export."""
from __future__ import annotations

from photon_trace.telemetry.trace.importers.sniff import is_kineto, is_nsys, load_any

__all__ = ["load_any", "is_kineto", "is_nsys"]
