#!/usr/bin/env bash
# gtrace's cost on real training steps, side by side with torch.profiler, on a machine with an
# NVIDIA GPU and a CUDA PyTorch. Three workloads: a launch-bound loop (48 tiny Linear layers,
# batch 8, AdamW) and a GPT-2-small-sized transformer from torch.nn (bf16 autocast, batch 8 x 512,
# AdamW), each in one process: median step time untraced, with `gtrace attach` (default options)
# on the same running process, after it detached (its agent left dormant: equal to untraced
# within the noise), and under torch.profiler (CPU + CUDA); targets gtrace <= 1.05x transformer,
# <= 1.15x loop, below the profiler on both; gtrace's own CPU and the trace's bytes per step.
# And a 2-rank torchrun job on the one GPU (gloo, DataLoader workers) attached through its
# torchrun agent: step time per rank untraced / attached / after, and the report's verdict.
#
#   sudo gpu-bench.sh [--device cuda|cpu] [--tiny] [--steps N] [--workloads loop,transformer,torchrun]
#                     [--also '[VAR=VALUE]... GTRACE OPTIONS']... [--floor launch,all] [--bpf-stats]
#                     [--keep-traces] [PYTHON]
#
# PYTHON: an interpreter with torch (default python3). --device cpu --tiny: a smoke run of every
# phase without a GPU (targets not checked). Writes gpu-bench-out/ in the current directory (each
# workload's log; --keep-traces keeps each gtrace phase's trace). --also adds a gtrace phase with
# those options (and environment); --floor adds phases under tracefs uprobes without BPF on the
# launch functions or on gtrace's whole probe table (uprobe_floor.py); --bpf-stats prints each BPF
# program's runs per step and ns per run, and the agent's own time per CUDA callback and Python
# walk. Runs from a checkout or from the gtrace package.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/gpu_common.sh"
DEVICE=cuda
EXTRA=()
PY=python3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --device) DEVICE=${2:-}; shift 2 ;;
    --tiny) EXTRA+=(--tiny); shift ;;
    --steps|--workloads|--also|--floor) EXTRA+=("$1" "${2:-}"); shift 2 ;;
    --bpf-stats|--keep-traces) EXTRA+=("$1"); shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-bench: unknown option $1; see gpu-bench.sh --help" >&2; exit 2 ;;
    *) PY=$1; shift ;;
  esac
done
require_torch "$PY" "$DEVICE" gpu-bench
locate_gtrace "$HERE" gpu-bench
preflight_gtrace gpu-bench
OUT=$PWD/gpu-bench-out
echo "gpu-bench: using $GTRACE: $("$GTRACE" --version | head -1); results in $OUT"
exec "$PY" "$HERE/gpu_bench.py" --gtrace "$GTRACE" --out "$OUT" --device "$DEVICE" "${EXTRA[@]}"
