"""``device_running``: a host-process worker's run-queue wait inside a gap takes the gap's
device-side parts (``dispatch`` first, then ``device_busy``), never the host's."""
from photon_trace.telemetry.analysis.attribution import Part
from photon_trace.telemetry.analysis.causes import DEPLOYMENT, Cause, who_fixes
from photon_trace.telemetry.analysis.device_running import DETAIL, MIN_RUNQ_NS, split, waited_ns
from photon_trace.telemetry.trace.records import DeviceSpan

US = 1_000


def op(t0, t1, q0=-1, q1=-1):
    return DeviceSpan("compute", "forward", 1, 0, t0, t1, t0, q0, q1)


PARTS = [Part(0, 300 * US, Cause.HOST_BOUND, "plan"), Part(300 * US, 500 * US, Cause.DEVICE_BUSY, "copy_back"),
         Part(500 * US, 900 * US, Cause.DISPATCH, "launch latency")]


def test_the_wait_takes_dispatch_from_its_end_first():
    prev, nxt = op(-10, 0, 5, 1_000), op(900 * US, 1_000 * US, 1_000 + 150 * US, 1_000 + 150 * US)
    assert waited_ns(prev, nxt) == 150 * US
    got = split(PARTS, prev, nxt)
    assert got == PARTS[:2] + [Part(500 * US, 750 * US, Cause.DISPATCH, "launch latency"),
                               Part(750 * US, 900 * US, Cause.DEVICE_DESCHEDULED, DETAIL)]
    assert who_fixes(Cause.DEVICE_DESCHEDULED) == DEPLOYMENT


def test_a_longer_wait_takes_device_busy_next_but_never_the_host():
    prev, nxt = op(-10, 0, 0, 0), op(900 * US, 1_000 * US, 10_000 * US, 0)
    got = split(PARTS, prev, nxt)
    assert got[0] == PARTS[0]                      # the host's lateness stays its own
    assert sum(p.t1 - p.t0 for p in got if p.cause == Cause.DEVICE_DESCHEDULED) == 600 * US
    assert [p.cause for p in got] == [Cause.HOST_BOUND, Cause.DEVICE_DESCHEDULED, Cause.DEVICE_DESCHEDULED]
    assert sum(p.t1 - p.t0 for p in got) == 900 * US    # the gap's total is unchanged


def test_unmeasured_or_tiny_waits_split_nothing():
    assert split(PARTS, op(-10, 0), op(900 * US, 1_000 * US)) == PARTS     # -1: a GPU, an import
    small = op(900 * US, 1_000 * US, MIN_RUNQ_NS - 1, 0)
    assert split(PARTS, op(-10, 0, 0, 0), small) == PARTS


def test_a_gap_a_sync_opened_stays_whole():
    """The sync drained the worker: its wake-up, waiting for a CPU included, is the sync's cost."""
    parts = [Part(0, 300 * US, Cause.ACCIDENTAL_SYNC, "engine.py:1")] + PARTS[1:]
    prev, nxt = op(-10, 0, 0, 0), op(900 * US, 1_000 * US, 10_000 * US, 0)
    assert split(parts, prev, nxt) == parts
