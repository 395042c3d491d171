"""One vocabulary of causes: ``Cause`` names each cause once, its serialised key stays what every
output has always written, and every consumer that lists causes has each of them (a new cause
fails here until its colour is added)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from photon_trace.dashboard.glossary import define
from photon_trace.dashboard.timeline.data import BUBBLE_CAUSES, BUBBLE_COLOURS, bubble_name
from photon_trace.server.metrics import ServerMetrics
from photon_trace.telemetry.analysis.causes import (
    ANOTHER_THREAD, DEPLOYMENT, DEVICE_SIDE, HOST_CODE, HOST_LATE, Cause, cause_label, fixable_by_host, who_fixes)

# The serialised form: JSON reports, check's Markdown and JUnit, Prometheus labels, Perfetto args.
KEYS = ["host_bound", "commit_wait", "accidental_sync", "copy_wait", "stream_wait", "device_busy", "dispatch",
        "host_descheduled", "host_blocked", "device_descheduled"]
LABELS = ["host-bound launch", "expected commit wait", "accidental sync", "copy wait", "wait on another stream",
          "device busy on another stream", "device dispatch", "host descheduled", "host blocked",
          "device descheduled"]


def test_each_cause_keeps_its_key_and_its_words_in_order():
    assert [c.value for c in Cause] == KEYS
    assert [c.label for c in Cause] == LABELS
    assert [cause_label(k) for k in KEYS] == LABELS


def test_a_cause_is_written_as_its_key_everywhere():
    for c, key in zip(Cause, KEYS):
        assert c == key and hash(c) == hash(key) and {key: 1}[c] == 1
        assert str(c) == f"{c}" == "%s" % c == key
        assert f"{c:<16}" == f"{key:<16}"                     # the import command's aligned table
        assert json.dumps({c: [c]}) == json.dumps({key: [key]})
        assert Cause(key) is c


def test_who_can_fix_each_cause():
    host = {c for c in Cause if c.fixable_by_host}
    # a wait on another stream is the device's (an NCCL kernel waiting on other ranks), not host code's (issue 30)
    assert host == {Cause.HOST_BOUND, Cause.COMMIT_WAIT, Cause.ACCIDENTAL_SYNC, Cause.COPY_WAIT}
    # the host not running is no code's in the phase: the machine's (descheduled) or another thread's (blocked);
    # a host-process device's worker waiting for a CPU with work queued is the machine's too
    not_running = {Cause.HOST_DESCHEDULED: DEPLOYMENT, Cause.HOST_BLOCKED: ANOTHER_THREAD}
    device_not_running = {Cause.DEVICE_DESCHEDULED: DEPLOYMENT}
    assert all(c.who_fixes == (HOST_CODE if c in host else {**not_running, **device_not_running}.get(c, DEVICE_SIDE))
               for c in Cause)
    assert (HOST_CODE, DEVICE_SIDE) == ("host code", "device-side latency")
    assert (DEPLOYMENT, ANOTHER_THREAD) == ("the deployment", "another thread")
    assert {c.part for c in not_running} == {HOST_LATE} and not any(c.part == HOST_LATE for c in device_not_running)
    # the lookups take a key as read back from JSON too
    assert [fixable_by_host(k) for k in KEYS] == [c.fixable_by_host for c in Cause]
    assert [who_fixes(k) for k in KEYS] == [c.who_fixes for c in Cause]


def test_the_queued_causes_are_what_the_device_makes_of_a_gap():
    assert {c for c in Cause if c.queued} == {Cause.COPY_WAIT, Cause.STREAM_WAIT, Cause.DEVICE_BUSY, Cause.DISPATCH,
                                              Cause.DEVICE_DESCHEDULED}


def test_a_cause_we_do_not_know_keeps_its_key():
    assert cause_label("cosmic_rays") == "cosmic rays"
    assert fixable_by_host("cosmic_rays") and who_fixes("cosmic_rays") == HOST_CODE


def test_reports_rank_host_code_first_then_the_host_not_running_then_the_device():
    from photon_trace.telemetry.analysis.diagnosis import Diagnosis, ranked
    rows = [Diagnosis(c, "x", 100 - i, 0.1, 1.1) for i, c in enumerate(
        [Cause.DISPATCH, Cause.HOST_DESCHEDULED, Cause.COMMIT_WAIT, Cause.HOST_BLOCKED, Cause.HOST_BOUND])]
    assert [d.cause for d in ranked(rows)] == [Cause.COMMIT_WAIT, Cause.HOST_BOUND, Cause.HOST_BLOCKED,
                                               Cause.HOST_DESCHEDULED, Cause.DISPATCH]


def test_the_dashboard_has_a_colour_and_a_legend_entry_for_every_cause():
    assert set(BUBBLE_COLOURS) == set(Cause)
    assert BUBBLE_CAUSES == tuple(Cause)
    assert [bubble_name(c) for c in Cause] == [f"bubble: {label}" for label in LABELS]


def test_the_glossary_names_every_cause():
    definition = define("cause")
    assert all(c.label in definition for c in Cause), definition
    assert all(f"'{who}'" in define("who can fix it") for who in (HOST_CODE, DEVICE_SIDE, DEPLOYMENT, ANOTHER_THREAD))


def test_the_metrics_export_every_cause_from_the_start():
    text = ServerMetrics(SimpleNamespace(engine=None, status="ok", restarts=0)).render().decode()
    for family in ("photon_bubbles_total", "photon_bubble_seconds_total"):
        assert [line.split()[0] for line in text.splitlines() if line.startswith(family + "{")] == [
            f'{family}{{cause="{key}"}}' for key in KEYS]
