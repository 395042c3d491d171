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
# No --no-compile: it halves a fresh setup here, but with PYTHONDONTWRITEBYTECODE=1 (set on
# these machines) nothing is then ever cached, every process compiles torch again, and the
# suite took 22:54 instead of ~15 minutes.
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extras}"
