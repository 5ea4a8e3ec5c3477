"""Python frames over driver-API launches, as in a PyTorch job on CUDA 13: a "model" whose layers
call the cuBLAS-like library (libgtsim_blas: cuLaunchKernel, cuLaunchKernelEx and cuMemset*Async
straight to the driver, no runtime call around them) and launch a kernel through the runtime
(cudaLaunchKernel, inside which the runtime calls cuLaunchKernel), from the main thread and from
a second Python thread. Runs against the GPU simulator.

  python gpu_blas.py GPUSIM_DIR DEMO_KERNELS GO_FILE [STEPS]

Prints "ready <pid>", waits for GO_FILE, runs STEPS (default 5) steps on each thread, then for
each call site a GTRACE_PYSTACK line: its stack (innermost first, "qualname (file:line)"),
`count` = the outermost API calls made from it, `calls` = those calls by name, `nested` = the
driver calls the runtime made inside them; then GTRACE_COUNTS (outermost calls) and GTRACE_GPU
(ops issued: in all, by path, and by the API call whose correlation id they carry).
"""
import collections
import ctypes
import json
import os
import sys
import threading
import time

import markers

HERE = os.path.abspath(__file__)
QUAL = sys.version_info >= (3, 11)  # co_qualname exists from 3.11
GEMM_CALLS = {"cuLaunchKernel": 1}
GEMM_EX_CALLS = {"cuMemsetD8Async": 1, "cuLaunchKernelEx": 1}
SPLITK_CALLS = {"cuMemsetD32Async": 1, "cuMemsetD8Async": 1, "cuLaunchKernelEx": 1, "cuLaunchKernel": 1}


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


gpusim, kernels_path, go_file = sys.argv[1], sys.argv[2], sys.argv[3]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
cudart = ctypes.CDLL(os.path.join(gpusim, "libcudart.so.13"))
cudart.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
cudart.cudaStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
cudart.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
blas = ctypes.CDLL(os.path.join(gpusim, "libgtsim_blas.so"))
blas.gtblas_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
for fn in (blas.gtblas_gemm, blas.gtblas_gemm_ex):
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
blas.gtblas_gemm_splitk.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_void_p]
demo = ctypes.CDLL(kernels_path)
demo.demo_kernel_address.restype = ctypes.c_void_p
RELU = demo.demo_kernel_address(1)


def check(rc, what):
    if rc != 0:
        raise SystemExit(f"gpu_blas: {what} returned {rc}")


class Linear:
    def __init__(self, handle, stream):
        self.handle, self.stream = handle, stream

    def forward(self, step):
        check(blas.gtblas_gemm(self.handle, 128 * (step + 1), 256, 64, self.stream), "gtblas_gemm")  # GEMM

    def backward(self, step):
        check(blas.gtblas_gemm_splitk(self.handle, 128, 128 * (step + 1), 64, 4, self.stream), "splitk")  # SPLITK

    def update(self, step):
        check(blas.gtblas_gemm_ex(self.handle, 256, 128 * (step + 1), 64, self.stream), "gtblas_gemm_ex")  # GEMM_EX


def relu(stream, step):
    check(cudart.cudaLaunchKernel(RELU, Dim3(step + 1, 7, 1), Dim3(128, 1, 1), None, 0, stream), "relu")  # RELU


def setup():
    """The runtime makes the device's context current on this thread; the library needs one."""
    check(cudart.cudaSetDevice(0), "cudaSetDevice")
    stream, handle = ctypes.c_void_p(), ctypes.c_void_p()
    check(cudart.cudaStreamCreate(ctypes.byref(stream)), "cudaStreamCreate")
    check(blas.gtblas_create(ctypes.byref(handle)), "gtblas_create")
    return Linear(handle, stream), stream


def train(full):
    layer, stream = setup()
    for step in range(steps):
        layer.forward(step)  # CALL_FORWARD
        relu(stream, step)  # CALL_RELU
        if full:
            layer.backward(step)  # CALL_BACKWARD
            layer.update(step)  # CALL_UPDATE
    check(cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize")


def frame(qualname, marker):
    return f"{qualname if QUAL else qualname.split('.')[-1]} ({HERE}:{markers.line_of(HERE, marker)})"


def report(thread, outer, site, callee, calls, nested=None):
    stack = [frame(callee, site), frame("train", outer)] + (
        [frame("main", "MAIN_TRAIN"), frame("<module>", "MAIN")] if thread == "main" else [frame("run", "THREAD_TRAIN")])
    record = {"thread": thread, "count": steps * sum(calls.values()), "stack": stack,
              "calls": {k: steps * v for k, v in calls.items()}, "nested": {k: steps * v for k, v in (nested or {}).items()}}
    print("GTRACE_PYSTACK " + json.dumps(record), flush=True)
    return record


def run():
    train(False)  # THREAD_TRAIN


def main():
    print(f"ready {os.getpid()}", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.01)
    train(True)  # MAIN_TRAIN
    second = threading.Thread(target=run, name="second")
    second.start()
    second.join()
    relu_calls, relu_nested = {"cudaLaunchKernel": 1}, {"cuLaunchKernel": 1}
    records = [report("main", "CALL_FORWARD", "GEMM", "Linear.forward", GEMM_CALLS),
               report("main", "CALL_RELU", "RELU", "relu", relu_calls, relu_nested),
               report("main", "CALL_BACKWARD", "SPLITK", "Linear.backward", SPLITK_CALLS),
               report("main", "CALL_UPDATE", "GEMM_EX", "Linear.update", GEMM_EX_CALLS),
               report("second", "CALL_FORWARD", "GEMM", "Linear.forward", GEMM_CALLS),
               report("second", "CALL_RELU", "RELU", "relu", relu_calls, relu_nested)]
    calls = collections.Counter()
    for r in records:
        calls.update(r["calls"])
    print("GTRACE_COUNTS " + json.dumps({"pid": os.getpid(), "calls": dict(calls)}), flush=True)
    # Per step: the main thread's GEMMs launch 1 + 2 + 1 kernels and 2 + 1 sets, the second's 1; one relu each.
    by_path = {"blas": {"kernels": steps * (4 + 1), "copies": 0, "sets": steps * 3},
               "runtime": {"kernels": steps * 2, "copies": 0, "sets": 0}}
    # Every outermost call here causes exactly one op, which carries that call's correlation id.
    print("GTRACE_GPU " + json.dumps({"pid": os.getpid(), "kernels": steps * 7, "copies": 0, "sets": steps * 3,
                                      "by_path": by_path, "by_api": dict(calls), "failed": 0}), flush=True)
    time.sleep(1.0)  # gtrace reads code objects from the live process; a real job outlives its calls


main()  # MAIN
