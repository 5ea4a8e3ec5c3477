"""The checks of scripts/gpu-check.sh on the traces gtrace wrote: one PASS/FAIL/SKIP line each.
As a command, on one trace: `gpu_check_verify.py TRACE [--device cuda|cpu]`, exit 1 if any failed:

  agent        the CUPTI agent ran in the traced processes, none failed
  gpu work     kernels (with durations) and host/device copies are in the trace
  linked       100% of the GPU ops are linked to the call that issued them: otherData's counts
               agree, and each kernel/copy/set has its flow — every op whose correlation id lies
               between the process's first and last linked one (a call already in flight when
               the agent started, or at the end, cannot carry its id)
  sources      every launch from a main thread has a Python `source` line in the job's script
               (stacks gtrace counted as dropped excepted)
  ranges       torch ranges named on the main thread: Optimizer.step, Optimizer.zero_grad,
               enumerate(DataLoader), each with the job script's line
On --device cpu the GPU checks are SKIPs (the loop runs no CUDA); the ranges are checked.
gpu_check_suite.py uses the same checks per job of its suite, and those below.
"""
import argparse
import json
import re
import sys

SCRIPT = "gpu_check_jobs.py"
results = []
OP_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def check(name, ok, detail, skip=False):
    state = "SKIP" if skip else "PASS" if ok else "FAIL"
    results.append(state)
    print(f"gpu-check: {state}: {name}: {detail}", flush=True)
    return ok


def summary_line():
    failed = results.count("FAIL")
    print(f"gpu-check: {'FAIL' if failed else 'PASS'}: {failed} of {len(results)} checks failed, "
          f"{results.count('SKIP')} skipped", flush=True)
    return failed


