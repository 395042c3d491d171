"""Device backends behind one interface: ``cuda`` and ``cpu`` (the host-process device)."""
from __future__ import annotations

from photon_trace.telemetry.tracer import NULL_TRACER, Tracer
from photon_trace.engine.device.base import Device, DeviceError, DeviceSpec


def make_device(backend: str, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> Device:
    if backend == "cuda":
        from photon_trace.engine.device.cuda import CudaDevice
        return CudaDevice(spec, tracer)
    if backend == "cpu":
        from photon_trace.engine.device.hostproc import HostProcessDevice
        return HostProcessDevice(spec, tracer)
    raise ValueError(f"unknown backend {backend!r} (cuda or cpu)")


__all__ = ["Device", "DeviceError", "DeviceSpec", "make_device"]
