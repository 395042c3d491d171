#!/usr/bin/env bash
# The one prepared GPU run: everything a first GPU session needs, safe to run once.
#
# On the GPU machine, from the repository root (one H200, python3 with CUDA torch, no
# network, no nvtx/OpenTelemetry/Dash/xgrammar; results come back as at most 8 files,
# so every trace and log is packed into one gpu_check.tgz beside a plain summary.txt):
#
#   PHOTON_TRACE_COMMIT=$(git rev-parse HEAD) scripts/gpu_check.sh /tmp/gpu_check "$OUT"
#
# i.e. run into a scratch folder (/tmp/gpu_check: its gpu_check/ holds everything, packed
# into /tmp/gpu_check/gpu_check.tgz beside /tmp/gpu_check/summary.txt) and copy those two
# files into the folder that is returned ("$OUT"); the commit is passed in because the
# machine may get no .git. Give the call a timeout of 480 s: the worst case is 415 s.
# Without a GPU, the same stages on the tiny preset and the host-process device (how
# this script is tested; PYTHON picks the interpreter, python3 otherwise):
#
#   PYTHON=.venv/bin/python scripts/gpu_check.sh --backend cpu /tmp/gpu_check_dry
#
# Stages, each in its time box. A stage that hits its box gets SIGABRT, so Python's
# faulthandler (PYTHONFAULTHANDLER=1) writes every thread's stack into its log, and
# SIGKILL 5 s later; later stages run regardless.
#   env     environment.txt: commit, python, torch, CUDA, optional modules, nvidia-smi    15 s
#   pytest  the GPU-marked tests (pytest -m gpu), a stack dump for any test over 60 s     95 s
#   bench   photon-trace bench: 1.5b, bf16, CUDA graphs, sync debug, 1/8/32 streams     125 s
#   check   photon-trace check on the 8-stream pipelined trace (Markdown, JUnit)         15 s
#   clock   scripts/cupti_clock_check.py: our device times against CUPTI's, 8 streams     60 s
#   profiler  bench --torch-profiler, 8 streams: the profiler's trace imported and checked
#           against ours (same steps, device op times), then photon-trace import of it    60 s
#   pack    gpu_check.tgz (everything above), at most 15 MiB                             10 s
# Worst case: 380 s of boxes + 7 x 5 s of kill grace = 415 s, under the 420 s budget.
# Exit status: 0 when every stage exited 0, 1 otherwise (check's 1 is the gate's verdict on the
# measured idle, a finding rather than a breakage: summary.txt says which), 2 on bad arguments.
set -uo pipefail

BACKEND=cuda
if [ "${1:-}" = "--backend" ]; then BACKEND=${2:?--backend needs cuda or cpu}; shift 2; fi
case "$BACKEND" in cuda|cpu) ;; *) echo "gpu_check: --backend cuda|cpu, got $BACKEND" >&2; exit 2 ;; esac
SCRATCH=${1:?usage: scripts/gpu_check.sh [--backend cpu] SCRATCH_DIR [RETURN_DIR]}
RETURN=${2:-}

# time boxes in seconds (tests/test_gpu_check_script.py holds their sum to the budget)
T_ENV=15 T_PYTEST=95 T_BENCH=125 T_CHECK=15 T_CLOCK=60 T_PROFILER=60 T_PACK=10 KILL_GRACE=5 BUDGET=420

ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$SCRATCH" || exit 2
SCR=$(cd "$SCRATCH" && pwd)
W=$SCR/gpu_check   # only this folder and the two files beside it are ours: cleared, so a rerun starts clean
TGZ=$SCR/gpu_check.tgz
rm -rf "$W" "$TGZ" "$SCR/summary.txt" && mkdir -p "$W" || exit 2
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export PHOTON_TRACE_COMMIT=${PHOTON_TRACE_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}
ulimit -c 0   # SIGABRT dumps Python stacks, not a core file
PY=${PYTHON:-$(command -v python3 || command -v python)}
SUMMARY="$W/summary.txt"
START=$(date +%s)
declare -A RC SECS

