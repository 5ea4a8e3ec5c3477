#!/usr/bin/env bash
# Sets everything up, starts the bundled demo training job (torchrun, 2 ranks, CPU torch whose
# steps also run CUDA work on gtrace's GPU simulator), attaches gtrace to the running job for
# 10 seconds — no restart, no code change — and writes demo-out/trace.pftrace with CPU calls,
# Python stacks, GPU kernels and copies per stream, and launch→kernel arrows (open it in
# Perfetto UI, ui.perfetto.dev), the report (report.html) and the verdict. --json writes the
# trace as Chrome JSON instead (demo-out/trace.json, also for chrome://tracing; ~10x larger).
# Needs root (BPF); builds only what it uses (into GTRACE_BUILD_DIR, default build/; the
# outputs go to GTRACE_DEMO_OUT, default demo-out/).
#
#   scripts/demo.sh [--scenario balanced|slow_loader|big_h2d|tiny_kernels|long_kernels|straggler] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$(realpath -m "${GTRACE_BUILD_DIR:-build}")
SCENARIO=balanced
TRACE_NAME=trace.pftrace
while [[ $# -gt 0 ]]; do
  case "$1" in
    --scenario) SCENARIO=${2:-}; shift 2 ;;
    --scenario=*) SCENARIO=${1#*=}; shift ;;
    --json) TRACE_NAME=trace.json; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument $1; see scripts/demo.sh --help" >&2; exit 2 ;;
  esac
done
case "$SCENARIO" in
  balanced|slow_loader|big_h2d|tiny_kernels|long_kernels) SIM_ENV=() ;;
  straggler) SIM_ENV=(GTSIM_SLOW_RANK=1 GTSIM_SLOW_FACTOR=3) ;;
  *) echo "demo: unknown scenario '$SCENARIO'; pick one of balanced, slow_loader, big_h2d, tiny_kernels, long_kernels, straggler" >&2; exit 2 ;;
esac
# shellcheck source=need_root.sh
source scripts/need_root.sh
need_root demo "gtrace loads BPF programs" "$0" "$@"

if [[ ! -x $BUILD/gtrace ]]; then
  echo "demo: first build of gtrace, its agent and the GPU simulator: about 1½ minutes on 2 cores, less with more (later runs: seconds)"
fi
GTRACE_BUILD_DIR=$BUILD bash scripts/build.sh gtrace gtrace_agent gpusim_cudart gpusim_cuda gpusim_cupti demo_kernels >/dev/null
OUT=$(realpath -m "${GTRACE_DEMO_OUT:-$ROOT/demo-out}")
mkdir -p "$OUT"
TRACE=$OUT/$TRACE_NAME

echo "demo: starting the training job (torchrun, 2 ranks, scenario $SCENARIO, GPU simulator)…"
# Python 3.11 needs --redirects/--tee with torch 1.13's torchrun (an enum bug otherwise).
setsid env "${SIM_ENV[@]}" /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 --redirects 1 --tee 1 \
  --master_port 29517 demo/train.py --scenario "$SCENARIO" --cudart "$BUILD/gpusim/libcudart.so.13" \
  --kernels "$BUILD/programs/libdemo_kernels.so" --steps 1000000 >"$OUT/job.log" 2>&1 &
JOB=$!
trap 'kill -TERM -- -$JOB 2>/dev/null || true; wait $JOB 2>/dev/null || true' EXIT

for _ in $(seq 1 240); do
  [[ $(grep -c "ready rank" "$OUT/job.log" || true) -ge 2 ]] && break
  kill -0 "$JOB" 2>/dev/null || { echo "demo: the job failed to start; see $OUT/job.log" >&2; exit 1; }
  sleep 0.5
done
sleep 2 # let it train a little: gtrace attaches to a job already running
echo "demo: job running; gtrace ps lists it:"
"$BUILD/gtrace" ps | sed 's/^/  /'
echo "demo: attaching gtrace to the torchrun agent (pid $JOB) for 10 s, no restart, no code change"
"$BUILD/gtrace" attach --pid "$JOB" --duration 10 -o "$TRACE" --force \
  --summary-json "$OUT/summary.json"
kill -TERM -- -"$JOB" 2>/dev/null || true # the job is no longer needed: free the CPUs for the report
# The report read from the trace (also where the end of the capture left it to `gtrace report`).
"$BUILD/gtrace" report "$TRACE" --html "$OUT/report.html" --json "$OUT/report.json" --force >/dev/null
echo
if [[ $TRACE_NAME == trace.json ]]; then
  echo "demo: trace:    $TRACE — open it in Perfetto UI (ui.perfetto.dev) or chrome://tracing"
else
  echo "demo: trace:    $TRACE — open it in Perfetto UI (ui.perfetto.dev); --json for chrome://tracing"
fi
echo "demo: report:   $OUT/report.html (charts; open it in any browser)"
echo "demo: findings: $OUT/report.json (the capture's facts: $OUT/summary.json)"
/usr/bin/python3 - "$OUT/report.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
v = s["verdict"]
ranks = ", ".join(f"{n if n.startswith('pid') else 'rank ' + n}: {x or 'none'}"
                  for n, x in sorted(v["ranks"].items(), key=lambda kv: (not kv[0].isdigit(), len(kv[0]), kv[0])))
slow = f" (rank {s['straggler_rank']})" if "straggler_rank" in s else ""
lead = f" (no dominant cause; leading cause: {v['leading']})" if v.get("leading") else ""
print(f"demo: VERDICT: {v['job'] or 'none'}{slow}{lead} — {ranks}")
if "host_cpu_pressure" in v:
    print(f"demo: note: this host's CPUs were busy ({100 * v['host_cpu_pressure']:.0f}% of the capture a task waited for one): "
          "the ranks lagged for want of a CPU, not for the scenario; run the demo on a quieter host")
PY
cat <<EOF

Next:
  - open $TRACE in https://ui.perfetto.dev, and $OUT/report.html in a browser
  - another bottleneck: $0 --scenario straggler   (or slow_loader, big_h2d, tiny_kernels, long_kernels)
  - your own job: $BUILD/gtrace ps, then $BUILD/gtrace attach --pid <its torchrun agent's PID> --duration 30 -o trace.pftrace
  - a hung job's stacks: $BUILD/gtrace dump --pid <PID>; every command: $BUILD/gtrace --help
EOF
