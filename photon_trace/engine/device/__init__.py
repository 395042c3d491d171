"""Device backends behind one interface: ``cuda`` and ``cpu`` (the host-process device)."""
from __future__ import annotations

from ...telemetry.tracer import NULL_TRACER, Tracer
from .base import Device, DeviceError, DeviceSpec


def make_device(backend: str, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> Device:
    if backend == "cuda":
        from .cuda import CudaDevice
        return CudaDevice(spec, tracer)
    if backend == "cpu":
        from .hostproc import HostProcessDevice
        return HostProcessDevice(spec, tracer)
    raise ValueError(f"unknown backend {backend!r} (cuda or cpu)")


__all__ = ["Device", "DeviceError", "DeviceSpec", "make_device"]
