"""The door every request passes: an ASGI middleware in front of the routes.

It gives each request an id (the ``X-Request-Id`` response header; errors are
logged with it, and 5xx bodies quote it), refuses what must not reach a handler,
and answers any error the handlers did not, without dropping the connection:

* ``Host`` not in ``allowed_hosts`` (when set: the server runs without an API key,
  so a web page the user visits must not reach it through DNS rebinding): 403;
* ``/v1/*`` and ``/metrics`` (call sites, counts) without the API key (when there is
  one): 401, before anything else is looked at. ``/health`` answers without it (a load
  balancer's probe has no key), but then only its status: the route reads
  ``request.state.key_ok``;
* a state-changing request (POST) from a browser on another origin (an ``Origin``
  header naming another host): 403; a POST whose body is not declared
  ``application/json`` (a ``text/plain`` POST is a CORS "simple" request a page
  may send anywhere without asking): 415;
* a body over ``max_body_bytes``, declared or streamed: 413, before it is parsed;
* an exception a handler let escape: a 500 with an OpenAI error body. Starlette's
  catch-all re-raises after answering, which closes the keep-alive connection;
  this one does not. (A streamed response that already started cannot change its
  status; it ends there.) A client that goes away before its body is in (or is closed
  for sending it too slowly: ``connections.py``) is no error: there is nobody to answer.

It also counts every response by route and status for ``/metrics``.
"""
from __future__ import annotations

import json
import logging
import secrets
import uuid
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect

from photon_trace.hosts import LOOPBACK_HOSTS, host_name, same_origin
from photon_trace.server.errors import AUTHENTICATION, SERVER_ERROR, APIError

log = logging.getLogger(__name__)

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
KEYED_PATHS = ("/v1/", "/metrics")   # what needs the key, when there is one (prefixes)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "LOOPBACK_HOSTS", "Guard", "host_name", "new_request_id"]


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


class Guard:
    """``app`` behind the checks above. ``count(scope, status)`` is called once per response."""

    def __init__(self, app, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 allowed_hosts: frozenset[str] | None = LOOPBACK_HOSTS, api_key: str | None = None,
                 count: Callable[[dict, int], None] | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = allowed_hosts
        self.api_key = api_key.encode() if api_key is not None else None
        self.count = count

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = new_request_id()
        headers = Headers(scope=scope)
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        state["key_ok"] = self.api_key is None or self._key_ok(headers)
        started = False

        async def send_with_id(message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", rid.encode())]}
                if self.count is not None:
                    self.count(scope, message["status"])
            await send(message)

        refusal = self.refuse(scope, headers)
        if refusal is not None:
            await _send_error(send_with_id, refusal)
            return
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _too_large(self.max_body_bytes)
            return message

        try:
            await self.app(scope, limited_receive, send_with_id)
        except ClientDisconnect:   # gone before its body was in (or closed by a timeout): nobody to answer
            log.info("photon_trace: request %s: the client went away before its request was in", rid)
        except Exception as e:
            if started:   # a stream already under way: it ends here; the log says why
                log.exception("photon_trace: request %s: error after the response started", rid)
                return
            if isinstance(e, APIError):
                await _send_error(send_with_id, e)
                return
            log.exception("photon_trace: request %s: unhandled error on %s %s", rid, scope["method"],
                          scope["path"])
            await _send_error(send_with_id, APIError(
                500, f"internal error (request id {rid}; the server log has the details)", type=SERVER_ERROR))

    def refuse(self, scope, headers: Headers) -> APIError | None:
        host = host_name(headers.get("host", ""))
        if self.allowed_hosts is not None and host not in self.allowed_hosts:
            return APIError(403, f"the Host header {host!r} is not one this server answers to (it has no API key, "
                                 f"so it answers only to --allowed-hosts)", code="host_not_allowed")
        if self.api_key is not None and scope["path"].startswith(KEYED_PATHS) and not scope["state"]["key_ok"]:
            return APIError(401, "Incorrect or missing API key (send 'Authorization: Bearer KEY')",
                            type=AUTHENTICATION, code="invalid_api_key")
        if scope["method"] not in STATE_CHANGING:
            return None
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, headers.get("host", "")):
            return APIError(403, "cross-origin requests are refused (the Origin header names another site)",
                            code="cross_origin")
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return APIError(415, f"the body must be sent as Content-Type: application/json, got {ctype or 'none'!r}",
                            code="unsupported_media_type")
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return _too_large(self.max_body_bytes)
        return None

    def _key_ok(self, headers: Headers) -> bool:
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
        return secrets.compare_digest(token.encode(), self.api_key)


def _too_large(limit: int) -> APIError:
    return APIError(413, f"the request body is larger than this server takes ({limit} bytes; see --max-body-bytes)",
                    code="body_too_large")


async def _send_error(send, e: APIError) -> None:
    body = json.dumps(e.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": e.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
