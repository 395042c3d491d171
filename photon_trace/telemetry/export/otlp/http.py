"""OTLP/HTTP export split in two: spans collected and encoded in pieces (in the engine's
device waits), the encoded request POSTed on the sink's own thread, bounded and abortable.

Why not the SDK's ``BatchSpanProcessor`` + ``OTLPSpanExporter``: the processor's
thread encodes the spans (Python, ~20-40 us a span) before it sends them, and a
thread in the engine's process that runs Python takes the GIL from the engine
for up to a switch interval each time (recording/recorder.py). Here ``SpanCollector``
only keeps ended spans, ``encode`` turns them into an ``ExportTraceServiceRequest``
a few spans at a time (serialised pieces concatenate into one valid message:
``resource_spans`` is a repeated field), and ``OtlpHttp.post`` sends bytes with
``http.client``, whose socket I/O releases the GIL.

Configuration, read like the SDK exporter reads it: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
(used as is) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces`` (default
``http://localhost:4318/v1/traces``); ``..._HEADERS`` (``k=v,k2=v2``, URL-encoded);
``..._TIMEOUT`` (seconds per request, retries included; default 10);
``..._COMPRESSION`` (``gzip``, ``deflate``, ``none``); ``..._CERTIFICATE``,
``..._CLIENT_CERTIFICATE``, ``..._CLIENT_KEY`` for TLS. Each variable may be set
for traces (``OTEL_EXPORTER_OTLP_TRACES_*``) or for every signal (``OTEL_EXPORTER_OTLP_*``).
Transient failures (connection errors, HTTP 429/502/503/504) are retried with
exponential backoff, honouring ``Retry-After``, until the request's timeout.
"""
from __future__ import annotations

import gzip
import http.client
import os
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Generator

ENCODE_PIECE = 2          # spans encoded per piece: ~20-80 us
MAX_REQUEST_SPANS = 512   # spans per POST
_RETRYABLE = frozenset({429, 502, 503, 504})
_DEFAULT_ENDPOINT = "http://localhost:4318"
_DEFAULT_TIMEOUT_S = 10.0


class ExportError(Exception):
    """A request that failed for good (or was aborted); its spans are lost."""


def preload() -> None:
    """Import what span building and encoding need (tens of ms), ahead of the first flush."""
    import opentelemetry.exporter.otlp.proto.common.trace_encoder  # noqa: F401
    import opentelemetry.sdk.resources  # noqa: F401
    import opentelemetry.sdk.trace  # noqa: F401


def span_collector():
    """An SDK span processor that only keeps ended spans (``take()`` hands them over)."""
    from opentelemetry.sdk.trace import SpanProcessor

    class SpanCollector(SpanProcessor):
        def __init__(self) -> None:
            self._spans: list = []

        def on_end(self, span) -> None:
            self._spans.append(span)

        def take(self) -> list:
            spans, self._spans = self._spans, []
            return spans

    return SpanCollector()


def encode(spans: list) -> Generator[None, None, list[tuple[bytes, int]]]:
    """``spans`` as serialised ``ExportTraceServiceRequest`` bodies of at most
    ``MAX_REQUEST_SPANS`` spans each, with their span counts; yields after each piece."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    requests = []
    for lo in range(0, len(spans), MAX_REQUEST_SPANS):
        batch = spans[lo:lo + MAX_REQUEST_SPANS]
        parts = []
        for i in range(0, len(batch), ENCODE_PIECE):
            parts.append(encode_spans(batch[i:i + ENCODE_PIECE]).SerializePartialToString())
            yield
        requests.append((b"".join(parts), len(batch)))
    return requests


def _env(name: str) -> str | None:
    return os.environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or os.environ.get(f"OTEL_EXPORTER_OTLP_{name}")


def _headers_from_env(raw: str) -> dict[str, str]:
    out = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[urllib.parse.unquote(key.strip()).lower()] = urllib.parse.unquote(value.strip())
    return out


class OtlpHttp:
    """POSTs encoded trace requests to an OTLP/HTTP endpoint (module docstring)."""

    def __init__(self, endpoint: str | None = None, headers: dict[str, str] | None = None,
                 timeout_s: float | None = None, compression: str | None = None) -> None:
        if endpoint is None:
            endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or \
                (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _DEFAULT_ENDPOINT).rstrip("/") + "/v1/traces"
        self.endpoint = endpoint
        url = urllib.parse.urlsplit(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"OTLP endpoint {endpoint!r} is not an http(s) URL")
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname, url.port
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self.headers = _headers_from_env(_env("HEADERS") or "")
        self.headers.update({k.lower(): v for k, v in (headers or {}).items()})
        if timeout_s is None:
            try:
                timeout_s = float(_env("TIMEOUT") or _DEFAULT_TIMEOUT_S)
            except ValueError:
                timeout_s = _DEFAULT_TIMEOUT_S
        self.timeout_s = timeout_s
        self.compression = (compression or _env("COMPRESSION") or "none").strip().lower()
        if self.compression not in ("none", "gzip", "deflate"):
            self.compression = "none"
        self._conn: http.client.HTTPConnection | None = None
        self._aborted = threading.Event()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def post(self, body: bytes, timeout_s: float | None = None) -> None:
        """Send one request, retrying transient failures until ``timeout_s`` (default: the
        configured timeout) has passed; raises ``ExportError`` when it gives up."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        headers = {"Content-Type": "application/x-protobuf", "User-Agent": "photon_trace-otlp-http"}
        headers.update(self.headers)
        if self.compression == "gzip":
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        elif self.compression == "deflate":
            body, headers["Content-Encoding"] = zlib.compress(body), "deflate"
        backoff = 0.5
        while True:
            if self._aborted.is_set():
                raise ExportError("export aborted")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ExportError(f"no answer from {self.endpoint} within the timeout")
            retry_after = None
            try:
                conn = self._connection(left)
                conn.request("POST", self._path, body=body, headers=headers)
                resp = conn.getresponse()
                content = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self._reset()
                if self._aborted.is_set():
                    raise ExportError("export aborted") from e
                why = f"{type(e).__name__}: {e}"
            else:
                if 200 <= resp.status < 300:
                    return
                why = f"HTTP {resp.status}: {content[:200]!r}"
                if resp.status not in _RETRYABLE:
                    raise ExportError(f"{self.endpoint} refused the spans: {why}")
                value = resp.getheader("Retry-After")
                retry_after = float(value) if value and value.strip().isdigit() else None
            pause = retry_after if retry_after is not None else backoff
            backoff *= 2
            if time.monotonic() + pause >= deadline:
                raise ExportError(f"gave up on {self.endpoint} after the timeout ({why})")
            if self._aborted.wait(pause):
                raise ExportError("export aborted")

    def abort(self) -> None:
        """Stop retrying and end a request in flight (from any thread)."""
        self._aborted.set()
        conn = self._conn
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._reset()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                ctx = ssl.create_default_context(cafile=_env("CERTIFICATE"))
                cert = _env("CLIENT_CERTIFICATE")
                if cert:
                    ctx.load_cert_chain(cert, _env("CLIENT_KEY"))
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=ctx)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        conn = self._conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _reset(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
