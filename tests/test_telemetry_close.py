"""Closing never hangs: an OTLP endpoint that never answers, a sink whose write blocks.
``close()`` returns within ``close_timeout_s`` (plus converting what is left in the rings),
gives up on the stuck sink, and the trace file says what that sink never got."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.recording.sink_port import SinkPort
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.tracer import TraceLevel
from helpers.loop_sim import SyntheticRun, VirtualClock, drive
from helpers.waiting import wait_until

CLOSE_S = 1.0
# The stated bound is close_timeout_s plus converting what is left in the rings (milliseconds
# here; 0.75 s measured for both cases). Without it each case would hang for 10 minutes or
# forever; the slack only keeps a slow machine from failing a close that is bounded.
GENEROUS_S = CLOSE_S + 10.0


class HungEndpoint:
    """A local socket that accepts connections and never answers (nor reads)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.accepted:
            c.close()


class BlockingSink:
    """A plain sink whose write blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def open(self, header) -> None:
        pass

    def write(self, chunk) -> None:
        self.entered.set()
        self.release.wait()

    def close(self) -> None:
        pass


def record(tracer: RecordingTracer, steps: int, seed: int = 0) -> None:
    """A synthetic run's tracer calls, on a thread named like the engine's."""
    th = threading.Thread(target=drive, args=(tracer, SyntheticRun(steps=steps, seed=seed), VirtualClock()),
                          name="scheduler")
    th.start()
    th.join()


def test_close_is_bounded_when_the_otlp_endpoint_never_answers(tmp_path, monkeypatch):
    pytest.importorskip("opentelemetry.sdk")
    from photon_trace.telemetry.export.otlp.sink import OtelSink

    hung = HungEndpoint()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", hung.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600")
    otel = OtelSink(every_n_steps=1, shutdown_timeout_s=600)
    path = tmp_path / "run.trace.jsonl"
    tracer = RecordingTracer(TraceLevel.ON, sinks=[TraceFileWriter(path), otel], flush_interval_s=None,
                             close_timeout_s=CLOSE_S, nvtx=False)
    try:
        record(tracer, steps=20)
        tracer.flush()                     # the first export is now stuck in its request
        wait_until(lambda: hung.accepted, what="the export's connection")
        t0 = time.monotonic()
        tracer.close()
        took = time.monotonic() - t0
        port = next(p for p in tracer.sink_ports if p.sink is otel)
        wait_until(lambda: not port._thread.is_alive(), what="the aborted request's thread to end")
    finally:
        hung.close()
    assert took < GENEROUS_S, f"close took {took:.1f} s"
    trace = load_trace(path)
    assert otel.spans_prepared > 20
    assert trace.header["dropped"] == {"otlp.spans": otel.spans_prepared}
    assert "incomplete" not in trace.header and len(trace.steps) == 20   # the file itself is whole
    assert tracer.sink_errors == []


def test_close_is_bounded_with_a_sink_whose_write_blocks(tmp_path):
    blocking = BlockingSink()
    path = tmp_path / "run.trace.jsonl"
    tracer = RecordingTracer(TraceLevel.ON, sinks=[TraceFileWriter(path), blocking], flush_interval_s=None,
                             close_timeout_s=CLOSE_S, nvtx=False)
    try:
        record(tracer, steps=10)
        first = tracer.flush()             # its write blocks the sink's thread
        assert blocking.entered.wait(GENEROUS_S)
        record(tracer, steps=10, seed=1)   # the engine's side goes on regardless
        t0 = time.monotonic()
        tracer.close()
        took = time.monotonic() - t0
    finally:
        blocking.release.set()
    assert took < GENEROUS_S, f"close took {took:.1f} s"
    trace = load_trace(path)
    recorded = sum(len(getattr(trace, k)) for k in ("host_spans", "device_spans", "waits", "steps", "requests"))
    assert len(first) > 0 and trace.header["dropped"] == {"BlockingSink.records": recorded}
    assert "incomplete" not in trace.header and len(trace.steps) == 20


def test_a_sink_that_falls_behind_drops_what_does_not_fit_and_counts_it():
    gate = threading.Event()
    calls = []

    def call(event, item):
        calls.append((event, item))
        gate.wait()

    port = SinkPort(object(), "slow", "records", call, lambda *a: None, max_queued=2)
    try:
        assert port.submit("write", "a", 10)
        wait_until(lambda: calls, what="the first write to start")
        assert port.submit("write", "b", 20) and port.submit("write", "c", 30)
        assert not port.submit("write", "d", 40) and port.dropped == 40      # the queue holds two
        assert port.submit("close", None)                                      # a close is never dropped
        assert not port.wait_idle(time.monotonic() + 0.05)
        assert port.abandon() == 10 + 20 + 30 and port.dropped == 100
    finally:
        gate.set()
    assert not port.submit("write", "e", 5) and port.dropped == 105
