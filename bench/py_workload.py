"""Benchmark workloads, timed by themselves after FILE (argv[2]) appears.
  py_workload.py stack N GO CUDART [RATE]
                                     N cudaLaunchKernel calls through ctypes from 45 Python frames deep,
                                     RATE calls a second if given (paced in chunks of 100), else at once
  py_workload.py cpu N GO            N iterations of a CPU-bound loop
Prints "ready PID", then "ns_per_op X" (CPU time per operation for cpu)."""
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


def stack_bench(n, go, cudart_path, rate=0.0):
    rt = ctypes.CDLL(cudart_path)
    launch = rt.cudaLaunchKernel
    launch.argtypes = [ctypes.c_void_p] * 6
    stub = ctypes.cast(rt.cudaGetErrorString, ctypes.c_void_p).value

    def loop():
        t0 = time.perf_counter_ns()
        if rate <= 0:
            for _ in range(n):
                launch(stub, 1, 1, None, 0, None)
            return time.perf_counter_ns() - t0
        busy, done = 0, 0
        while done < n:  # a steady share over the whole run: chunks of 100 on the schedule
            chunk = min(100, n - done)
            c0 = time.perf_counter_ns()
            for _ in range(chunk):
                launch(stub, 1, 1, None, 0, None)
            busy += time.perf_counter_ns() - c0
            done += chunk
            ahead = t0 + done * 1e9 / rate - time.perf_counter_ns()
            if ahead > 0:
                time.sleep(ahead / 1e9)
        print(f"paced_seconds {(time.perf_counter_ns() - t0) / 1e9:.3f}", flush=True)
        return busy

    wait(go)
    # The loop and main frames add to 45 recursive ones: about 50 Python frames at each call.
    elapsed = at_depth(45, loop)
    print(f"ns_per_op {elapsed / n:.1f}", flush=True)
    time.sleep(1)  # stay traced while the benchmark reads gtrace's BPF statistics


def cpu_bench(n, go):
    wait(go)
    wall0, cpu0 = time.perf_counter_ns(), time.process_time_ns()
    x = 1
    for i in range(n):
        x = (x * 31 + i) % 1000003
    wall, cpu = time.perf_counter_ns() - wall0, time.process_time_ns() - cpu0
    # CPU time is the figure compared (steadier on a shared 2-core VM); wall time for reference.
    print(f"wall_ns_per_op {wall / n:.2f} ns_per_op {cpu / n:.2f}", flush=True)
    time.sleep(1)  # stay traced while the benchmark reads gtrace's BPF statistics


if sys.argv[1] == "stack":
    stack_bench(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]) if len(sys.argv) > 5 else 0.0)
else:
    cpu_bench(int(sys.argv[2]), sys.argv[3])
