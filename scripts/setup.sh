#!/usr/bin/env bash
# Set up photon_trace in ./.venv. With --test, also the test dependencies and
# Debian's Chromium for the browser tests (apt, when run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=""
if [ "${1:-}" = "--test" ]; then
  extras="[test]"
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "setup: could not install chromium; browser tests will be skipped" >&2
  fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
# torch is pinned to 2.13.0 in pyproject.toml: the CPU build on local disk, not a multi-GB CUDA build.
# --no-compile: byte-compiling every installed module (torch, triton, ...) was half of a fresh
# setup (~3.5 min -> 1m54s on the 2-core VM); Python compiles the modules a run imports on first use (~2.5 s).
.venv/bin/python -m pip install -q --no-compile --disable-pip-version-check -e ".${extras}"
