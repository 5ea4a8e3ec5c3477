"""Backward passes whose launches come from threads without Python frames, as PyTorch's on a GPU:
the autograd engine runs a pass's nodes on its device threads ("pt_autograd_<device>") while the
thread that called loss.backward() waits. Debian's torch is CPU-only (its engine runs CPU nodes on
the calling thread), so a custom autograd Function's backward launches from a native thread named
pt_autograd_0 (native_launcher.cpp) — the real engine's THPEngine_run_backward around it. Against
the GPU simulator.

  python backward_threads.py GPUSIM_DIR DEMO_KERNELS NATIVE_LAUNCHER GO_FILE [STEPS]

Prints "ready <pid>", waits for GO_FILE, runs STEPS (default 5) steps, then GTRACE_SOURCES: each
launch's expected source — the loss.backward() line for the autograd thread's launches during a
pass; none ("") for the same thread's launches outside a pass and for another native thread's
during one; the launch line for the main thread's own.
"""
import collections
import ctypes
import json
import os
import sys
import time

import torch

import markers
from sim_cuda import Dim3, SimCuda

HERE = os.path.abspath(__file__)
QUAL = sys.version_info >= (3, 11)
LAUNCHES = 3  # per native thread, per step

gpusim, kernels_path, launcher_path, go_file = sys.argv[1:5]
steps = int(sys.argv[5]) if len(sys.argv) > 5 else 5


cuda = SimCuda(gpusim, kernels_path)
launcher = ctypes.CDLL(launcher_path)
launcher.launch_on_named_thread.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]


def on_thread(name):
    if launcher.launch_on_named_thread(cuda.launch_address, cuda.kernel, LAUNCHES, name) != 0:
        raise SystemExit("backward_threads: a launch failed")


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        on_thread(b"pt_autograd_0")  # the engine's device thread: its launches get the pass's stack
        on_thread(b"other_native")   # any other thread: no stack
        return grad * 2


def frame(qualname, marker):
    return f"{qualname if QUAL else qualname.split('.')[-1]} ({HERE}:{markers.line_of(HERE, marker)})"


def train():
    x = torch.ones(8, requires_grad=True)
    for _ in range(steps):
        loss = Scale.apply(x).sum()
        loss.backward()  # BACKWARD
        on_thread(b"pt_autograd_0")  # outside a pass: no stack
        if cuda.cudart.cudaLaunchKernel(cuda.kernel, Dim3(1, 1, 1), Dim3(32, 1, 1), None, 0, None) != 0:  # MAIN_LAUNCH
            raise SystemExit("backward_threads: the main thread's launch failed")
    cuda.cudart.cudaDeviceSynchronize()  # SYNC


print(f"ready {os.getpid()}", flush=True)
while not os.path.exists(go_file):
    time.sleep(0.01)
time.sleep(0.5)  # the agent's callbacks are on
train()
sources = collections.Counter({frame("train", "BACKWARD"): steps * LAUNCHES, "": steps * LAUNCHES * 2,
                               frame("train", "MAIN_LAUNCH"): steps, frame("train", "SYNC"): 1})
print("GTRACE_SOURCES " + json.dumps({"pid": os.getpid(), "sources": sources}), flush=True)
# gtrace reads a stack's frames from the live process, up to 50 ms after the call: a job does not
# exit the instant its last launch returns, and neither does this one.
time.sleep(0.5)
