"""Every /metrics name passes promtool's naming rules (checked with prometheus_client's parser):
counters end in _total and nothing else does, ratios end in _ratio, base units, no rates
precomputed as gauges; prompt and generated tokens are counters."""
from __future__ import annotations

import httpx

from photon_trace.engine.engine import Engine
from helpers.promlint import lint
from helpers.serving import metric_samples, serving
from helpers.waiting import wait_until

TINY = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
            kv_tokens=2048, page_size=8, max_context=256)

OLD_NAMES = """# HELP photon_device_idle_fraction Device idle fraction
# TYPE photon_device_idle_fraction gauge
photon_device_idle_fraction 0.1
# HELP photon_kv_pages_total KV pages
# TYPE photon_kv_pages_total gauge
photon_kv_pages_total 256
# HELP photon_tokens_per_second Tokens per second
# TYPE photon_tokens_per_second gauge
photon_tokens_per_second 10
# HELP photon_steps Steps
# TYPE photon_steps counter
photon_steps 3
"""


def test_the_rules_catch_the_names_we_used_to_export():
    problems = "\n".join(lint(OLD_NAMES))
    assert "photon_device_idle_fraction (gauge): a ratio ends in _ratio" in problems
    assert "photon_kv_pages_total (gauge): only counters end in _total" in problems
    assert "photon_tokens_per_second (gauge): a precomputed rate" in problems
    assert "photon_steps (counter): counter samples should end in _total" in problems


def test_every_served_metric_name_follows_the_rules():
    with serving(lambda tracer: Engine(tracer=tracer, **TINY), model_name="tiny") as server:
        r = httpx.post(server.url + "/v1/completions", json={"prompt": "count", "max_tokens": 9, "ignore_eos": True},
                       timeout=60).json()
        # the device figures arrive with a recorder flush: every family is there once it has
        m = wait_until(lambda: (s := metric_samples(server.url)).get("photon_step_period_seconds_count") and s,
                       60, "the device figures in /metrics")
        assert lint(httpx.get(server.url + "/metrics", timeout=30).text) == []
        assert m["photon_prompt_tokens_total"] == r["usage"]["prompt_tokens"]
        assert m["photon_generation_tokens_total"] == r["usage"]["completion_tokens"] == 9
        assert 0 <= m["photon_device_idle_ratio"] <= 1
        assert "photon_tokens_per_second" not in m and "photon_kv_pages_total" not in m


def test_only_vllms_own_names_may_carry_a_colon():
    """vLLM's names are exported as vLLM spells them (its dashboards key on them); a colon in one
    of ours is still a problem, and vLLM's names meet every other rule."""
    ours = "# HELP photon:steps Steps\n# TYPE photon:steps counter\nphoton:steps_total 3\n"
    assert any("no colons" in p for p in lint(ours))
    vllm = ("# HELP vllm:num_requests_running Running\n# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running 3\n# HELP vllm:queue_total Queue\n# TYPE vllm:queue_total gauge\n"
            "vllm:queue_total 1\n")
    assert lint(vllm) == ["vllm:queue_total (gauge): only counters end in _total"]
