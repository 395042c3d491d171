"""NVTX ranges for the tick phases, so Nsight Systems shows them over the kernels.

One domain (``photon_trace``), one category per phase, one colour per phase,
the step index as the range's payload, and every message a registered string.
The event attributes are built once; a push only sets the payload and calls
into libnvtx. Ranges are pushed and popped on the thread that runs the phase
(the scheduler thread), so they nest exactly like the host spans.

``nvtx`` is imported lazily and is optional: when the package is missing, or
no NVTX tool (Nsight Systems) is attached to the process, ``NvtxRanges.create``
returns ``None`` and the recorder never calls into it.

Profile a run with Nsight Systems::

    nsys profile --trace=cuda,nvtx,osrt --cuda-graph-trace=node \\
        --output traces/photon --force-overwrite=true \\
        python -m photon_trace.cli <command> --trace on ...

then open ``traces/photon.nsys-rep`` in the Nsight Systems GUI (the
``photon_trace`` row under the scheduler thread shows plan/launch/commit/finalize
with the step in each range's payload) or summarise it with
``nsys stats --report nvtx_sum traces/photon.nsys-rep``.
"""
from __future__ import annotations

from photon_trace.telemetry.tracer import Phase

DOMAIN = "photon_trace"

PHASE_COLORS: dict[Phase, int] = {  # ARGB
    Phase.PLAN: 0xFF4E79A7,         # blue
    Phase.LAUNCH: 0xFFF28E2B,       # orange
    Phase.COMMIT: 0xFF59A14F,       # green
    Phase.FINALIZE: 0xFFE15759,     # red
    Phase.STAGE: 0xFF76B7B2,        # teal
    Phase.MASK_BUILD: 0xFFEDC948,   # yellow
    Phase.MASK_UPLOAD: 0xFFB07AA1,  # purple
    Phase.STREAM_OUT: 0xFF9C755F,   # brown
    Phase.NO_WORK: 0xFFBAB0AC,      # grey: the engine had nothing to run
    Phase.SERVE: 0xFFFF9DA7,        # pink: the server's loop between ticks
}


class NvtxRanges:
    """Pre-registered per-phase NVTX attributes in one domain; ``push(phase, step)`` / ``pop()``."""

    def __init__(self, domain: object) -> None:
        self.domain = domain
        self._attrs = [domain.get_event_attributes(message=p.span_name, color=PHASE_COLORS[p],
                                                   category=p.span_name, payload=0)
                       for p in sorted(Phase)]
        self._push = domain.push_range
        self.pop = domain.pop_range

    @classmethod
    def create(cls, domain: str = DOMAIN, force: bool = False) -> NvtxRanges | None:
        """The ranges, or ``None`` when ``nvtx`` is missing or no NVTX tool is attached
        (``force`` builds them anyway, for tests with a stand-in ``nvtx`` module)."""
        try:
            import nvtx
        except ImportError:
            return None
        try:
            if not force and not nvtx.enabled():
                return None
            d = nvtx.get_domain(domain)
            # nvtx hands out a do-nothing DummyDomain when no tool is attached.
            if not force and type(d).__name__ == "DummyDomain":
                return None
            return cls(d)
        except Exception:  # a broken libnvtx must never stop the engine
            return None

    def push(self, phase: int, step: int) -> None:
        attrs = self._attrs[phase]
        attrs.payload = int(step)
        self._push(attrs)
