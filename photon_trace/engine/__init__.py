"""The engine: model and KV pages, device backends, slots, the scheduler and its tick,
sampling and constraints. It imports only ``telemetry.tracer`` from telemetry.

    from photon_trace.engine.engine import Engine
    from photon_trace.engine.params import SamplingParams
"""
