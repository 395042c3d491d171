"""The request side of ``OtelSink``: which requests are done, what their spans say, and
when the engine had nothing to do.

Plain Python (no OpenTelemetry import): it turns request records, and the attributes a
server gives with ``attributes()``, into the GenAI semantic conventions' attributes of
one span per request, and keeps the stretches with no request in the engine, so a
step's bubble leaves them out.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from photon_trace.telemetry.trace.records import RequestRecord

ATTR = "photon_trace."
GEN_AI_PROVIDER = "photon_trace"
MAX_ATTRIBUTE_WAITS = 20   # flushes a finished request waits for attributes(final=True)


@dataclass
class RequestBuf:
    events: dict[str, tuple[int, int]] = field(default_factory=dict)   # event -> (t, tokens)
    end: int | None = None
    waits: int = 0      # flushes spent waiting for its final attributes


class RequestSpans:
    def __init__(self) -> None:
        self.bufs: dict[int, RequestBuf] = {}
        self._done: list[int] = []
        self._attrs: dict[int, dict] = {}        # attributes() by request id
        self._final: set[int] = set()            # ... of requests whose outcome is known
        self._lock = threading.Lock()            # attributes() comes from the server's threads
        self._idle: deque[tuple[int, int]] = deque(maxlen=4096)   # no request in the engine
        self._active: set[int] = set()
        self._idle_since: int | None = None

    def attributes(self, req_id: int, attrs: dict, final: bool = False) -> None:
        with self._lock:
            self._attrs.setdefault(req_id, {}).update(attrs)
            if final:
                self._final.add(req_id)

    def event(self, q: RequestRecord) -> list[tuple[int, RequestBuf]]:
        """Take one record; returns finished requests to export now (an id used again: a replaced
        engine numbers its requests from 0 again)."""
        out = []
        if q.event == "arrival":
            old = self.bufs.get(q.req_id)
            if old is not None and old.events:
                del self.bufs[q.req_id]
                if old.end is not None:
                    self._done.remove(q.req_id)
                    out.append((q.req_id, old))
            if not self._active and self._idle_since is not None:
                self._idle.append((self._idle_since, q.t))
            self._active.add(q.req_id)
        b = self.bufs.setdefault(q.req_id, RequestBuf())
        b.events.setdefault(q.event, (q.t, q.tokens))
        if q.event in ("finalized", "aborted") and b.end is None:
            b.end = q.t
            self._done.append(q.req_id)
            self._active.discard(q.req_id)
            if not self._active:
                self._idle_since = q.t
        return out

    def busy_gap(self, t0: int, t1: int) -> int:
        """Device idle in [t0, t1] less the stretches with no request in the engine."""
        gap = t1 - t0
        for i0, i1 in self._idle:
            if i0 < t1 and t0 < i1:
                gap -= min(t1, i1) - max(t0, i0)
        return max(0, gap)

    def ready(self, exported_until: int, final: bool) -> list[tuple[int, RequestBuf]]:
        """Finished requests to export: once the steps up to their end are exported (so links can
        point at them) and the server said how they ended (if it labels them at all)."""
        out, keep = [], []
        for req_id in self._done:
            b = self.bufs[req_id]
            with self._lock:
                pending = req_id in self._attrs and req_id not in self._final
            if pending:
                b.waits += 1
            if final or (b.end <= exported_until and (not pending or b.waits > MAX_ATTRIBUTE_WAITS)):
                out.append((req_id, self.bufs.pop(req_id)))
            else:
                keep.append(req_id)
        self._done = keep
        if final:
            self.bufs.clear()
        return out

    def span(self, req_id: int, b: RequestBuf, operation: str, model: str) -> tuple[str, dict] | None:
        """The span's name and attributes; None for a request without its arrival or end."""
        with self._lock:
            given = self._attrs.pop(req_id, {})
            self._final.discard(req_id)
        e = b.events
        start = e.get("arrival") or e.get("admitted")
        if start is None or b.end is None:
            return None
        end_event = e.get("finalized") or e.get("aborted")
        attrs = {"gen_ai.operation.name": operation, "gen_ai.request.model": model,
                 "gen_ai.provider.name": GEN_AI_PROVIDER, ATTR + "request_id": req_id,
                 "gen_ai.usage.input_tokens": start[1], "gen_ai.usage.output_tokens": end_event[1]}
        if "aborted" in e and "finalized" not in e:
            attrs["gen_ai.response.finish_reasons"] = ["abort"]
        if "first_token" in e:
            attrs[ATTR + "time_to_first_token_s"] = (e["first_token"][0] - start[0]) / 1e9
        attrs.update(given)
        return f"{attrs['gen_ai.operation.name']} {model}", attrs

    def oldest_open(self, default: int) -> int:
        """When the earliest request still open became active."""
        return min((r.events.get("admitted", r.events.get("arrival", (default, 0)))[0]
                    for r in self.bufs.values() if r.events), default=default)
