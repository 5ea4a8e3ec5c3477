"""The attach checks of scripts/gpu-check.sh, on the jobs of gpu_check_jobs.py run side by side.

  1. one attach to the suite (every job is its child): the agent in each job; 100% of each job's
     GPU ops linked, and what each job's kind must show (GEMM, split-K, Triton kernels through
     cuLaunchKernelEx, graph kernels to their graph launch, NCCL kernels, every copy and set
     kind); the train job's Python sources, torch ranges, the backward thread's launches with
     loss.backward()'s line, and torch's reserved bytes at attach; `gtrace report` on the trace:
     the NCCL job's calls, and Communication from NCCL's kernels where it ran any (world size 1
     takes NCCL's one-rank path: copies and a reduce kernel not named nccl)
  2. five re-attaches in a row to the running train job: 100% linked each time
  3. an attach with --autograd-links: backward launches carry their forward op's line
  4. `gtrace record` of the train job against the attach: the same GPU ops (record from the
     first kernel, attach from attach on)
On --device cpu the same flow runs (gloo for NCCL; no compile or graph job) and the GPU checks
are SKIPs; the ranges are checked, and record/attach compare their torch ranges instead.

Usage: gpu_check_suite.py --gtrace PATH --out DIR [--device cuda|cpu] [--options 'GTRACE OPTIONS']
"""
import argparse
import json
import os
import subprocess
import sys
import time

import gpu_check_verify as v

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "gpu_check_jobs.py")


def log(msg):
    print(f"gpu-check: {msg}", flush=True)


def attach(args, pid, name, seconds, extra=()):
    """gtrace attach for SECONDS; returns the trace's path, or None (a FAIL line said why)."""
    path = os.path.join(args.out, f"{name}.json")
    cmd = [args.gtrace, "attach", "--pid", str(pid), "--duration", str(seconds), "--format", "json", "-o", path,
           "--force", *args.options, *extra]
    return run_gtrace(cmd, path, name, seconds + 60)


