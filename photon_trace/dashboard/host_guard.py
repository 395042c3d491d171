"""The dashboard's door: a WSGI middleware in front of Dash's Flask app, as the server's
``Guard`` is in front of its routes (the reasons are ``hosts.py``'s).

The page lists the allowed folders' trace files and opens any of them on request, so
a web page that rebinds its own name to 127.0.0.1 must not reach it:

* ``Host`` not one of ``allowed_hosts``: 403 (the loopback names and the address the
  dashboard listens on by default; ``--allowed-hosts`` to change);
* a state-changing request (every Dash callback is a POST) whose ``Origin`` names
  another site: 403; one whose body is not declared ``application/json`` (a
  ``text/plain`` POST is one any page may send without asking): 415.

Refusals are JSON and say what was refused, never what the dashboard holds.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from photon_trace.hosts import LOOPBACK_HOSTS, host_name, same_origin

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class HostGuard:
    """``app`` (a WSGI app) answering only to ``allowed_hosts``, and to state-changing
    requests only from its own origin."""

    def __init__(self, app: Callable, allowed_hosts: Iterable[str] = LOOPBACK_HOSTS) -> None:
        self.app = app
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        refusal = self.refuse(environ)
        if refusal is None:
            return self.app(environ, start_response)
        status, code, message = refusal
        body = json.dumps({"error": {"message": message, "code": code}}).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def refuse(self, environ: dict) -> tuple[str, str, str] | None:
        """``(status, code, message)`` for a request the dashboard must not answer, else None."""
        host = environ.get("HTTP_HOST", "")
        if host_name(host) not in self.allowed_hosts:
            return ("403 Forbidden", "host_not_allowed",
                    f"the Host header {host_name(host)!r} is not one this dashboard answers to (--allowed-hosts)")
        if environ.get("REQUEST_METHOD", "GET") not in STATE_CHANGING:
            return None
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and not same_origin(origin, host):
            return "403 Forbidden", "cross_origin", "cross-origin requests are refused (the Origin header names another site)"
        ctype = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return ("415 Unsupported Media Type", "unsupported_media_type",
                    f"the body must be sent as Content-Type: application/json, got {ctype or 'none'!r}")
        return None
