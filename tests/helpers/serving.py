"""A real uvicorn server on a thread, on an ephemeral loopback port: for tests and benchmarks;
``tiny_server``: the tiny preset on the CPU backend served, as the server tests use it;
``left_clean``: what a module that shares the session's server leaves behind."""
from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from helpers.waiting import wait_until


class ServerThread:
    """``with ServerThread(app) as srv: httpx.get(srv.url + "/health")``."""

    def __init__(self, app, host: str = "127.0.0.1", startup_timeout_s: float = 300.0, port: int = 0) -> None:
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))   # a given port: a "restarted" server at the same address
        self.host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]},
                                        name="uvicorn", daemon=True)
        self.startup_timeout_s = startup_timeout_s

    def start(self) -> ServerThread:
        self._thread.start()
        def up() -> bool:
            if not self._thread.is_alive():
                raise RuntimeError("the server stopped during start-up")
            return self.server.started

        wait_until(up, self.startup_timeout_s, "the server starting")
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout_s)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def metric_samples(url: str, **client) -> dict[str, float]:
    """Every sample of ``url``/metrics by ``name{label=value,...}``, parsed with prometheus_client's parser."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30, **client).text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def wait_idle(url: str, timeout_s: float = 60.0, **client) -> dict:
    """/health once the engine has nothing left: no request running, waiting or streaming."""
    import httpx

    def idle():
        h = httpx.get(url + "/health", timeout=30, **client).json()
        return h if h.get("running") == 0 and h.get("waiting") == 0 and h.get("streams") == 0 else None
    return wait_until(idle, timeout_s, "the engine going idle")


def sse_data(lines) -> list[str]:
    """The ``data:`` payloads of a server-sent-event body, in order (``[DONE]`` included)."""
    return [line[len("data: "):] for line in lines if line.startswith("data: ")]


@contextmanager
def serving(engine, **app_kwargs) -> Iterator[ServerThread]:
    """``create_app(engine, **app_kwargs)`` served on an ephemeral loopback port for the block."""
    from photon_trace.server.api import create_app

    srv = ServerThread(create_app(engine, **app_kwargs)).start()
    try:
        yield srv
    finally:
        srv.stop()


# The tiny preset on the CPU backend, sized for the server tests: 16 rows, a 256-token context.
TINY_SERVER = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
                   kv_tokens=2048, page_size=8, max_context=256)


@contextmanager
def tiny_server(api_key: str | None = None, **overrides) -> Iterator[ServerThread]:
    """A server with model id "tiny" whose engines are made with ``TINY_SERVER`` and ``overrides``
    (``Engine`` keyword arguments), requiring ``api_key`` on ``/v1/*`` when given."""
    from photon_trace.engine.engine import Engine

    settings = {**TINY_SERVER, **overrides}
    with serving(lambda tracer: Engine(tracer=tracer, **settings), api_key=api_key, model_name="tiny") as srv:
        yield srv


# The key of the session's shared tiny server (conftest's ``keyed_tiny_server``).
SHARED_KEY = "sk-test"


def left_clean(srv: ServerThread, api_key: str) -> None:
    """Fail unless ``srv`` is idle (nothing running, waiting or streaming), its engine healthy
    and its invariants held: a module sharing the session's server must leave it so."""
    health = wait_idle(srv.url, headers={"Authorization": f"Bearer {api_key}"})
    assert health["status"] == "ok" and health["invariants"] == "ok", health
