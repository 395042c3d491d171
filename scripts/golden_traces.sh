#!/usr/bin/env bash
# Re-record the golden traces in tests/data/golden/ (the analysis tests' real engine traces):
# tiny, 8 streams, every request constrained (point), the mask upload async and sync.
# Afterwards re-read the new traces and re-derive the constants in tests/test_analysis_golden.py
# (steps, the recorded call sites): they describe what happened in the recorded runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PT=${PT:-.venv/bin/photon-trace}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for upload in async sync; do
  $PT bench --model tiny --streams 8 --constrained point --mask-upload $upload --repeats 1 --no-progress \
      --out "$tmp/$upload" >/dev/null
done
cp "$tmp/async/bench-tiny-async-point-s8-pipelined-r1.trace.jsonl" tests/data/golden/clean-pipelined.trace.jsonl
cp "$tmp/sync/bench-tiny-sync-point-s8-pipelined-r1.trace.jsonl" tests/data/golden/mask-sync-pipelined.trace.jsonl
cp "$tmp/async/bench-tiny-async-point-s8-blocking-r1.trace.jsonl" tests/data/golden/blocking.trace.jsonl
ls -l tests/data/golden/
