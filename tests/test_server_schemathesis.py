"""schemathesis against the served /openapi.json: bodies generated from the documented request
schemas (valid and invalid), a bounded number per operation; not one may get a 5xx."""
from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from helpers.serving import tiny_server  # noqa: E402

KEY = "schemathesis-key"
EXAMPLES = 25        # per operation: bounded, so the suite stays minutes, not hours


@pytest.fixture(scope="module")
def server():
    with tiny_server(KEY, max_context=128) as srv:
        yield srv


@pytest.fixture(scope="module")
def api_schema(server):
    return schemathesis.openapi.from_url(server.url + "/openapi.json")


POSITIVE, NEGATIVE = GenerationMode.POSITIVE, GenerationMode.NEGATIVE
# (method, path, generation mode): invalid data only where there are inputs to get wrong
CASES = [(m, p, mode) for m, p in [("POST", "/v1/completions"), ("POST", "/v1/chat/completions"),
                                   ("POST", "/v1/point"), ("POST", "/v1/detect"), ("GET", "/v1/trace/recent")]
         for mode in (POSITIVE, NEGATIVE)]
CASES += [("GET", "/v1/models", POSITIVE), ("GET", "/v1/models/{model_id}", POSITIVE), ("GET", "/health", POSITIVE)]


def test_every_request_body_is_documented(server):
    import httpx
    doc = httpx.get(server.url + "/openapi.json", timeout=30).json()
    posts = {p: ops["post"] for p, ops in doc["paths"].items() if "post" in ops}
    assert set(posts) == {"/v1/completions", "/v1/chat/completions", "/v1/point", "/v1/detect"}
    for op in posts.values():
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.split("/")[-1] in doc["components"]["schemas"]


@pytest.mark.parametrize("method, path, mode", CASES, ids=[f"{m} {p} {mode.value}" for m, p, mode in CASES])
def test_no_generated_request_is_a_server_error(server, api_schema, method, path, mode):
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        case.call_and_validate(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"},
                               checks=[not_a_server_error])

    check()
