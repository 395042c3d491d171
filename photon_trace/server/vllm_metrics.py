"""vLLM's metrics, under vLLM's names and labels, beside our own on ``/metrics``.

Dashboards and alerts people already run against vLLM (its bundled Grafana dashboard
among them: ``tests/data/vllm/``) key on these names and on the ``model_name`` label, so
they work on this server unmodified. The names keep vLLM's ``vllm:`` prefix, colon and all
(Prometheus reserves colons for recording rules; these names are vLLM's, not ours to pick).
Every series carries ``model_name``, the served model's id as ``/v1/models`` lists it.

The values mean what vLLM's mean:

* ``vllm:num_requests_running`` / ``vllm:num_requests_waiting``: admitted and queued requests;
  ``vllm:kv_cache_usage_perc``: KV pages in use over those that can be handed out (0 to 1).
  Read from the engine at scrape time.
* ``vllm:prompt_tokens_total``: a request's prompt tokens, counted when its prefill is done
  (its first token reaches the host); ``vllm:generation_tokens_total``: tokens as they reach
  the host, tick by tick.
* ``vllm:inter_token_latency_seconds``: for each tick that gives a running request new tokens
  after its first, the time since its previous ones.
* Per finished request: ``vllm:request_success_total{finished_reason}`` (``stop``, ``length``,
  ``abort``, ``error``: OpenAI's words, as ``finish_reason`` in the response), and, for
  requests not aborted, histograms of end-to-end latency, time to first token, queue time
  (arrival to admission), prefill time (admission to first token), decode time (first token
  to last: the sum of its inter-token latencies), prompt and generated lengths, and the
  ``max_tokens`` it asked for (``vllm:request_max_num_generation_tokens``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from photon_trace.engine.outputs import RequestDelta, RequestOutput
from photon_trace.server.protocol import finish_reason

LABEL = "model_name"
FINISHED_REASONS = ("stop", "length", "abort", "error")
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
            300.0, 600.0)
_TOKEN_SECONDS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0)


def counts_buckets(limit: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``limit``: bounds for token counts of at most ``limit``."""
    out, scale = [], 1
    while True:
        for step in (1, 2, 5):
            if step * scale > limit:
                return tuple(out)
            out.append(step * scale)
        scale *= 10


@dataclass(slots=True)
class _Live:
    """What the metrics keep of a request between its admission and its end."""
    prompt_tokens: int
    max_tokens: int
    first_s: float | None = None     # monotonic time its first tokens reached the host
    last_s: float = 0.0              # ... its latest tokens


class VllmMetrics:
    """vLLM's metric families for the model ``model_name``, in ``registry``. Fed on the engine
    thread (``added``, ``tokens``, ``finished``, ``failed``); the gauges read ``loop.engine``."""

    def __init__(self, registry: CollectorRegistry, loop, model_name: str, max_context: int) -> None:
        self.model_name = model_name
        self._live: dict[int, _Live] = {}
        r, by_model = registry, [LABEL]

        def counter(name: str, doc: str, labels=by_model) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def histogram(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, by_model, buckets=buckets, registry=r).labels(model_name)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed").labels(model_name)
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens processed").labels(model_name)
        self.success = counter("vllm:request_success", "Finished requests by finish reason",
                               [LABEL, "finished_reason"])
        for reason in FINISHED_REASONS:     # every reason is exported, at 0 until it occurs
            self.success.labels(model_name, reason)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency", _SECONDS)
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token", _SECONDS)
        self.itl = histogram("vllm:inter_token_latency_seconds", "Inter-token latency", _TOKEN_SECONDS)
        self.queue = histogram("vllm:request_queue_time_seconds", "Time in the waiting queue", _SECONDS)
        self.prefill = histogram("vllm:request_prefill_time_seconds", "Admission to first token", _SECONDS)
        self.decode = histogram("vllm:request_decode_time_seconds", "First token to last token", _SECONDS)
        lengths = counts_buckets(max_context)
        self.prompt_len = histogram("vllm:request_prompt_tokens", "Prompt tokens of a request", lengths)
        self.generation_len = histogram("vllm:request_generation_tokens", "Generated tokens of a request", lengths)
        self.max_tokens = histogram("vllm:request_max_num_generation_tokens", "max_tokens a request asked for",
                                    lengths)
        r.register(_QueueCollector(loop, model_name))

    def added(self, req_id: int, prompt_tokens: int, max_tokens: int) -> None:
        self._live[req_id] = _Live(prompt_tokens, max_tokens)

    def tokens(self, deltas: list[RequestDelta]) -> None:
        """A tick's new tokens, as they reach the host."""
        now = time.monotonic()
        for d in deltas:
            live = self._live.get(d.req_id)
            if live is None or not d.token_ids:
                continue
            self.generation_tokens.inc(len(d.token_ids))
            if live.first_s is None:
                live.first_s = now
                self.prompt_tokens.inc(live.prompt_tokens)
            else:
                self.itl.observe(now - live.last_s)
            live.last_s = now

    def finished(self, out: RequestOutput) -> None:
        live = self._live.pop(out.req_id, None)
        self.success.labels(self.model_name, finish_reason(out) or "error").inc()
        m = out.metrics
        if live is None or m is None or out.finish_reason == "abort":
            return
        self.e2e.observe(m.e2e_s)
        self.queue.observe(m.queue_s)
        self.prompt_len.observe(len(out.prompt_token_ids))
        self.generation_len.observe(len(out.token_ids))
        self.max_tokens.observe(live.max_tokens)
        if out.token_ids:
            self.ttft.observe(m.ttft_s)
            self.prefill.observe(max(0.0, m.ttft_s - m.queue_s))
        if live.first_s is not None:
            self.decode.observe(live.last_s - live.first_s)

    def failed(self, req_id: int) -> None:
        """A request an engine failure ended."""
        self._live.pop(req_id, None)
        self.success.labels(self.model_name, "error").inc()


class _QueueCollector:
    """vLLM's scheduler and KV cache gauges, read from the engine's stats at scrape time."""

    def __init__(self, loop, model_name: str) -> None:
        self.loop, self.model_name = loop, model_name

    def describe(self):
        return []

    def collect(self):
        e = self.loop.engine
        if e is None:
            return
        s = e.stats()
        for name, doc, value in (
                ("vllm:num_requests_running", "Requests in model execution batches", s.running),
                ("vllm:num_requests_waiting", "Requests waiting to be processed", s.waiting),
                ("vllm:kv_cache_usage_perc", "KV-cache usage: 1 means 100 percent",
                 s.kv_pages_used / s.kv_pages_total if s.kv_pages_total else 0.0)):
            family = GaugeMetricFamily(name, doc, labels=[LABEL])
            family.add_metric([self.model_name], value)
            yield family
