"""The dashboard against a hostile local web page (issue 32, item 1): a page that rebinds its
own name to 127.0.0.1 gets nothing (not the layout with the file list, not a callback that
opens a trace), a page on another origin cannot drive a callback, and no message the page can
read (refusals, load errors, notes) carries an absolute path of this machine.

The dashboard is served by werkzeug on a real loopback socket and asked over HTTP as a
browser would, with the ``Host`` and ``Origin`` headers a rebinding or cross-origin page sends.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from photon_trace.cli.dashboard import add_dashboard_parser
from photon_trace.dashboard.sources.store import LoadError, PathRefused, TraceStore
from photon_trace.telemetry.trace.file import write_trace
from helpers.browser import Server
from helpers.trace_builder import pipelined_trace

REBOUND = "attacker.example"


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    write_trace(pipelined_trace(tokens=20), d / "good.trace.jsonl")
    return d


@pytest.fixture()
def server(folder):
    s = Server([folder / "good.trace.jsonl"], [folder])
    yield s
    s.close()


def open_path_payload(path: str) -> dict:
    """The open-path callback's request, as the page's renderer sends it."""
    outputs = [("trace-a", "options"), ("trace-a", "value"), ("trace-b", "options"), ("trace-b", "value"),
               ("path-error", "children")]
    return {"output": ".." + "...".join(f"{i}.{p}" for i, p in outputs) + "..",
            "outputs": [{"id": i, "property": p} for i, p in outputs],
            "inputs": [{"id": "open-a", "property": "n_clicks", "value": 1},
                       {"id": "open-b", "property": "n_clicks", "value": None},
                       {"id": "path-input", "property": "n_submit", "value": None}],
            "state": [{"id": "path-input", "property": "value", "value": path},
                      {"id": "trace-a", "property": "value", "value": None},
                      {"id": "trace-b", "property": "value", "value": None}],
            "changedPropIds": ["open-a.n_clicks"]}


def port_of(server) -> int:
    return int(server.url.rstrip("/").rsplit(":", 1)[1])


def test_a_rebinding_page_gets_neither_the_layout_nor_a_callback(server, folder):
    host = f"{REBOUND}:{port_of(server)}"
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for path in ("/", "/_dash-layout", "/_dash-dependencies"):
            r = c.get(path, headers={"Host": host})
            assert r.status_code == 403, (path, r.status_code)
            assert r.json()["error"]["code"] == "host_not_allowed"
            assert str(folder) not in r.text and "good.trace.jsonl" not in r.text
        r = c.post("/_dash-update-component", json=open_path_payload(str(folder / "good.trace.jsonl")),
                   headers={"Host": host})
        assert r.status_code == 403 and "good.trace.jsonl" not in r.text
        # the same requests under the dashboard's own name are answered
        layout = c.get("/_dash-layout")
        assert layout.status_code == 200 and "good.trace.jsonl" in layout.text
        assert c.post("/_dash-update-component", json=open_path_payload("traces/good.trace.jsonl")).status_code == 200


def test_a_page_on_another_origin_cannot_drive_a_callback(server, folder):
    payload = json.dumps(open_path_payload(str(folder / "good.trace.jsonl")))
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post("/_dash-update-component", content=payload,
                   headers={"Content-Type": "application/json", "Origin": "http://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin"
        # a "simple" request any page may send without asking
        r = c.post("/_dash-update-component", content=payload, headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        own = server.url.rstrip("/")
        r = c.post("/_dash-update-component", content=payload,
                   headers={"Content-Type": "application/json", "Origin": own})
        assert r.status_code == 200


def test_allowed_hosts_are_the_loopback_names_and_the_listening_address_unless_given():
    import argparse
    parser = argparse.ArgumentParser()
    add_dashboard_parser(parser.add_subparsers())
    from photon_trace.hosts import allowed_hosts
    args = parser.parse_args(["dashboard"])
    assert allowed_hosts(args.host, args.allowed_hosts) == {"localhost", "127.0.0.1", "::1"}
    args = parser.parse_args(["dashboard", "--host", "192.0.2.7"])
    assert "192.0.2.7" in allowed_hosts(args.host, args.allowed_hosts)
    args = parser.parse_args(["dashboard", "--allowed-hosts", "dash.example,B.example"])
    assert allowed_hosts(args.host, args.allowed_hosts) == {"dash.example", "b.example"}


def test_a_dashboard_given_other_host_names_answers_to_them(folder):
    s = Server([folder / "good.trace.jsonl"], [folder], allowed_hosts={"dash.example"})
    try:
        with httpx.Client(base_url=s.url, timeout=30) as c:
            assert c.get("/_dash-layout", headers={"Host": f"dash.example:{port_of(s)}"}).status_code == 200
            assert c.get("/_dash-layout").status_code == 403      # 127.0.0.1 is not in the list given
    finally:
        s.close()


ABSOLUTE = re.compile(r"(?<![\w.~])/(?:[\w.-]+/)+")


def no_absolute_path(text: str, tmp_path: Path) -> None:
    assert str(tmp_path) not in text and not ABSOLUTE.search(text), text


def test_no_message_the_page_can_read_names_an_absolute_path(folder, tmp_path):
    """Refusals, load errors and a damaged trace's notes name files as the page lists them."""
    store = TraceStore([folder])
    (folder / "sub").mkdir()
    (folder / "corrupt.trace.jsonl").write_text('{"format":"photon_trace","version":1}\n{"chunk":1,"host_spans":[[1]]}\n')
    good = (folder / "good.trace.jsonl").read_bytes()
    (folder / "cut.trace.jsonl").write_bytes(good[:-40])         # a partial last line: loaded, with a note
    messages = []
    for path, error in ((tmp_path / "elsewhere.trace.jsonl", PathRefused), ("/etc/passwd", PathRefused),
                        (folder / "missing.trace.jsonl", LoadError), (folder / "sub", LoadError),
                        (folder / "corrupt.trace.jsonl", LoadError)):
        with pytest.raises(error) as info:
            store.get(path)
        messages.append(str(info.value))
    notes = store.get(folder / "cut.trace.jsonl").notes
    assert notes and any("partial line" in n for n in notes)
    for text in messages + notes:
        no_absolute_path(text, tmp_path)
    assert "traces/corrupt.trace.jsonl" in messages[-1] or "corrupt.trace.jsonl" in messages[-1]


def test_the_open_path_callback_answers_without_an_absolute_path(server, folder, tmp_path):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for typed in (str(tmp_path / "elsewhere.trace.jsonl"), str(folder / "missing.trace.jsonl")):
            r = c.post("/_dash-update-component", json=open_path_payload(typed))
            assert r.status_code == 200
            error = json.dumps(r.json()["response"]["path-error"])
            assert "refused" in error or "cannot read" in error
            no_absolute_path(error, tmp_path)
