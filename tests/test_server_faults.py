"""What the server shows when things go wrong below it: the mask-upload bug's accidental syncs
in /metrics, and an engine failure answered with 503s instead of hung requests."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from photon_trace.engine.engine import Engine
from helpers.serving import serving, sse_data

# mask_upload="sync": the source's bug, kept in the engine so the tooling can be shown to catch it
TINY_SYNC = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
                 kv_tokens=2048, page_size=8, max_context=256, mask_upload="sync")


@pytest.fixture(scope="module")
def server():
    with serving(lambda tracer: Engine(tracer=tracer, **TINY_SYNC), model_name="tiny") as srv:
        yield srv


def samples(url: str) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30).text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_flag_the_mask_upload_bugs_accidental_syncs(server):
    fmt = {"type": "regex", "regex": "[a-z]{30}"}
    with httpx.Client(base_url=server.url, timeout=60) as c:
        for i in range(2):
            r = c.post("/v1/completions", json={"prompt": f"sync {i}", "max_tokens": 30, "response_format": fmt})
            assert r.status_code == 200
    time.sleep(1.2)      # a recorder flush
    m = samples(server.url)
    syncs = {dict(k[1])["site"]: v for k, v in m.items() if k[0] == "photon_accidental_syncs_total"}
    assert syncs and sum(syncs.values()) >= 30
    assert all(site.startswith("engine/") for site in syncs)      # the call site, file:line
    assert m[("photon_bubbles_total", (("cause", "accidental_sync"),))] > 0
    assert m[("photon_bubble_seconds_total", (("cause", "accidental_sync"),))] > 0


def test_an_engine_failure_is_answered_with_503s_not_hangs(server):
    """Runs last in this module: it kills the engine thread."""
    engine = server.app.state.server.loop.engine
    events: list[str] = []

    def stream():
        body = {"prompt": "doomed", "max_tokens": 200, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                events.extend(sse_data([line]))

    t = threading.Thread(target=stream)
    t.start()
    deadline = time.monotonic() + 30
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)

    def fail() -> None:
        raise RuntimeError("injected device failure")

    engine.scheduler.plan = fail    # the engine thread's next plan fails
    t.join(60)
    assert not t.is_alive()
    assert events[-1] == "[DONE]" and "error" in json.loads(events[-2])
    health = httpx.get(server.url + "/health", timeout=30)
    assert health.status_code == 503 and "injected" in health.json()["error"]
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "after", "max_tokens": 4}, timeout=30)
    assert r.status_code == 503 and r.json()["error"]["type"] == "service_unavailable"
    m = samples(server.url)
    assert m[("photon_engine_up", ())] == 0
