"""The dashboard opens only trace files, within size limits: never another file's bytes in a
message, no gzip bomb expanded, a NUL byte in a path is a message (not Flask's HTML 500), and
no "Share chart" button that uploads a figure to Plotly Cloud."""
from __future__ import annotations

import gzip
import json
import os
import struct
import threading
import zlib
from pathlib import Path

import pytest

from photon_trace.dashboard.sources.openable import NotOpenable, check_openable
from photon_trace.dashboard.sources.store import LoadError, PathRefused, TraceStore
from helpers.trace_builder import pipelined_trace

SECRET = "root:x:0:0:secret-token-123"


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    from photon_trace.telemetry.trace.file import write_trace
    write_trace(pipelined_trace(), tmp_path / "good.trace.jsonl")
    (tmp_path / "passwd.trace.jsonl").write_text(SECRET + "\n")
    (tmp_path / "notes.txt").write_text(SECRET)
    (tmp_path / "fake.trace.jsonl.gz").write_bytes(gzip.compress(SECRET.encode()))
    (tmp_path / "plain.trace.jsonl.gz").write_text(SECRET)
    return tmp_path


def refusal(path: Path, **limits) -> str:
    with pytest.raises(NotOpenable) as info:
        check_openable(path, **limits)
    return str(info.value)


def test_only_trace_files_are_opened_and_their_bytes_never_quoted(folder):
    check_openable(folder / "good.trace.jsonl")
    for name, words in (("notes.txt", "not a trace file"), ("passwd.trace.jsonl", "not a photon_trace trace"),
                        ("fake.trace.jsonl.gz", "not a photon_trace trace"), ("plain.trace.jsonl.gz", "not gzip")):
        message = refusal(folder / name)
        assert words in message and "secret" not in message and "root:" not in message, message
    store = TraceStore([folder])
    for name in ("notes.txt", "passwd.trace.jsonl", "fake.trace.jsonl.gz"):
        with pytest.raises(LoadError) as info:
            store.get(folder / name)
        assert "secret" not in str(info.value)
    assert store.get(folder / "good.trace.jsonl").trace.steps


def test_size_limits(folder):
    good = folder / "good.trace.jsonl"
    assert "larger than" in refusal(good, max_bytes=100)
    gz = folder / "good.trace.jsonl.gz"
    gz.write_bytes(gzip.compress(good.read_bytes()))
    check_openable(gz)
    assert "decompresses to more than" in refusal(gz, max_decompressed_bytes=1000)
    store = TraceStore([folder], limits={"max_bytes": 100})
    with pytest.raises(LoadError, match="larger than"):
        store.get(good)


def write_gzip_bomb(path: Path, header: bytes, chunk: int = 64 * 1024 * 1024, chunks: int = 64) -> None:
    """A gzip file of ``header`` then ``chunks`` times ``chunk`` zero bytes. The zeros are
    compressed once and the block repeated: after a full flush the compressor starts afresh,
    so each repeat is the block it would have made again (compressing 4 GiB took ~10 s).
    The CRC and length in the trailer are those of the whole content: a valid gzip file."""
    z = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)     # raw deflate: the gzip framing is ours
    zeros = bytes(chunk)
    head = z.compress(header) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)
    end = z.flush()
    crc = zlib.crc32(header)
    for _ in range(chunks):
        crc = zlib.crc32(zeros, crc)
    size = len(header) + chunks * chunk
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")   # gzip, deflate, no name, no mtime
        f.write(head)
        for _ in range(chunks):
            f.write(block)
        f.write(end)
        f.write(struct.pack("<II", crc, size & 0xFFFFFFFF))


def test_a_gzip_bomb_is_refused_without_expanding_it(folder):
    """4 GiB of zeros after a real header, in ~4 MB: refused while streaming, in bounded memory."""
    bomb = folder / "bomb.trace.jsonl.gz"
    header = (folder / "good.trace.jsonl").read_bytes().split(b"\n", 1)[0] + b"\n"
    write_gzip_bomb(bomb, header)
    assert bomb.stat().st_size < 8 * 1024 * 1024
    assert "decompresses to more than" in refusal(bomb, max_decompressed_bytes=32 * 1024 * 1024)
    assert "expands more than 100 times its size" in refusal(bomb)     # the default limits: by its ratio
    with pytest.raises(LoadError, match="gzip bomb"):
        TraceStore([folder]).get(bomb)


def test_a_nul_byte_in_a_path_is_a_message(folder):
    store = TraceStore([folder])
    with pytest.raises(PathRefused, match="NUL byte"):
        store.check(str(folder / "good\x00.trace.jsonl"))


def test_a_nul_byte_typed_into_the_page_is_an_error_box_not_a_500(folder):
    """The open-path callback as the page calls it (Dash's JSON protocol, Flask's test client)."""
    from photon_trace.dashboard.app import create_app

    app = create_app([str(folder / "good.trace.jsonl")], [str(folder)], None)
    outputs = [("trace-a", "options"), ("trace-a", "value"), ("trace-b", "options"), ("trace-b", "value"),
               ("path-error", "children")]
    payload = {
        "output": ".." + "...".join(f"{i}.{p}" for i, p in outputs) + "..",
        "outputs": [{"id": i, "property": p} for i, p in outputs],
        "inputs": [{"id": "open-a", "property": "n_clicks", "value": 1},
                   {"id": "open-b", "property": "n_clicks", "value": None},
                   {"id": "path-input", "property": "n_submit", "value": None}],
        "state": [{"id": "path-input", "property": "value", "value": str(folder) + "/x\x00.trace.jsonl"},
                  {"id": "trace-a", "property": "value", "value": None},
                  {"id": "trace-b", "property": "value", "value": None}],
        "changedPropIds": ["open-a.n_clicks"],
    }
    r = app.server.test_client().post("/_dash-update-component", data=json.dumps(payload),
                                      content_type="application/json")
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    assert "NUL byte" in r.get_data(as_text=True)


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")
def test_the_modebar_has_no_share_chart_button(folder, pages):
    from contextlib import closing

    from helpers.browser import Server
    from helpers.waiting import wait_until

    server = Server([folder / "good.trace.jsonl"], [folder])
    try:
        with closing(pages.new(1280, 720)) as page:
            page.goto(server.url)
            page.wait_for_selector("#timeline .modebar-btn", state="attached", timeout=60_000)
            titles = wait_until(lambda: page.eval_on_selector_all(
                ".modebar-btn", "els => els.map(e => e.getAttribute('data-title'))"), 30, "the modebar")
    finally:
        server.close()
    assert any("Download" in (t or "") for t in titles), titles       # the modebar is there
    assert not [t for t in titles if "Share" in (t or "") or "Cloud" in (t or "") or "Chart Studio" in (t or "")]
