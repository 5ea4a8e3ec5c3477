#!/usr/bin/python3
"""Torch range probes cost a trap only for user-scope ranges: on the demo job (torch 1.13 or pip
torch 2.x, 2 ranks, GPU simulator) gtrace attaches with --bpf-stats, and the kernel's count of runs of the
range probe divided by the steps recorded must stay at or under 30 per step (probing the entry
of RecordFunction's constructor, end() and destructor costs one trap per autograd node: 64 per
step here, ~960 on GPT-2). Every rank must still have its ranges, named.

Usage: torch_range_hits.py --build BUILD_DIR --source SOURCE_DIR [--torch 1.13|2]"""
import argparse
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_job import demo_job, fail, require_root  # noqa: E402

MAX_HITS_PER_STEP = 30
NAMES = ("Optimizer.step", "Optimizer.zero_grad", "enumerate(DataLoader)", "DistributedDataParallel.forward")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--torch", choices=["1.13", "2"], default="1.13")
    a = ap.parse_args()
    require_root()
    with demo_job(a.build, a.source, "balanced", 29651, torch=a.torch) as (job, tmp):
        out = os.path.join(tmp, "trace.json")
        r = subprocess.run([os.path.join(a.build, "gtrace"), "attach", "--pid", str(job), "-d", "4", "-q", "-o", out,
                            "--bpf-stats", "--sample-hz", "0"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail(f"gtrace attach exited {r.returncode}: {r.stderr}")
        trace = json.load(open(out))
    stats = trace["otherData"]["bpf_stats"].get("torch_range_probe")
    if not stats:
        fail(f"no BPF statistics for the range probe: {trace['otherData']['bpf_stats']}")
    ranges = [e for e in trace["traceEvents"] if e.get("cat") == "torch_range"]
    steps = sum(1 for e in ranges if e["name"].startswith("Optimizer.step"))
    if steps < 20:
        fail(f"only {steps} steps recorded")
    per_pid = collections.defaultdict(set)
    for e in ranges:
        per_pid[e["pid"]].add(next((n for n in NAMES if e["name"].startswith(n)), e["name"]))
    for pid, names in per_pid.items():
        if not all(n in names for n in NAMES):
            fail(f"pid {pid}: ranges {sorted(names)}, expected all of {NAMES}")
    how = trace["otherData"]["torch_libraries"]
    hits = stats["runs"] / steps
    print(f"range probe: {stats['runs']} hits, {steps} steps (both ranks): {hits:.1f} hits per step, "
          f"{stats['ns_per_run']} ns per hit; probed at {json.dumps(how)}", flush=True)
    if hits > MAX_HITS_PER_STEP:
        fail(f"{hits:.1f} range-probe hits per step, more than {MAX_HITS_PER_STEP}")
    print("PASS")


if __name__ == "__main__":
    main()
