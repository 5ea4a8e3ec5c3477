#!/usr/bin/env bash
# Self-check on a machine with an NVIDIA GPU and a CUDA PyTorch: starts a small training loop
# (DataLoader, AdamW, copies each step), attaches gtrace to it while it runs, and checks the
# trace: the CUPTI agent ran; kernels and copies are there; 100% of the GPU ops are linked to
# the call that issued them; launches from the main thread carry their Python source line; the
# torch ranges (Optimizer.step, zero_grad, enumerate(DataLoader)) are named. Then the job's own
# torch.profiler beside gtrace (gpu_profiler_check.py), as started plainly and with
# KINETO_USE_DAEMON=1: windows opened before and while gtrace is attached record the kernels of a
# window without gtrace; the job never crashes or hangs (--no-profiler skips this part).
#
#   sudo gpu-check.sh [--device cuda|cpu] [--options 'GTRACE OPTIONS'] [--no-profiler] [PYTHON]
#
# PYTHON: an interpreter with torch (default python3). --device cpu: a smoke run without a GPU
# (the GPU checks are skipped). --options: gtrace attach runs with these options too
# (e.g. '--api-capture agent-records'). Prints PASS/FAIL per check and exits 1 if any failed; leaves
# gpu-check-out/trace.json (open it in Perfetto UI) in the current directory. Runs from a
# checkout or from the gtrace package.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/gpu_common.sh"
DEVICE=cuda
OPTIONS=()
PY=python3
PROFILER=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --device) DEVICE=${2:-}; shift 2 ;;
    --options) read -r -a OPTIONS <<< "${2:-}"; shift 2 ;;
    --no-profiler) PROFILER=0; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option $1; see gpu-check.sh --help" >&2; exit 2 ;;
    *) PY=$1; shift ;;
  esac
done
if [[ $DEVICE == cuda ]] && ! command -v nvidia-smi >/dev/null; then
  echo "gpu-check: FAIL: no nvidia-smi; this check needs an NVIDIA GPU (--device cpu for a smoke run)" >&2
  exit 1
fi
require_torch "$PY" "$DEVICE" gpu-check
locate_gtrace "$HERE" gpu-check
OUT=$PWD/gpu-check-out
mkdir -p "$OUT"
echo "gpu-check: using $GTRACE: $("$GTRACE" --version | head -1)"

"$PY" "$HERE/gpu_check_train.py" --device "$DEVICE" >"$OUT/train.log" 2>&1 &
JOB=$!
trap 'kill $JOB 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  grep -q ready "$OUT/train.log" && break
  kill -0 $JOB 2>/dev/null || { echo "gpu-check: FAIL: the training loop died; see $OUT/train.log" >&2; exit 1; }
  sleep 0.5
done
sleep 3 # initialized and training: gtrace attaches to a running process
echo "gpu-check: attaching to the running training loop (pid $JOB) for 5 s"
# JSON explicitly: gpu_check_verify.py reads it with plain python3 (no protobuf module on GPU hosts).
"$GTRACE" attach --pid $JOB --duration 5 --format json -o "$OUT/trace.json" --force "${OPTIONS[@]}" 2>&1 | tee "$OUT/gtrace.log"
STATUS=0
"$PY" "$HERE/gpu_check_verify.py" "$OUT/trace.json" --device "$DEVICE" || STATUS=1
kill $JOB 2>/dev/null || true
if ((PROFILER)); then
  "$PY" "$HERE/gpu_profiler_check.py" --gtrace "$GTRACE" --python "$PY" --out "$OUT" --device "$DEVICE" || STATUS=1
  "$PY" "$HERE/gpu_profiler_check.py" --gtrace "$GTRACE" --python "$PY" --out "$OUT" --device "$DEVICE" --daemon || STATUS=1
fi
exit $STATUS
