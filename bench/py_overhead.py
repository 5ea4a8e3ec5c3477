#!/usr/bin/python3
"""Python-side costs, each measured side by side in one run (modes interleaved per round,
medians reported):

1. stack: added cost per CUDA call of a ~50-frame Python stack walk: gtrace --py-stacks all
   against gtrace --py-stacks off on the same ctypes cudaLaunchKernel loop (and no gtrace).
2. sampling: slowdown of a CPU-bound Python loop sampled at 100 Hz and 1000 Hz by gtrace and by
   austin (Debian's 1.0.1; it reads CPython 3.10, not 3.11, hence the pyenv 3.10 interpreter).
   The loop and the profiler are pinned to one CPU (taskset), as on a machine whose cores are all
   busy — the case where a profiler's CPU time is the job's loss; wall time per iteration.

Usage: py_overhead.py BUILD_DIR [--rounds R]"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CUDART = "/usr/local/cuda/lib64/libcudart.so.13"


def bpf_stats(name):
    """(run_time_ns, run_cnt) of gtrace's BPF program `name` (kernel.bpf_stats_enabled=1)."""
    import json
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout or "[]")
    for p in progs:
        if p.get("name") == name:
            return p.get("run_time_ns", 0), p.get("run_cnt", 0)
    return 0, 0


STATS = {}


PIN = ["taskset", "-c", "1"]  # the sampling comparison: workload and profiler share one CPU


