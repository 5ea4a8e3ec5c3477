#!/usr/bin/python3
"""scripts/demo.sh in each of its six scenarios, run as a user runs it (as root, this build through
GTRACE_BUILD_DIR, its outputs in a temp dir through GTRACE_DEMO_OUT): `scripts/demo.sh` as the
README writes it (balanced), then `--scenario S` for the five others (long_kernels with --json;
tiny_kernels' 10 s make a million launches: about 1 GiB of JSON, which `gtrace report` reads back
in the demo, as it does when the end of the capture leaves it the report; checked by hand). Each must exit 0; list the job with
gtrace ps; write the trace it names (trace.pftrace by default, trace.json with --json), the HTML
report and report.json; print the scenario's verdict (the simulator's bottleneck: the same
expectations as report/<scenario>, rank 1 for the straggler) and the "Next:" steps.

Usage: demo_scenarios.py --build BUILD --source SOURCE [--scenario S ...]"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_job import fail, require_root  # noqa: E402
from report_scenarios import EXPECTED, contended_straggler  # noqa: E402

RUNS = [("balanced", []), ("slow_loader", ["--scenario", "slow_loader"]), ("big_h2d", ["--scenario", "big_h2d"]),
        ("tiny_kernels", ["--scenario", "tiny_kernels"]), ("long_kernels", ["--scenario", "long_kernels", "--json"]),
        ("straggler", ["--scenario", "straggler"])]


def run_demo(source, build, tmp, scenario, args):
    out_dir = os.path.join(tmp, scenario)
    env = dict(os.environ, GTRACE_BUILD_DIR=build, GTRACE_DEMO_OUT=out_dir)
    r = subprocess.run(["scripts/demo.sh", *args], cwd=source, env=env, capture_output=True, text=True, timeout=600)
    print(r.stdout + r.stderr, flush=True)
    what = " ".join(["scripts/demo.sh", *args])
    if r.returncode != 0:
        fail(f"{what} exited {r.returncode}")
    for want in (r"gtrace ps lists it:\n.*PID +PPID", r"torchrun agent", r"demo: VERDICT: ", r"\nNext:\n(  - .*\n){3,}"):
        if not re.search(want, r.stdout):
            fail(f"{what} printed nothing like /{want}/")
    trace = os.path.join(out_dir, "trace.json" if "--json" in args else "trace.pftrace")
    for path in (trace, os.path.join(out_dir, "report.html"), os.path.join(out_dir, "report.json")):
        if not os.path.isfile(path) or not os.path.getsize(path):
            fail(f"{what} wrote no {os.path.basename(path)}")
    if not re.search(rf"demo: trace: +{re.escape(trace)} ", r.stdout):
        fail(f"{what} did not name its trace {trace}")
    verdict = re.search(r"demo: VERDICT: (\S+)", r.stdout).group(1)
    report = json.load(open(os.path.join(out_dir, "report.json")))
    if verdict != EXPECTED[scenario] and not contended_straggler(EXPECTED[scenario], report["verdict"]):
        fail(f"{what}: verdict {verdict}, the scenario's bottleneck is {EXPECTED[scenario]}")
    if scenario == "straggler" and "(rank 1)" not in r.stdout:
        fail(f"{what} did not name rank 1 as the straggler")
    if report["verdict"]["job"] != verdict:
        fail(f"{what} printed {verdict}, its report.json says {report['verdict']['job']}")
    size = os.path.getsize(trace) / 2**20
    print(f"ok: {what}: verdict {verdict}, {os.path.basename(trace)} {size:.1f} MiB", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--scenario", action="append", help="only these (default: all six)")
    a = ap.parse_args()
    require_root()
    with tempfile.TemporaryDirectory(prefix="gtrace-demo-") as tmp:
        for scenario, args in RUNS:
            if not a.scenario or scenario in a.scenario:
                run_demo(os.path.abspath(a.source), os.path.abspath(a.build), tmp, scenario, args)
    print("demo_scenarios: ok", flush=True)


if __name__ == "__main__":
    main()
