"""Traces other programs wrote, as our records: ``load_any`` reads ours or a PyTorch profiler trace."""
from __future__ import annotations

from photon_trace.telemetry.trace.importers.sniff import is_kineto, load_any

__all__ = ["load_any", "is_kineto"]
