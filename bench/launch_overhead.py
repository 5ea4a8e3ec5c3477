#!/usr/bin/python3
"""Per-call cost of a traced cudaLaunchKernel, side by side in one run:
  untraced            the loop alone
  floor-launch        tracefs p:+r: uprobes on cudaLaunchKernel, no BPF, tracing off: the traps alone
  floor-table         the same on every function of gtrace's probe table (the same probe set)
  gtrace-probes       gtrace attach --no-gpu --py-stacks off --sample-hz 0 (probes, events, no walk)
  gtrace-stacks       gtrace attach --no-gpu --sample-hz 0 (with the Python stack walk)
Modes are interleaved over several rounds; the median per mode is reported, and the ratio of
gtrace-probes' added cost (mode minus untraced) to floor-table's: target <= 1.3x.

With --agent the loop runs on the GPU simulator (its libcudart and libcupti) instead, and the
modes are: untraced, gtrace --no-gpu (uprobes record the calls), gtrace (the agent records them
in its CUPTI callbacks, uprobes off), --api-capture agent-records with and without Python stacks.
The simulator's CUPTI dispatch is cheap: this measures gtrace's own work per call, not CUPTI's
(bench/cupti_cost.cu measures that on a GPU host).

Usage: launch_overhead.py BUILD_DIR [--calls N] [--rounds R] [--agent]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from uprobe_floor import Floor, gtrace_symbols  # noqa: E402

CUDART = "/usr/local/cuda/lib64/libcudart.so.13"


def run_loop(build, calls, tracer=None, env=None):
    """Start the loop, attach the tracer (a function taking the pid), run it, return ns/call."""
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        p = subprocess.Popen([os.path.join(build, "bench", "launch_loop"), "--calls", str(calls), "--go-file", go],
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})))
        assert p.stdout.readline().startswith("ready")
        t = tracer(p.pid, tmp) if tracer else None
        open(go, "w").close()
        out = p.stdout.read()
        p.wait()
        if t:
            t.terminate()
            t.wait(timeout=60)
        return float(out.split()[-1])


class _FloorTracer:
    """The raw uprobe floor on SYMBOLS while a run lasts (the run_loop tracer interface)."""

    def __init__(self, pid, symbols):
        self.floor = Floor(pid, symbols)
        self.floor.__enter__()

    def terminate(self):
        self.floor.__exit__(None, None, None)

    def wait(self, timeout=None):
        return 0


def floor(symbols):
    return lambda pid, tmp: _FloorTracer(pid, symbols)


def gtrace(build, *extra):
    def start(pid, tmp):
        t = subprocess.Popen([os.path.join(build, "gtrace"), "attach", "--pid", str(pid), "-o",
                              os.path.join(tmp, "trace.json"), "--sample-hz", "0", *extra],
                             stderr=subprocess.PIPE, text=True)
        want = "CUDA uprobes off" if "--no-gpu" not in extra else "attached to PID"  # the agent records the calls
        for line in t.stderr:  # gtrace exits by itself when the loop ends
            if want in line:
                time.sleep(0.5)
                threading.Thread(target=t.stderr.read, daemon=True).start()
                return t
        sys.exit(f"gtrace {' '.join(extra)} failed before the measurement")
    return start


def agent_main(args):
    env = {"LD_LIBRARY_PATH": os.path.join(args.build, "gpusim")}
    modes = {"untraced": None, "gtrace --no-gpu": gtrace(args.build, "--no-gpu"), "gtrace (agent)": gtrace(args.build),
             "gtrace agent-records": gtrace(args.build, "--api-capture", "agent-records"),
             "agent-records, no stacks": gtrace(args.build, "--api-capture", "agent-records", "--py-stacks", "off")}
    results = {m: [] for m in modes}
    for r in range(args.rounds):
        for name, tracer in modes.items():
            results[name].append(run_loop(args.build, args.calls, tracer, env))
        print(f"round {r + 1}: " + "  ".join(f"{m}={v[-1]:.0f}ns" for m, v in results.items()), flush=True)
    med = {m: statistics.median(v) for m, v in results.items()}
    print(f"\nmedian ns per cudaLaunchKernel (GPU simulator) over {args.rounds} rounds of {args.calls} calls:")
    for m in modes:
        print(f"  {m:18s} {med[m]:8.0f} ns")
    base = med["untraced"]
    print(f"\nadded per launch: uprobes (--no-gpu) {med['gtrace --no-gpu'] - base:.0f} ns; the agent recording the calls "
          f"(uprobes off): callbacks {med['gtrace (agent)'] - base:.0f} ns, API records "
          f"{med['gtrace agent-records'] - base:.0f} ns, API records without stacks (no callback) "
          f"{med['agent-records, no stacks'] - base:.0f} ns")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--calls", type=int, default=300000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--agent", action="store_true", help="measure the CUPTI agent on the GPU simulator")
    args = ap.parse_args()
    if args.agent:
        return agent_main(args)
    modes = {
        "untraced": None,
        "floor-launch": floor(("cudaLaunchKernel",)),
        "floor-table": floor(gtrace_symbols()),
        "gtrace-probes": gtrace(args.build, "--no-gpu", "--py-stacks", "off"),
        "gtrace-stacks": gtrace(args.build, "--no-gpu"),
    }
    busy = subprocess.run(["bpftool", "perf", "list"], capture_output=True, text=True).stdout
    if "libcudart" in busy:
        sys.exit("another tracer has uprobes on libcudart (bpftool perf list); stop it first:\n" + busy)
    results = {m: [] for m in modes}
    for r in range(args.rounds):
        for name, tracer in modes.items():
            results[name].append(run_loop(args.build, args.calls, tracer))
        print(f"round {r + 1}: " + "  ".join(f"{m}={v[-1]:.0f}ns" for m, v in results.items()), flush=True)
    med = {m: statistics.median(v) for m, v in results.items()}
    base = med["untraced"]
    added = {m: med[m] - base for m in modes if m != "untraced"}
    print(f"\nmedian ns per cudaLaunchKernel over {args.rounds} rounds of {args.calls} calls:")
    for m in modes:
        print(f"  {m:22s} {med[m]:8.0f} ns" + (f"   (+{added[m]:.0f} ns)" if m in added else ""))
    ratio = added["gtrace-probes"] / added["floor-table"]
    print(f"\ngtrace-probes added cost / floor-table added cost: {ratio:.2f}x (target <= 1.30x: "
          f"{'met' if ratio <= 1.3 else 'NOT met'})")
    print(f"the Python stack walk adds {added['gtrace-stacks'] - added['gtrace-probes']:.0f} ns per call")


if __name__ == "__main__":
    main()
