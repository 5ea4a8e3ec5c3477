"""Point 3 of the exactness issue on a real GPU: the job's own torch.profiler beside gtrace.
Usage: gpu_profiler_check.py --gtrace GTRACE --python PY --out DIR [--device cuda|cpu] [--daemon]

Runs scripts/gpu_profiler_job.py and profiles windows of the same steps: one without gtrace
(the baseline), one opened while gtrace is attached, one that is open already when gtrace
attaches, one after gtrace left. PASS/FAIL per check:
  job alive       the job never crashed or hung (every window done in time)
  window N        the job's profiler recorded the baseline's kernels, by name and count
  gtrace said     gtrace's stderr names the window (recorded beside it, all records given back)
  gtrace linked   every GPU op of gtrace's trace is linked to its call
--daemon: the job runs with KINETO_USE_DAEMON=1 (Kineto's on-demand mode, as dynolog needs).
Exits 1 if any check failed."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--gtrace", required=True)
ap.add_argument("--python", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
ap.add_argument("--daemon", action="store_true")
args = ap.parse_args()
HERE = os.path.dirname(os.path.abspath(__file__))
tag = "daemon" if args.daemon else "profiler"
work = os.path.join(args.out, tag)
os.makedirs(work, exist_ok=True)
for name in os.listdir(work):
    os.unlink(os.path.join(work, name))
failed = []


def check(name, ok, detail):
    print(f"gpu-check: {'PASS' if ok else 'FAIL'}: {tag} {name}: {detail}", flush=True)
    if not ok:
        failed.append(name)


env = dict(os.environ, **({"KINETO_USE_DAEMON": "1"} if args.daemon else {}))
job_log = open(os.path.join(work, "job.log"), "w")
job = subprocess.Popen([args.python, os.path.join(HERE, "gpu_profiler_job.py"), "--dir", work, "--device", args.device],
                       stdout=job_log, stderr=subprocess.STDOUT, env=env)


def wait_for(path, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if job.poll() is not None:
            check("job alive", False, f"the job exited ({job.returncode}) waiting for {what}; see {work}/job.log")
            sys.exit(1)
        if (os.path.exists(path) if path.startswith("/") else re.search(path, open(job_log.name).read())):
            return
        time.sleep(0.1)
    check("job alive", False, f"no {what} within {seconds} s (the job hangs?); see {work}/job.log")
    job.kill()
    sys.exit(1)


def run_window(n):
    open(os.path.join(work, f"window{n}.open"), "w").close()
    wait_for(os.path.join(work, f"window{n}.done"), 300, f"window {n} done")
    with open(os.path.join(work, f"window{n}.json")) as f:
        return json.load(f)


def attach(n):
    log = open(os.path.join(work, f"gtrace{n}.log"), "w")
    g = subprocess.Popen([args.gtrace, "attach", "--pid", str(job.pid), "--format", "json", "-o",
                          os.path.join(work, f"trace{n}.json"), "--force"], stderr=log, stdout=log)
    deadline = time.time() + 120
    while time.time() < deadline and args.device == "cuda" and "GPU agent active" not in open(log.name).read():
        time.sleep(0.1)
    return g, log.name


def detach(n, g, log_name):
    g.send_signal(signal.SIGINT)
    g.wait(timeout=120)
    text = open(log_name).read()
    if args.device != "cuda":
        return
    check(f"gtrace said {n}", re.search(r"its own profiler .* gtrace recorded beside it, and gave it back all its records", text) is not None,
          next((line for line in text.splitlines() if "its own profiler" in line), "no line about the job's profiler"))
    with open(os.path.join(work, f"trace{n}.json")) as f:
        gpu = json.load(f)["otherData"].get("gpu", {})
    check(f"gtrace linked {n}", gpu.get("gpu_ops", 0) > 0 and gpu.get("joined_to_call") == gpu.get("gpu_ops"),
          f"{gpu.get('joined_to_call')} of {gpu.get('gpu_ops')} GPU ops linked")


wait_for("ready", 300, "the job's first steps")
baseline = run_window(0)
check("baseline", args.device != "cuda" or baseline["kernels"] > 0, f"{baseline['kernels']} kernels in {baseline['active_steps']} steps")
results = {}
g, log_name = attach(1)  # gtrace first, then the window
results[1] = run_window(1)
detach(1, g, log_name)
open(os.path.join(work, "window2.open"), "w").close()  # the window first, then gtrace
wait_for(r"window 2 recording", 300, "window 2 recording")
g, log_name = attach(2)
wait_for(os.path.join(work, "window2.done"), 300, "window 2 done")
with open(os.path.join(work, "window2.json")) as f:
    results[2] = json.load(f)
detach(2, g, log_name)
results[3] = run_window(3)  # after gtrace left
for n, got in results.items():
    check(f"window {n}", got["by_name"] == baseline["by_name"],
          f"{got['kernels']} kernels recorded, baseline {baseline['kernels']}"
          + ("" if got["by_name"] == baseline["by_name"] else
             f"; differing: {sorted(k for k in set(got['by_name']) | set(baseline['by_name']) if got['by_name'].get(k) != baseline['by_name'].get(k))[:5]}"))
open(os.path.join(work, "stop"), "w").close()
try:
    job.wait(timeout=60)
    check("job alive", job.returncode == 0, f"the job ended with status {job.returncode}")
except subprocess.TimeoutExpired:
    job.kill()
    check("job alive", False, "the job did not end within 60 s of being asked")
sys.exit(1 if failed else 0)
