"""Benchmark workloads, timed by themselves after FILE (argv[2]) appears.
  py_workload.py stack N GO CUDART   N cudaLaunchKernel calls through ctypes from 45 Python frames deep
  py_workload.py cpu N GO            N iterations of a CPU-bound loop
Prints "ready PID", then "ns_per_op X"."""
import ctypes
import os
import sys
import time


def wait(go):
    print(f"ready {os.getpid()}", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)


def at_depth(depth, fn):
    return fn() if depth == 0 else at_depth(depth - 1, fn)


def stack_bench(n, go, cudart_path):
    rt = ctypes.CDLL(cudart_path)
    launch = rt.cudaLaunchKernel
    launch.argtypes = [ctypes.c_void_p] * 6
    stub = ctypes.cast(rt.cudaGetErrorString, ctypes.c_void_p).value

    def loop():
        t0 = time.perf_counter_ns()
        for _ in range(n):
            launch(stub, 1, 1, None, 0, None)
        return time.perf_counter_ns() - t0

    wait(go)
    # The loop and main frames add to 45 recursive ones: about 50 Python frames at each call.
    elapsed = at_depth(45, loop)
    print(f"ns_per_op {elapsed / n:.1f}", flush=True)


def cpu_bench(n, go):
    wait(go)
    t0 = time.perf_counter_ns()
    x = 1
    for i in range(n):
        x = (x * 31 + i) % 1000003
    print(f"ns_per_op {(time.perf_counter_ns() - t0) / n:.2f}", flush=True)


if sys.argv[1] == "stack":
    stack_bench(int(sys.argv[2]), sys.argv[3], sys.argv[4])
else:
    cpu_bench(int(sys.argv[2]), sys.argv[3])