if [ "$BACKEND" = cuda ]; then
  MODEL=1.5b DTYPE=bfloat16 STREAMS="1 8 32" TOKENS=96
else
  MODEL=tiny DTYPE=float32 STREAMS="1 8" TOKENS=32
fi

log() { echo "[gpu_check $(( $(date +%s) - START ))s] $*" | tee -a "$SUMMARY"; }

# run NAME BOX LOG CMD...: the command in its time box, output to LOG; records exit code and seconds
run() {
  local name=$1 box=$2 out=$3 t0
  shift 3
  t0=$(date +%s)
  timeout -s ABRT -k "$KILL_GRACE" "$box" "$@" > "$out" 2>&1
  RC[$name]=$?
  SECS[$name]=$(( $(date +%s) - t0 ))
  log "$name: exit ${RC[$name]} in ${SECS[$name]} s (box $box s; 124: timed out, stacks in $(basename "$out"))"
}

: > "$SUMMARY"
log "photon_trace gpu_check, backend $BACKEND, commit $PHOTON_TRACE_COMMIT, python $PY"

# -- env (find_spec: whether a module is there without importing it)
ENV_PY='
import datetime, importlib.util, os, platform, sys
print("date:", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
print("commit:", os.environ.get("PHOTON_TRACE_COMMIT"), "tree:", os.getcwd())
print("python:", sys.executable, platform.python_version())
for mod in ("numpy", "pytest", "pytest_timeout", "hypothesis", "tqdm", "tokenizers", "safetensors",
            "nvtx", "xgrammar", "dash", "opentelemetry"):
    print(f"module {mod}:", "yes" if importlib.util.find_spec(mod) else "no", flush=True)
import torch
cuda = torch.cuda.is_available()
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", cuda,
      "device", torch.cuda.get_device_name() if cuda else None)
'
run env "$T_ENV" "$W/environment.txt" bash -c '"$1" -c "$2"; command -v nvidia-smi >/dev/null && nvidia-smi || echo "no nvidia-smi"' \
    _ "$PY" "$ENV_PY"
grep -E '^(python|torch) |^module (pytest|nvtx|xgrammar|dash|opentelemetry):' "$W/environment.txt" | tee -a "$SUMMARY"

# -- pytest: only the files with GPU marks (an optional package missing for another module
#    cannot stop collection); a module that still fails to import is reported, the rest run
GPU_FILES=$(grep -lE 'pytest\.mark\.gpu|gpu_test' tests/test_*.py | tr '\n' ' ')
# pytest-timeout registers itself through its entry point where it is installed: naming it
# with -p as well is refused ("Plugin already registered"), so only ask whether --timeout exists
TIMEOUT_OPT=()
"$PY" -m pytest --help 2>/dev/null | grep -q -- '--timeout=' && TIMEOUT_OPT=(--timeout 100)
log "pytest -m gpu on: $GPU_FILES"
# shellcheck disable=SC2086
run pytest "$T_PYTEST" "$W/pytest-gpu.log" "$PY" -m pytest -m gpu -q -p no:cacheprovider \
    --continue-on-collection-errors -o addopts="-ra" -o faulthandler_timeout=60 "${TIMEOUT_OPT[@]}" \
    --junitxml "$W/pytest-gpu.xml" $GPU_FILES
sed -n '/short test summary/,$p' "$W/pytest-gpu.log" | tail -n 40 >> "$SUMMARY"
grep -q 'short test summary' "$W/pytest-gpu.log" || tail -n 3 "$W/pytest-gpu.log" >> "$SUMMARY"

# -- bench
log "photon-trace bench --model $MODEL --dtype $DTYPE --streams $STREAMS"
# shellcheck disable=SC2086
run bench "$T_BENCH" "$W/bench.log" "$PY" -m photon_trace.cli bench --model "$MODEL" --backend "$BACKEND" \
    --dtype "$DTYPE" --cuda-graphs on --sync-debug --streams $STREAMS --tokens "$TOKENS" --repeats 2 \
    --no-progress --out "$W/bench"
