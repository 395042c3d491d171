"""The recorder's sinks, each behind its port (sink_port.py): handing them chunks, counting
what they lose, and closing them in a bounded time.

Handing: a sink with ``prepare`` has its CPU part run by the caller, in pieces (the
recorder's cycle, in the engine's device waits), and its payload queued for
``deliver``; any other sink gets the chunk itself queued for ``write``.

Losses, in each sink's own unit, keyed ``"<sink>.<unit>"``: chunks a full queue
dropped, what was queued or in flight when the sink was given up on, and what the
sink itself reports as ``lost`` (exports that failed). ``new_drops`` returns what
was not yet reported, for the next chunk's ``dropped``: that is how it reaches the
trace file's header.

Closing, in two waves under one deadline: first the sinks that do not hold the
trace (OTLP, user sinks); then a last chunk carrying their losses goes to the ones
that do (file, memory, live), and those close. A sink still busy at its wave's
deadline is abandoned (``abort()`` called if it has one, e.g. to end a hung HTTP
request) and what it did not take is counted.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Generator

from photon_trace.telemetry.recording.sink_port import SinkPort
from photon_trace.telemetry.trace.pieces import run_to_end
from photon_trace.telemetry.trace.records import Chunk

log = logging.getLogger(__name__)


class SinkSet:
    def __init__(self) -> None:
        self.ports: list[SinkPort] = []      # attached
        self.all_ports: list[SinkPort] = []  # detached ones too: their losses still count
        self.errors: list[str] = []
        self.dropped: dict[str, int] = {}    # losses so far, by key
        self._reported: dict[str, int] = {}

    def attach(self, sink) -> SinkPort:
        name, unit = getattr(sink, "drop_key", f"{type(sink).__name__}.records").rsplit(".", 1)
        port = SinkPort(sink, name, unit, _caller(sink), self._failed)
        self.ports.append(port)
        self.all_ports.append(port)
        return port

    def hand(self, port: SinkPort, event: str, arg) -> Generator:
        """Give ``port`` an open/write/close: prepared by the caller (in pieces) if the sink prepares."""
        sink = port.sink
        weight = len(arg) if event == "write" else 0
        if port.failed or port.abandoned:
            port.submit(event, None, weight)   # not prepared for nothing: only counted
            return
        if hasattr(sink, "prepare"):
            try:
                arg = yield from sink.prepare(event, arg)
            except Exception as e:
                self._failed(port, event, e)
                return
            weigh = getattr(sink, "weigh", None)
            if weigh is not None and event != "open":
                weight = weigh(arg)
        port.submit(event, arg, weight)

    def hand_all(self, chunk: Chunk, opening: dict | None) -> Generator:
        """Open every sink first if ``opening`` (the header), then hand each the chunk."""
        for port in list(self.ports):
            if opening is not None:
                yield from self.hand(port, "open", opening)
            yield from self.hand(port, "write", chunk)

    def wait_idle(self, deadline: float) -> None:
        for port in list(self.ports):
            port.wait_idle(deadline)

    def new_drops(self) -> dict[str, int]:
        """Losses since the last call (the next chunk's ``dropped``)."""
        total: dict[str, int] = {}
        for port in self.all_ports:
            total[port.key] = total.get(port.key, 0) + port.dropped + int(getattr(port.sink, "lost", 0) or 0)
        new = {k: n - self._reported.get(k, 0) for k, n in total.items() if n > self._reported.get(k, 0)}
        self._reported.update({k: total[k] for k in new})
        self.dropped = {k: n for k, n in total.items() if n}
        return new

    def close(self, deadline: float, reserve_s: float, next_seq: Callable[[], int]) -> None:
        """Close in two waves (module docstring); the trace's own sinks get ``reserve_s`` at the end."""
        keepers = [p for p in self.ports if getattr(p.sink, "keeps_trace", False)]
        others = [p for p in self.ports if p not in keepers]
        self._close(others, deadline - reserve_s)
        lost = self.new_drops()
        if lost and keepers:
            last = Chunk(seq=next_seq(), dropped=lost)
            for port in keepers:
                run_to_end(self.hand(port, "write", last))
        self._close(keepers, deadline)
        self.new_drops()

    def _close(self, ports: list[SinkPort], deadline: float) -> None:
        for port in ports:
            run_to_end(self.hand(port, "close", None))
        for port in ports:
            if port.wait_idle(deadline) or port.failed:
                continue
            lost = port.abandon()
            abort = getattr(port.sink, "abort", None)
            if abort is not None:
                try:
                    abort()
                except Exception:
                    log.exception("photon_trace: aborting %s failed", type(port.sink).__name__)
            log.warning("photon_trace: %s did not finish by the close deadline; gave up on it, %d %s dropped",
                        type(port.sink).__name__, lost, port.key.rsplit(".", 1)[1])

    def _failed(self, port: SinkPort, event: str, exc: BaseException) -> None:
        """A sink call raised: report it once and detach the sink; the engine keeps running.
        The machine failing the sink (a full disk, a refused connection: an ``OSError``) is one
        line that says what failed; anything else is a bug, reported with its traceback."""
        if isinstance(exc, OSError):
            msg = f"{type(port.sink).__name__}.{event} failed: {exc.strerror or exc}; sink detached"
            log.error("photon_trace: %s", " ".join(msg.split()))
        else:
            msg = f"{type(port.sink).__name__}.{event} failed: {exc!r}; sink detached"
            log.error("photon_trace: %s", msg, exc_info=exc)
        self.errors.append(msg)
        port.failed = True
        if port in self.ports:
            self.ports.remove(port)


def _caller(sink):
    """What a sink's thread runs for each queued item."""
    if hasattr(sink, "prepare"):
        return sink.deliver

    def call(event: str, arg) -> None:
        if event == "close":
            sink.close()
        else:
            getattr(sink, event)(arg)
    return call
