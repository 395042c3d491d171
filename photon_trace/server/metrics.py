"""Prometheus metrics on the server's own registry.

Three sources, three ways in:

* the engine's counters and queue state (steps, tokens, zombie rows, running and
  waiting requests, KV pages) are read at scrape time by a collector, so
  ``/metrics`` always agrees with the engine;
* per-request latencies (TTFT, TPOT, end-to-end, queue) are observed when each
  request finishes, on the engine thread;
* device-side figures (busy/idle, idle fraction, bubbles by cause, accidental
  syncs by call site, step periods, tokens/s) come from ``DeviceStats``, a
  recorder sink that analyses each flushed chunk of trace records.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from photon_trace.engine.outputs import RequestOutput
from photon_trace.telemetry.analysis.causes import Cause

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_TPOT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
_PERIOD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class ServerMetrics:
    """Every metric the server exports; ``render()`` is the ``/metrics`` body."""

    def __init__(self, loop) -> None:
        self.loop = loop                    # the EngineLoop: the engine and its thread's state
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.http_requests = Counter("photon_http_requests", "HTTP requests by endpoint and status code",
                                     ["endpoint", "status"], registry=r)
        self.finished = Counter("photon_requests_finished", "Requests finished, by the engine's finish reason",
                                ["reason"], registry=r)
        self.prompt_tokens = Counter("photon_prompt_tokens", "Prompt tokens of finished requests", registry=r)
        self.generation_tokens = Counter("photon_generation_tokens", "Generated tokens of finished requests",
                                         registry=r)
        self.ttft = Histogram("photon_time_to_first_token_seconds", "Arrival to first token on the host",
                              buckets=_LATENCY_BUCKETS, registry=r)
        self.tpot = Histogram("photon_time_per_output_token_seconds", "Mean time per output token after the first",
                              buckets=_TPOT_BUCKETS, registry=r)
        self.e2e = Histogram("photon_request_latency_seconds", "Arrival to finished",
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.queue = Histogram("photon_request_queue_seconds", "Arrival to admission",
                               buckets=_LATENCY_BUCKETS, registry=r)
        # device side, fed by DeviceStats
        self.step_period = Histogram("photon_step_period_seconds", "Device step period (first compute op "
                                     "to the next step's)", buckets=_PERIOD_BUCKETS, registry=r)
        self.device_busy = Counter("photon_device_busy_seconds", "Device compute-stream busy time while the "
                                   "engine had work", registry=r)
        self.device_idle = Counter("photon_device_idle_seconds", "Device compute-stream idle time while the "
                                   "engine had work", registry=r)
        self.device_no_work = Counter("photon_device_no_work_seconds", "Device compute-stream idle time while "
                                      "the engine had nothing to run (no request): no bubble, not in the idle "
                                      "figures", registry=r)
        self.idle_ratio = Gauge("photon_device_idle_ratio", "Device idle share (0-1) over the recent window "
                                "(engine-idle time excluded)", registry=r)
        self.bubbles = Counter("photon_bubbles", "Device bubbles (gaps >= 20 us) by cause", ["cause"], registry=r)
        self.bubble_seconds = Counter("photon_bubble_seconds", "Device idle in bubbles, by cause", ["cause"],
                                      registry=r)
        self.syncs = Counter("photon_accidental_syncs", "Unexpected host waits on the device, by call site",
                             ["site"], registry=r)
        self.sync_seconds = Counter("photon_accidental_sync_wait_seconds", "Host time in unexpected waits, "
                                    "by call site", ["site"], registry=r)
        self.recent_period = Gauge("photon_step_period_recent_seconds", "Median step period over the recent "
                                   "window", registry=r)
        for cause in Cause:    # every cause is exported, at 0 until it occurs
            self.bubbles.labels(cause)
            self.bubble_seconds.labels(cause)
        r.register(_EngineCollector(loop))

    def request_finished(self, out: RequestOutput) -> None:
        """Observe one finished request (called on the engine thread)."""
        self.finished.labels(out.finish_reason or "unknown").inc()
        self.prompt_tokens.inc(len(out.prompt_token_ids))
        self.generation_tokens.inc(len(out.token_ids))
        m = out.metrics
        if m is None or out.finish_reason == "abort":
            return
        self.e2e.observe(m.e2e_s)
        self.queue.observe(m.queue_s)
        if out.token_ids:
            self.ttft.observe(m.ttft_s)
        if len(out.token_ids) > 1:
            self.tpot.observe(m.tpot_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _EngineCollector:
    """The engine's own counters and queue state, read at scrape time."""

    def __init__(self, loop) -> None:
        self.loop = loop

    def describe(self):
        return []

    def collect(self):
        loop = self.loop
        e = loop.engine
        yield GaugeMetricFamily("photon_engine_up", "1 while the engine serves (0 while a failed engine is "
                                "replaced, or after the loop stopped)", value=int(loop.status == "ok"))
        yield CounterMetricFamily("photon_engine_restarts", "Engines replaced after a failure (device worker "
                                  "killed, out of memory, ...)", value=loop.restarts)
        if e is None:
            return
        stats = e.stats()
        old = loop.retired    # counters of engines replaced after a failure: totals never go back
        yield CounterMetricFamily("photon_engine_steps", "Steps committed by the engine",
                                  value=old["steps"] + stats.steps)
        yield CounterMetricFamily("photon_engine_generated_tokens", "Tokens appended at commit",
                                  value=old["tokens"] + stats.tokens)
        yield CounterMetricFamily("photon_engine_zombie_rows", "Rows committed after their sequence finished",
                                  value=old["zombie_rows"] + stats.zombie_rows)
        yield GaugeMetricFamily("photon_requests_running", "Requests admitted (holding a row and pages)",
                                value=stats.running)
        yield GaugeMetricFamily("photon_requests_waiting", "Requests queued for admission", value=stats.waiting)
        yield GaugeMetricFamily("photon_kv_pages_used", "KV cache pages in use", value=stats.kv_pages_used)
        yield GaugeMetricFamily("photon_kv_pages_capacity", "KV cache pages that can be handed out",
                                value=stats.kv_pages_total)
        yield GaugeMetricFamily("photon_engine_invariant_ok", "1 when the last idle check found every page, "
                                "row and slot free", value=int(loop.invariant_error is None))
        dropped = getattr(e.tracer, "dropped", None)
        if isinstance(dropped, dict):
            yield CounterMetricFamily("photon_trace_dropped_records", "Trace records lost to ring wrap-around",
                                      value=sum(dropped.values()))
