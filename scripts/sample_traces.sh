#!/usr/bin/env bash
# Regenerate the sample traces in traces/ from the current engine: the demo's runs at 8 streams
# on tiny, i.e. the blocking/pipelined pair, and every other request constrained (`point`),
# pipelined with the async mask upload and with the mask-upload bug.
# Then regenerate the screenshots in docs/ from them:
#   PT_DOCS_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/test_dashboard_screenshots.py
set -euo pipefail
cd "$(dirname "$0")/.."
PT=${PT:-.venv/bin/photon-trace}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

$PT bench --model tiny --streams 8 --no-progress --out "$tmp/pair" >/dev/null
cp "$tmp/pair/bench-tiny-async-s8-blocking-r1.trace.jsonl" traces/tiny-s8-blocking.trace.jsonl
cp "$tmp/pair/bench-tiny-async-s8-pipelined-r1.trace.jsonl" traces/tiny-s8-pipelined.trace.jsonl

for upload in async sync; do
  $PT bench --model tiny --streams 8 --constrained point --mask-upload $upload --no-progress \
      --out "$tmp/$upload" >/dev/null
  cp "$tmp/$upload/bench-tiny-$upload-point-s8-pipelined-r1.trace.jsonl" \
     "traces/tiny-point-s8-mask-$upload-pipelined.trace.jsonl"
done
ls -l traces/*.trace.jsonl
