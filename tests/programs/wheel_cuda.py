"""CUDA calls through the real libraries of pip's `nvidia-*` wheels (no GPU on the machine: every
call fails fast, which is all a probe needs). Run with the project venv's Python (pip torch 2.x).

  python wheel_cuda.py libs|torch STUB_LIBCUDA GO_FILE [N]

  libs   loads the wheels' libcudart.so.13, libcublas.so.13, libcupti.so.13 and libnccl.so.2 from
         site-packages/nvidia/... itself, and the toolkit's stub libcuda for driver entry points
  torch  imports torch and asks torch.cuda.is_available(): torch loads the wheels' libraries
         itself; the calls then go through the libcudart it loaded (found by its soname)

Prints "ready PID", waits for GO_FILE, makes N (default 5) calls of each runtime entry point
below (and of each driver one, with `libs`), then "GTRACE_COUNTS {json}" with what it called and
"GTRACE_LIBRARIES {json}" with the real path of each wheel library the process maps."""
import ctypes
import json
import os
import sys
import time

mode, stub, go_file = sys.argv[1:4]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 5


def nvidia_dir():
    import importlib.util
    spec = importlib.util.find_spec("nvidia")  # a namespace package: the wheels' shared folder
    return list(spec.submodule_search_locations)[0]


counts = {}


def call(lib, name, *args):
    getattr(lib, name)(*args)
    counts[name] = counts.get(name, 0) + 1


if mode == "libs":
    base = nvidia_dir()
    cudart = ctypes.CDLL(os.path.join(base, "cu13", "lib", "libcudart.so.13"), mode=ctypes.RTLD_GLOBAL)
    others = [ctypes.CDLL(os.path.join(base, *p)) for p in
              [("cu13", "lib", "libcublas.so.13"), ("cu13", "lib", "libcupti.so.13"), ("nccl", "lib", "libnccl.so.2")]]
    driver = ctypes.CDLL(stub)
else:
    import torch
    torch.cuda.is_available()  # the runtime's own calls; with no GPU: False
    cudart = ctypes.CDLL("libcudart.so.13")  # the one torch loaded (by soname: already in the process)
    driver = None

print(f"ready {os.getpid()}", flush=True)
while not os.path.exists(go_file):
    time.sleep(0.01)
time.sleep(0.3)
ptr = ctypes.c_void_p()
buf = ctypes.create_string_buffer(64)
for _ in range(n):
    call(cudart, "cudaMalloc", ctypes.byref(ptr), ctypes.c_size_t(64))
    call(cudart, "cudaMemcpy", buf, buf, ctypes.c_size_t(64), ctypes.c_int(1))
    call(cudart, "cudaMemset", buf, ctypes.c_int(0), ctypes.c_size_t(64))
    call(cudart, "cudaDeviceSynchronize")
    call(cudart, "cudaStreamSynchronize", ctypes.c_void_p(0))
    call(cudart, "cudaFree", ctypes.c_void_p(0))
    if driver:
        call(driver, "cuCtxSynchronize")
        call(driver, "cuStreamSynchronize", ctypes.c_void_p(0))
        call(driver, "cuMemsetD8_v2", ctypes.c_uint64(0), ctypes.c_ubyte(0), ctypes.c_size_t(64))
print("GTRACE_COUNTS " + json.dumps({"pid": os.getpid(), "calls": counts}), flush=True)
maps = {}
with open("/proc/self/maps") as f:
    for line in f:
        path = line.split()[-1]
        if "/nvidia/" in path and ".so" in path:
            maps[os.path.basename(path)] = os.path.realpath(path)
print("GTRACE_LIBRARIES " + json.dumps(maps), flush=True)
time.sleep(0.5)