tail -n 30 "$W/bench.log" >> "$SUMMARY"

# -- check: the CI gate on the 8-stream pipelined trace
TRACE=$(ls "$W"/bench/bench-*-s8-pipelined-r1.trace.jsonl 2>/dev/null | head -1)
if [ -n "$TRACE" ]; then
  run check "$T_CHECK" "$W/check.log" "$PY" -m photon_trace.cli check "$TRACE" \
      --markdown "$W/check.md" --junit "$W/check.xml"
  cat "$W/check.log" >> "$SUMMARY"
else
  echo "no 8-stream pipelined trace to check" > "$W/check.log"; RC[check]=2; SECS[check]=0
  log "check: exit 2 (no 8-stream pipelined trace)"
fi

# -- clock: the same 8-stream pipelined run under torch.profiler, against CUPTI
run clock "$T_CLOCK" "$W/clock.log" "$PY" scripts/cupti_clock_check.py "$W/clock" --model "$MODEL" \
    --backend "$BACKEND" --dtype "$DTYPE" --streams 8
grep -vE '^(USDT|STAGE:|\[W)' "$W/clock.log" | tail -n 8 >> "$SUMMARY"

# -- profiler: torch.profiler's trace of a bench run, imported and checked against ours
# shellcheck disable=SC2016
run profiler "$T_PROFILER" "$W/profiler.log" bash -c '"$1" -m photon_trace.cli bench --model "$2" --backend "$3" \
    --dtype "$4" --streams 8 --tokens 16 --repeats 1 --no-progress --torch-profiler --out "$5" || exit $?
  pt=$(ls "$5"/*-s8-pipelined-r1.pt.trace.json.gz | head -1) && "$1" -m photon_trace.cli import "$pt" --step-annotation launch' \
    _ "$PY" "$MODEL" "$BACKEND" "$DTYPE" "$W/profiler"
grep -vE '^(USDT|STAGE:|\[W)' "$W/profiler.log" | tail -n 12 >> "$SUMMARY"

# -- pack: the whole folder; over 15 MiB, the bench traces but one go
status=0
for stage in env pytest bench check clock profiler; do [ "${RC[$stage]}" = 0 ] || status=1; done
log "stages: env=${RC[env]} pytest=${RC[pytest]} bench=${RC[bench]} check=${RC[check]} clock=${RC[clock]} profiler=${RC[profiler]} -> exit $status"
timeout -k "$KILL_GRACE" "$T_PACK" tar -czf "$TGZ" -C "$SCR" gpu_check 2>> "$SUMMARY"
RC[pack]=$?
if [ "$(stat -c %s "$TGZ" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
  log "gpu_check.tgz over 15 MiB: packed again without the bench traces but s8 pipelined r1"
  timeout -k "$KILL_GRACE" "$T_PACK" tar -czf "$TGZ" --exclude='*-r2.trace.jsonl' --exclude='*-s1-*.trace.jsonl' \
      --exclude='*-s32-*.trace.jsonl' --exclude='*-s8-blocking-*.trace.jsonl' -C "$SCR" gpu_check 2>> "$SUMMARY"
  RC[pack]=$?
fi
[ "${RC[pack]}" = 0 ] || status=1
log "gpu_check.tgz: $(stat -c %s "$TGZ" 2>/dev/null || echo 0) bytes, $(tar -tzf "$TGZ" 2>/dev/null | wc -l) entries; pack exit ${RC[pack]}"
log "done in $(( $(date +%s) - START )) s -> exit $status"
cp "$SUMMARY" "$SCR/summary.txt"
if [ -n "$RETURN" ]; then
  mkdir -p "$RETURN" && cp "$TGZ" "$SCR/summary.txt" "$RETURN"/ && echo "copied gpu_check.tgz and summary.txt to $RETURN"
fi
exit $status
