"""Analysis on traces the engine itself recorded (tests/data/golden/, tiny preset, 8 streams,
every request constrained to the ``point`` skill, host-process device), not simulated ones.

What each trace must give is written from what happened in the run: the clean pipelined run
has only commit's expected waits, the mask-upload bug run has one accidental sync site (the
engine's ``upload_mask_sync`` line *as it was when recorded*) once per steady-state step, and
the blocking run idles the device for the host. ``scripts/golden_traces.sh`` re-records them;
then re-read the new files and re-derive the constants below rather than copying outputs.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from photon_trace.telemetry.analysis import Cause, analyze
from photon_trace.telemetry.analysis.gate import EXIT_FAIL, EXIT_PASS, run_check
from photon_trace.telemetry.trace.file import load_trace

DATA = Path(__file__).parent / "data" / "golden"
STEPS = 123                     # committed steps in each run (same workload and seed)
COMMIT_SITE = "engine/engine.py:177"     # commit's wait when these were recorded
MASK_SYNC_SITE = "engine/engine.py:165"  # upload_mask_sync when these were recorded
MASK_SYNC_REASON = "mask upload: pageable copy waits for the device to drain"


@pytest.fixture(scope="module")
def golden():
    out = {}
    for name in ("clean-pipelined", "mask-sync-pipelined", "blocking"):
        trace = load_trace(DATA / f"{name}.trace.jsonl")
        out[name] = (trace, analyze(trace))
    return out


def test_the_three_runs_are_the_same_workload(golden):
    for name, (trace, report) in golden.items():
        assert len(trace.steps) == STEPS, name
        assert trace.header["settings"]["mode"] == ("blocking" if name == "blocking" else "pipelined")
        assert report.L == pytest.approx(golden["blocking"][1].L), name   # same tokens per request


def test_the_clean_pipelined_run_has_only_commits_expected_waits(golden):
    trace, report = golden["clean-pipelined"]
    assert trace.waits and {(w.reason, w.expected, w.site) for w in trace.waits} == \
        {("commit: copy-back", True, COMMIT_SITE)}
    assert report.syncs == []
    assert Cause.ACCIDENTAL_SYNC not in {b.cause for b in report.bubbles}
    assert report.host_idle_fraction == 0.0     # every next op was enqueued before the device got to it


def test_the_mask_upload_bug_is_one_sync_site_once_per_step(golden):
    trace, report = golden["mask-sync-pipelined"]
    (site,) = report.syncs
    assert (site.site, site.reason) == (MASK_SYNC_SITE, MASK_SYNC_REASON)
    assert site.count == len(report.steps)                   # once in every steady-state step
    unexpected = [w for w in trace.waits if not w.expected]
    assert len(unexpected) == len({w.step for w in unexpected})
    assert Cause.ACCIDENTAL_SYNC in {d.cause for d in report.diagnosis}
    assert report.idle_fraction > golden["clean-pipelined"][1].idle_fraction


def test_blocking_idles_the_device_for_the_host(golden):
    _, blocking = golden["blocking"]
    _, pipelined = golden["clean-pipelined"]
    assert blocking.syncs == []
    assert blocking.idle_fraction > 3 * pipelined.idle_fraction
    assert blocking.host_idle_fraction > 0.5 * blocking.idle_fraction   # most of it is the host's doing
    assert pipelined.period_ms < blocking.period_ms


def test_the_gate_on_the_recorded_runs(golden):
    assert run_check(golden["clean-pipelined"][0], max_idle_fraction=0.10).exit_code == EXIT_PASS
    sync = run_check(golden["mask-sync-pipelined"][0], max_idle_fraction=0.10)
    assert sync.exit_code == EXIT_FAIL and "accidental_syncs" in {g.name for g in sync.failures}
    blocking = run_check(golden["blocking"][0], max_idle_fraction=0.10)
    assert blocking.exit_code == EXIT_FAIL and {g.name for g in blocking.failures} == {"idle_fraction"}