class Trace:
    """A gtrace JSON trace, indexed: GPU ops, CUDA calls by (pid, correlation), flows."""

    def __init__(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.events, self.other = doc["traceEvents"], doc["otherData"]
        self.gpu = self.other.get("gpu", {})
        self.ops = [e for e in self.events if e.get("ph") == "X" and e.get("cat") in OP_CATS]
        self.calls = [e for e in self.events if e.get("ph") == "X" and e.get("cat") == "cuda_api"]
        self.call_of = {(e["pid"], e["args"]["correlation"]): e for e in self.calls if "correlation" in e.get("args", {})}
        self.flows = {(e["pid"], e["tid"], e["args"]["correlation"], e["ts"]) for e in self.events
                      if e.get("cat") == "ac2g" and e.get("ph") == "f"}

    def ops_of(self, pids=None, cat=None):
        return [e for e in self.ops if (pids is None or e["pid"] in pids) and (cat is None or e["cat"] == cat)]

    def call_name(self, op):
        call = self.call_of.get((op["pid"], op["args"]["correlation"]))
        return call["name"] if call else None

    def linked(self, pids=None):
        """(linked, counted, left out as in flight, names of unlinked ops) over PIDS' GPU ops."""
        window = {}
        for pid, _, corr, _ in self.flows:
            if pids is None or pid in pids:
                lo, hi = window.get(pid, (corr, corr))
                window[pid] = (min(lo, corr), max(hi, corr))
        ops = self.ops_of(pids)
        counted = [e for e in ops if e["pid"] in window and window[e["pid"]][0] <= e["args"]["correlation"] <= window[e["pid"]][1]]
        unlinked = [e for e in counted if (e["pid"], e["tid"], e["args"]["correlation"], e["ts"]) not in self.flows]
        return len(counted) - len(unlinked), len(counted), len(ops) - len(counted), sorted({e["name"][:60] for e in unlinked})[:5]

    def lost(self):
        """gtrace's counts of what it lost: CPU events, GPU records (ring, CUPTI)."""
        return {"events": self.other.get("lost_events", 0), "gpu ring": self.gpu.get("lost_ring_full", 0),
                "cupti": self.gpu.get("lost_by_cupti", 0)}


def check_agent(t, want_active=1):
    g = t.gpu
    check("agent", g.get("agents_active", 0) >= want_active and not g.get("agents_failed", 0),
          f"{g.get('agents_active', 0)} active (want {want_active}), {g.get('agents_failed', 0)} failed "
          f"{g.get('warnings') or ''}".strip())


def check_gpu_work(t, label="gpu work", pids=None):
    kernels, copies = t.ops_of(pids, "kernel"), t.ops_of(pids, "gpu_memcpy")
    timed = sum(1 for k in kernels if k.get("dur", 0) > 0)
    check(label, bool(kernels) and bool(copies) and timed > 0,
          f"{len(kernels)} kernels ({timed} with a duration), {len(copies)} copies, {len(t.ops_of(pids, 'gpu_memset'))} sets")


def check_linked(t, label="linked", pids=None, whole=True):
    """100% linked over PIDS' ops between their first and last linked call; WHOLE: otherData's
    counts (the whole trace's) agree too — every op linked but those of calls already in flight
    at the start or at the end, which carry no id gtrace saw."""
    n, counted, outside, names = t.linked(pids)
    detail = (f"{n} of {counted} GPU ops have a flow from their call"
              + (f" ({outside} in flight at attach or at the end, not counted)" if outside else "")
              + (f"; unlinked e.g. {names}" if names else ""))
    ok = counted > 0 and n == counted
    if whole:
        edges = t.gpu.get("unlinked", {})
        in_flight = edges.get("before_first_call", 0) + edges.get("after_last_call", 0)
        ok = ok and t.gpu.get("joined_to_call", 0) + in_flight == t.gpu.get("gpu_ops", -1)
        detail += (f"; otherData.gpu: {t.gpu.get('joined_to_call')} of {t.gpu.get('gpu_ops')} linked, "
                   f"{in_flight} of calls in flight at the edges; lost {t.lost()}")
    return check(label, ok, detail)


def check_nothing_lost(t, label="nothing lost"):
    lost = t.lost()
    return check(label, not any(lost.values()), f"lost: {lost}")


def find_key(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def check_sources(t, pid=None):
    launches = [e for e in t.calls if e["pid"] == e["tid"] and "Launch" in e["name"] and (pid is None or e["pid"] == pid)]
    with_source = [e for e in launches if e.get("args", {}).get("source")]
    in_script = [e for e in with_source if SCRIPT in e["args"]["source"]]
    dropped = (find_key(t.other, "python_stacks_dropped_torn") or 0) + (find_key(t.other, "call_stacks_missed") or 0)
    ok = bool(launches) and len(launches) - len(with_source) <= dropped and len(in_script) == len(with_source)
    odd = sorted({e["args"]["source"] for e in with_source if SCRIPT not in e["args"]["source"]})[:3]
    check("sources", ok, f"{len(with_source)} of {len(launches)} main-thread launches have a source ({dropped} stacks dropped), "
          f"{len(in_script)} in {SCRIPT}" + (f"; others: {odd}" if odd else ""))


def check_ranges(t, pid=None):
    ranges = [e for e in t.events if e.get("cat") == "torch_range" and e["pid"] == e["tid"] and (pid is None or e["pid"] == pid)]
    found = {}
    for w in ["Optimizer.step", "Optimizer.zero_grad", "enumerate(DataLoader)"]:
        named = [e for e in ranges if e["name"].startswith(w)]
        sourced = [e for e in named if SCRIPT in e.get("args", {}).get("source", "")]
        found[w] = (len(named), len(sourced), named[0]["name"] if named else None)
    check("ranges", all(n > 0 and s == n for n, s, _ in found.values()),
          "; ".join(f"{w}: {n} ({s} with the script's line){f' e.g. {ex!r}' if ex else ''}" for w, (n, s, ex) in found.items()))


def backward_lines(script_path):
    """`file:line` of each `loss.backward()` in the jobs' script."""
    with open(script_path) as f:
        return {f"{SCRIPT}:{i}" for i, line in enumerate(f, 1) if line.strip().startswith("loss.backward()")}


def other_thread_launches(t, pid):
    """PID's launches from threads other than its main one: autograd's own, in these jobs."""
    return [e for e in t.calls if e["pid"] == pid != e["tid"] and "Launch" in e["name"]]


def check_backward_source(t, pid, lines):
    """The launches of autograd's own threads (no Python frames) carry loss.backward()'s line."""
    launches = other_thread_launches(t, pid)
    sourced = [e for e in launches if any(re.search(re.escape(l) + r"(\D|$)", e.get("args", {}).get("source", "")) for l in lines)]
    check("backward source", bool(launches) and len(sourced) == len(launches),
          f"{len(sourced)} of {len(launches)} launches from other threads than the main one carry a loss.backward() line "
          f"({sorted(lines)}); otherData.backward {t.other.get('backward')}")


def check_autograd_links(t, pid):
    launches = other_thread_launches(t, pid)
    linked = [e for e in launches if "sequence_nr" in e.get("args", {}) and SCRIPT in e["args"].get("forward_source", "")]
    check("autograd links", bool(launches) and len(linked) * 2 >= len(launches),
          f"{len(linked)} of {len(launches)} backward-thread launches carry sequence_nr and a forward_source in {SCRIPT}; "
          f"otherData.autograd_links {t.other.get('autograd_links')}")


def check_memory_at_attach(t, pid, reserved):
    facts = t.gpu.get("memory_at_attach", {}).get(str(pid), [])
    read = [f for f in facts if f.get("torch") == "read"]
    ok = bool(read) and read[0].get("torch_reserved_bytes") == reserved and 0 < read[0].get("torch_allocated_bytes", 0) <= reserved
    check("memory at attach", ok, f"{facts}; the job's torch.cuda.memory_reserved() at ready: {reserved}")


def kernels_named(t, pids, pattern):
    return [e for e in t.ops_of(pids, "kernel") if re.search(pattern, e["name"], re.I)]


def calls_of(t, ops):
    names = {}
    for op in ops:
        name = t.call_name(op) or "(no call)"
        names[name] = names.get(name, 0) + 1
    return names


def nccl_ops(t, pid):
    """(NCCL API calls of PID, its GPU ops whose call was made inside one of them on its thread).
    At world size 1 NCCL takes its one-rank path: copies, or a reduce kernel not named nccl."""
    spans = {}
    for e in t.events:
        if e.get("cat") == "collective" and e.get("ph") == "X" and e["pid"] == pid and e.get("args", {}).get("phase") == "nccl":
            spans.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e.get("dur", 0)))
    ops = []
    for op in t.ops_of({pid}):
        call = t.call_of.get((pid, op["args"]["correlation"]))
        if call and any(a <= call["ts"] <= b for a, b in spans.get(call["tid"], [])):
            ops.append(op)
    return sum(len(v) for v in spans.values()), ops


