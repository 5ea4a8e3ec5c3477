#!/usr/bin/python3
"""Long captures (issue 14 point 6): does a normal `gtrace attach` left on for an hour stay in
bounded memory, and leak no fds, in gtrace or in the job (the agent lives inside the job)?

Starts demo/train.py alone on the GPU simulator at a steady, realistic rate (--scenario
tiny_kernels paced by --step-sleep: a few thousand CUDA calls a second with their Python stacks,
each launch's kernel recorded by the CUPTI agent), with a new epoch every --epoch-steps steps (the
DataLoader's worker exits and a fresh one is forked) and a short evaluation run of train.py every
--eval-every steps (a CUDA process with its own agent, exiting after 20 steps): processes come and
go all the time, so gtrace's per-process state and the agents' rings are exercised. It
attaches `gtrace attach` (a .pftrace, the default) for --minutes. Every --every seconds it samples
gtrace's VmRSS, RssAnon, open fds, threads and CPU time, the trace file's size, and the job's fds
(the training process, which holds the agent, and its whole tree). It prints the curve and writes
OUT/samples.csv and OUT/soak.json (samples, gtrace's summary, verdict).

Verdict, over the second half of the capture (the first half is warm-up: tables filling, malloc
arenas settling; the samples after --minutes are gtrace writing its summary and are left out):
- memory bounded: the least-squares slope of gtrace's RSS is below --tolerance MiB per hour
  (default 8). Why 8: at this rate gtrace sees tens of millions of events an hour, so keeping
  anything per event — even one byte — grows by 20+ MiB/h; and 8 MiB/h is < 200 MiB over a day.
- fds flat: the floor of gtrace's fds, and of the training process's, does not climb — the
  lowest count of the last quarter of the capture is at most --fd-slack (default 2) above the
  lowest of the second quarter. (The count rises while an evaluation process lives: gtrace holds
  its agent's ring and pipe; the floor is what is left once it has gone.)

Needs root (BPF, ptrace) and a build (--build) with the simulator and the demo kernels.

Usage: soak.py [--minutes 60] [--every 10] [--out DIR] [--step-sleep 0.15] [--epoch-steps 50]
               [--eval-every 200] [--tolerance 8] [--fd-slack 2] [--build build] [--source .]
               [--heaptrack SECONDS]

gtrace runs with GTRACE_TEST_BENCH_HEAP=1: after each malloc_trim (every 30 s) it logs the heap it holds
and the free memory glibc keeps in it; the verdict prints both slopes beside RSS's.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "runtime"))
from demo_job import demo_job, require_root  # noqa: E402
from kernel_state import process_tree  # noqa: E402
from proc_stats import cpu_seconds, open_fds, rss_mib, status_field, threads  # noqa: E402

COLUMNS = ["t_s", "gtrace_rss_mib", "gtrace_anon_mib", "gtrace_fds", "gtrace_threads", "gtrace_cpu_s",
           "trace_mib", "job_fds", "job_tree_fds", "job_processes"]


def sample(t, gtrace_pid, job_pid, trace):
    tree = process_tree(job_pid)
    tree_fds = [n for n in (open_fds(p) for p in tree) if n is not None]
    size = 0
    for path in (trace + ".partial", trace):
        if os.path.exists(path):
            size = os.path.getsize(path)
    return {"t_s": round(t, 1), "gtrace_rss_mib": round(rss_mib(gtrace_pid), 2),
            "gtrace_anon_mib": round((status_field(gtrace_pid, "RssAnon") or 0) / 1024, 2),
            "gtrace_fds": open_fds(gtrace_pid), "gtrace_threads": threads(gtrace_pid),
            "gtrace_cpu_s": round(cpu_seconds(gtrace_pid), 2), "trace_mib": round(size / 2**20, 2),
            "job_fds": open_fds(job_pid), "job_tree_fds": sum(tree_fds), "job_processes": len(tree_fds)}


def slope_per_hour(points):
    """Least-squares slope of [(t seconds, y)] in y per hour."""
    n = len(points)
    mt, my = sum(t for t, _ in points) / n, sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / var * 3600 if var else 0.0


def floor_rise(rows, duration, column):
    """Lowest `column` in the last quarter of the capture minus the lowest in the second."""
    def lowest(a, b):
        return min((r[column] for r in rows if a * duration <= r["t_s"] < b * duration and r[column] is not None), default=0)
    return lowest(0.75, 1.0) - lowest(0.25, 0.5)


def spread(rows, column):
    values = [r[column] for r in rows if r[column] is not None]
    return (min(values), max(values)) if values else (0, 0)


def at(rows, seconds):
    """The sample nearest to `seconds`."""
    return min(rows, key=lambda r: abs(r["t_s"] - seconds))


def heap_log(path):
    """gtrace's `gtrace-heap:` lines (GTRACE_TEST_BENCH_HEAP): (t_s, MiB in use, MiB glibc keeps free)."""
    points = []
    for line in open(path, errors="replace"):
        if line.startswith("gtrace-heap: "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            points.append((float(f["t"]), (int(f["in_use"]) + int(f["mmapped"])) / 2**20, int(f["free"]) / 2**20))
    return points


def gtrace_process(launcher_pid, gtrace):
    """Under --heaptrack the launched process is heaptrack's script: find gtrace below it."""
    for _ in range(100):
        for p in process_tree(launcher_pid):
            try:
                if os.path.realpath(f"/proc/{p}/exe") == os.path.realpath(gtrace):
                    return p
            except OSError:
                pass
        time.sleep(0.1)
    sys.exit("gtrace did not start under heaptrack")


def capture(args, gtrace, pid, duration):
    trace = os.path.join(args.out, "soak.pftrace")
    cmd = [gtrace, "attach", "--pid", str(pid), "-q", "-o", trace, "--duration", f"{duration:g}",
           "--summary-json", os.path.join(args.out, "summary.json")]
    launcher = ["heaptrack", "-o", os.path.join(args.out, "heaptrack")] if args.heaptrack else []
    with open(os.path.join(args.out, "gtrace.stderr"), "w") as err:
        g = subprocess.Popen(launcher + cmd, stdout=subprocess.DEVNULL, stderr=err,
                             env=dict(os.environ, GTRACE_TEST_BENCH_HEAP="1"))
    gtrace_pid = gtrace_process(g.pid, gtrace) if args.heaptrack else g.pid
    print(" ".join(cmd[1:]), flush=True)
    print("  ".join(COLUMNS), flush=True)
    rows, start = [], time.time()
    with open(os.path.join(args.out, "samples.csv"), "w", newline="") as f:
        out = csv.DictWriter(f, COLUMNS)
        out.writeheader()
        next_copy = args.heaptrack
        while g.poll() is None:
            row = sample(time.time() - start, gtrace_pid, pid, trace)
            if args.heaptrack and row["t_s"] >= next_copy:  # a copy of the stream reads as a capture that stopped here
                for name in os.listdir(args.out):
                    if name.startswith("heaptrack") and ".at-" not in name:
                        subprocess.run(["cp", os.path.join(args.out, name), os.path.join(args.out, f"{name}.at-{int(row['t_s'])}s")])
                next_copy += args.heaptrack
            if row["gtrace_fds"] is not None:
                rows.append(row)
                out.writerow(row)
                f.flush()
                print("  ".join(f"{row[c]}" for c in COLUMNS), flush=True)
            time.sleep(args.every)
    if g.returncode != 0:
        sys.exit(f"gtrace exited {g.returncode}: " + open(os.path.join(args.out, "gtrace.stderr")).read()[-2000:])
    return rows, os.path.getsize(trace)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--every", type=float, default=10, help="seconds between samples")
    ap.add_argument("--out", default="/tmp/gtrace-soak")
    ap.add_argument("--scenario", default="tiny_kernels")
    ap.add_argument("--step-sleep", type=float, default=0.15, help="pace of the job: seconds slept after each step")
    ap.add_argument("--epoch-steps", type=int, default=50, help="a fresh DataLoader worker every N steps")
    ap.add_argument("--eval-every", type=int, default=200, help="a 20-step CUDA child process every N steps")
    ap.add_argument("--tolerance", type=float, default=8.0, help="MiB per hour of RSS growth over the second half")
    ap.add_argument("--fd-slack", type=int, default=2)
    ap.add_argument("--build", default="build")
    ap.add_argument("--source", default=".")
    ap.add_argument("--heaptrack", type=float, default=0,
                    help="run gtrace under heaptrack and copy its data file every N seconds (the live heap then)")
    args = ap.parse_args()
    require_root()
    os.makedirs(args.out, exist_ok=True)
    gtrace = os.path.join(os.path.abspath(args.build), "gtrace")
    duration = args.minutes * 60
    train_args = ["--step-sleep", str(args.step_sleep), "--epoch-steps", str(args.epoch_steps),
                  "--eval-every", str(args.eval_every)]
    with demo_job(args.build, args.source, args.scenario, 0, single=True, train_args=train_args) as (pid, _):
        rows, trace_bytes = capture(args, gtrace, pid, duration)
    summary = json.load(open(os.path.join(args.out, "summary.json")))
    judged = [r for r in rows if duration / 2 <= r["t_s"] < duration]
    if len(judged) < 4:
        sys.exit(f"too short to judge: {len(judged)} samples in the second half; raise --minutes or lower --every")
    slope = slope_per_hour([(r["t_s"], r["gtrace_rss_mib"]) for r in judged])
    fds, job_fds = spread(judged, "gtrace_fds"), spread(judged, "job_fds")
    capture_facts = summary.get("capture", {})
    calls = sum(capture_facts.get("calls", {}).values())
    gpu = capture_facts.get("gpu", {})
    print(f"CUDA calls: {calls} ({calls / duration:.0f}/s); GPU ops {gpu.get('gpu_ops')}, joined to their call "
          f"{gpu.get('joined_to_call')}; agents {gpu.get('agents')}; lost events: {capture_facts.get('lost_events')}")
    print("RSS (MiB) at " + ", ".join(f"{m} min {at(rows, m * 60)['gtrace_rss_mib']:.1f}"
                                       for m in (0, 1, 5, 10, 30, 60) if m * 60 <= duration)
          + f"; peak {max(r['gtrace_rss_mib'] for r in rows):.1f}")
    print(f"second half ({len(judged)} samples): RSS slope {slope:+.2f} MiB/h (tolerance {args.tolerance:g}); "
          f"gtrace fds {fds[0]}..{fds[1]}, threads {spread(judged, 'gtrace_threads')}; "
          f"job fds {job_fds[0]}..{job_fds[1]}, job tree fds {spread(judged, 'job_tree_fds')}, "
          f"processes {spread(judged, 'job_processes')}")
    heap = [h for h in heap_log(os.path.join(args.out, "gtrace.stderr")) if duration / 2 <= h[0] < duration]
    heap_slopes = None
    if len(heap) >= 4:  # tells what gtrace holds from what glibc keeps free inside the heap
        heap_slopes = {"in_use": slope_per_hour([(t, u) for t, u, _ in heap]),
                       "kept_free": slope_per_hour([(t, f) for t, _, f in heap])}
        print(f"heap after each trim, second half: in use {heap[0][1]:.1f} -> {heap[-1][1]:.1f} MiB "
              f"({heap_slopes['in_use']:+.2f} MiB/h), kept free {heap[0][2]:.1f} -> {heap[-1][2]:.1f} MiB "
              f"({heap_slopes['kept_free']:+.2f} MiB/h)")
    print(f"trace: {trace_bytes / 2**20:.1f} MiB in {duration:g} s; gtrace CPU {rows[-1]['gtrace_cpu_s']:.0f} s")
    rises = {c: floor_rise(rows, duration, c) for c in ("gtrace_fds", "job_fds")}
    print(f"fd floor, last quarter against the second: gtrace {rises['gtrace_fds']:+d}, job {rises['job_fds']:+d}")
    checks = {"rss_bounded": slope < args.tolerance, "gtrace_fds_flat": rises["gtrace_fds"] <= args.fd_slack,
              "job_fds_flat": rises["job_fds"] <= args.fd_slack}
    verdict = "BOUNDED" if all(checks.values()) else "GROWING"
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump({"args": vars(args), "samples": rows, "summary": summary, "slope_mib_per_h": slope, "heap_slopes_mib_per_h": heap_slopes, "fd_floor_rise": rises,
                   "trace_bytes": trace_bytes, "checks": checks, "verdict": verdict}, f, indent=1)
    print(f"soak: {verdict} ({', '.join(f'{k} {v}' for k, v in checks.items())}); samples in {args.out}")
    sys.exit(0 if verdict == "BOUNDED" else 1)


if __name__ == "__main__":
    main()