def run_gtrace(cmd, path, name, timeout):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    with open(os.path.join(os.path.dirname(path), f"{name}.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0 or not os.path.exists(path):
        v.check(f"{name}: gtrace ran", False, f"exit {r.returncode}: {(r.stdout + r.stderr)[-800:]}")
        return None
    return path


def log_tail(args, kind, lines=5):
    with open(os.path.join(args.out, f"job-{kind}.log"), errors="replace") as f:
        return " | ".join(line.strip() for line in f.readlines()[-lines:])


def start_suite(args):
    """The suite of jobs, running: (its process, {kind: pid} of the jobs that started, torch's
    reserved bytes in the train job at its start). A job that did not start is a FAIL of its own."""
    suite = subprocess.Popen([sys.executable, JOBS, "suite", "--device", args.device, "--out", args.out],
                             stdout=subprocess.PIPE, text=True)
    line = suite.stdout.readline()
    if not line.startswith("ready"):
        suite.terminate()
        suite.wait(timeout=30)
        sys.exit(f"gpu-check: FAIL: the suite of jobs did not start: {line.strip()!r} (logs in {args.out})")
    with open(os.path.join(args.out, "jobs.json")) as f:
        state = json.load(f)
    for kind, why in sorted(state["failed"].items()):
        v.check(f"job started: {kind}", False, f"{why}: {log_tail(args, kind)}")
    reserved = 0
    if "train" in state["ready"]:
        with open(os.path.join(args.out, "job-train.log")) as f:
            reserved = int(next(line for line in f if line.startswith("ready")).split("reserved=")[1])
    return suite, state["ready"], reserved


def check_jobs_alive(args, jobs):
    """Every job still running after all the attaches (a zombie counts as dead: the suite does not
    reap its children). A job that died under gtrace is gtrace's fault until shown otherwise."""
    dead = {}
    for kind, pid in jobs.items():
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        if state in ("Z", "X", "gone"):
            dead[kind] = log_tail(args, kind)
    v.check("jobs alive", not dead, f"{len(jobs) - len(dead)} of {len(jobs)} jobs still running after every attach"
            + (f"; dead: {dead}" if dead else ""))


def gpu_keys(t, cuda, pids=None, late_only=False):
    """What record and attach must agree on: (category, name) of PIDS' GPU ops (on --device cpu:
    their torch ranges); LATE_ONLY: those of the second half of the trace (the job's steady steps)."""
    items = t.ops_of(pids) if cuda else [e for e in t.events if e.get("cat") == "torch_range" and (pids is None or e["pid"] in pids)]
    if late_only and items:
        first, last = min(e["ts"] for e in items), max(e["ts"] for e in items)
        items = [e for e in items if e["ts"] >= (first + last) / 2]
    return {(e["cat"], e["name"]) for e in items}


def check_first_attach(args, t, jobs, reserved, cuda):
    train = jobs.get("train")
    if cuda:
        v.check_agent(t, want_active=len(jobs))
        v.check_linked(t, "linked: all jobs")
        v.check_nothing_lost(t)
        for kind, pid in sorted(jobs.items()):
            v.check_linked(t, f"linked: {kind}", {pid}, whole=False)
            v.check_job_kind(t, kind, pid)
        if train:
            v.check_gpu_work(t, "gpu work: train", {train})
            v.check_sources(t, train)
            v.check_backward_source(t, train, v.backward_lines(JOBS))
            v.check_memory_at_attach(t, train, reserved)
    else:
        for name in ("agent", "linked", "job kinds", "sources", "backward source", "memory at attach"):
            v.check(name, False, "no GPU (--device cpu)", skip=True)
    if train:
        v.check_ranges(t, train)


def check_report(args, t, trace, jobs, cuda):
    """`gtrace report` on the suite's trace: the NCCL job (rank 0) has its NCCL calls, and, where
    NCCL ran kernels of its own (two ranks and more), Communication from them."""
    path = os.path.join(args.out, "report.json")
    r = subprocess.run([args.gtrace, "report", trace, "--json", path, "--force"], capture_output=True, text=True, timeout=120)
    with open(os.path.join(args.out, "report.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        return v.check("report", False, f"gtrace report exited {r.returncode}: {r.stderr[-500:]}")
    if "nccl" not in jobs:
        return  # its FAIL is said
    with open(path) as f:
        ranks = [x for x in json.load(f)["ranks"] if x.get("rank") == 0]
    if not ranks:
        return v.check("report: nccl calls", False, "no rank 0 (the nccl job) in the report")
    rank = ranks[0]
    if not cuda:
        v.check("report: nccl calls", False, f"no GPU (--device cpu); rank 0 reported ({rank['name']})", skip=True)
        return v.check("report: communication", False, "no GPU (--device cpu)", skip=True)
    kinds = {n["kind"]: n.get("calls", 0) for n in rank.get("nccl", [])}
    v.check("report: nccl calls", all(kinds.get(k, 0) > 0 for k in ("AllReduce", "AllGather", "Broadcast")),
            f"rank 0 (the nccl job): NCCL calls by kind {kinds}")
    comm = (rank.get("breakdown_ms") or {}).get("Communication", 0)
    on_gpu = [c["name"] for c in rank.get("collectives", []) if c.get("on") == "gpu"]
    named = v.kernels_named(t, {jobs["nccl"]}, r"nccl")
    detail = (f"rank 0: Communication {comm:.3f} ms per step, collectives on the GPU {on_gpu}, verdict {rank.get('verdict')}; "
              f"{len(named)} NCCL-named kernels in the trace")
    if not named:  # the report knows NCCL's kernels by their names (ncclDevKernel_*)
        return v.check("report: communication", False, detail + ": world size 1, NCCL's one-rank path ran none", skip=True)
    v.check("report: communication", comm > 0 and bool(on_gpu), detail)


def check_reattaches(args, train, cuda):
    for i in range(1, 6):
        path = attach(args, train, f"reattach-{i}", 3)
        if not path:
            continue
        t = v.Trace(path)
        if cuda:
            v.check_linked(t, f"re-attach {i}")
        else:
            ranges = [e for e in t.events if e.get("cat") == "torch_range"]
            v.check(f"re-attach {i}", bool(ranges), f"{len(ranges)} torch ranges (no GPU: --device cpu)")


def check_record_vs_attach(args, attached, train, cuda):
    path = os.path.join(args.out, "record.json")
    cmd = [args.gtrace, "record", "--format", "json", "-o", path, "--force", *args.options, "--",
           sys.executable, JOBS, "train", "--device", args.device, "--steps", "300"]
    if not run_gtrace(cmd, path, "record", 300):
        return
    rec = v.Trace(path)
    if cuda:
        v.check_linked(rec, "record: linked")
    seen, everything, late = gpu_keys(attached, cuda, {train}), gpu_keys(rec, cuda), gpu_keys(rec, cuda, late_only=True)
    what = "GPU ops" if cuda else "torch ranges (no GPU)"
    v.check("record = attach", bool(seen) and seen <= everything and late <= seen,
            f"{what}: attach saw {len(seen)} kinds, record {len(everything)} ({len(late)} in its second half); "
            f"only in attach: {sorted(seen - everything)[:3]}; in record's steady steps, not in attach: {sorted(late - seen)[:3]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gtrace", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--options", default="")
    args = ap.parse_args()
    args.options = args.options.split()
    cuda = args.device == "cuda"
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    suite, jobs, reserved = start_suite(args)
    try:
        log(f"jobs running: {jobs}; attaching to the suite (pid {suite.pid}) for 6 s")
        trace = attach(args, suite.pid, "suite", 6)
        if trace:
            t = v.Trace(trace)
            check_first_attach(args, t, jobs, reserved, cuda)
            check_report(args, t, trace, jobs, cuda)
        if "train" in jobs:
            log("five re-attaches to the train job")
            check_reattaches(args, jobs["train"], cuda)
            log("--autograd-links")
            path = attach(args, jobs["train"], "autograd", 3, ["--autograd-links"])
            if path and cuda:
                v.check_autograd_links(v.Trace(path), jobs["train"])
            elif path:
                v.check("autograd links", False, "no GPU (--device cpu)", skip=True)
        check_jobs_alive(args, jobs)
        if trace and "train" in jobs:
            log("gtrace record of the train job, against the attach")
            check_record_vs_attach(args, t, jobs["train"], cuda)
    finally:
        suite.terminate()
        suite.wait(timeout=30)
    log(f"suite checks took {time.monotonic() - started:.0f} s")
    sys.exit(1 if v.summary_line() else 0)


if __name__ == "__main__":
    main()
