"""Analysis of a loaded trace: pure functions returning tables, behind ``analyze``.

    report = analyze(trace)                 # steady-state window by default
    report.bubbles, report.syncs, report.diagnosis
    report.streams, report.devices          # idle per stream (ours) and per device (Nsight's)
    expert_rules(trace)                     # nsys analyze's rules, under its names
    cost_model(analyze(blocking), analyze(pipelined))

Loading lives in ``telemetry.trace``; nothing here reads files or plots.
Each table is a list of NamedTuples; ``Report.to_dict()`` is the JSON summary.
"""
from __future__ import annotations

from photon_trace.telemetry.analysis.bubbles import (
    MIN_BUBBLE_NS, OUTSIDE_PHASES, Bubble, busy_intervals, device_gaps, find_bubbles)
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.costmodel import CostModel, cost_model
from photon_trace.telemetry.analysis.device_idle import DeviceIdle, device_idle
from photon_trace.telemetry.analysis.diagnosis import Diagnosis, Removal, diagnose, predict_removal
from photon_trace.telemetry.analysis.gpu_rules import RuleResult, expert_rules, gpu_gaps, gpu_time_util
from photon_trace.telemetry.analysis.report import Report, analyze
from photon_trace.telemetry.analysis.steps import StepStats, step_stats
from photon_trace.telemetry.analysis.streams import StreamStats, stream_stats
from photon_trace.telemetry.analysis.syncs import SyncSite, sync_sites
from photon_trace.telemetry.analysis.window import steady_state_window

__all__ = [
    "analyze", "Report", "Bubble", "StepStats", "SyncSite", "Diagnosis", "CostModel",
    "cost_model", "steady_state_window", "find_bubbles", "busy_intervals", "device_gaps",
    "step_stats", "sync_sites", "diagnose", "predict_removal", "Removal", "MIN_BUBBLE_NS", "Cause", "OUTSIDE_PHASES",
    "StreamStats", "stream_stats", "DeviceIdle", "device_idle", "RuleResult", "expert_rules", "gpu_gaps",
    "gpu_time_util",
]
