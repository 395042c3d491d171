"""Where the dashboard's traces come from: allowed folders, loading errors, live following, CLI."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
import time

import pytest

from photon_trace.dashboard.sources.live import FileSource, LiveFollower
from photon_trace.dashboard.sources.folders import PathRefused, is_inside, list_traces
from photon_trace.dashboard.sources.store import LoadError, TraceStore
from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk, Trace
from helpers.dashboard_samples import report, sample, write_samples


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    write_samples(d)
    return d


def test_paths_outside_the_allowed_folders_are_refused(folder, tmp_path):
    allowed = [folder.resolve()]
    assert is_inside(folder / "blocking.trace.jsonl", allowed) == (folder / "blocking.trace.jsonl").resolve()
    for bad in (tmp_path / "x.trace.jsonl", folder / ".." / "elsewhere.trace.jsonl", "/etc/passwd"):
        with pytest.raises(PathRefused, match="outside the folders"):
            is_inside(bad, allowed)


def test_a_symlink_out_of_the_allowed_folder_is_refused(folder, tmp_path):
    outside = tmp_path / "secret.trace.jsonl"
    outside.write_text("x")
    link = folder / "link.trace.jsonl"
    link.symlink_to(outside)
    try:
        with pytest.raises(PathRefused):
            TraceStore([folder]).get(link)
    finally:
        link.unlink()


def test_listing_holds_trace_files_newest_first(folder):
    # newer than every file the module's other tests touched (the folder is shared, in any order)
    newest = max(f.stat().st_mtime for f in folder.iterdir()) + 10
    os.utime(folder / "blocking.trace.jsonl", (newest, newest))
    files = list_traces([folder.resolve()])
    assert files[0].name == "blocking.trace.jsonl"
    assert {f.name for f in files} >= {"pipelined.trace.jsonl", "mask_sync.trace.jsonl", "corrupt.trace.jsonl"}


def test_a_corrupt_file_becomes_a_readable_error(folder):
    store = TraceStore([folder])
    with pytest.raises(LoadError, match="corrupt.trace.jsonl") as e:
        store.get(folder / "corrupt.trace.jsonl")
    assert "host_spans" in str(e.value)
    with pytest.raises(LoadError, match="cannot read"):
        store.get(folder / "missing.trace.jsonl")


def test_loads_are_analysed_once_and_cached(folder):
    calls = []

    def counting_load(p):
        calls.append(p)
        return load_trace(p)
    store = TraceStore([folder], load=counting_load)
    a = store.get(folder / "mask_sync.trace.jsonl")
    b = store.get(str(folder / "mask_sync.trace.jsonl"))
    assert a is b and len(calls) == 1
    assert a.report.syncs and a.timeline.syncs.in_window.sum() == sum(s.count for s in a.report.syncs)


def test_a_page_waiting_for_a_loading_trace_gets_its_spans_or_its_error(folder, tmp_path):
    """``peek(wait_s=...)`` returns the spans-only view once they are ready (the first draw need
    not poll for them), and a file that may not be opened is reported, not "loading" forever."""
    released = threading.Event()

    def slow_load(p):
        assert released.wait(60)
        return load_trace(p)
    store = TraceStore([folder, tmp_path], load=slow_load)
    path = folder / "mask_sync.trace.jsonl"
    assert store.peek(path) is None                  # the load starts in the background
    threading.Timer(0.05, released.set).start()
    part = store.peek(path, wait_s=60)
    assert part is not None and part.timeline.n_spans > 0
    not_ours = tmp_path / "notes.trace.jsonl"
    not_ours.write_text('{"hello": 1}\n')
    with pytest.raises(LoadError, match="not a photon_trace trace"):
        store.peek(not_ours, wait_s=60)


def test_a_background_load_that_fails_tells_every_later_look_not_only_the_first(folder):
    """The page's poll sees a failed load first, then the timeline re-draws to show it: both must
    get the error. Once reported it was forgotten, so the re-draw started the load again and the
    page said "loading" for ever, reloading a large trace in a loop."""
    calls = []

    def broken_load(p):
        calls.append(p)
        raise ValueError("a damaged record")
    store = TraceStore([folder], load=broken_load)
    path = folder / "mask_sync.trace.jsonl"
    with pytest.raises(LoadError, match="a damaged record"):
        store.peek(path, wait_s=60)                  # the poll
    for _ in range(2):                               # the re-draw, and any later look
        with pytest.raises(LoadError, match="a damaged record"):
            store.peek(path, wait_s=60)
    assert len(calls) == 1


def _write_growing(path, trace: Trace, cuts: list[int]):
    """Write ``trace``'s records that end before each cut as one chunk per cut; returns the writer."""
    w = TraceFileWriter(path)
    w.open(dict(trace.header))
    done = -1

    def upto(i):
        nonlocal done
        lo, hi = (cuts[done] if done >= 0 else -1), cuts[i]
        rows = {k: [r for r in getattr(trace, k) if lo < _end(r) <= hi] for k in RECORD_KINDS}
        w.write(Chunk(seq=i + 1, **rows))
        done = i
    return w, upto


