"""What a user meets at the command line before any work starts: refusals that come before a
model is loaded or a port taken (a missing or foreign trace, a GPU-only preset on the CPU, a
busy port), one message per bad argument, ``--help`` in plain words with every default, and
the note that a preset's text is noise."""
from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from photon_trace.cli.dispatch import build_parser, command_of, main

ROOT = Path(__file__).resolve().parents[1]
DEMO_TRACE = ROOT / "traces" / "tiny-s8-pipelined.trace.jsonl"


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture
def nothing_may_load(monkeypatch):
    """Fail the test if a command builds an engine, loads a model or serves a page."""
    import photon_trace.dashboard.app as app_module
    import photon_trace.engine.engine as engine_module
    import photon_trace.engine.model.host_side as host_side

    def loaded(*_, **__):
        raise AssertionError("loaded or served before refusing")

    monkeypatch.setattr(engine_module, "Engine", loaded)
    monkeypatch.setattr(host_side, "load_host_side", loaded)
    monkeypatch.setattr(app_module, "create_app", loaded)


def test_the_dashboard_refuses_a_missing_path_or_a_file_that_is_not_a_trace(tmp_path, capsys, nothing_may_load):
    err = one_line_error(capsys, ["dashboard", "/nonexistent.jsonl"])
    assert err == "photon-trace dashboard: error: /nonexistent.jsonl: no such file or folder"
    err = one_line_error(capsys, ["dashboard", str(ROOT / "README.md")])
    assert "README.md: not a trace file" in err
    fake = tmp_path / "notes.trace.jsonl"
    fake.write_text((ROOT / "README.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert "not a photon_trace trace" in one_line_error(capsys, ["dashboard", str(DEMO_TRACE), str(fake)])


@pytest.mark.parametrize("argv", [
    ["bench", "--model", "1.5b", "--backend", "cpu"],
    ["generate", "--model", "1.5b", "--backend", "cpu", "hi"],
    ["serve", "--model", "1.5b", "--backend", "cpu", "--port", "0"],
    ["check", "--run", "--model", "1.5b"],
    ["demo", "--model", "1.5b", "--backend", "cpu", "--no-serve"],
], ids=["bench", "generate", "serve", "check-run", "demo"])
def test_a_gpu_only_preset_is_refused_on_the_cpu_before_anything_is_built(argv, tmp_path, capsys, nothing_may_load):
    out = tmp_path / "runs"
    if argv[0] in ("bench", "demo", "check"):
        argv = [*argv, "--out", str(out)]
    err = one_line_error(capsys, argv)
    assert err.startswith(f"photon-trace {argv[0]}: error: the 1.5b preset") and "CUDA GPU only" in err
    assert not out.exists(), "the refused command wrote its output folder"


def test_the_gpu_only_preset_on_auto_follows_the_machine(tmp_path, capsys, nothing_may_load):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: auto takes it, and 1.5b runs")
    err = one_line_error(capsys, ["bench", "--model", "1.5b", "--out", str(tmp_path / "runs")])
    assert "there is no CUDA GPU here" in err


def test_generate_refuses_a_bad_sampling_value_before_loading_the_model(capsys, nothing_may_load):
    err = one_line_error(capsys, ["generate", "--backend", "cpu", "--top-p", "2", "hi"])
    assert err.startswith("photon-trace generate: error:") and "top_p" in err


def test_serve_refuses_a_busy_port_before_loading_the_model(capsys, nothing_may_load):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = one_line_error(capsys, ["serve", "--backend", "cpu", "--port", str(port)])
    assert err == (f"photon-trace serve: error: cannot listen on 127.0.0.1:{port}: the port is in use "
                   f"(another server is listening there: stop it or choose another --port)")


def test_the_dashboard_refuses_a_busy_port_before_serving(capsys, nothing_may_load):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = one_line_error(capsys, ["dashboard", str(DEMO_TRACE), "--port", str(port)])
    assert err.startswith(f"photon-trace dashboard: error: cannot listen on 127.0.0.1:{port}: the port is in use")


def test_the_demo_refuses_a_busy_port_before_its_benches(tmp_path, capsys, nothing_may_load):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = one_line_error(capsys, ["demo", "--port", str(port), "--out", str(tmp_path / "runs")])
    assert "the port is in use" in err and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv, message", [
    (["bench", "--streams", "-3"], "argument --streams: must be at least 1, got -3"),
    (["bench", "--repeats", "0"], "argument --repeats: must be at least 1, got 0"),
    (["bench", "--tokens", "1"], "argument --tokens: must be at least 2, got 1"),
    (["bench", "--streams", "1", "x"], "argument --streams: must be a whole number, got 'x'"),
    (["check", "t", "--max-idle", "2"], "argument --max-idle: must be a fraction from 0 to 1 (0.05 is 5%), got 2"),
    (["check", "t", "--max-idle", "nan"], "argument --max-idle: must be a finite number, got 'nan'"),
    (["check", "t", "--tolerance", "-1"], "argument --tolerance: must be zero or more, got -1"),
    (["check", "--run", "--streams", "0"], "argument --streams: must be at least 1, got 0"),
    (["demo", "--mask-streams", "0"], "argument --mask-streams: must be at least 1, got 0"),
    (["generate", "--max-tokens", "0", "hi"], "argument --max-tokens: must be at least 1, got 0"),
    (["serve", "--port", "70000"], "argument --port: must be a TCP port, 0 to 65535, got 70000"),
    (["serve", "--header-timeout", "0"], "argument --header-timeout: must be more than 0, got 0"),
    (["dashboard", "--port", "-1"], "argument --port: must be at least 0, got -1"),
])
def test_each_bad_value_is_refused_with_a_message_of_its_own(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"photon-trace {argv[0]}: error: {message}"


def test_several_bad_values_name_the_first_alone(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--streams", "-3", "--repeats", "0", "--tokens", "1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--streams" in last and "--repeats" not in last and "--tokens" not in last


def every_parser() -> list[argparse.ArgumentParser]:
    found, todo = [], [build_parser()]
    while todo:
        p = todo.pop()
        found.append(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += action.choices.values()
    return found


RST_OR_CODE = re.compile(r"``|:(class|func|meth|mod):`|\b[\w/]+\.py\b|photon_trace/")


@pytest.mark.parametrize("parser", every_parser(), ids=lambda p: p.prog)
def test_help_is_plain_words_and_says_every_default(parser):
    text = parser.format_help()
    assert not RST_OR_CODE.search(text), RST_OR_CODE.search(text).group(0)
    for action in parser._actions:
        if not action.option_strings or action.help is argparse.SUPPRESS:
            continue
        assert action.help, f"{parser.prog} {action.option_strings[0]}: no help"
        shown = " ".join(parser._get_formatter()._format_action(action).split())
        default = action.default
        if any(default is x for x in (None, False, argparse.SUPPRESS)) or default == []:
            continue
        assert "default" in shown.lower(), f"{parser.prog}: {shown}"


def test_help_shows_the_defaults_values(capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 1 8 32)" in text and "(default: small)" in text and "(default: traces/runs)" in text


def test_the_perfetto_export_answers_help_and_refuses_a_missing_trace_in_one_line(tmp_path, capsys):
    for argv in (["export", "perfetto", "--help"], ["export", "perfetto", str(DEMO_TRACE), "-h"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: photon-trace export perfetto") and "ui.perfetto.dev" in out
    missing = tmp_path / "missing.trace.jsonl"
    assert main(["export", "perfetto", str(missing), "--debug"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {missing}: no such file"
    assert main(["export", "perfetto", "--", "--help"]) == 2   # a file named --help, which is not there
    hint = "(for help: photon-trace export perfetto --help)"
    assert capsys.readouterr().err.strip() == f"error: --help: no such file {hint}"


def test_generate_says_a_presets_text_is_noise(capsys):
    assert main(["generate", "--backend", "cpu", "--max-tokens", "3", "--model", "tiny", "hi"]) == 0
    err = capsys.readouterr().err
    assert "tiny is a preset with random weights: its text is noise" in err


PROFILE = ROOT / "tests" / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"


def test_a_subcommand_imports_only_what_it_needs():
    """``photon-trace check`` of a profile loads neither the web server nor the engine nor the
    dashboard (other subcommands' parsers import them): a fresh process, since this one has them."""
    code = ("import contextlib, io, sys\n"
            "from photon_trace.cli.dispatch import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    code = main(['check', {str(PROFILE)!r}])\n"
            "heavy = ('photon_trace.server', 'photon_trace.engine', 'photon_trace.dashboard', 'starlette')\n"
            "print(code, sorted(m for m in sys.modules if m.startswith(heavy)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(None, 1) == ["1", "[]\n"]    # the gate ran (a sync in it: exit 1)


@pytest.mark.parametrize("argv", [
    ["check", str(PROFILE), "--max-idle", "0.5", "--allow-sync", "*item*"],
    ["--debug", "import", str(PROFILE), "--debug"],
    ["export", "perfetto", str(PROFILE)],
    ["serve", "--port", "0"],
    ["bench", "--streams", "1", "8"],
], ids=lambda a: a[0] if a[0] != "--debug" else a[1])
def test_the_one_subcommand_parser_reads_arguments_as_the_whole_one(argv):
    assert command_of(argv) is not None
    one, whole = vars(build_parser(command_of(argv)).parse_args(argv)), vars(build_parser().parse_args(argv))
    assert one == whole


@pytest.mark.parametrize("argv", [["--help"], ["-h", "check"], ["chek", "x"], [], ["--debug"]])
def test_help_and_mistakes_get_the_whole_parser(argv):
    assert command_of(argv) is None
