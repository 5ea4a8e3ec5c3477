"""CPU-bound ground truth for sampling: spends nearly all its time in hot_loop() (and the
functions it calls inline), for --seconds, then exits. Under torchrun each rank does the same.

  python py_hot.py [--seconds S]
"""
import os
import sys
import time


def hot_loop(deadline):
    x = 1
    while time.monotonic() < deadline:  # HOT
        for _ in range(10000):
            x = (x * 31 + 7) % 1000003
    return x


def main():
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 5.0
    print(f"ready {os.getpid()} rank {os.environ.get('RANK', '-')}", flush=True)
    hot_loop(time.monotonic() + seconds)


main()
