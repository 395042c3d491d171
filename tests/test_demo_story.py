"""The demo's story in numbers (issue 28 item 6): each speed with its interval, or "too busy to
tell" and why; the syncs the fix removed, always. Rules on bench summaries and simulated traces."""
from __future__ import annotations

from dataclasses import replace

from helpers.loop_sim import BATCHED_COSTS, SyntheticRun, synthetic_trace
from photon_trace.cli.bench_gain import gain_of
from photon_trace.cli.demo_story import mask_fix_lines, pipelining_lines
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.file import write_trace

RUN = dict(steps=None, streams=4, requests=8, output_tokens=(60,), arrival_gap_ns=0, jitter=0.1)


def sim(seed: int, forward_scale: float = 1.0, **kw):
    costs = replace(BATCHED_COSTS, forward_ns=int(forward_scale * BATCHED_COSTS.forward_ns))
    return synthetic_trace(SyntheticRun(seed=seed, costs=costs, **{**RUN, **kw}))


def pipelining_summary(forward_scale: float) -> dict:
    reports = {"blocking": [analyze(sim(1, depth=1, constrained_every=0))],
               "pipelined": [analyze(sim(2, forward_scale, depth=2, constrained_every=0))]}
    return {"rows": [{"streams": 4, "gain": gain_of(reports, {"blocking": [{}], "pipelined": [{}]})}]}


def test_pipelining_is_stated_with_its_interval_when_the_device_held():
    (line,) = pipelining_lines(pipelining_summary(1.0))
    assert line.startswith("  pipelining, 4 stream(s): faster: ") and "95% interval" in line


def test_a_device_that_moved_between_the_modes_is_too_busy_to_tell_never_slower():
    (line,) = pipelining_lines(pipelining_summary(3.0))
    assert "cannot tell: the machine changed: forward" in line and "slower" not in line
    assert "too busy" not in line       # the device moved; nothing says the machine was busy


def mask_summary(tmp_path, name: str, **kw) -> dict:
    trace = sim(3 if name == "bug" else 4, depth=2, constrained_every=1, **kw)
    settings = trace.header["settings"]     # the engine's name for the switch, as a bench's trace has it
    settings["mask_upload"] = "sync" if settings.pop("mask_upload_bug", False) else "async"
    path = write_trace(trace, tmp_path / f"{name}.trace.jsonl")
    return {"rows": [{"modes": {"pipelined": {"traces": [str(path)]}}}]}


def test_the_fix_is_told_with_its_syncs_and_its_speed_or_why_not(tmp_path):
    bug = mask_summary(tmp_path, "bug", mask_upload_bug=True)
    lines = mask_fix_lines(bug, mask_summary(tmp_path, "fix"))
    assert lines[0].startswith("  the mask-upload fix: accidental syncs per run ") and lines[0].endswith(
        "0 fixed (a count: no noise in it)") and " 0 with the bug" not in lines[0]
    assert lines[1].startswith("  the mask-upload fix's speed: faster: ") and "95% interval" in lines[1]
    slow = mask_fix_lines(bug, mask_summary(tmp_path, "fix", forward_scale=3.7))
    assert slow[1].startswith("  the mask-upload fix's speed: cannot tell: the machine changed: forward"), slow


def test_a_fix_faster_beyond_what_its_faster_device_explains_is_still_faster(tmp_path):
    # the fix's run on a device 15% faster: the pair is not valid as a whole, but its period fell
    # by more than a faster device can give, so the story is told, and says why it still holds
    bug = mask_summary(tmp_path, "bug", mask_upload_bug=True)
    lines = mask_fix_lines(bug, mask_summary(tmp_path, "fix", forward_scale=0.85))
    assert lines[1].startswith("  the mask-upload fix's speed: faster, beyond what the device's own change "
                               "explains: median period"), lines