def _end(r) -> int:
    return getattr(r, "t1", None) or getattr(r, "t", None) or getattr(r, "step", 0)


def test_a_file_being_written_is_followed_by_reading_only_new_lines(tmp_path):
    tr = sample("pipelined")
    t_end = max(d.t1 for d in tr.device_spans)
    t_start = min(d.t0 for d in tr.device_spans)
    mid = (t_start + t_end) // 2
    path = tmp_path / "growing.trace.jsonl"
    w, upto = _write_growing(path, Trace(tr.header, tr.host_spans, tr.device_spans, tr.waits, [], []),
                             [mid, t_end + 1])
    upto(0)
    src = FileSource(path, load_trace)
    first = src.read()
    n1 = len(first.device_spans)
    assert 0 < n1 < len(tr.device_spans)
    assert src.read() is None  # nothing new
    upto(1)
    second = src.read()
    assert len(second.device_spans) == len(tr.device_spans)
    w.close()


def test_live_follower_analyses_the_last_seconds_and_keeps_the_last_good_view(tmp_path):
    tr = sample("mask_sync")
    path = tmp_path / "live.trace.jsonl"
    t_end = max(d.t1 for d in tr.device_spans)
    w, upto = _write_growing(path, tr, [t_end + 1])
    store = TraceStore([tmp_path])
    follower = LiveFollower(str(path), store, seconds=0.05)
    assert follower.poll() is None and "no spans" in follower.error   # only the header so far
    upto(0)
    view = follower.poll()
    assert view is not None and follower.error is None
    w0, w1 = view.report.window
    assert w1 - w0 <= 0.05e9 + 1 and w1 >= t_end - 1e6
    with open(path, "ab") as f:   # a line the reader cannot parse: keep the last good view
        f.write(b'{"chunk": 9, "host_spans": [[1]]}\n')
    assert follower.poll() is view and follower.error


def test_live_follower_waits_for_a_file_that_does_not_exist_yet(tmp_path):
    follower = LiveFollower(str(tmp_path / "later.trace.jsonl"), TraceStore([tmp_path]))
    assert follower.poll() is None and "waiting for" in follower.error


# ---------------------------------------------------------------------- CLI, app


def test_dashboard_parser_defaults_to_loopback_and_port_8050():
    from photon_trace.cli.dashboard import add_dashboard_parser, run_dashboard
    parser = argparse.ArgumentParser()
    add_dashboard_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["dashboard", "a.trace.jsonl", "--live", "http://127.0.0.1:9000/live"])
    assert (args.host, args.port, args.traces, args.live) == ("127.0.0.1", 8050, ["a.trace.jsonl"],
                                                              "http://127.0.0.1:9000/live")
    assert args.func is run_dashboard


