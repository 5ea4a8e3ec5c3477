#!/usr/bin/python3
"""Two "nodes" on this machine, one view: a gloo job under two torchrun agents (--nnodes 2 over
127.0.0.1, one rank each) whose rank 1 (node-b) sleeps before each all_reduce, each agent traced
by its own gtrace attach in its own UTS namespace (hostnames node-a, node-b). node-b's gtrace has
its wall clock reading shifted by GTRACE_TEST_CLOCK_OFFSET_NS (2.5 ms, the test-only hook in
output/clocks.cpp): by the clock readings alone, node-b's times would be 2.5 ms off. Then:

- gtrace report node-a.pftrace node-b.pftrace names node-b and rank 1 as the straggler (text, JSON,
  and the HTML page's Nodes section and verdict, checked in headless Chromium), and puts
  node-b on node-a's clock within 100 µs of the truth (0: one machine, one CLOCK_MONOTONIC), or
  says the alignment is uncertain: its collectives' ends scatter (the truth within 3x the
  uncertainty it states), or the CPUs were contended (most of the clocks' 2.5 ms error still
  corrected);
- gtrace merge -o job.pftrace writes one trace (valid as trace_processor reads it) in which every
  all_reduce of rank 1 ends within 100 µs of the same all_reduce on rank 0, each process named
  with its node; gtrace report on it still names rank 1;
- bad input: one trace, the same node twice, a JSON trace: one-line errors with their exit codes;
- gtrace report --summaries over the two captures' --summary-json files (no trace read) names
  node-b and rank 1 as well, saying the wait was inferred (issue 30.4).

About 15 s (torch's import and the two captures). Usage: two_nodes.py --build BUILD --source SOURCE"""
import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_job import fail, require_root  # noqa: E402
from trace_formats import check_pftrace  # noqa: E402

OFFSET_NS = 2_500_000
PORT = 29571
STEPS = 20
WITHIN_US = 100


def start_agent(source, node_rank, tmp):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    log = open(os.path.join(tmp, f"agent-{node_rank}.log"), "w")
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node_rank),
           "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(PORT), "--redirects", "1", "--tee", "1",
           os.path.join(source, "tests/programs/comm_straggler.py"), "--steps", str(STEPS), "--sleep-ms", "30",
           "--late-rank", "1", "--go-file", os.path.join(tmp, "go")]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(path, text, proc, timeout, what):
    deadline = time.time() + timeout
    while text not in open(path, errors="replace").read():
        if time.time() > deadline or proc.poll() is not None:
            fail(f"{what}: no '{text}' in {path}: " + open(path, errors="replace").read()[-2000:])
        time.sleep(0.2)


def start_gtrace(gtrace, host, pid, out, tmp, env_extra):
    err = os.path.join(tmp, f"gtrace-{host}.err")
    env = dict(os.environ, **env_extra)
    # Its own UTS namespace: the trace names this host.
    cmd = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$0" "$@"', gtrace, "attach", "--pid", str(pid), "-o", out,
           "--sample-hz", "0", "--summary-json", summary_path(out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(err, "w"), env=env), err


def summary_path(trace):
    return trace.replace(".pftrace", ".summary.json")


def check_summaries(gtrace, traces, tmp):
    """gtrace report --summaries over the nodes' --summary-json files (no trace read): the same
    straggler node and rank as the traces' report, said as inferred; bad input refused in one line."""
    summaries = [summary_path(t) for t in traces]
    merged_json = os.path.join(tmp, "summaries-report.json")
    r = run(gtrace, "report", "--summaries", *summaries, "--json", merged_json)
    if r.returncode != 0 or "JOB VERDICT: straggler" not in r.stdout or "from 2 node summaries (no trace read)" not in r.stdout:
        fail(f"gtrace report --summaries: exit {r.returncode}, no straggler verdict from 2 node summaries")
    merged = json.load(open(merged_json))
    if merged.get("straggler_rank") != 1 or merged.get("straggler_node") != "node-b" or not merged.get("from_summaries"):
        fail(f"--summaries: straggler_rank {merged.get('straggler_rank')}, straggler_node {merged.get('straggler_node')}")
    if "inferred" not in merged["verdict"]["evidence"]:
        fail(f"--summaries: the evidence does not say the wait was inferred: {merged['verdict']['evidence']!r}")
    bad = os.path.join(tmp, "not-a-summary.json")
    with open(bad, "w") as f:
        json.dump({"traceEvents": []}, f)
    for args, code, pattern in [(["report", "--summaries", summaries[0], bad], 11, "not a gtrace summary"),
                                (["report", "--summaries", traces[0]], 11, "not JSON"),
                                (["report", "--summaries", *summaries, "--html", os.path.join(tmp, "x.html")], 2, "--html needs traces")]:
        r = run(gtrace, *args)
        lines = r.stderr.strip().splitlines()
        if r.returncode != code or len(lines) != 1 or pattern not in lines[0]:
            fail(f"gtrace {' '.join(args)}: exit {r.returncode} (expected {code}), stderr {r.stderr!r}")
    print("ok: report --summaries names node-b rank 1 from the nodes' summaries", flush=True)