def check_job_kind(t, kind, pid):
    """What each suite job must show besides being 100% linked."""
    pids = {pid}
    if kind == "gemm":
        gemms = kernels_named(t, pids, r"gemm|xmma|nvjet|cutlass|sm\d+_")
        split = kernels_named(t, pids, r"splitK|split_k|reduce")
        check("gemm kernels", bool(gemms), f"{len(gemms)} GEMM kernels (calls {calls_of(t, gemms)}), {len(split)} split-K/reduce, "
              f"{len(t.ops_of(pids, 'gpu_memset'))} sets (calls {calls_of(t, t.ops_of(pids, 'gpu_memset'))})")
    elif kind == "compile":
        triton = kernels_named(t, pids, r"^triton")
        check("triton kernels", bool(triton) and all("LaunchKernel" in n for n in calls_of(t, triton) if n != "(no call)"),
              f"{len(triton)} Triton kernels, calls {calls_of(t, triton)}")
    elif kind == "graph":
        graph = [e for e in t.ops_of(pids, "kernel") if e["args"].get("graph")]
        check("graph kernels", bool(graph) and all("GraphLaunch" in n for n in calls_of(t, graph) if n != "(no call)"),
              f"{len(graph)} kernels of graph replays, calls {calls_of(t, graph)}")
    elif kind == "nccl":
        calls, ops = nccl_ops(t, pid)
        named = kernels_named(t, pids, r"nccl")
        check("nccl ops", bool(ops), f"{calls} NCCL calls; {len(ops)} GPU ops issued inside them "
              f"({sorted({e['name'][:50] for e in ops})[:4]}, calls {calls_of(t, ops)}); {len(named)} NCCL-named kernels")
    elif kind == "copies":
        kinds = {}
        for op in t.ops_of(pids, "gpu_memcpy"):
            kinds[op["args"].get("kind")] = kinds.get(op["args"].get("kind"), 0) + 1
        sets = calls_of(t, t.ops_of(pids, "gpu_memset"))
        check("copies and sets", {"HtoD", "DtoH", "DtoD"} <= set(kinds) and "cudaMemsetAsync" in sets
              and any(n.startswith("cuMemsetD8") for n in sets), f"copies by kind {kinds}; sets by call {sets}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    t = Trace(args.trace)
    if args.device == "cuda":
        check_agent(t)
        check_gpu_work(t)
        check_linked(t)
        check_sources(t)
    else:
        for name in ("agent", "gpu work", "linked", "sources"):
            check(name, False, "no GPU (--device cpu)", skip=True)
    check_ranges(t)
    sys.exit(1 if summary_line() else 0)


if __name__ == "__main__":
    main()
