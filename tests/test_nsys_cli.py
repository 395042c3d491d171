"""``photon-trace import``, ``check`` and ``export perfetto`` on Nsight Systems exports, from the
command line; and every kind of bad input: exit 2, one line naming the problem, no traceback."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from photon_trace.cli import main as cli
from photon_trace.dashboard.sources.openable import NotOpenable, check_openable
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data" / "nsys"
SAXPY = DATA / "pipit_saxpy0.sqlite.gz"
FUSER = DATA / "fuser_report1.sqlite.gz"
WEATHER = DATA / "weatherbench2_report1.sqlite.gz"


def gunzip(gz: Path, tmp: Path) -> Path:
    out = tmp / gz.name.removesuffix(".gz")
    with gzip.open(gz, "rb") as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    return out


def edited(gz: Path, tmp: Path, *sql: str) -> Path:
    """A copy of the export with ``sql`` run on it (a real export changed as nsys itself would)."""
    out = gunzip(gz, tmp)
    con = sqlite3.connect(out)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    return out


def test_import_prints_both_idle_views_the_rules_and_writes_our_format(tmp_path, capsys):
    out = tmp_path / "fuser.trace.jsonl"
    assert cli(["import", str(FUSER), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Nsight Systems 2025.1.1.110 export (schema 3.17.1" in text
    assert "per stream (each over its own span" in text and "per device (all its streams together" in text
    for rule in ("cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "cuda_api_sync", "gpu_gaps",
                 "gpu_time_util"):
        assert f"  {rule} (" in text
    assert "gpu_gaps (GPU Gaps): 3 found" in text
    assert load_trace(out).device_spans == load_any(FUSER).device_spans


def test_import_json_carries_devices_and_rules(capsys):
    assert cli(["import", str(SAXPY), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"]["format"] == "nsys" and doc["source"]["duplicate_runtime_rows"] == 38
    (dev,) = doc["analysis"]["devices"]
    assert dev["device"] == "gpu0" and dev["idle_ns"] == doc["analysis"]["streams"][0]["idle_ns"]
    assert doc["nsys_rules"]["cuda_memcpy_sync"]["count"] == 15


@pytest.mark.parametrize("annotation,steps", [("saxpy", 5), ("MPI:MPI_Send", 10), ("MPI_Recv", 5)])
def test_steps_from_nvtx_ranges_by_name_and_domain(annotation, steps):
    trace = load_any(SAXPY, step_annotation=annotation)
    assert trace.header["settings"]["steps_found"] == steps


def test_an_unknown_step_range_names_those_there_are(capsys):
    assert cli(["import", str(SAXPY), "--step-annotation", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no NVTX range named 'nope'" in err and "'MPI_Send'" in err and "Traceback" not in err
    # the domain matters: MPI_Send is in the MPI domain, not the default one
    with pytest.raises(Exception, match="no NVTX range named 'other:MPI_Send'"):
        load_any(SAXPY, step_annotation="other:MPI_Send")


def test_check_and_export_take_an_export(tmp_path, capsys):
    md = tmp_path / "check.md"
    assert cli(["check", str(SAXPY), "--markdown", str(md)]) == 1
    assert "15 accidental syncs" in capsys.readouterr().err
    assert "| device `gpu0` (all 1 streams)" in md.read_text()
    out = tmp_path / "saxpy.json"
    assert cli(["export", "perfetto", str(SAXPY), str(out)]) == 0
    doc = json.loads(out.read_text())
    procs = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert "gpu0 idle, all streams together" in procs
    idle = [e for e in doc["traceEvents"] if e.get("cat") == "device_idle"]
    assert len(idle) == 19 and doc["otherData"]["device_idle"]


def test_a_report_without_device_activity_says_so_and_check_exits_2(tmp_path, capsys):
    # As nsys writes a report whose CUDA activity was not traced: runtime calls, no activity tables.
    p = edited(WEATHER, tmp_path, "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET")
    assert cli(["import", str(p)]) == 0
    assert "no device activity: runtime calls but no kernel, memcpy or memset" in capsys.readouterr().out
    assert cli(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert "no device activity" in err and "0.00%" not in err and "Traceback" not in err


def bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    plain = gunzip(SAXPY, tmp)
    cut = tmp / "cut.sqlite"
    cut.write_bytes(plain.read_bytes()[:200_000])
    scrambled = tmp / "scrambled.sqlite"
    raw = bytearray(plain.read_bytes())
    raw[100:40_000] = b"\xff" * (40_000 - 100)
    scrambled.write_bytes(bytes(raw))
    other = tmp / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    gz_cut = tmp / "cut.sqlite.gz"
    gz_cut.write_bytes(SAXPY.read_bytes()[:100_000])
    report = tmp / "run.nsys-rep"
    report.write_bytes(b"\x00" * 64)
    (tmp / "col").mkdir(exist_ok=True)
    no_column = edited(FUSER, tmp / "col", "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN correlationId")
    return {"report": (report, "export it first: nsys export --type sqlite --output"),
            "cut": (cut, "corrupt"), "scrambled": (scrambled, "corrupt"),
            "not nsight": (other, "not an Nsight Systems export"),
            "cut gzip": (gz_cut, "cut short"),
            "no column": (no_column, "lacks column(s) correlationId")}


@pytest.mark.parametrize("command", ["import", "check", "export"])
def test_bad_input_exits_2_naming_the_problem(tmp_path, capsys, command):
    for kind, (path, message) in bad_inputs(tmp_path).items():
        args = ["export", "perfetto", str(path), str(tmp_path / "o.json")] if command == "export" else [command, str(path)]
        assert cli(args) == 2, kind
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (kind, err)
        assert len(err.strip().splitlines()) == 1, (kind, err)


def test_the_dashboard_names_a_report_and_lists_exports(tmp_path):
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\x00")
    with pytest.raises(NotOpenable, match="nsys export --type sqlite --output run.sqlite run.nsys-rep"):
        check_openable(report)
    check_openable(SAXPY)   # an export opens
    fake = tmp_path / "fake.sqlite"
    fake.write_text("not sqlite")
    with pytest.raises(NotOpenable, match="not an SQLite database"):
        check_openable(fake)


def test_schemas_without_enum_tables_or_under_the_other_metadata_name(tmp_path):
    """Kinds fall back to CUPTI's numbering without ENUM_* tables; the metadata table may have
    either name; the import is the same."""
    con = sqlite3.connect(gunzip(FUSER, tmp_path))
    enums = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE name LIKE 'ENUM_%'")]
    con.close()
    p = edited(FUSER, tmp_path, *[f"DROP TABLE {t}" for t in enums],
               "ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
    a, b = load_any(FUSER), load_any(p)
    assert a.device_spans == b.device_spans and a.waits == b.waits
    assert b.header["source"]["metadata_table"] == "EXPORT_META_DATA"
    assert any(d.op == "Memcpy HtoD (Pageable -> Device)" for d in b.device_spans)
