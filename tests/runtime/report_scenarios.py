#!/usr/bin/python3
"""`gtrace report` against the GPU simulator's scenarios: a 2-rank torchrun job (demo/train.py
--scenario S on the simulator) is traced for a few seconds by `gtrace attach`, then reported.
The job's verdict must be the scenario's bottleneck (and rank 1 the straggler), every rank's
verdict too, and every step's breakdown must add up to the step's wall time.

Usage: report_scenarios.py SCENARIO --build BUILD_DIR --source SOURCE_DIR"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

EXPECTED = {"slow_loader": "data_loading", "big_h2d": "copy", "tiny_kernels": "launch_overhead",
            "long_kernels": "gpu", "straggler": "straggler"}
PORTS = {name: 29600 + i for i, name in enumerate(sorted(EXPECTED))}


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(EXPECTED))
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("cannot run: needs root (BPF and ptrace)", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    env = dict(os.environ)
    if a.scenario == "straggler":
        env.update(GTSIM_SLOW_RANK="1", GTSIM_SLOW_FACTOR="3")
    with tempfile.TemporaryDirectory() as tmp:
        log = open(os.path.join(tmp, "job.log"), "w")
        job = subprocess.Popen(["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "1",
                                "--tee", "1", "--master_port", str(PORTS[a.scenario]), os.path.join(a.source, "demo/train.py"),
                                "--scenario", a.scenario, "--cudart", os.path.join(a.build, "gpusim/libcudart.so.13"),
                                "--kernels", os.path.join(a.build, "programs/libdemo_kernels.so"), "--steps", "1000000"],
                               stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.time() + 120
            while open(os.path.join(tmp, "job.log")).read().count("ready rank") < 2:
                if time.time() > deadline or job.poll() is not None:
                    fail("the job did not start: " + open(os.path.join(tmp, "job.log")).read()[-2000:])
                time.sleep(0.5)
            time.sleep(2)
            trace, summary = os.path.join(tmp, "trace.json"), os.path.join(tmp, "summary.json")
            r = subprocess.run([os.path.join(a.build, "gtrace"), "attach", "--pid", str(job.pid), "-d", "6", "-q", "-o", trace],
                               timeout=120)
            if r.returncode != 0:
                fail(f"gtrace attach exited {r.returncode}")
        finally:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        html = os.path.join(tmp, "report.html")
        r = subprocess.run([os.path.join(a.build, "gtrace"), "report", trace, "--json", summary, "--html", html],
                           capture_output=True, text=True)
        print(r.stdout, r.stderr, flush=True)
        if r.returncode != 0:
            fail(f"gtrace report exited {r.returncode}")
        s = json.load(open(summary))
        # The HTML report in headless Chromium: no errors, charts painted, numbers as in the JSON (77: no chromium).
        check = subprocess.run([sys.executable, os.path.join(a.source, "tests/runtime/html_report_check.py"), html, summary])
        if check.returncode not in (0, 77):
            fail(f"the HTML report failed its check (html_report_check.py exited {check.returncode})")
    want = EXPECTED[a.scenario]
    if s["verdict"]["job"] != want:
        fail(f"job verdict {s['verdict']['job']!r}, expected {want!r}")
    if want == "straggler":
        if s.get("straggler_rank") != 1:
            fail(f"straggler rank {s.get('straggler_rank')}, expected 1")
    else:
        for rank, v in s["verdict"]["ranks"].items():
            if v != want:
                fail(f"rank {rank}: verdict {v!r}, expected {want!r}")
    for rank in s["ranks"]:
        if rank["steps"] < 3:
            fail(f"rank {rank['rank']}: only {rank['steps']} steps found")
        for step in rank["per_step"]:
            if abs(sum(step["breakdown_ms"].values()) - step["wall_ms"]) > 1e-6:
                fail(f"rank {rank['rank']}: a step's breakdown {step['breakdown_ms']} does not add up to {step['wall_ms']} ms")
    print(f"ok: {a.scenario}: job verdict {want}, breakdowns add up to every step's wall time")
    print("PASS")


if __name__ == "__main__":
    main()
