"""Which device stream an analysis looks at, and which host spans are phases.

Our engine's traces name their streams ``compute`` and ``copy`` and their top-level host
phases plan / launch / commit / finalize. An imported trace (a PyTorch profiler trace of
any program) has its own names, so its header says: ``primary_stream`` (the stream
analysed unless another is asked for) and ``host_phases`` (the host span names that count
as "what the host was doing"). Every other stream is a secondary one, as our copy stream is.

Streams run on devices: an imported trace's lanes are named ``[pid P ]gpuN stream S`` and its
header may map each to its device (``stream_devices``); our engine's two streams share one
device. ``device_of`` says which.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from photon_trace.telemetry.trace.columns import codes
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.tracer import TOP_PHASES

COMPUTE = "compute"
COPY = "copy"
_OUR_PHASES = frozenset(TOP_PHASES)
OUR_DEVICE = "device"
"""The device our engine's compute and copy streams run on (one per engine)."""
IMPORTED_STEP = "step"
"""``StepRecord.kind`` of an imported trace's steps: no batch, no tokens, no warm-up rule."""


def primary_stream(trace: Trace) -> str:
    """The stream analysed by default: ``compute``, or what an imported trace's header names."""
    return trace.header.get("primary_stream") or COMPUTE


def host_phases(trace: Trace) -> frozenset[str]:
    """Host span names that are phases: our four, or an imported trace's ``host_phases``."""
    names = trace.header.get("host_phases")
    return _OUR_PHASES if names is None else frozenset(names)


def streams(trace: Trace) -> list[str]:
    """Every stream with an op: the primary one first, then by name."""
    stream, table = codes(trace.device_spans, "stream")
    present = {table[i] for i in np.flatnonzero(np.bincount(np.asarray(stream), minlength=len(table)))} if len(stream) \
        else set()
    first = primary_stream(trace)
    return ([first] if first in present else []) + sorted(present - {first})


def on_stream(trace: Trace, stream: str) -> Trace:
    """The same records, analysed as if ``stream`` were the primary one (nothing is copied)."""
    if stream == primary_stream(trace):
        return trace
    return dataclasses.replace(trace, header={**trace.header, "primary_stream": stream})


def device_of(trace: Trace, stream: str) -> str:
    """The device ``stream`` runs on: the header's ``stream_devices`` entry, else the lane name
    before `` stream `` (``gpu0 stream 7`` -> ``gpu0``), else our engine's one device."""
    mapped = (trace.header.get("stream_devices") or {}).get(stream)
    if mapped:
        return mapped
    head, sep, _ = stream.rpartition(" stream ")
    return head if sep and head else OUR_DEVICE
