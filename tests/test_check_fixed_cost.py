"""What ``photon-trace check`` of a small trace pays before any work: the imports and look-ups
every run makes whatever the trace's size (issue 31 item 1: a 28-event profile in a few
hundredths of a second). Each is checked in a fresh interpreter, since this one has imported
everything already."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from photon_trace.telemetry.analysis import analyze, find_bubbles, gate, sync_sites, whole_run
from photon_trace.telemetry.analysis.whole_run import whole_run_bubbles
from photon_trace.telemetry.analysis.window import compute_extent
from photon_trace.telemetry.trace.distinct import distinct, first_of_each, member
from photon_trace.telemetry.trace.importers import load_any

ROOT = Path(__file__).resolve().parents[1]
KINETO = sorted((ROOT / "tests" / "data" / "kineto").glob("*.json.gz"))


def fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_check_without_a_baseline_or_junit_imports_neither_comparison_nor_xml():
    heavy = ("photon_trace.telemetry.analysis.comparison", "xml.etree.ElementTree")
    got = fresh("import contextlib, io, sys\n"
                "from photon_trace.cli.dispatch import main\n"
                "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
                f"    code = main(['check', {str(KINETO[0])!r}])\n"
                f"print(code, [m for m in {heavy!r} if m in sys.modules])")
    assert got == "1 []"


def test_a_profile_is_told_from_an_nsight_export_without_the_nsight_reader():
    got = fresh("import sys\n"
                "from photon_trace.telemetry.trace.importers.sniff import is_kineto, is_nsys\n"
                f"p = {str(KINETO[0])!r}\n"
                "print(is_nsys(p), is_kineto(p), [m for m in sys.modules if m.endswith(('nsys_read', 'sqlite3'))])")
    assert got == "False True []"


def test_the_version_in_a_header_is_the_packages_without_reading_the_installed_metadata():
    got = fresh("import sys\n"
                "from photon_trace.telemetry.trace.header import photon_trace_version\n"
                "print(photon_trace_version(), 'importlib.metadata' in sys.modules)")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert got == f"{project} False"


@pytest.mark.parametrize("path", KINETO + sorted(Path("/work/shared/kineto-samples").glob("*.json.gz")),
                         ids=lambda p: p.name.split(".")[0])
def test_the_sync_gate_counts_the_same_idle_from_the_reports_bubbles(path):
    """Where the steady-state window is the whole compute extent, the report's bubbles are the
    whole run's: the syncs' idle per site is the same as from splitting every gap again."""
    trace = load_any(path)
    report = analyze(trace)
    extent = compute_extent(trace)
    again = sync_sites(trace, find_bubbles(trace, extent))
    assert sync_sites(trace, whole_run_bubbles(report, trace, None)) == again
    if tuple(report.window) == extent:
        assert sync_sites(trace, report.bubbles) == again


def test_the_gate_does_not_split_the_gaps_again_when_the_window_is_the_whole_run(monkeypatch):
    path = ROOT / "tests" / "data" / "kineto" / "trace_filter_sampled_rank-0.json.gz"
    calls = []
    monkeypatch.setattr(whole_run, "find_bubbles", lambda *a, **k: calls.append(a) or find_bubbles(*a, **k))
    result = gate.run_check(str(path))
    assert tuple(result.report.window) == compute_extent(load_any(path))   # the case this is about
    assert [g.name for g in result.gates] == ["idle_fraction", "accidental_syncs"] and calls == []


def test_checking_a_profile_does_not_import_numpys_masked_arrays():
    """``np.unique`` (and ``np.isin`` of timestamps) import ``numpy.ma`` on first use: 12 ms of
    a small check. The importer and the analysis use ``trace/distinct.py`` instead."""
    paths = [str(p) for p in KINETO]
    got = fresh("import contextlib, io, sys\n"
                "from photon_trace.cli.dispatch import main\n"
                "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
                f"    codes = [main(['check', p]) for p in {paths!r}]\n"
                "print(codes, 'numpy.ma' in sys.modules)")
    assert got.endswith("] False") and "2" not in got.split("]")[0]     # each was checked, none bad input


@pytest.mark.parametrize("seed", range(40))
def test_distinct_first_of_each_and_member_answer_as_numpy_does(seed):
    rng = np.random.default_rng(seed)
    n, spread = int(rng.integers(0, 60)), int(rng.choice([1, 3, 50, 2**40]))
    a = rng.integers(-spread, spread + 1, n, dtype=np.int64)
    of = rng.choice(np.append(a, rng.integers(-spread, spread + 1, 5)), int(rng.integers(0, 10)))
    values, first, inverse = first_of_each(a)
    want = np.unique(a, return_index=True, return_inverse=True)
    for got, expected in zip((values, first, inverse), want):
        assert got.dtype == expected.dtype and np.array_equal(got, expected.reshape(-1))
    assert np.array_equal(distinct(a), np.unique(a)) and distinct(a).dtype == a.dtype
    assert np.array_equal(member(a, of), np.isin(a, of))
