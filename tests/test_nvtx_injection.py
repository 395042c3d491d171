"""What Nsight Systems receives from our NVTX ranges, proven without Nsight.

A profiler gets NVTX calls through NVTX's injection interface: ``NVTX_INJECTION64_PATH``
names a shared library whose ``InitializeInjectionNvtx2`` installs its callbacks.
``helpers/nvtx_collector.c`` is such a library, written against the NVTX3 headers:
this test builds it with the system compiler, runs a traced engine (full level, so
every phase, constrained rows included) with it injected, and checks what it
received against the trace file the same run wrote: the ``photon_trace`` domain,
one named category per phase, each range's message its phase and payload its step
index, pushes and pops balanced and nested exactly like the host spans (same count
per phase, same order, same depth), all on the scheduler thread.

Skips when there is no C compiler, no NVTX3 headers (the CUDA toolkit's
``include/nvtx3``, or an ``nvidia-nvtx`` wheel's) or no ``nvtx`` package.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from photon_trace.telemetry.tracer import Phase

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCE = HERE / "helpers" / "nvtx_collector.c"


def _nvtx3_include() -> str | None:
    """A folder holding nvtx3/nvToolsExt.h: $CUDA_HOME, the CUDA toolkits, an nvidia-nvtx wheel."""
    candidates = [os.path.join(os.environ.get("CUDA_HOME", "/nonexistent"), "include"),
                  *sorted(glob.glob("/usr/local/cuda*/include"), reverse=True), "/usr/include"]
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidates += glob.glob(os.path.join(base, "nvtx", "include"))
    return next((c for c in candidates if os.path.exists(os.path.join(c, "nvtx3", "nvToolsExt.h"))), None)


COMPILER = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
INCLUDE = _nvtx3_include()
pytestmark = [
    pytest.mark.skipif(COMPILER is None, reason="no C compiler"),
    pytest.mark.skipif(INCLUDE is None, reason="no NVTX3 headers (CUDA toolkit include/nvtx3 or nvidia-nvtx wheel)"),
    pytest.mark.skipif(importlib.util.find_spec("nvtx") is None, reason="the nvtx package is not installed"),
]

RUN = """
import json, sys, threading
from photon_trace.engine.engine import Engine
from photon_trace.telemetry.tracer import TraceLevel
from photon_trace.traced_run import trace_run
from photon_trace.workload import Workload, engine_settings, prepare

wl = Workload(streams=3, tokens=6, constrained="point", constrained_share=0.67, seed=1)
with Engine(model="tiny", backend="cpu", **engine_settings(wl)) as eng:
    prepared = prepare(eng, wl)
    trace, _ = trace_run(eng, prepared, sys.argv[1], TraceLevel.FULL, analyse=False)
print(json.dumps({"scheduler_tid": threading.get_native_id(), "steps": len(trace.steps)}))
"""


@pytest.fixture(scope="module")
def received(tmp_path_factory):
    """(what the collector received, the trace file's host spans, the run's facts)."""
    tmp = tmp_path_factory.mktemp("nvtx")
    lib = tmp / "libnvtx_collector.so"
    build = subprocess.run([COMPILER, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", f"-I{INCLUDE}", str(SOURCE),
                            "-o", str(lib), "-lpthread"], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    out, trace_path = tmp / "nvtx.txt", tmp / "run.trace.jsonl"
    env = {**os.environ, "NVTX_INJECTION64_PATH": str(lib), "NVTX_COLLECTOR_OUT": str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("NVTX_DISABLE", None)
    proc = subprocess.run([sys.executable, "-c", RUN, str(trace_path)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    from photon_trace.telemetry.trace.file import load_trace

    return out.read_text().splitlines(), load_trace(trace_path), facts


def _ours(lines):
    """The photon_trace domain's categories and its push/pop events, in call order."""
    domains = {int(f[1]): f[2] if len(f) > 2 else "" for f in (ln.split(" ", 2) for ln in lines) if f[0] == "domain"}
    ids = {d for d, name in domains.items() if name == "photon_trace"}
    categories, events = {}, []
    for ln in lines:
        f = ln.split(" ")
        if f[0] == "category" and int(f[1]) in ids:
            categories[int(f[2])] = " ".join(f[3:])
        elif f[0] == "push" and int(f[1]) in ids:
            events.append(("push", int(f[2]), int(f[3]), int(f[4]), int(f[5]), " ".join(f[6:])))
        elif f[0] == "pop" and int(f[1]) in ids:
            events.append(("pop", int(f[2])))
    return ids, categories, events


def _nested(events):
    """Pushes as (phase, step, depth) in order; asserts balance on the way."""
    depth, out = 0, []
    for e in events:
        if e[0] == "push":
            out.append((e[5], e[4], depth))
            depth += 1
        else:
            depth -= 1
            assert depth >= 0, "a pop without its push"
    assert depth == 0, "pushes left open"
    return out


def _host_nesting(trace):
    """Host spans as (phase, step, depth) in start order: what the NVTX pushes must mirror."""
    spans = sorted(trace.host_spans, key=lambda h: (h.t0, -h.t1))
    stack, out = [], []
    for h in spans:
        while stack and stack[-1] <= h.t0:
            stack.pop()
        out.append((h.phase, h.step, len(stack)))
        stack.append(h.t1)
    return out


def test_the_profiler_sees_the_photon_trace_domain_with_a_named_category_per_phase(received):
    lines, trace, _ = received
    ids, categories, events = _ours(lines)
    assert len(ids) >= 1 and events, lines[:20]
    assert sorted(set(categories.values())) == sorted(p.name.lower() for p in Phase)


def test_every_range_is_its_phase_with_the_step_as_payload_on_the_scheduler_thread(received):
    lines, trace, facts = received
    _, categories, events = _ours(lines)
    pushes = [e for e in events if e[0] == "push"]
    assert {e[1] for e in events} == {facts["scheduler_tid"]}
    for _, _, category, payload_type, payload, message in pushes:
        assert categories[category] == message, "the range's category names its phase"
        assert payload_type == 2 and payload >= 0   # NVTX_PAYLOAD_TYPE_INT64: the step index
    assert {e[4] for e in pushes} >= {s.step for s in trace.steps}


def test_pushes_and_pops_nest_exactly_like_the_host_spans(received):
    lines, trace, facts = received
    _, _, events = _ours(lines)
    nvtx = _nested(events)
    host = _host_nesting(trace)
    assert Counter(p for p, _, _ in nvtx) == Counter(p for p, _, _ in host)
    # every phase of a tick (no_work and serve are recorded only by a server's engine loop)
    assert {p for p, _, _ in host} == {p.name.lower() for p in Phase if p not in (Phase.NO_WORK, Phase.SERVE)}, \
        "a full-level constrained run has every phase"
    assert nvtx == host
    assert max(d for _, _, d in host) >= 1, "sub-phases nest inside the tick phases"
