#!/usr/bin/env bash
# Sets everything up, starts the bundled demo training job (torchrun, 2 ranks, CPU torch whose
# steps also make CUDA calls), attaches gtrace to the running job for 10 seconds, and writes
# demo-out/trace.json. Open it in Perfetto UI (ui.perfetto.dev) or chrome://tracing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/build.sh
OUT=$ROOT/demo-out
mkdir -p "$OUT"
rm -f "$OUT/go"

echo "demo: starting the training job (torchrun, 2 ranks)…"
# Python 3.11 needs --redirects/--tee with torch 1.13's torchrun (an enum bug otherwise).
setsid /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 --redirects 1 --tee 1 --master_port 29517 \
  demo/train.py --kernels "$ROOT/build/programs/libdemo_kernels.so" --steps 1000000 --step-sleep 0.02 \
  >"$OUT/job.log" 2>&1 &
JOB=$!
trap 'kill -TERM -- -$JOB 2>/dev/null || true; wait $JOB 2>/dev/null || true' EXIT

for _ in $(seq 1 240); do
  [[ $(grep -c "ready rank" "$OUT/job.log" || true) -ge 2 ]] && break
  kill -0 "$JOB" 2>/dev/null || { echo "demo: the job failed to start; see $OUT/job.log" >&2; exit 1; }
  sleep 0.5
done
sleep 2 # let it train a little: gtrace attaches to a job already running
echo "demo: job running (torchrun pid $JOB); attaching gtrace for 10 s, no restart, no code change"
"$ROOT/build/gtrace" attach --pid "$JOB" --duration 10 -o "$OUT/trace.json" --force
echo
echo "demo: trace written to $OUT/trace.json — open it in Perfetto UI (ui.perfetto.dev) or chrome://tracing"
