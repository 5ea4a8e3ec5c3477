#!/usr/bin/python3
"""Does a --flight-recorder capture stay in bounded memory over a long run?

Starts demo/train.py alone on the GPU simulator (a steady job: --scenario tiny_kernels, hundreds
of launches per step, the CUPTI agent on), attaches `gtrace attach --flight-recorder WINDOW` to
it for --minutes, sends it SIGUSR1 once in the middle (a dump is written while it records), and
samples gtrace's RSS (VmRSS) every --every seconds. It prints the curve, then the verdict: the
RSS plateaus if, once the window has filled (after window + 2 s grace + 10 s), the highest RSS
of the last third of the run is within --tolerance of the highest of the middle third (the
store is full: evictions keep pace with new events). The last dump's otherData.flight_recorder
gives the store's own count of events and bytes, and what it evicted.

Needs root (BPF), a build (--build) with the simulator and the demo kernels.

Usage: flight_recorder_memory.py [--minutes 10] [--window 30s] [--every 5] [--build build] [--source .]
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


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def window_seconds(text):
    units = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--window", default="30s")
    ap.add_argument("--every", type=float, default=5)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--scenario", default="tiny_kernels")
    ap.add_argument("--build", default="build")
    ap.add_argument("--source", default=".")
    args = ap.parse_args()
    require_root()
    gtrace = os.path.join(os.path.abspath(args.build), "gtrace")
    duration = args.minutes * 60
    filled = window_seconds(args.window) + 2 + 10
    with demo_job(args.build, args.source, args.scenario, 0, single=True) as (pid, _), tempfile.TemporaryDirectory() as out:
        cmd = [gtrace, "attach", "--pid", str(pid), "-o", os.path.join(out, "fr.pftrace"), "--flight-recorder", args.window,
               "--duration", f"{duration:g}"]
        err = open(os.path.join(out, "stderr"), "w+")
        g = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        start, curve, signalled = time.time(), [], False
        print(f"{' '.join(cmd[1:])}\n   t (s)   RSS (MiB)", flush=True)
        while g.poll() is None:
            t = time.time() - start
            try:
                curve.append((t, rss_mib(g.pid)))
            except FileNotFoundError:
                break
            print(f"  {t:6.0f}   {curve[-1][1]:9.1f}", flush=True)
            if not signalled and t >= duration / 2:
                g.send_signal(signal.SIGUSR1)
                signalled = True
            time.sleep(args.every)
        rc = g.wait()
        err.seek(0)
        log = err.read()
        if rc != 0:
            print(log[-3000:])
            sys.exit(f"gtrace exited {rc}")
        dumps = sorted(p for p in os.listdir(out) if p.startswith("fr-") and p.endswith(".pftrace"))
        facts = trace_formats.load_trace(os.path.join(out, dumps[-1]))["otherData"]["flight_recorder"] if dumps else {}
    print("".join(line + "\n" for line in log.splitlines() if "flight recorder dump" in line), end="")
    steady = [(t, r) for t, r in curve if t >= filled]
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
    verdict = "PLATEAU" if growth <= args.tolerance else "GROWING"
    print(f"flight-recorder-memory: {verdict} (last third within {args.tolerance:.0%} of the middle third)")
    sys.exit(0 if verdict == "PLATEAU" else 1)


if __name__ == "__main__":
    main()