def cpu_seconds(pid):
    """Time on CPU of a process (all its threads), in seconds, to the nanosecond (schedstat)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just exited
    return total / 1e9


PROFILER_CPU = {}  # mode -> [share of one CPU the profiler used while the workload ran]


def run(cmd, tracer=None, stats_of=None):
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        p = subprocess.Popen(cmd + [go] + ([CUDART] if cmd[-2] == "stack" else []), stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().startswith("ready")
        t = tracer(p.pid, tmp) if tracer else None
        cpu0, bpf0, wall0 = (cpu_seconds(t.pid) if t else 0), (bpf_stats(stats_of[0])[0] if t and stats_of else 0), time.time()
        open(go, "w").close()
        out = p.stdout.readline()
        if t:  # what the profiler took from the machine while the workload ran: its CPU, and BPF's
            wall = time.time() - wall0
            bpf = (bpf_stats(stats_of[0])[0] - bpf0) / 1e9 if stats_of else 0
            PROFILER_CPU.setdefault(stats_of[1] if stats_of else None, []).append((cpu_seconds(t.pid) - cpu0 + bpf) / wall)
        if t and stats_of:  # BPF time inside the traced process's calls/samples: no VM noise
            STATS.setdefault(stats_of[1], []).append(bpf_stats(stats_of[0]))
        p.wait()
        if t:
            t.terminate()
            t.wait(timeout=60)
        fields = out.split()
        # cpu workload: wall time per iteration (pinned); stack workload: ns per call
        return float(fields[1]) if fields[0] == "wall_ns_per_op" else float(fields[-1])


def gtrace(build, *args, pin=False, env=None):
    def start(pid, tmp):
        t = subprocess.Popen((PIN if pin else []) + [os.path.join(build, "gtrace"), "attach", "--pid", str(pid), "-q", "-o",
                              os.path.join(tmp, "t.json"), *args], env=dict(os.environ, **(env or {})))
        time.sleep(2.5)
        if t.poll() is not None:
            sys.exit(f"gtrace {' '.join(args)} exited with {t.returncode} before the measurement; fix that first")
        return t
    return start


def austin(hz):
    def start(pid, tmp):
        t = subprocess.Popen(PIN + ["austin", "-p", str(pid), "-i", str(1_000_000 // hz), "-o", os.path.join(tmp, "a.txt")],
                             stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        return t
    return start


def compare(title, modes, rounds, cmd, baseline, stats_prog=None):
    results = {m: [] for m in modes}
    for r in range(rounds):
        for name, tracer in modes.items():
            stats = (stats_prog, name) if stats_prog and name.startswith("gtrace") else ("-", name)
            results[name].append(run(cmd, tracer, stats))
        print(f"  round {r + 1}: " + "  ".join(f"{m}={v[-1]:.1f}" for m, v in results.items()), flush=True)
    med = {m: statistics.median(v) for m, v in results.items()}
    print(f"\n{title} (median ns per operation over {rounds} rounds):")
    for m in modes:
        extra = f"  ({(med[m] / med[baseline] - 1) * 100:+.2f}% vs {baseline}, {med[m] - med[baseline]:+.0f} ns)" if m != baseline else ""
        print(f"  {m:24s} {med[m]:10.1f}{extra}")
    for m in modes:
        if m in STATS:
            per = [t / c for t, c in STATS[m] if c]
            if per:
                print(f"  BPF {stats_prog} in {m}: {statistics.median(per):.0f} ns per run (median of {len(per)} rounds)")
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["stack", "sampling"], help="run one of the two comparisons")
    args = ap.parse_args()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    if args.only != "sampling":
        stack_comparison(args)
    if args.only != "stack":
        sampling_comparison(args)


def stack_comparison(args):
    py = "/usr/bin/python3.11"
    med = compare("1. Python stack per CUDA call (~50 frames)", {
        "no gtrace": None,
        "gtrace --py-stacks off": gtrace(args.build, "--py-stacks", "off", "--sample-hz", "0"),
        "gtrace --py-stacks all": gtrace(args.build, "--py-stacks", "all", "--sample-hz", "0"),
        # The same walk reading each frame on its own instead of through the window (before 2026-11-22).
        "gtrace all, frame by frame": gtrace(args.build, "--py-stacks", "all", "--sample-hz", "0",
                                             env={"GTRACE_TEST_PY_FRAME_BY_FRAME": "1"}),
    }, args.rounds, [py, os.path.join(HERE, "py_workload.py"), "stack", "100000"], "gtrace --py-stacks off",
        "cuda_api_enter")
    for mode in ("gtrace --py-stacks all", "gtrace all, frame by frame"):
        wall = (med[mode] - med["gtrace --py-stacks off"]) / 1000
        per = {m: statistics.median([t / c for t, c in STATS[m] if c]) for m in (mode, "gtrace --py-stacks off")}
        print(f"  => {mode}: the walk adds {wall:.2f} us per call (wall), "
              f"{(per[mode] - per['gtrace --py-stacks off']) / 1000:.2f} us (BPF time)")


def sampling_comparison(args):
    py310 = sorted(glob.glob("/root/.pyenv/versions/3.10*/bin/python3.10"))
    if not py310:
        sys.exit("sampling comparison needs pyenv's CPython 3.10 (austin 1.0.1 cannot read 3.11)")
    compare("2. CPU-bound loop under sampling, loop and profiler on one CPU (wall ns per iteration)", {
        "unsampled": None,
        "gtrace 100 Hz": gtrace(args.build, "--sample-hz", "100", pin=True),
        "austin 100 Hz": austin(100),
        "gtrace 1000 Hz": gtrace(args.build, "--sample-hz", "1000", pin=True),
        "austin 1000 Hz": austin(1000),
    }, args.rounds, PIN + [py310[-1], os.path.join(HERE, "py_workload.py"), "cpu", "8000000"], "unsampled", "on_sample")
    print("  CPU the profiler used while the loop ran (its process + its BPF programs), share of one CPU —")
    print("  on the CPU it shares with the loop, this is the loop's slowdown:")
    for mode in ("gtrace 100 Hz", "austin 100 Hz", "gtrace 1000 Hz", "austin 1000 Hz"):
        if PROFILER_CPU.get(mode):
            print(f"    {mode:16s} {statistics.median(PROFILER_CPU[mode]) * 100:6.2f}%  (median of {len(PROFILER_CPU[mode])} rounds)")
    for hz in (100, 1000):
        per = [t / c for t, c in STATS.get(f"gtrace {hz} Hz", []) if c]
        if per:
            cost = statistics.median(per)
            print(f"  => gtrace at {hz} Hz costs the sampled thread {cost:.0f} ns per sample in BPF: "
                  f"{cost * hz / 1e7:.3f}% of its CPU time")


if __name__ == "__main__":
    main()
