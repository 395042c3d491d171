"""The trace file as a recorder sink: its lines encoded in the engine's device waits,
written on the sink's own thread (sink_port.py).

What the lines are, and how a file is framed and loaded, is the trace layer's
(``trace/file.py``); this is when and where they are made and written while the engine runs.
"""
from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

from photon_trace.telemetry.trace.file import chunk_lines, encode_line, end_line
from photon_trace.telemetry.trace.line_file import LineFile, WriteStopped
from photon_trace.telemetry.trace.pieces import run_to_end
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk


class TraceFileWriter:
    """Sink that appends a trace file while the engine runs (see ``trace/file.py``).

    ``path`` ending in ``.gz`` writes gzip. The header line is written on open
    (the recorder's first flush), one chunk line per non-empty flush, and the end
    line on close. In a recorder, the JSON is encoded by ``prepare`` in pieces (in the
    engine's device waits) and the file written by ``deliver`` on the sink's thread;
    ``open``/``write``/``close`` do both at once, for direct use.

    A write the disk refuses (full, a quota) ends the file with a line saying why and how
    many records it holds (``trace/line_file.py``), and raises ``WriteStopped`` with a
    one-line message: the sink is detached, the engine runs on."""

    keeps_trace = True
    drop_key = "trace_file.records"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._out: LineFile | None = None
        self._counts = dict.fromkeys(RECORD_KINDS, 0)   # records written (the end line's counts)

    def open(self, header: dict) -> None:
        self.deliver("open", run_to_end(self.prepare("open", header)))

    def write(self, chunk: Chunk) -> None:
        self.deliver("write", run_to_end(self.prepare("write", chunk)))

    def close(self) -> None:
        self.deliver("close", None)

    def prepare(self, event: str, arg) -> Generator[None, None, tuple[bytes, dict] | None]:
        """The lines for ``event`` as bytes (and the records they hold), JSON-encoded
        ``PIECE`` rows at a time."""
        if event == "open":
            return encode_line(arg), {}
        if event != "write":
            return None
        return (yield from chunk_lines(arg))

    def deliver(self, event: str, payload: tuple[bytes, dict] | None) -> None:
        """Write prepared lines (opening the file first, ending it on close)."""
        if event == "open":
            self._out = LineFile(self.path)
        if self._out is None:
            return
        if event == "close":
            payload = end_line(self._counts), {}
        try:
            if payload is not None:
                data, counts = payload
                self._out.write(data, counts)
                for kind, n in counts.items():
                    self._counts[kind] += n
        except WriteStopped as e:
            out, self._out = self._out, None
            try:
                said = out.stop()
            finally:
                out.close()
            raise WriteStopped(e.errno, f"the trace file {self.path} stopped: {said['why']} ({said['error']}); "
                                        f"it ends with a line saying so, after "
                                        f"{sum(said['records'].values())} records") from None
        if event == "close":
            self._out.close()
            self._out = None
