"""Runs the GPU test programs on the simulator (gpu_paths, gpu_blas.py) and checks that what each
says it issued is what the simulator's ground truth (GTSIM_LOG) shows: the same ops, every op under
the correlation id of the call the program made (by the log's "api"), graph replays with their
graph and node ids. No gtrace, no BPF: this keeps the programs honest for the cases that trace them.

  check_programs.py --programs DIR --gpusim DIR --python PYTHON
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    raise SystemExit(1)


def run(cmd, log, go):
    env = dict(os.environ, GTSIM_LOG=log)
    env.pop("CUDA_INJECTION64_PATH", None)
    open(go, "w").close()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        fail(f"{cmd[0]} exited {out.returncode}: {out.stderr.strip()[-500:]}")
    tagged = {}
    for line in out.stdout.splitlines():
        tag, _, rest = line.partition(" ")
        if tag in ("GTRACE_GPU", "GTRACE_COUNTS"):
            tagged[tag] = json.loads(rest)
    if set(tagged) != {"GTRACE_GPU", "GTRACE_COUNTS"}:
        fail(f"{cmd[0]} printed {sorted(tagged)}: {out.stdout[-500:]}")
    with open(log) as f:
        lines = [json.loads(x) for x in f]
    return tagged["GTRACE_GPU"], [x for x in lines if x["pid"] == tagged["GTRACE_GPU"]["pid"]]


def check_totals(name, gpu, lines):
    kinds = collections.Counter(x["kind"] for x in lines)
    want = {"kernel": gpu["kernels"], "memcpy": gpu["copies"], "memset": gpu["sets"]}
    if gpu["failed"] or {k: kinds.get(k, 0) for k in want} != want:
        fail(f"{name}: the log has {dict(kinds)}, the program issued {want} ({gpu['failed']} calls failed)")
    by_api = collections.Counter(x["api"] for x in lines)
    if dict(by_api) != gpu["by_api"]:
        fail(f"{name}: ops by owning call {dict(by_api)}, the program made {gpu['by_api']}")
    print(f"ok: {name}: {dict(kinds)}, each under the id of the call that issued it ({len(by_api)} APIs)")


def check_graphs(lines, replays):
    graph = [x for x in lines if x["graph"]]
    by_launch = collections.defaultdict(list)
    for x in graph:
        by_launch[x["correlation"]].append(x)
    if len(by_launch) != replays or any(len(v) != 5 for v in by_launch.values()):
        fail(f"graph replays: {len(by_launch)} launches with {[len(v) for v in by_launch.values()]} ops")
    nodes = {tuple(sorted(x["graph_node"] for x in v)) for v in by_launch.values()}
    graphs = {x["graph"] for x in graph}
    apis = collections.Counter(v[0]["api"] for v in by_launch.values())
    if len(nodes) != 1 or len(graphs) != 1 or apis != {"cudaGraphLaunch": (replays + 1) // 2, "cuGraphLaunch": replays // 2}:
        fail(f"graph replays: node sets {nodes}, graphs {graphs}, launches {dict(apis)}")
    print(f"ok: {replays} graph replays, 5 ops each, one graph and the same nodes every time")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", required=True)
    ap.add_argument("--gpusim", required=True)
    ap.add_argument("--python", required=True)
    opts = ap.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        log, go = os.path.join(tmp, "sim.jsonl"), os.path.join(tmp, "go")
        replays = 7
        gpu, lines = run([os.path.join(opts.programs, "gpu_paths"), "--rounds", "2", "--threads", "2",
                          "--replays", str(replays), "--go-file", go], log, go)
        check_totals("gpu_paths", gpu, lines)
        check_graphs(lines, replays)
        if len({x["tid"] for x in lines}) < 3:
            fail("gpu_paths: the ops came from fewer than 3 threads")
        os.unlink(log)
        gpu, lines = run([opts.python, os.path.join(source, "programs", "gpu_blas.py"), opts.gpusim,
                          os.path.join(opts.programs, "libdemo_kernels.so"), go, "4"], log, go)
        check_totals("gpu_blas.py", gpu, lines)
        bench = subprocess.run([os.path.join(opts.programs, "gpu_paths"), "--graph-bench", "20000"], capture_output=True,
                               text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "GTSIM_LOG"})
        result = json.loads(bench.stdout.partition("GTSIM_BENCH ")[2] or "null")
        if bench.returncode != 0 or not result or result["kernels"] != 2000000:
            fail(f"gpu_paths --graph-bench: {bench.stdout} {bench.stderr}")
        print(f"ok: graph replays cost the simulator {result['ns_per_kernel']} ns per kernel (no CUPTI, no log)")


if __name__ == "__main__":
    sys.exit(main())
