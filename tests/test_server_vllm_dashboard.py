"""vLLM's own Grafana dashboard (``tests/data/vllm/grafana.json``, copied from vLLM) works on our
server unmodified: every PromQL expression in it parses, and every series it selects (metric
name and label matchers, Grafana's variables filled in as Grafana fills them) is served by a real
server, with the labels its aggregations group by and histograms as _bucket/_sum/_count; the
values mean what vLLM's mean (checked against the responses' own usage and timings)."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.promql import parse
from helpers.serving import tiny_server, wait_idle

DASHBOARD = Path(__file__).parent / "data" / "vllm" / "grafana.json"
MODEL = "tiny"
# What the dashboard selects, by metric name: a dashboard file that lost a panel is noticed.
SELECTED = {
    "vllm:e2e_request_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_sum",
    "vllm:e2e_request_latency_seconds_count", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
    "vllm:inter_token_latency_seconds_bucket", "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count", "vllm:kv_cache_usage_perc", "vllm:request_prompt_tokens_bucket",
    "vllm:request_generation_tokens_bucket", "vllm:request_success_total", "vllm:request_queue_time_seconds_sum",
    "vllm:request_prefill_time_seconds_sum", "vllm:request_decode_time_seconds_sum",
    "vllm:request_max_num_generation_tokens_sum"}
COMPLETIONS = [("one", 5), ("two two", 8), ("three three three", 12)]   # (prompt, max_tokens)


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query target in the dashboard."""
    doc = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in doc["panels"] for target in panel.get("targets", ())
            if "expr" in target]


def as_grafana_sends(expr: str) -> str:
    """``expr`` with the dashboard's variables filled in, as Grafana does before it queries."""
    return expr.replace("$__rate_interval", "1m").replace("${model_name}", MODEL).replace("$model_name", MODEL)


def scrape(url: str) -> tuple[dict[str, str], list]:
    """(family name -> type, every sample) of ``url``/metrics, by prometheus_client's parser."""
    types, samples = {}, []
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30).text):
        types[family.name] = family.type
        samples.extend(family.samples)
    return types, samples


def value(samples, name: str, **labels) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {len(found)} series"
    return found[0]


@pytest.fixture(scope="module")
def served():
    """A real server after known traffic: its URL, the responses, and its /metrics once idle."""
    with tiny_server() as srv:
        out = []
        for i, (prompt, n) in enumerate(COMPLETIONS):
            out.append(httpx.post(srv.url + "/v1/completions", timeout=120, json={
                "prompt": prompt, "max_tokens": n, "ignore_eos": True, "temperature": 0.8, "seed": i}).json())
        out.append(httpx.post(srv.url + "/v1/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "Yes or no?"}], "max_tokens": 20,
            "guided_choice": ["yes", "no"]}).json())
        wait_idle(srv.url)
        yield srv.url, out, scrape(srv.url)


def test_the_dashboard_is_vllms_and_every_query_parses():
    doc = json.loads(DASHBOARD.read_text())
    assert doc["title"] == "vLLM" and len(doc["panels"]) == 12
    queries = dashboard_queries()
    assert len(queries) == 27
    selected = {s.metric for _, expr in queries for s in parse(as_grafana_sends(expr)).selectors}
    assert selected == SELECTED
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["model_name"]["definition"] == "label_values(model_name)"


@pytest.mark.parametrize("title, expr", dashboard_queries(), ids=[f"{t}: {e[:60]}" for t, e in dashboard_queries()])
def test_every_series_the_dashboard_selects_is_served(served, title, expr):
    _, _, (types, samples) = served
    query = parse(as_grafana_sends(expr))
    for sel in query.selectors:
        assert "model_name" in sel.matchers, f"{title}: the dashboard filters by model_name"
        hits = [s for s in samples if s.name == sel.metric and sel.matches(s.labels)]
        assert hits, f"{title}: {sel.metric}{sel.matchers} selects nothing on our server"
        base = sel.metric.rsplit("_", 1)[0]
        if sel.metric.endswith(("_bucket", "_sum", "_count")):
            assert types.get(base) == "histogram", f"{sel.metric}: vLLM's is a histogram"
            names = {s.name for s in samples if s.labels.get("model_name") == MODEL}
            assert {base + "_bucket", base + "_sum", base + "_count"} <= names
        elif sel.metric.endswith("_total"):
            assert types.get(sel.metric[:-len("_total")]) == "counter", f"{sel.metric}: vLLM's is a counter"
        else:
            assert types.get(sel.metric) == "gauge", f"{sel.metric}: vLLM's is a gauge"
        if "rate" in query.functions or "increase" in query.functions:
            assert not types.get(sel.metric) == "gauge", f"{title}: rate() of a gauge"
    for _, labels, selectors in query.groupings:
        for sel in selectors:
            for s in (s for s in samples if s.name == sel.metric and sel.matches(s.labels)):
                assert set(labels) <= set(s.labels), f"{title}: {sel.metric} lacks {labels}"
    # the dashboard's model_name variable: label_values(model_name) finds the served model
    assert MODEL in {s.labels.get("model_name") for s in samples}


