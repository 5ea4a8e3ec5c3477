#!/usr/bin/python3
"""`gtrace report` against the GPU simulator's scenarios: a 2-rank torchrun job (demo/train.py
--scenario S on the simulator) is traced for a few seconds by `gtrace attach`, then reported.
The job's verdict must be the scenario's bottleneck (and rank 1 the straggler), every rank's
verdict too; steps must come from the optimizer's ranges; every step's breakdown must add up to
the step's wall time, and its Kernel, Memcpy and DataLoader shares must be within 5% of the
scenario's ground truth (the simulator's log of every GPU op, the program's own timing of each
wait for a batch: tests/runtime/breakdown_truth.py); GPU memory over time must show the demo's
256 MiB allocations. The HTML report is checked in Chromium.

Usage: report_scenarios.py SCENARIO --build BUILD_DIR --source SOURCE_DIR"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from breakdown_truth import compare  # noqa: E402
from demo_job import demo_job, fail, require_root  # noqa: E402

EXPECTED = {"slow_loader": "data_loading", "big_h2d": "copy", "tiny_kernels": "launch_overhead",
            "long_kernels": "gpu", "straggler": "straggler"}
PORTS = {name: 29600 + i for i, name in enumerate(sorted(EXPECTED))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(EXPECTED))
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    require_root()
    gtrace = os.path.join(a.build, "gtrace")
    env = {}
    if a.scenario == "straggler":
        env.update(GTSIM_SLOW_RANK="1", GTSIM_SLOW_FACTOR="3")
    with tempfile.TemporaryDirectory() as truth_dir:
        env.update(GTSIM_LOG=os.path.join(truth_dir, "sim.jsonl"), GTRACE_TRUTH_LOG=os.path.join(truth_dir, "steps"))
        with demo_job(a.build, a.source, a.scenario, PORTS[a.scenario], env) as (job, tmp):
            trace, summary, html = (os.path.join(tmp, f) for f in ("trace.json", "summary.json", "report.html"))
            r = subprocess.run([gtrace, "attach", "--pid", str(job), "-d", "6", "-q", "-o", trace], timeout=120)
            if r.returncode != 0:
                fail(f"gtrace attach exited {r.returncode}")
            r = subprocess.run([gtrace, "report", trace, "--json", summary, "--html", html], capture_output=True, text=True)
            print(r.stdout, r.stderr, flush=True)
            if r.returncode != 0:
                fail(f"gtrace report exited {r.returncode}")
            s = json.load(open(summary))
            # The HTML report in headless Chromium: no errors, charts painted, numbers as in the JSON.
            check = subprocess.run([sys.executable, os.path.join(a.source, "tests/runtime/html_report_check.py"), html, summary])
            if check.returncode not in (0, 77):
                fail(f"the HTML report failed its check (html_report_check.py exited {check.returncode})")
        failures = compare(s, env["GTSIM_LOG"], env["GTRACE_TRUTH_LOG"])
    want = EXPECTED[a.scenario]
    if s["verdict"]["job"] != want:
        fail(f"job verdict {s['verdict']['job']!r}, expected {want!r}")
    if want == "straggler":
        if s.get("straggler_rank") != 1:
            fail(f"straggler rank {s.get('straggler_rank')}, expected 1")
        if s["verdict"]["ranks"].get("0") != "straggler":  # rank 0 is bound by rank 1
            fail(f"rank 0: verdict {s['verdict']['ranks'].get('0')!r}, expected 'straggler' (it waits for rank 1)")
    else:
        for rank, v in s["verdict"]["ranks"].items():
            if v != want:
                fail(f"rank {rank}: verdict {v!r}, expected {want!r}")
    for rank in s["ranks"]:
        if rank["steps"] < 3:
            fail(f"rank {rank['rank']}: only {rank['steps']} steps found")
        memory = rank.get("memory", {})  # the demo allocates 256 MiB every 10 steps and frees it 5 later
        if memory.get("peak_bytes", 0) < 256 << 20 or len(memory.get("points", [])) < 4:
            fail(f"rank {rank['rank']}: GPU memory over time missing: peak {memory.get('peak_bytes')}, "
                 f"{len(memory.get('points', []))} points")
        if "Optimizer.step" not in rank["step_rule"]:
            fail(f"rank {rank['rank']}: steps not from the optimizer's ranges: {rank['step_rule']}")
        for step in rank["per_step"]:
            if abs(sum(step["breakdown_ms"].values()) - step["wall_ms"]) > 1e-6:
                fail(f"rank {rank['rank']}: a step's breakdown {step['breakdown_ms']} does not add up to {step['wall_ms']} ms")
    if failures:
        fail("breakdown off the ground truth by more than 5%: " + "; ".join(failures))
    print(f"ok: {a.scenario}: job verdict {want}, breakdowns add up and match the ground truth within 5%")
    print("PASS")


if __name__ == "__main__":
    main()