def run(gtrace, *args):
    r = subprocess.run([gtrace, *args], capture_output=True, text=True, timeout=120)
    print(f"$ gtrace {' '.join(args)}  → exit {r.returncode}\n{r.stdout}{r.stderr}", flush=True)
    return r


def collective_ends(trace, node):
    """The all_reduce completions (µs: the ends of its waits; an issue returns at once, when the
    rank gets there) of the process named with `node`, and that name."""
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"}
    pids = [pid for pid, name in names.items() if (node is None or name.startswith(f"[{node}] ")) and "rank" in name]
    if len(pids) != 1:
        fail(f"expected one rank process named [{node}] in the merged trace, found: {names}")
    pid = pids[0]
    ends = sorted(e["ts"] + e["dur"] for e in trace["traceEvents"]
                  if e.get("pid") == pid and e.get("cat") == "collective" and e.get("ph") == "X" and e["name"] == "all_reduce"
                  and e.get("args", {}).get("phase") == "wait")
    return ends, names[pid]


def check_merged(path, node_b_trace, within_us):
    trace = check_pftrace(path)  # raises with what trace_processor would object to
    a, a_name = collective_ends(trace, "node-a")
    b, b_name = collective_ends(trace, "node-b")
    print(f"merged: {a_name}: {len(a)} all_reduce slices, {b_name}: {len(b)}", flush=True)
    if len(a) < STEPS // 2 or len(b) < STEPS // 2:
        fail(f"expected {STEPS // 2} all_reduce waits or more per rank, got {len(a)} and {len(b)}")
    # Each of rank 1's all_reduce completions, with the nearest on rank 0.
    gaps = [min(abs(t - u) for u in a) for t in b]
    print(f"merged: |rank 1 end - rank 0 end| µs: median {statistics.median(gaps):.1f}, max {max(gaps):.1f}", flush=True)
    # Both "nodes" share this machine's monotonic clock (the hook shifts only node-b's wall-clock
    # reading): node-b's completions in the merged trace must lie where its own trace has them,
    # within WITHIN_US, or as far as the report (which said why) put them. (Rank against rank, completions scatter by scheduling on a busy 2-core
    # machine, by up to a millisecond: printed above, not judged.)
    own, _ = collective_ends(check_pftrace(node_b_trace), None)
    if len(own) != len(b):
        fail(f"node-b has {len(own)} all_reduce waits in its trace and {len(b)} in the merged one")
    shift = statistics.median(m - o for m, o in zip(b, own))
    print(f"merged: node-b's completions moved by a median {shift:.1f} µs from its own trace (truth: 0)", flush=True)
    if abs(shift) > within_us:
        fail(f"node-b's all_reduce completions lie {shift:.1f} µs from where its trace has them (> {within_us:.0f} µs)")
    nodes = trace["otherData"].get("merged", {}).get("nodes", [])
    if [n.get("name") for n in nodes] != ["node-a", "node-b"]:
        fail(f"otherData.merged.nodes names {nodes}, expected node-a and node-b")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    require_root()
    gtrace = os.path.join(os.path.abspath(a.build), "gtrace")
    source = os.path.abspath(a.source)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(f"stopped by signal {s}"))
    started = time.time()
    with tempfile.TemporaryDirectory() if not os.environ.get("KEEP") else contextlib.nullcontext(tempfile.mkdtemp()) as tmp:
        agents = [start_agent(source, i, tmp) for i in (0, 1)]
        tracers = []
        try:
            for i, agent in enumerate(agents):
                wait_for(os.path.join(tmp, f"agent-{i}.log"), f"ready rank {i}", agent, 120, f"node {i}'s rank")
            traces = [os.path.join(tmp, f"node-{n}.pftrace") for n in "ab"]
            for i, (host, extra) in enumerate([("node-a", {}), ("node-b", {"GTRACE_TEST_CLOCK_OFFSET_NS": str(OFFSET_NS)})]):
                tracers.append(start_gtrace(gtrace, host, agents[i].pid, traces[i], tmp, extra))
            for (proc, err), host in zip(tracers, ("node-a", "node-b")):
                wait_for(err, "attached to PID", proc, 60, f"gtrace on {host}")
            open(os.path.join(tmp, "go"), "w").close()
            for agent in agents:
                agent.wait(timeout=120)
            for proc, err in tracers:
                if proc.wait(timeout=60) != 0:
                    fail(f"gtrace exited {proc.returncode}: " + open(err).read()[-2000:])
            print(f"captured in {time.time() - started:.1f} s", flush=True)

            check_summaries(gtrace, traces, tmp)
            report_json = os.path.join(tmp, "report.json")
            report_html = os.path.join(tmp, "report.html")
            r = run(gtrace, "report", *traces, "--json", report_json, "--html", report_html)
            if r.returncode != 0 or not re.search(r"^  straggler: node node-b rank 1$", r.stdout, re.M):
                fail("gtrace report does not name node node-b rank 1 as the straggler")
            # The page of a job report: its Nodes section and the straggler node, as the JSON has them.
            if subprocess.run([sys.executable, os.path.join(a.source, "tests/runtime/html_report_check.py"), report_html, report_json]).returncode:
                fail("the HTML report of the two nodes failed its check (html_report_check.py)")
            report = json.load(open(report_json))
            if report.get("straggler_node") != "node-b" or report.get("straggler_rank") != 1:
                fail(f"report.json: straggler_node {report.get('straggler_node')}, straggler_rank {report.get('straggler_rank')}")
            # Both captures were attached before the job's first step: each node recorded all of them.
            if not report.get("steps_overlap", 0) >= 0.9 or not re.search(r"^steps every node recorded: \d+% ", r.stdout, re.M):
                fail(f"report: steps_overlap {report.get('steps_overlap')} (both nodes recorded every step: 0.9 or more expected)")
            clock = report["nodes"][1]["clock"]
            if abs(clock["clock_offset_ns"] - OFFSET_NS) > 50_000:
                fail(f"node-b's clock reading says {clock['clock_offset_ns']} ns, expected the injected {OFFSET_NS} (the hook)")
            if clock["matched_collectives"] < STEPS // 2:  # both captures start after the job, a few steps apart
                fail(f"node-b aligned from {clock['matched_collectives']} collectives, fewer than {STEPS // 2}")
            # Within 100 µs of the truth, or, on a host too busy for that (ends returned late),
            # the report says the alignment is uncertain and the truth lies within 3x what it says.
            # On a contended host (/proc/pressure/cpu) the ends lag by scheduling delays alike from
            # one collective to the next: said, and still most of the 2.5 ms clock error corrected.
            off, unc = abs(clock["offset_ns"]), clock.get("uncertainty_us", 0) * 1000
            doubt = clock.get("doubt") or ""
            said = (doubt.startswith("uncertain: the CPUs were contended") and off < OFFSET_NS * 0.8) or (doubt and off <= 3 * unc)
            if off > WITHIN_US * 1000 and not said:
                fail(f"node-b aligned by {clock['offset_ns']} ns from {clock['matched_collectives']} collectives "
                     f"(±{unc:.0f} ns, doubt: {clock.get('doubt')!r}); the truth is 0")
            # Stated, and sane; not held to WITHIN_US: it measures how the ranks' completions scatter
            # (up to ~0.6 ms median on this busy 2-core machine), the offset above the alignment.
            if not 0 <= clock.get("residual_skew_us", -1) < 10_000:
                fail(f"residual skew {clock.get('residual_skew_us')} µs")
            print(f"report: node-b offset {clock['offset_ns']} ns (clock reading {clock['clock_offset_ns']}, "
                  f"collectives {clock['refined_ns']}), residual skew {clock['residual_skew_us']} µs, ±{clock.get('uncertainty_us')} µs, "
                  f"CPU pressure {clock.get('cpu_pressure')}, doubt: {clock.get('doubt')}", flush=True)

            merged = os.path.join(tmp, "job.pftrace")
            r = run(gtrace, "merge", "-o", merged, *traces)
            if r.returncode != 0 or "node node-b" not in r.stderr:
                fail("gtrace merge failed")
            # merge aligns as report does: it says the same doubt, and is held to the same bound.
            if doubt and doubt not in r.stderr:
                fail(f"gtrace merge does not say what report does: {doubt!r}")
            check_merged(merged, traces[1], WITHIN_US if off <= WITHIN_US * 1000 else off / 1000 + WITHIN_US)
            r = run(gtrace, "report", merged, "--json", report_json, "--force")
            if r.returncode != 0 or json.load(open(report_json)).get("straggler_rank") != 1:
                fail("gtrace report on the merged trace does not name rank 1 as the straggler")

            for args, code, pattern in [
                (["merge", "-o", os.path.join(tmp, "x.pftrace"), traces[0]], 2, "give two traces or more"),
                (["merge", "-o", os.path.join(tmp, "x.pftrace"), traces[0], merged], 2, "both hold rank 0"),
                (["merge", "-o", merged, *traces], 9, "exists"),
                (["merge", "-o", os.path.join(tmp, "x.pftrace"), traces[0], report_json], 11, ""),
            ]:
                r = run(gtrace, *args)
                lines = r.stderr.strip().splitlines()
                if r.returncode != code or len(lines) != 1 or not lines[0].startswith("gtrace: error: ") or pattern not in lines[0]:
                    fail(f"gtrace {' '.join(args)}: exit {r.returncode} (expected {code}), stderr {r.stderr!r}")
        finally:
            for agent in agents:
                if agent.poll() is None:
                    os.killpg(agent.pid, signal.SIGKILL)
            for proc, _ in tracers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    proc.wait(timeout=30)
    print(f"PASS in {time.time() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
