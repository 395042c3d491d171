"""The scale benchmark's smoke test: its streamed traces hold what they say, and ``--quick``
prints every table with a verdict per row (speed is never asserted: a benchmark, not a test)."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from helpers.scale_traces import GENERATOR_VERSION, write_own_trace, write_training_trace
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.importers import load_any

ROOT = Path(__file__).resolve().parent.parent


def test_the_streamed_profiler_trace_is_json_holding_the_events_it_counts(tmp_path):
    w = write_training_trace(tmp_path / "p.json.gz", 3000, kernels_per_step=40)
    doc = json.loads(gzip.decompress(w.path.read_bytes()))
    events = doc["traceEvents"]
    assert len(events) == w.events and w.events >= 3000
    assert Counter(e.get("cat", e["ph"]) for e in events) == w.counts
    assert w.events - 3000 < w.events / w.steps + 10      # whole steps: it stops within the step that reached it
    # shaped like a real one: steps, nesting, flows, three streams, syncs
    assert sum(e["name"].startswith("ProfilerStep#") for e in events) == w.steps
    assert {e["args"]["stream"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy")} == {7, 11, 23}
    assert {e["args"]["cuda_sync_kind"] for e in events if e.get("cat") == "cuda_sync"} == {"Stream Sync", "Wait Event"}
    assert any(e["name"] == "aten::addmm" for e in events) and w.counts["ac2g"] == 2 * (
        w.counts["kernel"] + w.counts["gpu_memcpy"])
    again = write_training_trace(tmp_path / "q.json.gz", 3000, kernels_per_step=40)
    assert gzip.decompress(again.path.read_bytes()) == gzip.decompress(w.path.read_bytes())   # seeded
    trace = load_any(w.path)
    assert len(analyze(trace).streams) == 3


def test_the_streamed_own_trace_loads_with_the_records_it_counts(tmp_path):
    w = write_own_trace(tmp_path / "o.trace.jsonl.gz", 2500)
    trace = load_any(w.path)
    for kind, n in w.counts.items():
        assert len(getattr(trace, kind)) == n, kind
    assert len(trace.host_spans) + len(trace.device_spans) >= 2500
    copies = trace.header["synthetic"]["repeated"]["copies"]
    assert copies >= 2 and len({s.step for s in trace.steps}) == w.steps     # each copy its own steps
    assert len({(r.req_id, r.event) for r in trace.requests}) == len(trace.requests)
    assert analyze(trace).steps


def test_quick_prints_each_table_with_a_verdict_per_row(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--quick",
                          "--cache", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert re.search(r"machine: \d+ CPUs, load [\d.]+", text)
    made = dict(re.findall(r"made (\S+): ([\d,]+) records", text))
    v = GENERATOR_VERSION
    assert set(made) == {f"synthetic-5000-v{v}.json.gz", f"profiler-20000-v{v}.json.gz", f"own-20000-v{v}.trace.jsonl.gz"}
    tables = re.split(r"\n### ", text)[1:]
    assert [t.split(".")[0] for t in tables] == ["1", "2", "3"]
    for t in tables:
        rows = [line for line in t.splitlines() if line.startswith("| ") and not line.startswith("| trace")]
        assert rows, t
        head = next(line for line in t.splitlines() if line.startswith("| trace"))
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert len(cells) == head.count("|") - 1, row
            assert cells[-1] in ("PASS", "MISS"), row          # a figure, never a failed measurement
            seconds = [float(c) for c, h in zip(cells, head.strip("|").split("|")) if h.strip().endswith(" s")
                       and c != "-"]
            assert seconds and all(0 <= s < 600 for s in seconds), row
    spans = re.search(rf"\| profiler: profiler-20000-v{v}.json.gz \| ([\d,]+) \|", tables[1])
    assert spans and 0 < int(spans.group(1).replace(",", "")) <= int(made[f"profiler-20000-v{v}.json.gz"].replace(",", ""))
