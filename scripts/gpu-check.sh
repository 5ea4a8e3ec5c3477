#!/usr/bin/env bash
# Self-check on a machine with an NVIDIA GPU and PyTorch (CUDA build): starts a small CUDA
# training loop, attaches gtrace to it while it runs, and checks that the trace has GPU kernels
# and copies from CUPTI, each linked to the CPU call that launched it.
#
#   sudo scripts/gpu-check.sh [PYTHON]     (PYTHON: an interpreter with torch; default python3)
#
# Prints PASS or FAIL with the reason; leaves gpu-check-out/trace.json for Perfetto UI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${1:-python3}
OUT=$ROOT/gpu-check-out
command -v nvidia-smi >/dev/null || { echo "gpu-check: FAIL: no nvidia-smi; this check needs an NVIDIA GPU" >&2; exit 1; }
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" ||
  { echo "gpu-check: FAIL: $PY has no CUDA-enabled torch" >&2; exit 1; }
[[ -x build/gtrace ]] || bash scripts/build.sh
mkdir -p "$OUT"

"$PY" scripts/gpu_check_train.py >"$OUT/train.log" 2>&1 &
JOB=$!
trap 'kill $JOB 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  grep -q ready "$OUT/train.log" && break
  kill -0 $JOB 2>/dev/null || { echo "gpu-check: FAIL: the training loop died; see $OUT/train.log" >&2; exit 1; }
  sleep 0.5
done
sleep 3 # CUDA initialized and training: gtrace attaches to a running process
echo "gpu-check: attaching to the running training loop (pid $JOB) for 5 s"
build/gtrace attach --pid $JOB --duration 5 -o "$OUT/trace.json" --force 2>&1 | tee "$OUT/gtrace.log"

/usr/bin/python3 - "$OUT/trace.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
gpu = t["otherData"]["gpu"]
kernels = [e for e in ev if e.get("cat") == "kernel"]
copies = [e for e in ev if e.get("cat") == "gpu_memcpy"]
launches = [e for e in ev if e.get("cat") == "cuda_api" and "Launch" in e["name"]]
flows = [e for e in ev if e.get("cat") == "ac2g" and e["ph"] == "f"]
print(f"gpu-check: {len(launches)} launches, {len(kernels)} kernels, {len(copies)} copies, {len(flows)} launch->GPU links; agent: {gpu}")
problems = []
if not gpu.get("agents_active"):
    problems.append(f"no active agent ({gpu.get('warnings')})")
if not kernels:
    problems.append("no kernels in the trace")
if not copies:
    problems.append("no host/device copies in the trace")
if kernels and gpu.get("joined_to_call", 0) < 0.9 * gpu.get("gpu_ops", 1):
    problems.append(f"only {gpu.get('joined_to_call')} of {gpu.get('gpu_ops')} GPU records linked to their call")
if kernels and not any(k["dur"] > 0 for k in kernels):
    problems.append("every kernel has zero duration (CUPTI timestamps)")
print("gpu-check: " + ("PASS" if not problems else "FAIL: " + "; ".join(problems)))
sys.exit(1 if problems else 0)
PY
