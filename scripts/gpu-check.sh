#!/usr/bin/env bash
# Self-check on a machine with an NVIDIA GPU and a CUDA PyTorch. gpu_check_suite.py starts jobs on
# every launch path a training step uses (gpu_check_jobs.py: a training loop; bf16 cuBLAS/cuBLASLt
# GEMMs with split-K; torch.compile's Triton kernels; a CUDA graph replayed; NCCL collectives at
# world size 1; copies and sets of every kind), attaches gtrace to them while they run, and
# checks: the agent ran in each; 100% of each job's GPU ops are linked to their call; Python
# sources, torch ranges, the backward thread's loss.backward() line and torch's memory at attach;
# Communication from NCCL's kernels in `gtrace report`; five re-attaches in a row, 100% each;
# --autograd-links; `gtrace record` gives the attach's GPU ops. Then the job's own torch.profiler
# beside gtrace (gpu_profiler_check.py), as started plainly and with KINETO_USE_DAEMON=1: windows
# opened before and while gtrace is attached record the kernels of a window without gtrace; the
# job never crashes or hangs (--no-profiler skips this part).
#
#   sudo gpu-check.sh [--device cuda|cpu] [--options 'GTRACE OPTIONS'] [--no-profiler] [PYTHON]
#
# PYTHON: an interpreter with torch (default python3). --device cpu: a smoke run without a GPU
# (the GPU checks are SKIPs). --options: every gtrace run has these options too (e.g.
# '--api-capture agent-records'). Prints PASS/FAIL per check with its counts and exits 1 if any
# failed; leaves its traces and logs in gpu-check-out/ in the current directory (suite.json:
# open it in Perfetto UI). Runs from a checkout or from the gtrace package.
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
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
preflight_gtrace gpu-check
OUT=$PWD/gpu-check-out
mkdir -p "$OUT"
echo "gpu-check: using $GTRACE: $("$GTRACE" --version | head -1)"

STATUS=0
"$PY" "$HERE/gpu_check_suite.py" --gtrace "$GTRACE" --out "$OUT" --device "$DEVICE" --options="${OPTIONS[*]}" || STATUS=1
if ((PROFILER)); then
  "$PY" "$HERE/gpu_profiler_check.py" --gtrace "$GTRACE" --python "$PY" --out "$OUT" --device "$DEVICE" || STATUS=1
  "$PY" "$HERE/gpu_profiler_check.py" --gtrace "$GTRACE" --python "$PY" --out "$OUT" --device "$DEVICE" --daemon || STATUS=1
fi
exit $STATUS
