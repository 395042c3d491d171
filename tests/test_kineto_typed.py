"""A trace decoded by msgspec into structs (``importers/kineto_structs.py``, ``kineto_typed.py``)
reads exactly as one decoded by orjson into dicts: every field the importer keeps, every
problem and its message, strict or not, for plain events and for each kind of event the typed
loop leaves to the dict loop (integers past 64 bits, odd ids, bad fields, odd ``args``)."""
from __future__ import annotations

import gzip
import json
import pickle
import warnings
from pathlib import Path

import pytest

from photon_trace.telemetry.trace.importers import kineto_structs
from photon_trace.telemetry.trace.importers.kineto_read import read_kineto

pytest.importorskip("msgspec")

SAMPLE = Path(__file__).resolve().parent / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
BIG = 2 ** 70


def _first(events: list, **match) -> dict:
    return next(e for e in events if all(e.get(k) == v for k, v in match.items()))


def _set(field: str, value, **match):
    return lambda ev: _first(ev, **match).__setitem__(field, value)


def _set_arg(field: str, value, **match):
    return lambda ev: _first(ev, **match).setdefault("args", {}).__setitem__(field, value)


def _flow(**fields):
    return lambda ev: ev.append({"ph": "s", "cat": "ac2g", "id": 9, "ts": 5, "pid": 1, "tid": 2, **fields})


CHANGES = {
    "plain": lambda ev: None,
    "big pid": _set("pid", BIG, cat="cpu_op"),
    "float pid": _set("pid", 1.5, cat="cpu_op"),
    "list tid": _set("tid", [1], cat="cpu_op"),
    "big int ts": _set("ts", BIG, cat="kernel"),
    "int dur": _set("dur", 3, cat="kernel"),
    "big int dur": _set("dur", BIG, cat="cpu_op"),
    "bool dur": _set("dur", True, cat="cpu_op"),
    "negative dur": _set("dur", -1, cat="cpu_op"),
    "no dur": lambda ev: _first(ev, cat="cpu_op").pop("dur"),
    "name not text": _set("name", 5, cat="cpu_op"),
    "no cat": lambda ev: _first(ev, cat="cpu_op").pop("cat"),
    "int cat": _set("cat", 7, cat="cpu_op"),
    "capitalised cat": _set("cat", "Kernel", cat="kernel"),
    "big correlation": _set_arg("correlation", BIG, cat="cuda_runtime"),
    "u64 correlation": _set_arg("correlation", 2 ** 63 + 1, cat="cuda_runtime"),
    "text correlation": _set_arg("correlation", "x", cat="cuda_runtime"),
    "bool correlation": _set_arg("correlation", True, cat="cuda_runtime"),
    "big stream": _set_arg("stream", BIG, cat="kernel"),
    "text stream": _set_arg("stream", "7", cat="kernel"),
    "big device": _set_arg("device", BIG, cat="kernel"),
    "big bytes": _set_arg("bytes", BIG, cat="gpu_memcpy"),
    "list bytes": _set_arg("bytes", [BIG], cat="gpu_memcpy"),
    "args null": _set("args", None, cat="cuda_runtime"),
    "copy args null": _set("args", None, cat="gpu_memcpy"),
    "args a list": _set("args", [1], cat="cuda_runtime"),
    "thread name big": _set_arg("name", BIG, ph="M", name="thread_name"),
    "thread name null": _set_arg("name", None, ph="M", name="thread_name"),
    "thread name list": _set_arg("name", ["a"], ph="M", name="thread_name"),
    "flow big id": _flow(id=BIG),
    "flow text id": _flow(id="a"),
    "flow big ts": _flow(ts=BIG),
    "flow big tid": _flow(tid=BIG),
    "flow no id": lambda ev: ev.append({"ph": "f", "cat": "ac2g", "ts": 5, "pid": 1, "tid": 2}),
    "not an object": lambda ev: ev.insert(3, [1, 2]),
}


def _write(tmp_path: Path, name: str) -> Path:
    doc = json.loads(gzip.open(SAMPLE).read())
    CHANGES[name](doc["traceEvents"])
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    return path


def _read(path: Path, strict: bool):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = pickle.dumps(read_kineto(path, strict=strict))
        except Exception as e:      # noqa: BLE001 - the error is the answer to compare
            out = f"{type(e).__name__}: {e}"
    return out, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", CHANGES)
def test_structs_read_as_dicts_do(name, tmp_path, monkeypatch):
    path = _write(tmp_path, name)
    for strict in (True, False):
        monkeypatch.setattr(kineto_structs, "_msgspec", lambda: None)
        as_dicts = _read(path, strict)
        monkeypatch.undo()
        monkeypatch.setattr(kineto_structs, "TYPED_FROM", 0)
        as_structs = _read(path, strict)
        monkeypatch.undo()
        assert as_structs == as_dicts


def test_a_typed_block_is_read_by_the_typed_loop(tmp_path, monkeypatch):
    """The plain trace takes the typed path (else the test above compares dicts with dicts)."""
    from photon_trace.telemetry.trace.importers import kineto_typed
    seen = []
    real = kineto_typed.add_typed
    monkeypatch.setattr(kineto_typed, "add_typed", lambda b, raw: seen.append(real(b, raw)) or seen[-1])
    monkeypatch.setattr(kineto_structs, "TYPED_FROM", 0)
    read_kineto(_write(tmp_path, "plain"))
    read_kineto(_write(tmp_path, "big pid"))
    assert seen == [True, False]