def test_the_values_mean_what_vllms_mean(served):
    url, out, (_, m) = served
    usage = [r["usage"] for r in out]
    timings = [r["photon_trace"]["metrics"] for r in out]
    model = dict(model_name=MODEL)
    assert value(m, "vllm:request_success_total", finished_reason="length", **model) == len(COMPLETIONS)
    assert value(m, "vllm:request_success_total", finished_reason="stop", **model) == 1   # the guided choice
    assert value(m, "vllm:request_success_total", finished_reason="abort", **model) == 0
    prompt = sum(u["prompt_tokens"] for u in usage)
    generated = sum(u["completion_tokens"] for u in usage)
    assert value(m, "vllm:prompt_tokens_total", **model) == prompt
    assert value(m, "vllm:generation_tokens_total", **model) == generated
    assert value(m, "vllm:request_prompt_tokens_sum", **model) == prompt
    assert value(m, "vllm:request_generation_tokens_sum", **model) == generated
    assert value(m, "vllm:request_max_num_generation_tokens_sum", **model) == sum(n for _, n in COMPLETIONS) + 20
    n = len(out)
    for name in ("e2e_request_latency_seconds", "time_to_first_token_seconds", "request_queue_time_seconds",
                 "request_prefill_time_seconds", "request_decode_time_seconds", "request_prompt_tokens",
                 "request_generation_tokens", "request_max_num_generation_tokens"):
        assert value(m, f"vllm:{name}_count", **model) == n
        assert value(m, f"vllm:{name}_bucket", le="+Inf", **model) == n
    # the latencies are the requests' own, as each response reports them
    assert value(m, "vllm:e2e_request_latency_seconds_sum", **model) == pytest.approx(
        sum(t["e2e_s"] for t in timings), rel=1e-9)
    assert value(m, "vllm:time_to_first_token_seconds_sum", **model) == pytest.approx(
        sum(t["ttft_s"] for t in timings), rel=1e-9)
    assert value(m, "vllm:request_queue_time_seconds_sum", **model) == pytest.approx(
        sum(t["queue_s"] for t in timings), rel=1e-9, abs=1e-12)
    assert value(m, "vllm:request_prefill_time_seconds_sum", **model) == pytest.approx(
        sum(t["ttft_s"] - t["queue_s"] for t in timings), rel=1e-9)
    # one inter-token latency per token after the first (one token per request per step);
    # together they are the decode time, first token to last, which lies inside end to end
    assert value(m, "vllm:inter_token_latency_seconds_count", **model) == generated - n
    decode = value(m, "vllm:request_decode_time_seconds_sum", **model)
    assert value(m, "vllm:inter_token_latency_seconds_sum", **model) == pytest.approx(decode, rel=1e-9)
    assert 0 < decode < sum(t["e2e_s"] for t in timings)
    # idle: nothing running or waiting, no KV page in use
    for gauge in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert value(m, f"vllm:{gauge}", **model) == 0


def test_the_gauges_follow_a_running_request():
    with tiny_server() as srv, httpx.Client(timeout=120) as client:
        body = {"prompt": "long", "max_tokens": 200, "ignore_eos": True, "stream": True}
        with client.stream("POST", srv.url + "/v1/completions", json=body) as r:
            lines = r.iter_lines()
            next(line for line in lines if line.startswith("data: "))   # it is running now
            _, m = scrape(srv.url)
            for _ in lines:
                pass
        assert value(m, "vllm:num_requests_running", model_name=MODEL) == 1
        used, capacity = value(m, "photon_kv_pages_used"), value(m, "photon_kv_pages_capacity")
        assert 0 < value(m, "vllm:kv_cache_usage_perc", model_name=MODEL) <= 1
        assert used > 0 and capacity > 0
        wait_idle(srv.url)
        _, m = scrape(srv.url)
        assert value(m, "vllm:num_requests_running", model_name=MODEL) == 0
        assert value(m, "vllm:kv_cache_usage_perc", model_name=MODEL) == 0
