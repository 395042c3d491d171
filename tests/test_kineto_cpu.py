"""Profiler traces recorded here, on the CPU, with ``torch.profiler``: no device activity at all.

The importer must still give host lanes per thread, the steps, the clock (these traces have
float timestamps: ns resolution, relative to ``baseTimeNanoseconds``) and a clear "no device
activity" result; with Python stacks, a sync's call site names the program's own function.
"""
from __future__ import annotations

import gzip
import inspect
import json
import threading

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from photon_trace.cli import main as cli
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.importers.kineto import import_kineto

STEPS = 5
ACTIVE = 3   # schedule(wait=1, warmup=1, active=3): ProfilerStep#2..#4 are recorded


def work(x: torch.Tensor) -> torch.Tensor:
    for _ in range(2):
        x = torch.tanh(x @ x)
    return x


def _other_thread(stop: threading.Event) -> None:
    y = torch.randn(16, 16)
    while not stop.is_set():
        with record_function("side_work"):
            y = torch.relu(y @ y)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A CPU-only profile of a small loop (Python stacks, a second thread), plain and gzipped."""
    d = tmp_path_factory.mktemp("profiler")
    stop = threading.Event()
    side = threading.Thread(target=_other_thread, args=(stop,), name="side")
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=ACTIVE),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(d / "cpu.json"))) as prof:
        side.start()
        x = torch.randn(32, 32)
        for _ in range(STEPS):
            with record_function("execute_model"):
                x = work(x)
            prof.step()
        stop.set()
        side.join()
    plain = d / "cpu.json"
    gz = d / "cpu.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    return plain, gz


def test_a_cpu_only_trace_imports_its_host_lanes_steps_and_clock(recorded):
    plain, gz = recorded
    trace = load_any(plain)
    raw = json.loads(plain.read_text())
    assert trace.device_spans == [] and trace.waits == []
    steps = sorted({int(e["name"].split("#")[1]) for e in raw["traceEvents"]
                    if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")})
    assert len(steps) == ACTIVE and [s.step for s in trace.steps if s.step >= 0] == steps
    assert trace.header["source"]["resolution_ns"] == 1           # float µs with 3 decimals
    assert trace.header["clock"]["wall_ns"] == raw["baseTimeNanoseconds"]
    # displayTimeUnit ("ms" here) only labels a viewer's axis: ts stays µs, made integer ns
    assert trace.header["source"]["display_time_unit"] == raw["displayTimeUnit"]
    first = min((e for e in raw["traceEvents"] if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    op = min((h for h in trace.host_spans if h.phase == first["name"]), key=lambda h: h.t0)
    assert (op.t0, op.t1 - op.t0) == (round(first["ts"] * 1000), round(first["dur"] * 1000))
    cats = trace.header["categories"]["host"]
    assert {"cpu op", "annotation", "python"} <= set(cats.values())
    assert len({h.thread for h in trace.host_spans}) >= 2          # the loop's thread and "side"
    assert load_any(gz).host_spans == trace.host_spans             # the gzipped copy reads the same


def test_no_device_activity_is_a_result_not_a_crash(recorded, capsys):
    plain, _ = recorded
    report = analyze(load_any(plain))
    assert (report.window_ns, report.bubbles, report.steps, report.streams) == (0, [], [], [])
    assert cli(["import", str(plain)]) == 0
    assert "no device activity" in capsys.readouterr().out
    result = run_check(plain)
    assert result.exit_code == EXIT_BAD_INPUT and "no device activity" in result.error


def test_steps_from_a_named_annotation(recorded):
    plain, _ = recorded
    trace = import_kineto(plain, step_annotation="execute_model")
    # "execute_model" has no number: the steps are counted in order
    assert [s.step for s in trace.steps if s.step >= 0] == list(range(ACTIVE))
    assert trace.header["settings"] == {"step_annotation": "execute_model", "steps_found": ACTIVE}
    with pytest.raises(ValueError, match="no annotation named 'nope'.*'execute_model'"):
        import_kineto(plain, step_annotation="nope")


def test_a_sync_inside_a_recorded_op_gets_the_programs_python_function(recorded, tmp_path):
    """A cudaStreamSynchronize placed inside one of the recorded aten::mm calls (a CPU cannot
    record one) is attributed to ``work`` in this file and to aten::matmul > aten::mm."""
    plain, _ = recorded
    doc = json.loads(plain.read_text())
    mm = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::mm")
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize",
                               "pid": mm["pid"], "tid": mm["tid"], "ts": mm["ts"] + 0.001, "dur": 0.002,
                               "args": {"correlation": 424242}})
    path = tmp_path / "with_sync.json"
    path.write_text(json.dumps(doc))
    (wait,) = load_any(path).waits
    line = inspect.getsourcelines(work)[1]     # Kineto names a Python function by where it is defined
    # (the path as the profiler shortens it: relative to the sys.path entry it was imported from)
    assert wait.site.endswith(f"test_kineto_cpu.py:{line} (work) · aten::matmul > aten::mm"), wait.site
    assert wait.reason == "cudaStreamSynchronize: waits for a stream" and wait.t1 - wait.t0 == 2
