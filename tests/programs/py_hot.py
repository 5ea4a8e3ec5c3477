"""CPU-bound ground truth for sampling: spends nearly all its time in hot_loop() (and the
functions it calls inline) until it has used --cpu-seconds of CPU time (or --seconds of wall
time, whichever comes first), then exits. Under torchrun each rank does the same. Counting CPU
time makes the work a sampler sees the same on a busy host as on an idle one: beside two CPU hogs
a rank gets a third of a core, and a wall-clock loop then gives a third of the samples.

  python py_hot.py [--cpu-seconds C] [--seconds S] [--go-file F]

With --go-file, the work (and its clock) starts once F exists: the case creates it once gtrace
has attached, so that attaching does not eat into the CPU time the samples are taken from.
"""
import os
import sys
import time


def arg(name, default):
    return float(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def hot_loop(cpu_until, deadline):
    x = 1
    while time.process_time() < cpu_until and time.monotonic() < deadline:  # HOT
        for _ in range(10000):
            x = (x * 31 + 7) % 1000003
    return x


def main():
    cpu_seconds, seconds = arg("--cpu-seconds", float("inf")), arg("--seconds", 5.0 if "--cpu-seconds" not in sys.argv else 120.0)
    print(f"ready {os.getpid()} rank {os.environ.get('RANK', '-')}", flush=True)
    if "--go-file" in sys.argv:
        go = sys.argv[sys.argv.index("--go-file") + 1]
        while not os.path.exists(go):
            time.sleep(0.01)
    hot_loop(time.process_time() + cpu_seconds, time.monotonic() + seconds)


main()
