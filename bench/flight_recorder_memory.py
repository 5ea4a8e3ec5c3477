#!/usr/bin/python3
"""Does a --flight-recorder capture stay in bounded memory over a long run?

Starts demo/train.py alone on the GPU simulator (a steady job: --scenario tiny_kernels, hundreds
of launches per step, the CUPTI agent on), attaches `gtrace attach --flight-recorder WINDOW` to
it for --minutes, sends it SIGUSR1 once in the middle (a dump is written while it records), and
samples gtrace's RSS (VmRSS) every --every seconds. It prints the curve, then the verdict: the
RSS plateaus if, once the window has filled (after window + 2 s grace + 10 s) and until
--duration (then the last dump is written and judged), the highest RSS of the last third of the run is within --tolerance of the highest of the middle third (the
store is full: evictions keep pace with new events). The last dump's otherData.flight_recorder
gives the store's own count of events and bytes, and what it evicted.

With --compare, a normal capture of the same job follows for the same length: gtrace's CPU time
in each (the flight recorder's cost is meant to be a normal capture's), and the normal trace's size.

Needs root (BPF), a build (--build) with the simulator and the demo kernels.

Usage: flight_recorder_memory.py [--minutes 10] [--window 30s] [--every 5] [--compare] [--build build] [--source .]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "runtime"))
from demo_job import demo_job, require_root  # noqa: E402
import trace_formats  # noqa: E402
from proc_stats import rss_mib  # noqa: E402


def window_seconds(text):
    units = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


def run_capture(gtrace, pid, out, extra, duration, every, signal_at=None, job_log=None):
    """gtrace attach for `duration` s; returns its RSS curve [(t, MiB)], CPU seconds and stderr."""
    cmd = [gtrace, "attach", "--pid", str(pid), *extra, "--duration", f"{duration:g}"]
    err = open(os.path.join(out, "stderr"), "w+")
    g = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    start, curve, signalled = time.time(), [], False
    print(f"{' '.join(cmd[1:])}\n   t (s)   RSS (MiB)", flush=True)
    while True:
        reaped, status, usage = os.wait4(g.pid, os.WNOHANG)
        if reaped:
            break
        t = time.time() - start
        curve.append((t, rss_mib(g.pid)))
        print(f"  {t:6.0f}   {curve[-1][1]:9.1f}", flush=True)
        if signal_at is not None and not signalled and t >= signal_at:
            g.send_signal(signal.SIGUSR1)
            signalled = True
        time.sleep(every)
    g.returncode = 0  # reaped here
    err.seek(0)
    log = err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        print(log[-3000:])
        sys.exit(f"gtrace exited {os.waitstatus_to_exitcode(status)}")
    if time.time() - start < duration - every:
        print(log[-3000:])
        if job_log and os.path.exists(job_log):
            print("the job's log ends:\n" + open(job_log).read()[-2000:])
        sys.exit(f"gtrace stopped after {time.time() - start:.0f} s, before --duration {duration:g} s (did the job end?)")
    return curve, usage.ru_utime + usage.ru_stime, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--window", default="30s")
    ap.add_argument("--every", type=float, default=5)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--scenario", default="tiny_kernels")
    ap.add_argument("--compare", action="store_true", help="then a normal capture of the same length: its CPU time and RSS")
    ap.add_argument("--build", default="build")
    ap.add_argument("--source", default=".")
    args = ap.parse_args()
    require_root()
    gtrace = os.path.join(os.path.abspath(args.build), "gtrace")
    duration = args.minutes * 60
    filled = window_seconds(args.window) + 2 + 10
    with demo_job(args.build, args.source, args.scenario, 0, single=True) as (pid, job_dir), tempfile.TemporaryDirectory() as out:
        curve, cpu_s, log = run_capture(gtrace, pid, out, ["-o", os.path.join(out, "fr.pftrace"), "--flight-recorder", args.window],
                                        duration, args.every, signal_at=duration / 2, job_log=os.path.join(job_dir, "job.log"))
        dumps = sorted(p for p in os.listdir(out) if p.startswith("fr-") and p.endswith(".pftrace"))
        facts = trace_formats.load_trace(os.path.join(out, dumps[-1]))["otherData"]["flight_recorder"] if dumps else {}
    normal = None
    if args.compare:  # a fresh job of the same scenario
        with demo_job(args.build, args.source, args.scenario, 0, single=True) as (pid, job_dir), tempfile.TemporaryDirectory() as out:
            normal_curve, normal_cpu, _ = run_capture(gtrace, pid, out, ["-o", os.path.join(out, "normal.pftrace")], duration, args.every,
                                                      job_log=os.path.join(job_dir, "job.log"))
            normal = (normal_curve, normal_cpu, os.path.getsize(os.path.join(out, "normal.pftrace")))
    print("".join(line + "\n" for line in log.splitlines() if "flight recorder dump" in line), end="")
    # From the window's filling to --duration (after it, gtrace writes the last dump and judges it).
    steady = [(t, r) for t, r in curve if filled <= t < duration]
    if len(steady) < 6:
        sys.exit(f"too short to judge: {len(steady)} samples after the window filled at {filled:.0f} s; raise --minutes")
    third = len(steady) // 3
    middle = max(r for _, r in steady[third : 2 * third])
    last = max(r for _, r in steady[2 * third :])
    growth = (last - middle) / middle
    print(f"dumps: {len(dumps)}; store at the end: {facts.get('stored_events')} events, "
          f"{facts.get('stored_bytes', 0) / 2**20:.1f} MiB (bound {facts.get('max_bytes', 0) / 2**20:.0f} MiB), "
          f"evicted by age {facts.get('evicted_by_age')}, by memory {facts.get('evicted_by_memory')}")
    print(f"RSS: first {curve[0][1]:.1f} MiB, peak {max(r for _, r in curve):.1f} MiB; once the window filled: "
          f"middle third's peak {middle:.1f} MiB, last third's {last:.1f} MiB ({growth:+.1%})")
    print(f"gtrace CPU: {cpu_s:.1f} s in {duration:g} s ({cpu_s / duration:.1%} of a core)")
    if normal:
        n_curve, n_cpu, n_bytes = normal
        print(f"normal capture, same job and length: CPU {n_cpu:.1f} s ({n_cpu / duration:.1%} of a core), "
              f"RSS peak {max(r for _, r in n_curve):.1f} MiB, trace {n_bytes / 2**20:.1f} MiB; "
              f"flight recorder / normal CPU: {cpu_s / n_cpu:.2f}x")
    verdict = "PLATEAU" if growth <= args.tolerance else "GROWING"
    print(f"flight-recorder-memory: {verdict} (last third within {args.tolerance:.0%} of the middle third)")
    sys.exit(0 if verdict == "PLATEAU" else 1)


if __name__ == "__main__":
    main()
