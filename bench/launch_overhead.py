#!/usr/bin/python3
"""Per-call cost of a traced cudaLaunchKernel, side by side in one run:
  untraced            the loop alone
  bpftrace-entry      a count-only bpftrace uprobe on the same symbol (the floor any uprobe pays)
  bpftrace-entry+exit count-only bpftrace uprobe + uretprobe (the floor of any entry/exit tracer)
  gtrace              gtrace attach (entry + return probe, full event to the ring buffer)
Modes are interleaved over several rounds; the median per mode is reported, and the ratios of
added cost (mode minus untraced) to the floors'. Usage: launch_overhead.py BUILD_DIR [--calls N] [--rounds R]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CUDART = "/usr/local/cuda/lib64/libcudart.so.13"


def run_loop(build, calls, tracer=None):
    """Start the loop, attach the tracer (a function taking the pid), run it, return ns/call."""
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        p = subprocess.Popen([os.path.join(build, "bench", "launch_loop"), "--calls", str(calls), "--go-file", go],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().startswith("ready")
        t = tracer(p.pid, tmp) if tracer else None
        open(go, "w").close()
        out = p.stdout.read()
        p.wait()
        if t:
            t.terminate()
            t.wait(timeout=60)
        return float(out.split()[-1])


def bpftrace(program):
    def start(pid, tmp):
        t = subprocess.Popen(["bpftrace", "-e", program], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in t.stdout:  # "Attaching N probes..." comes once they are attached
            seen.append(line)
            if "Attaching" in line:
                time.sleep(1.0)
                return t
        sys.exit("bpftrace failed: " + "".join(seen))
    return start


def gtrace(build):
    def start(pid, tmp):
        t = subprocess.Popen([os.path.join(build, "gtrace"), "attach", "--pid", str(pid), "-q", "-o",
                              os.path.join(tmp, "trace.json")])
        time.sleep(2.0)  # BPF load and attach; gtrace exits by itself when the loop ends
        return t
    return start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--calls", type=int, default=300000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    modes = {
        "untraced": None,
        "bpftrace-entry": bpftrace(f"uprobe:{CUDART}:cudaLaunchKernel {{ @calls = count(); }}"),
        "bpftrace-entry+exit": bpftrace(f"uprobe:{CUDART}:cudaLaunchKernel {{ @enter = count(); }} "
                                        f"uretprobe:{CUDART}:cudaLaunchKernel {{ @exit = count(); }}"),
        "gtrace": gtrace(args.build),
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
    print(f"\ngtrace added cost / bpftrace entry-only uprobe added cost:  {added['gtrace'] / added['bpftrace-entry']:.2f}x")
    print(f"gtrace added cost / bpftrace entry+exit uprobes added cost: {added['gtrace'] / added['bpftrace-entry+exit']:.2f}x")


if __name__ == "__main__":
    main()
