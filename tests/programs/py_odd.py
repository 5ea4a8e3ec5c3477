"""Odd Python stacks at CUDA calls: recursion deeper than gtrace keeps (128 frames: the stack
is cut and marked), a generator, and a coroutine under asyncio. Prints GTRACE_PYSTACK records
(innermost first) and GTRACE_COUNTS.

  python py_odd.py CUDART GO_FILE
"""
import asyncio
import ctypes
import json
import os
import sys
import time

import markers

cudart = ctypes.CDLL(sys.argv[1])
HERE = os.path.abspath(__file__)
QUAL = sys.version_info >= (3, 11)


def line_of(marker):
    return markers.line_of(HERE, marker)


def at(fn, marker):
    return f"{fn} ({HERE}:{line_of(marker)})"


def cuda():
    cudart.cudaDeviceSynchronize()  # CUDA


def deep(n):
    if n == 0:
        return cuda()  # DEEP_BOTTOM
    return deep(n - 1)  # DEEP_RECURSE


def producer():
    for i in range(3):
        cuda()  # GEN_CALL
        yield i


async def worker():
    await asyncio.sleep(0)
    cuda()  # CORO_CALL


def main():
    print(f"ready {os.getpid()}", flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    deep(300)
    for _ in producer():  # GEN_LOOP
        pass
    asyncio.run(worker())  # CORO_RUN
    truncated = [at("cuda", "CUDA"), at("deep", "DEEP_BOTTOM")] + [at("deep", "DEEP_RECURSE")] * 126
    records = [
        {"thread": "deep recursion", "count": 1, "stack": truncated + ["[truncated: deeper than 128 frames]"]},
        {"thread": "generator", "count": 3, "stack": [at("cuda", "CUDA"), at("producer", "GEN_CALL"), at("main", "GEN_LOOP")]},
        {"thread": "coroutine", "count": 1, "stack": [at("cuda", "CUDA"), at("worker", "CORO_CALL")]},
    ]
    for r in records:
        print("GTRACE_PYSTACK " + json.dumps(r), flush=True)
    print("GTRACE_COUNTS " + json.dumps({"pid": os.getpid(), "calls": {"cudaDeviceSynchronize": 5}}), flush=True)
    time.sleep(1.0)


main()  # MAIN
