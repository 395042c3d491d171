"""The cost model: predicted pipelining speedup against the observed one.

``predicted = T_block / T_pipe * (1 - z)``: T is each mode's step period and z
the pipelined run's zombie tax (blocking has no zombies).
``observed`` is the ratio of end-to-end tokens/s, as the source measures it;
``observed_steady`` is the ratio of steady-state tokens/s.

T is each mode's mean step period over the whole run (``run_period_ms``) by
default: end-to-end throughput pays for every step, the prefill-heavy start and
the drain included, and with a short decode step those common costs dilute the
gain by several points (a 0.8 ms pipelined step beside a 4 ms prefill: 4 points
on a modelled run). ``period="steady"`` uses the steady-state window's mean
period and ``period="median"`` the source tables' median; compare them with
``observed_steady``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from photon_trace.telemetry.analysis.report import Report


@dataclass(frozen=True, slots=True)
class CostModel:
    T_block: float          # ms
    T_pipe: float           # ms
    L: float
    z: float
    predicted: float
    observed: float
    observed_steady: float

    @property
    def error_pts(self) -> float:
        """predicted - observed, in percentage points of speedup."""
        return (self.predicted - self.observed) * 100

    def to_dict(self) -> dict:
        return {**asdict(self), "error_pts": self.error_pts}


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def cost_model(blocking: Report, pipelined: Report, *, period: str = "run", tax: str = "rows") -> CostModel:
    """Compare a blocking and a pipelined run of the same workload.

    ``tax="steps"`` uses the wasted-step share ``z_steps`` instead of z (see ``requests``).
    """
    fields = {"run": "run_period_ms", "steady": "mean_period_ms", "median": "period_ms"}
    if period not in fields or tax not in ("rows", "steps"):
        raise ValueError(f"period={period!r}, tax={tax!r}")
    field = fields[period]
    t_block, t_pipe = getattr(blocking, field), getattr(pipelined, field)
    z = pipelined.z if tax == "rows" else pipelined.z_steps
    return CostModel(
        T_block=t_block, T_pipe=t_pipe, L=pipelined.L, z=z,
        predicted=_ratio(t_block, t_pipe) * (1 - z),
        observed=_ratio(pipelined.e2e_tokens_per_s, blocking.e2e_tokens_per_s),
        observed_steady=_ratio(pipelined.tokens_per_s, blocking.tokens_per_s),
    )
