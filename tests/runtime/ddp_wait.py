#!/usr/bin/python3
"""DDP's wait is Communication (issue 27.4): a 2-rank DistributedDataParallel job (gloo, torchrun)
whose rank 1 spends 40 ms of Python before each backward (tests/programs/ddp_straggler.py). Rank
0 waits inside loss.backward(), where DDP's reducer waits on its buckets' all-reduce futures.
gtrace attaches, the job trains and ends, and `gtrace report --json` must say, against the job's
own measurement of rank 0's wait (backward time with the all-reduce minus without):
  - rank 0's Communication is within 5% of the time it really waits (and at most a few ms more);
  - its evidence names the all-reduce and rank 1, the rank it waits for;
  - the job's verdict blames rank 1 (the slow rank), not rank 0.

Usage: ddp_wait.py --build BUILD --source SOURCE --torch 1.13|2"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_job import fail, require_root, torch_python  # noqa: E402
from kernel_state import kill_tree  # noqa: E402


def ok(msg):
    print(f"ok: {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--torch", choices=["1.13", "2"], required=True)
    a = ap.parse_args()
    require_root()
    python = torch_python(a.torch, a.source)
    if not os.path.exists(python):
        print(f"cannot run: no {python}; scripts/setup.sh makes it", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    gtrace = os.path.join(os.path.abspath(a.build), "gtrace")
    with tempfile.TemporaryDirectory() as tmp:
        go, log_path, trace, report = (os.path.join(tmp, n) for n in ("go", "job.log", "trace.json", "report.json"))
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        with open(log_path, "w") as log:
            job = subprocess.Popen([python, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
                                    "--master_port", "29671", os.path.join(a.source, "tests/programs/ddp_straggler.py"),
                                    "--go-file", go, "--steps", "40"], stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        try:
            deadline = time.time() + 120
            while open(log_path).read().count("ready rank") < 2:
                if time.time() > deadline or job.poll() is not None:
                    fail("the job did not start: " + open(log_path).read()[-2000:])
                time.sleep(0.2)
            g = subprocess.Popen([gtrace, "attach", "--pid", str(job.pid), "-o", trace],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            while True:  # the attach line on stderr: probes are on
                line = g.stderr.readline()
                if not line or "attached to PID" in line:
                    break
            open(go, "w").close()
            try:
                _, err = g.communicate(timeout=180)
            except subprocess.TimeoutExpired:  # which side hung: the job, or gtrace after it ended
                g.kill()
                _, err = g.communicate()
                where = ""
                if job.poll() is None:  # where each of its processes stands, by gtrace dump
                    d = subprocess.run([gtrace, "dump", "--pid", str(job.pid)], capture_output=True, text=True, timeout=120)
                    where = "; gtrace dump of the job ends:\n    " + "\n    ".join((d.stdout + d.stderr).splitlines()[-40:])
                fail(f"gtrace still ran after 180 s; the job {'still ran' if job.poll() is None else 'had exited'}; "
                     f"gtrace's stderr: {err[-1500:]}; the job's log: {open(log_path).read()[-1500:]}{where}")
            if g.returncode != 0:
                fail(f"gtrace exited {g.returncode}: {err}")
            job.wait(timeout=60)
        finally:
            kill_tree(job.pid)
        out = open(log_path).read()
        m = re.search(r"GTRACE_DDP_TRUTH (\{.*\})", out)
        if not m:
            fail("the job printed no truth: " + out[-2000:])
        truth = json.loads(m.group(1))
        print(f"truth: {truth}", flush=True)
        r = subprocess.run([gtrace, "report", trace, "--json", report], capture_output=True, text=True, timeout=120)
        print(r.stdout, flush=True)
        if r.returncode != 0:
            fail(f"gtrace report exited {r.returncode}: {r.stderr}")
        data = json.load(open(report))
    ranks = {p["rank"]: p for p in data["ranks"] if p.get("rank") is not None}
    if set(ranks) != {0, 1}:
        fail(f"ranks {sorted(ranks)} in the report, expected 0 and 1")
    r0 = ranks[0]
    comm_ms = r0["step_ms"] * r0["breakdown_share"]["Communication"]
    wait_ms = truth["wait_ms"]
    print(f"rank 0: Communication {comm_ms:.1f} ms a step; it really waits {wait_ms:.1f} ms "
          f"(step {truth['step_ms']:.1f} ms, report's step {r0['step_ms']:.1f} ms)", flush=True)
    if abs(comm_ms - wait_ms) > 0.05 * wait_ms:
        fail(f"rank 0's Communication ({comm_ms:.1f} ms/step) is not within 5% of its wait ({wait_ms:.1f} ms/step)")
    ok("rank 0's Communication is the time it waits, within 5%")
    evidence = json.dumps(r0.get("evidence"))
    if "all_reduce" not in evidence or "rank 1" not in evidence:
        fail(f"rank 0's evidence names neither the all-reduce nor rank 1: {r0.get('verdict')}: {evidence}")
    ok(f"rank 0: {r0['verdict']}: the evidence names the all-reduce and rank 1")
    verdict = data["verdict"]
    if data.get("straggler_rank") != 1 or "rank 1" not in json.dumps(verdict.get("evidence")):
        fail(f"the job's verdict does not name rank 1 as the slow one: straggler_rank {data.get('straggler_rank')}, "
             f"{json.dumps(verdict)[:1500]}")
    ok(f"the job: {verdict['job']}: {verdict['evidence']}")
    if ranks[1]["verdict"] == "data_loading":
        fail(f"rank 1, busy on the CPU, is called {ranks[1]['verdict']}: {ranks[1]['evidence']}")
    ok(f"rank 1: {ranks[1]['verdict']}")
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
