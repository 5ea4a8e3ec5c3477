"""The checks of scripts/gpu-check.sh on the trace gtrace wrote: one PASS/FAIL/SKIP line each,
exit 1 if any failed. Usage: gpu_check_verify.py TRACE [--device cuda|cpu]

  agent        the CUPTI agent ran in the training process
  gpu work     kernels (with durations) and host/device copies are in the trace
  linked       100% of the GPU ops are linked to the call that issued them: otherData's counts
               agree, and each kernel/copy/set has its flow — every op whose correlation id lies
               between the process's first and last linked one (a call already in flight when
               the agent started, or at the end, cannot carry its id)
  sources      every launch from the main thread has a Python `source` line, in the training
               script (stacks gtrace counted as dropped excepted)
  ranges       torch ranges named on the main thread: Optimizer.step, Optimizer.zero_grad,
               enumerate(DataLoader), each with the training script's line
On --device cpu the GPU checks are SKIPs (the loop runs no CUDA); the ranges are checked.
"""
import argparse
import json
import sys

SCRIPT = "gpu_check_train.py"
results = []


def check(name, ok, detail, skip=False):
    state = "SKIP" if skip else "PASS" if ok else "FAIL"
    results.append(state)
    print(f"gpu-check: {state}: {name}: {detail}", flush=True)


def find_key(obj, key):
    """A counter anywhere in otherData (0 when absent)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def check_gpu(events, gpu):
    check("agent", gpu.get("agents_active", 0) > 0,
          f"{gpu.get('agents_active', 0)} active, {gpu.get('agents_failed', 0)} failed {gpu.get('warnings') or ''}".strip())
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    kernels = [e for e in ops if e["cat"] == "kernel"]
    copies = [e for e in ops if e["cat"] == "gpu_memcpy"]
    timed = sum(1 for k in kernels if k.get("dur", 0) > 0)
    check("gpu work", bool(kernels) and bool(copies) and timed > 0,
          f"{len(kernels)} kernels ({timed} with a duration), {len(copies)} copies, "
          f"{len(ops) - len(kernels) - len(copies)} sets")

    flows = {(e["pid"], e["tid"], e["args"]["correlation"], e["ts"]) for e in events
             if e.get("cat") == "ac2g" and e.get("ph") == "f"}
    window = {}
    for pid, _, corr, _ in flows:
        lo, hi = window.get(pid, (corr, corr))
        window[pid] = (min(lo, corr), max(hi, corr))
    counted = [e for e in ops if e["pid"] in window
               and window[e["pid"]][0] <= e["args"]["correlation"] <= window[e["pid"]][1]]
    unlinked = [e for e in counted if (e["pid"], e["tid"], e["args"]["correlation"], e["ts"]) not in flows]
    outside = len(ops) - len(counted)
    names = sorted({e["name"][:60] for e in unlinked})[:5]
    ok = bool(counted) and not unlinked and gpu.get("joined_to_call", 0) == gpu.get("gpu_ops", -1)
    check("linked", ok,
          f"{len(counted) - len(unlinked)} of {len(counted)} GPU ops have a flow from their call"
          f"{f' ({outside} in flight at attach or at the end, not counted)' if outside else ''}; "
          f"otherData.gpu: {gpu.get('joined_to_call')} of {gpu.get('gpu_ops')} linked"
          + (f"; unlinked e.g. {names}" if names else ""))


def check_sources(events, other):
    launches = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_api" and "Launch" in e["name"]
                and e["pid"] == e["tid"]]
    with_source = [e for e in launches if e.get("args", {}).get("source")]
    in_script = [e for e in with_source if SCRIPT in e["args"]["source"]]
    dropped = find_key(other, "python_stacks_dropped_torn") or 0
    missing = len(launches) - len(with_source)
    ok = bool(launches) and missing <= dropped and len(in_script) == len(with_source)
    odd = sorted({e["args"]["source"] for e in with_source if SCRIPT not in e["args"]["source"]})[:3]
    check("sources", ok,
          f"{len(with_source)} of {len(launches)} main-thread launches have a source ({dropped} stacks dropped), "
          f"{len(in_script)} in {SCRIPT}" + (f"; others: {odd}" if odd else ""))


def check_ranges(events):
    ranges = [e for e in events if e.get("cat") == "torch_range" and e["pid"] == e["tid"]]
    wanted = ["Optimizer.step", "Optimizer.zero_grad", "enumerate(DataLoader)"]
    found = {}
    for w in wanted:
        named = [e for e in ranges if e["name"].startswith(w)]
        sourced = [e for e in named if SCRIPT in e.get("args", {}).get("source", "")]
        found[w] = (len(named), len(sourced), named[0]["name"] if named else None)
    ok = all(n > 0 and s == n for n, s, _ in found.values())
    check("ranges", ok, "; ".join(f"{w}: {n} ({s} with the script's line){f' e.g. {ex!r}' if ex else ''}"
                                  for w, (n, s, ex) in found.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events, other = trace["traceEvents"], trace["otherData"]
    if args.device == "cuda":
        check_gpu(events, other.get("gpu", {}))
        check_sources(events, other)
    else:
        for name in ("agent", "gpu work", "linked", "sources"):
            check(name, False, "no GPU (--device cpu)", skip=True)
    check_ranges(events)
    failed = results.count("FAIL")
    print(f"gpu-check: {'FAIL' if failed else 'PASS'}: {failed} of {len(results)} checks failed, "
          f"{results.count('SKIP')} skipped", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
