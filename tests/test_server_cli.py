"""``photon-trace serve``'s security defaults, before anything starts: an empty API key is an
error (it used to turn the check off), a key on the command line is refused (every local user
can read it with ps) and is read from a file or the environment instead, a non-loopback
address without a key is a warning, and the Host allowlist follows --host."""
from __future__ import annotations

import subprocess
import sys

import pytest

from photon_trace.cli.dispatch import build_parser
from photon_trace.cli.serve import allowed_hosts, api_key, security_check


def parse(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def test_an_empty_api_key_is_an_error_at_start():
    error, _ = security_check(parse("--api-key", ""))
    assert error and "empty" in error
    r = subprocess.run([sys.executable, "-m", "photon_trace.cli", "serve", "--port", "1"], capture_output=True,
                       text=True, timeout=120, env={"PHOTON_TRACE_API_KEY": "  ", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "the API key is empty" in r.stderr


@pytest.mark.parametrize("host, warns", [("127.0.0.1", False), ("localhost", False), ("::1", False),
                                         ("0.0.0.0", True), ("192.0.2.7", True)])
def test_a_public_address_without_a_key_warns(host, warns, monkeypatch):
    monkeypatch.delenv("PHOTON_TRACE_API_KEY", raising=False)
    error, warning = security_check(parse("--host", host))
    assert error is None and bool(warning) == warns
    monkeypatch.setenv("PHOTON_TRACE_API_KEY", "k")   # a key (from the environment: see below)
    assert security_check(parse("--host", host)) == (None, None)


def test_a_key_on_the_command_line_is_refused_and_read_from_a_file_or_the_environment(tmp_path, monkeypatch):
    """``--api-key KEY`` would show the key to every local user in ``ps``: refused, saying where
    to put it instead; ``--api-key-file`` and ``PHOTON_TRACE_API_KEY`` give it to the server."""
    monkeypatch.delenv("PHOTON_TRACE_API_KEY", raising=False)
    error, _ = security_check(parse("--api-key", "sk-visible"))
    assert error and "--api-key-file" in error and "PHOTON_TRACE_API_KEY" in error and "sk-visible" not in error
    r = subprocess.run([sys.executable, "-m", "photon_trace.cli", "serve", "--port", "1", "--api-key", "sk-visible"],
                       capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "command line" in r.stderr and "sk-visible" not in r.stderr

    keyfile = tmp_path / "key"
    keyfile.write_text("sk-from-file\n")
    keyfile.chmod(0o600)
    assert api_key(parse("--api-key-file", str(keyfile))) == ("sk-from-file", None)
    keyfile.chmod(0o644)
    key, warning = api_key(parse("--api-key-file", str(keyfile)))
    assert key == "sk-from-file" and "chmod 600" in warning and "sk-from-file" not in warning
    (tmp_path / "empty").write_text("\n")
    for bad, says in ((tmp_path / "empty", "empty"), (tmp_path / "missing", "cannot read")):
        error, _ = security_check(parse("--api-key-file", str(bad)))
        assert error and says in error
    monkeypatch.setenv("PHOTON_TRACE_API_KEY", "sk-from-env")
    assert api_key(parse()) == ("sk-from-env", None)


def test_the_host_allowlist():
    assert allowed_hosts(parse()) == {"localhost", "127.0.0.1", "::1"}
    assert "192.0.2.7" in allowed_hosts(parse("--host", "192.0.2.7"))
    assert allowed_hosts(parse("--allowed-hosts", "a.example, B.example")) == {"a.example", "b.example"}
