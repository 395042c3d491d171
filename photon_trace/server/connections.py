"""Connections bounded in time and number, below the ASGI app: a slow client cannot hold
the server's open files.

uvicorn closes a keep-alive connection that stays silent, but a client that trickles
its request (a header byte every few seconds, or a body that never ends) resets that
timer with every byte and is never closed; two hundred of them hold two hundred open
files. ``bounded_protocol`` is uvicorn's HTTP/1.1 protocol with three limits
(``ConnectionLimits``):

* **header timeout**: a request's headers must be complete within ``header_timeout_s``
  of the moment the server started waiting for them (the connection opened, or the
  last response ended); bytes arriving do not extend it;
* **body timeout**: its body must be complete within ``body_timeout_s`` of its headers;
* **connection limit**: at most ``max_connections`` open connections. One more evicts
  the connection that has waited longest for the rest of its request (an idle keep-alive
  or a slow client: a new client with a request to send is served, not the one that is
  not sending it); when every connection's request is in and being answered, the new one
  gets a 503.

A connection past a timeout is closed (a handler waiting for its body sees a
disconnect); once the request is received there is no limit, so a long streamed
answer is never cut.

The server accepts connections in bursts of at most its listen backlog, and a connection
closed is let go on the event loop's next turn; ``uvicorn_options`` sets the backlog to the
connection limit too, so the open files stay under about twice ``max_connections`` (and the
kernel's queue of connections not yet accepted is as short).
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADERS, BODY = "headers", "body"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout_s: float = 10.0   # from waiting for a request to its headers complete
    body_timeout_s: float = 30.0     # from the headers to the body complete (4 MiB at 140 KB/s)
    max_connections: int = 256       # open connections; each is an open file

    def __post_init__(self) -> None:
        if not (self.header_timeout_s > 0 and self.body_timeout_s > 0):
            raise ValueError("the header and body timeouts must be positive")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")


_BUSY = json.dumps({"error": {"message": "the server has too many open connections; try again",
                              "type": "service_unavailable", "param": None, "code": "too_many_connections"}}).encode()
_BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
                  b"content-length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)


class _Bounded(H11Protocol):
    """uvicorn's h11 protocol under ``limits`` (set on the subclass ``bounded_protocol`` makes)."""

    limits: ConnectionLimits = ConnectionLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._waiting: str | None = None   # HEADERS or BODY: what this connection owes; None: the app's turn
        self._since = 0.0                  # loop time the wait began
        self._timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        open_now = sum(1 for c in self.connections if not c.transport.is_closing())   # not those on their way out
        if open_now > self.limits.max_connections and not self._evict_one():
            transport.write(_BUSY_RESPONSE)
            transport.close()
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Start the clock of what the connection owes now (none once its request is in)."""
        if self.transport.is_closing():
            self._cancel()
            return
        theirs = self.conn.their_state
        owes = HEADERS if theirs is h11.IDLE else BODY if theirs is h11.SEND_BODY else None
        if owes == self._waiting:
            return                        # the same wait goes on: its deadline stands
        self._cancel()
        self._waiting, self._since = owes, self.loop.time()
        if owes is not None:
            limit = self.limits.header_timeout_s if owes == HEADERS else self.limits.body_timeout_s
            self._timer = self.loop.call_later(limit, self._expire)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.logger.info("photon_trace: closed a connection that sent no complete request %s in time",
                             self._waiting)
            self.transport.close()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for its request (headers or body); False
        if every other one has its request in."""
        waiting = [c for c in self.connections if c is not self and isinstance(c, _Bounded)
                   and c._waiting is not None and not c.transport.is_closing()]
        if not waiting:
            return False
        min(waiting, key=lambda c: c._since).transport.close()
        return True


def bounded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol under ``limits``."""
    return type("BoundedH11Protocol", (_Bounded,), {"limits": limits})


def uvicorn_options(limits: ConnectionLimits) -> dict:
    """What ``uvicorn.run`` (or ``uvicorn.Config``) takes to serve under ``limits``."""
    return {"http": bounded_protocol(limits), "backlog": limits.max_connections}