def test_with_no_trace_named_the_newest_under_traces_are_opened(folder, tmp_path):
    from photon_trace.cli.dashboard import resolve_inputs
    newest = folder / "mask_sync.trace.jsonl"
    os.utime(newest, (time.time() + 100, time.time() + 100))
    files, allowed = resolve_inputs([], str(folder))
    assert files[0] == str(newest.resolve()) and len(files) == 2
    assert allowed == [str(folder.resolve())]
    other = tmp_path / "x.trace.jsonl"
    files, allowed = resolve_inputs([str(other)], str(folder))
    assert files == [str(other)] and str(tmp_path.resolve()) in allowed


def test_importing_the_app_registers_nothing_and_create_app_wires_callbacks(folder):
    import dash._callback as registry
    before = len(registry.GLOBAL_CALLBACK_LIST)
    for mod in ("photon_trace.dashboard", "photon_trace.dashboard.app", "photon_trace.cli.dashboard"):
        sys.modules.pop(mod, None)
        importlib.import_module(mod)
    assert len(registry.GLOBAL_CALLBACK_LIST) == before
    from photon_trace.dashboard.app import create_app
    app = create_app([str(folder / "blocking.trace.jsonl")], [str(folder)], None)
    assert len(app.callback_map) >= 5
    assert len(registry.GLOBAL_CALLBACK_LIST) == before


def test_live_follower_reads_records_after_a_cursor_from_a_live_url():
    """The server's live endpoint as the dashboard expects it (GET URL?cursor=N → records after N)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from urllib.parse import parse_qs, urlparse

    tr = sample("mask_sync")
    half = len(tr.device_spans) // 2
    chunks = [(tr.host_spans, tr.device_spans[:half], tr.waits), ([], tr.device_spans[half:], [])]
    asked = []

    class Live(BaseHTTPRequestHandler):
        def do_GET(self):
            cursor = int(parse_qs(urlparse(self.path).query).get("cursor", ["0"])[0])
            asked.append(cursor)
            body = {"header": tr.header, "cursor": min(cursor + 1, len(chunks))}
            if cursor < len(chunks):
                h, d, w = chunks[cursor]
                body.update(host_spans=[list(x) for x in h], device_spans=[list(x) for x in d],
                            waits=[list(x) for x in w], steps=[list(x) for x in tr.steps] if cursor == 0 else [])
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Live)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        base = LiveFollower(f"http://127.0.0.1:{httpd.server_port}", TraceStore(["."]))
        assert base.source.url.endswith("/v1/trace/recent")   # a bare server URL: the server's endpoint
        follower = LiveFollower(f"http://127.0.0.1:{httpd.server_port}/live", TraceStore(["."]), seconds=10)
        first = follower.poll()
        second = follower.poll()
        assert asked[:2] == [0, 1]
        assert len(first.trace.device_spans) < len(second.trace.device_spans)
        assert follower.poll() is second and follower.error is None   # nothing new after the last chunk
    finally:
        httpd.shutdown()


def test_the_three_runs_differ_as_their_names_say():
    assert len(report("blocking").bubbles) > 0 and sum(s.count for s in report("blocking").syncs) == 0
    assert report("pipelined").idle_fraction < report("blocking").idle_fraction
    assert sum(s.count for s in report("mask_sync").syncs) > 0
    assert any(b.cause == "accidental_sync" for b in report("mask_sync").bubbles)


def test_the_page_names_the_allowed_folders_as_a_typed_path_would(folder, tmp_path, monkeypatch):
    from photon_trace.dashboard.layout import page

    def allowed_line(store) -> str:
        found, todo = [], [page(store, None, None, [], None, None)]
        while todo:
            node = todo.pop()
            if isinstance(node, str) and node.startswith("allowed: "):
                found.append(node)
            children = getattr(node, "children", None)
            todo.extend(children if isinstance(children, list) else [children] if children is not None else [])
        assert len(found) == 1, found
        return found[0]

    inside = tmp_path / "traces"
    inside.mkdir()
    monkeypatch.chdir(tmp_path)
    # inside the working directory: relative, as the path box resolves it; elsewhere: absolute
    assert allowed_line(TraceStore([inside, folder])) == f"allowed: traces, {folder.resolve()}"
    assert is_inside("traces/x.trace.jsonl", TraceStore([inside]).allowed) == (inside / "x.trace.jsonl").resolve()
