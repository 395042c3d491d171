"""Constrained decoding through the engine: valid outputs, pipelined equals blocking,
the mask-upload switch changes timing only, bad formats rejected at add time."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from photon_trace.engine.constraints import ConstraintError, ResponseFormat
from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import Req, drive, mask_upload_sync

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "n"], "additionalProperties": False}
REGEX = r"(yes|no)-[0-9]{1,3}"
FORMATS = {
    "point": ResponseFormat(kind="point", max_count=3),
    "detect": ResponseFormat(kind="detect", max_count=2),
    "schema": ResponseFormat(kind="json_schema", schema=SCHEMA),
    "regex": ResponseFormat(kind="regex", regex=REGEX),
    "text": None,
}


@pytest.fixture
def engines(tiny_engines):
    """The session's real tiny engines (conftest); "sync" is the pipelined one run with the
    mask-upload bug (``mask_upload_sync``), the engine that setting builds."""
    return {"blocking": tiny_engines[1], "pipelined": tiny_engines[2], "sync": tiny_engines[2]}


def run_on(name: str, eng, reqs):
    """``drive`` on the engine called ``name`` in ``engines``."""
    if name != "sync":
        return drive(eng, reqs)
    with mask_upload_sync(eng):
        return drive(eng, reqs)


def check_valid(kind: str, out) -> None:
    if out.finish_reason != "constraint":
        return  # cut by max_tokens: not a finished answer
    if kind == "point":
        assert 1 <= len(out.result) <= 3
        assert all(0 <= p["x"] <= 1 and 0 <= p["y"] <= 1 for p in out.result)
    elif kind == "detect":
        assert len(out.result) <= 2
        for b in out.result:
            assert 0 <= b["x_min"] <= b["x_max"] <= 1 and 0 <= b["y_min"] <= b["y_max"] <= 1
    elif kind == "schema":
        jsonschema.validate(json.loads(out.result["text"]), SCHEMA)
    elif kind == "regex":
        assert re.fullmatch(REGEX, out.result["text"])


@st.composite
def workloads(draw):
    reqs = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(sorted(FORMATS)))
        greedy = draw(st.booleans())
        params = SamplingParams(temperature=0.0 if greedy else 1.0, seed=draw(st.integers(0, 10**6)),
                                max_tokens=draw(st.integers(4, 40)), ignore_eos=kind == "text")
        reqs.append((kind, Req(draw(st.integers(0, 4)), draw(st.lists(st.integers(1, 255), min_size=1,
                                                                      max_size=20)), params,
                                response_format=FORMATS[kind])))
    return reqs


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(work=workloads())
def test_constrained_outputs_are_valid_and_identical_across_modes(engines, work):
    kinds = [k for k, _ in work]
    reqs = [r for _, r in work]
    runs = {name: run_on(name, eng, reqs) for name, eng in engines.items()}
    assert runs["blocking"].tokens == runs["pipelined"].tokens == runs["sync"].tokens
    for i, kind in enumerate(kinds):  # validity of what the engine returns (results, not just tokens)
        check_valid(kind, runs["pipelined"].outputs[i])


def test_mixed_batch_finishes_constrained_rows_validly(engines):
    eng = engines["pipelined"]
    ids = []
    for i, (kind, fmt) in enumerate(FORMATS.items()):
        for j in range(2):
            p = SamplingParams(temperature=1.0, seed=100 * i + j, max_tokens=60)
            ids.append((kind, eng.add_request([i + 1, j + 1, 7], p, fmt)))
    eng.run_until_idle()
    finished = 0
    for kind, rid in ids:
        out = eng.requests.output(rid, forget=True)
        check_valid(kind, out)
        finished += out.finish_reason == "constraint"
    assert finished >= 4, "too few constrained rows finished for the check to mean anything"
    eng.check_invariants()


@pytest.mark.parametrize("bad, match", [
    (dict(kind="json_schema", schema={"type": "objekt"}), "schema"),
    (dict(kind="regex", regex="([a-z"), "regex"),
    (dict(kind="grammar", grammar="root ::= (("), "grammar"),
])
def test_invalid_formats_are_rejected_when_added(engines, bad, match):
    eng = engines["pipelined"]
    with pytest.raises((ConstraintError, ValueError), match=match):
        eng.add_request([1, 2], SamplingParams(), ResponseFormat(**bad))
    out = eng.generate([[3, 4]], SamplingParams(max_tokens=3, ignore_eos=True))
    assert len(out[0].token_ids) == 3
