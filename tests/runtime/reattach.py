#!/usr/bin/python3
"""Attach five times in a row to one running demo job (2 ranks, GPU simulator): each capture
reuses the agents the previous one left dormant, and each must link 100% of the GPU ops it
recorded to the calls that issued them, on every rank.

Usage: reattach.py --build BUILD_DIR --source SOURCE_DIR"""
import argparse
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_job import demo_job, fail, require_root  # noqa: E402

ATTACHES = 5


def linked_per_process(trace):
    """pid → (GPU ops, GPU ops with a flow from their call)."""
    events = trace["traceEvents"]
    flows = {(e["pid"], e["args"]["correlation"]) for e in events if e.get("cat") == "ac2g" and e.get("ph") == "f"}
    ops, linked = collections.Counter(), collections.Counter()
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            ops[e["pid"]] += 1
            corr = e.get("args", {}).get("correlation")
            linked[e["pid"]] += (e["pid"], corr) in flows
    return ops, linked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    require_root()
    gtrace = os.path.join(a.build, "gtrace")
    with demo_job(a.build, a.source, "balanced", 29650) as (job, tmp):
        for i in range(1, ATTACHES + 1):
            out = os.path.join(tmp, f"attach-{i}.json")
            r = subprocess.run([gtrace, "attach", "--pid", str(job), "-d", "3", "-o", out, "--sample-hz", "0"],
                               capture_output=True, text=True, timeout=120)
            summary = [l for l in r.stderr.splitlines() if "GPU:" in l or "WARNING" in l]
            print(f"attach {i}: exit {r.returncode}: " + " | ".join(summary), flush=True)
            if r.returncode != 0:
                fail(f"attach {i} exited {r.returncode}: {r.stderr}")
            trace = json.load(open(out))
            gpu = trace["otherData"]["gpu"]
            if gpu["agents_active"] != 2:
                fail(f"attach {i}: {gpu['agents_active']} active agents, expected 2 (one per rank)")
            if gpu["gpu_ops"] == 0 or gpu["joined_to_call"] != gpu["gpu_ops"]:
                fail(f"attach {i}: {gpu['joined_to_call']} of {gpu['gpu_ops']} GPU ops linked")
            ops, linked = linked_per_process(trace)
            if len(ops) != 2:
                fail(f"attach {i}: GPU ops from {len(ops)} processes, expected 2")
            for pid in ops:
                if linked[pid] != ops[pid]:
                    fail(f"attach {i}: pid {pid}: {linked[pid]} of {ops[pid]} GPU ops have a flow from their call")
            print(f"ok: attach {i}: {gpu['gpu_ops']} GPU ops, all linked, " +
                  ", ".join(f"pid {p}: {n}" for p, n in sorted(ops.items())), flush=True)
    print("PASS")


if __name__ == "__main__":
    main()
