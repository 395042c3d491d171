"""``photon-trace serve``'s security defaults, before anything starts: an empty API key is an
error (it used to turn the check off), a non-loopback address without a key is a warning, and
the Host allowlist follows --host."""
from __future__ import annotations

import subprocess
import sys

import pytest

from photon_trace.cli.dispatch import build_parser
from photon_trace.cli.serve import allowed_hosts, security_check


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
def test_a_public_address_without_a_key_warns(host, warns):
    error, warning = security_check(parse("--host", host))
    assert error is None and bool(warning) == warns
    assert security_check(parse("--host", host, "--api-key", "k")) == (None, None)


def test_the_host_allowlist():
    assert allowed_hosts(parse()) == {"localhost", "127.0.0.1", "::1"}
    assert "192.0.2.7" in allowed_hosts(parse("--host", "192.0.2.7"))
    assert allowed_hosts(parse("--allowed-hosts", "a.example, B.example")) == {"a.example", "b.example"}
