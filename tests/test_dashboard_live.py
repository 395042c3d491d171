"""Live mode without a browser: a followed server that restarts, dies or goes idle.

The server side is the real ``LiveBuffer`` (what ``/v1/trace/recent`` serves) behind a
small HTTP handler, so the cursor and header semantics are the server's own.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from photon_trace.dashboard.sources.live import STALE_S, LiveFollower
from photon_trace.dashboard.sources.store import TraceStore
from photon_trace.telemetry.recording.sinks import LiveBuffer
from photon_trace.telemetry.trace.file import write_trace
from photon_trace.telemetry.trace.header import new_header
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk
from helpers.dashboard_samples import sample


def _run(n_chunks: int, kind: str = "mask_sync") -> LiveBuffer:
    """A LiveBuffer holding one run's records in ``n_chunks`` flushes, with a fresh header."""
    tr = sample(kind)
    live = LiveBuffer()
    live.open(new_header("on", settings=dict(tr.header.get("settings", {}))))
    t0 = min(d.t0 for d in tr.device_spans)
    t1 = max(d.t1 for d in tr.device_spans) + 1
    cuts = [t0 + (t1 - t0) * (k + 1) // n_chunks for k in range(n_chunks)]
    lo = -1
    for seq, hi in enumerate(cuts, start=1):
        rows = {k: [r for r in getattr(tr, k) if lo < getattr(r, "t1", getattr(r, "t", 0)) <= hi]
                for k in RECORD_KINDS if k != "steps"}
        live.write(Chunk(seq=seq, steps=list(tr.steps) if seq == 1 else [], **rows))
        lo = hi
    return live


class Endpoint:
    """``/v1/trace/recent`` over whichever LiveBuffer is current (a restart swaps it)."""

    def __init__(self, live: LiveBuffer):
        self.live = live
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                cursor = int(parse_qs(urlparse(self.path).query).get("cursor", ["0"])[0])
                trace, nxt = outer.live.recent(cursor)
                body = {"header": trace.header, "cursor": nxt, **{k: [list(r) for r in getattr(trace, k)]
                                                                   for k in RECORD_KINDS}}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1/trace/recent"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint():
    e = Endpoint(_run(6))
    yield e
    e.close()


def test_a_restarted_server_is_followed_from_its_new_run(endpoint):
    f = LiveFollower(endpoint.url, TraceStore(["."]), seconds=10)
    assert f.poll() is not None and f.source.cursor == 6
    first_run = f.current
    endpoint.live = _run(2, "pipelined")       # the server restarted: a new header, its cursor back at 2
    view = f.poll()
    assert f.restarts == 1 and f.error is None
    assert view is not None and view is not first_run and f.source.cursor == 2
    assert view.trace.header["created_wall_ns"] == endpoint.live.recent(0)[0].header["created_wall_ns"]
    assert "new run" in f.status().text


def test_a_cursor_that_goes_backwards_is_a_new_run_even_with_the_same_header(endpoint):
    f = LiveFollower(endpoint.url, TraceStore(["."]), seconds=10)
    f.poll()
    header = endpoint.live._header
    fresh = _run(3)
    fresh._header = header                       # same run id, but the buffer starts again
    endpoint.live = fresh
    assert f.poll() is not None and f.restarts == 1 and f.source.cursor == 3


def test_a_dead_server_is_unreachable_with_the_time_of_the_last_data(endpoint):
    f = LiveFollower(endpoint.url, TraceStore(["."]), seconds=10)
    f.poll()
    assert f.status().state == "live" and not f.status().stale
    # paused on a zoom, the line says so and what the source does, not that it is following
    # (issue 33 item 3: "paused (zoomed or selected): live: following…")
    paused = f.status().paused()
    assert paused.startswith("paused") and "following" not in paused and "is live" in paused
    endpoint.close()
    f.poll()
    st = f.status()
    assert st.state == "unreachable" and st.stale
    assert "last data " + time.strftime("%H:%M", time.localtime(f.last_data)) in st.text
    assert "ConnectError" in st.text


def test_a_reachable_server_with_nothing_new_is_idle_after_the_stale_limit(endpoint):
    now = [1000.0]
    f = LiveFollower(endpoint.url, TraceStore(["."]), seconds=10, clock=lambda: now[0])
    f.poll()
    assert f.status().state == "live"
    now[0] += STALE_S + 0.1
    f.poll()                                      # answers, nothing new
    st = f.status()
    assert st.state == "idle" and st.stale and "reachable" in st.text
    now[0] += STALE_S + 0.1                       # and no poll got through since: no answer
    assert f.status().state == "unreachable"


def test_a_replaced_trace_file_is_a_new_run(tmp_path):
    path = tmp_path / "live.trace.jsonl"
    write_trace(sample("mask_sync"), path)
    f = LiveFollower(str(path), TraceStore([tmp_path]), seconds=10)
    assert f.poll() is not None
    other = tmp_path / "other.trace.jsonl"
    tr = sample("pipelined")
    tr2 = type(tr)(new_header("on"), tr.host_spans, tr.device_spans, tr.waits, tr.steps, tr.requests)
    write_trace(tr2, other)
    other.replace(path)                           # a new run writes a new file at the same path
    assert f.poll() is not None and f.restarts == 1
    assert f.current.trace.header["created_wall_ns"] == tr2.header["created_wall_ns"]


def test_views_drawn_lately_stay_available_while_following_is_paused(endpoint):
    f = LiveFollower(endpoint.url, TraceStore(["."]), seconds=10)
    f.poll()
    v = f.version
    drawn = f.current
    endpoint.live.write(Chunk(seq=7, device_spans=[d._replace(t0=d.t0 + 10**9, t1=d.t1 + 10**9)
                                               for d in sample("mask_sync").device_spans[-5:]]))
    f.poll()
    assert f.version == v + 1 and f.snapshot(v) is drawn and f.snapshot(None) is f.current


SECRET = "root:x:0:0:secret-token-123 " * 4


@pytest.mark.parametrize("name, content, says", [
    ("notes.txt", SECRET, "not a trace file"),                                  # no trace suffix
    ("passwd.trace.jsonl", SECRET + "\n", "not a photon_trace trace"),          # a trace's name, not its header
    ("big.trace.jsonl", None, "larger than"),                                   # over the size limit
], ids=["suffix", "header", "size"])
def test_a_live_file_is_opened_with_the_same_checks_and_nothing_of_it_is_quoted(tmp_path, name, content, says):
    """``--live FILE`` (issue 32, item 7): refused as the page would refuse the file, the status
    line quoting none of its bytes and naming it without its folder."""
    path = tmp_path / name
    if content is None:
        write_trace(sample("mask_sync"), path)
    else:
        path.write_text(content)
    store = TraceStore([], limits={"max_bytes": 10_000})
    f = LiveFollower(str(path), store, seconds=10)
    assert f.poll() is None
    text = f.status().text
    assert says in text and "refused" in text, text
    assert "secret" not in text and "root:" not in text and str(tmp_path) not in text, text
    assert f.status().state == "unreachable" and f.current is None


def test_a_live_file_that_grows_past_the_limit_stops_being_read(tmp_path):
    path = tmp_path / "live.trace.jsonl"
    write_trace(sample("mask_sync"), path)
    store = TraceStore([], limits={"max_bytes": path.stat().st_size + 10})
    f = LiveFollower(str(path), store, seconds=10)
    assert f.poll() is not None
    with open(path, "ab") as out:
        out.write(b'{"meta": {"note": "' + b"x" * 100 + b'"}}\n')
    f.poll()
    assert "larger than" in f.status().text


def test_the_live_files_folder_is_not_opened_to_the_page(tmp_path):
    from photon_trace.cli.dashboard import resolve_inputs
    (tmp_path / "traces").mkdir()
    secret_folder = tmp_path / "home"
    secret_folder.mkdir()
    _, allowed = resolve_inputs([], str(tmp_path / "traces"), live=str(secret_folder / "run.trace.jsonl"))
    assert allowed == [str((tmp_path / "traces").resolve())]
