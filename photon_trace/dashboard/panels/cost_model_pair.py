"""The cost model's panel for a pair of runs: whether it applies (one blocking and one pipelined
run of one workload), which is which, and its inputs against the predicted and observed speedup."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


def cost_model_rows(cm: Any) -> list[dict[str, str]]:
    """The cost model for a blocking/pipelined pair: inputs, and predicted against observed speedup."""
    if cm is None:
        return []
    return [
        {"quantity": "T_block (blocking period)", "value": f"{cm.T_block:.3f} ms"},
        {"quantity": "T_pipe (pipelined period)", "value": f"{cm.T_pipe:.3f} ms"},
        {"quantity": "L (generated tokens per sequence)", "value": f"{cm.L:.3g}"},
        {"quantity": "z (zombie tax)", "value": f"{cm.z:.3g}"},
        {"quantity": "predicted speedup", "value": f"{cm.predicted:.2f}×"},
        {"quantity": "observed speedup (end to end)", "value": f"{cm.observed:.2f}×"},
    ] + ([{"quantity": "observed speedup (steady state)", "value": f"{cm.observed_steady:.2f}×"}]
         if getattr(cm, "observed_steady", None) is not None else [])


def cost_model_figure(cm: Any) -> go.Figure:
    """Predicted against observed speedup as two bars (the check that the model explains the run)."""
    fig = go.Figure(go.Bar(x=["predicted", "observed"], y=[cm.predicted, cm.observed],
                           marker_color=["#9ECAE9", "#2F6DB5"], text=[f"{cm.predicted:.2f}×", f"{cm.observed:.2f}×"],
                           textposition="outside", hovertemplate="%{x}: %{y:.3f}×<extra></extra>"))
    top = max(cm.predicted, cm.observed, 1.0) * 1.25
    fig.update_layout(template="plotly_white", height=240, margin=dict(l=50, r=10, t=10, b=30),
                      yaxis=dict(title="speedup (×)", range=[0, top]))
    return fig


def pipeline_depth(report: Any, header: dict | None = None) -> int | None:
    """The run's pipeline depth (1 blocking, 2 pipelined) from its settings, when recorded."""
    for settings in (getattr(report, "settings", None) or {}, (header or {}).get("settings") or {}):
        for key in ("depth", "pipeline_depth"):
            if isinstance(settings.get(key), int):
                return settings[key]
    return None


# settings a blocking/pipelined pair may differ in; the engine's seed only draws the seeds of
# requests that carry none, and the bench's requests all carry theirs (issue 28: the bench's own
# pairs were refused for it)
WORKLOAD_FREE = frozenset({"depth", "mode", "planned_stops", "seed"})


def cost_model_applies(a: Any, b: Any, headers: tuple[dict, dict] = ({}, {}),
                       live: tuple[bool, bool] = (False, False)) -> tuple[bool, str]:
    """Whether the cost model describes this pair: one blocking (depth 1) and one pipelined
    (depth 2) run of the same workload (every other setting equal), neither a live view."""
    if any(live):
        return False, "a live view is a moving window, not a whole run: the cost model compares two whole runs"
    depths = {pipeline_depth(a, headers[0]), pipeline_depth(b, headers[1])}
    if depths != {1, 2}:
        return False, (f"the cost model compares a blocking (depth 1) and a pipelined (depth 2) run; these are "
                       f"depths {pipeline_depth(a, headers[0])} and {pipeline_depth(b, headers[1])}")
    sa = {k: v for k, v in ((headers[0] or {}).get("settings") or getattr(a, "settings", {}) or {}).items()
          if k not in WORKLOAD_FREE}
    sb = {k: v for k, v in ((headers[1] or {}).get("settings") or getattr(b, "settings", {}) or {}).items()
          if k not in WORKLOAD_FREE}
    differ = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
    if differ:
        return False, f"not the same workload: {', '.join(differ[:4])} differ, so a speedup would mix two changes"
    return True, ""


def blocking_and_pipelined(a: Any, b: Any, headers: tuple[dict, dict] = ({}, {})) -> tuple[Any, Any, str]:
    """Order a pair for the cost model by their recorded depths; A is taken as blocking when unknown."""
    da, db = pipeline_depth(a, headers[0]), pipeline_depth(b, headers[1])
    if da == 2 and db == 1:
        return b, a, "B is the blocking run (depth 1), A the pipelined one (depth 2)"
    if da == 1 and db == 2:
        return a, b, "A is the blocking run (depth 1), B the pipelined one (depth 2)"
    return a, b, (f"depths not a blocking/pipelined pair (A: {da}, B: {db}); "
                  "treating A as blocking and B as pipelined")
