"""Backward launches linked to their forward op (gtrace --autograd-links), against real torch's
autograd: two custom autograd Functions, applied at two lines of the forward pass, launch a kernel
from their backward (run by the engine's evaluate_function, as every backward node is); a third
launch is made outside any node. Debian's torch is CPU-only, so the launches go to the GPU
simulator through ctypes.

  python autograd_links.py GPUSIM_DIR DEMO_KERNELS GO_FILE [STEPS]

Prints "ready <pid>", waits for GO_FILE, runs STEPS (default 5) steps, then two GTRACE_SOURCES
lines: each launch's expected `forward_source` (the line that applied the Function whose backward
made it; none for the launch outside backward) and `sequence_nr` presence.
"""
import collections
import ctypes
import json
import os
import sys
import time

import torch

import markers

HERE = os.path.abspath(__file__)
QUAL = sys.version_info >= (3, 11)

gpusim, kernels_path, go_file = sys.argv[1:4]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 5


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


cudart = ctypes.CDLL(os.path.join(gpusim, "libcudart.so.13"))
cudart.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
demo = ctypes.CDLL(kernels_path)
demo.demo_kernel_address.restype = ctypes.c_void_p
KERNEL = demo.demo_kernel_address(2)


def launch():
    if cudart.cudaLaunchKernel(KERNEL, Dim3(1, 1, 1), Dim3(32, 1, 1), None, 0, None) != 0:
        raise SystemExit("autograd_links: a launch failed")


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        launch()
        return grad * 2


class Shift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        launch()
        launch()
        return grad


def frame(qualname, marker):
    return f"{qualname if QUAL else qualname.split('.')[-1]} ({HERE}:{markers.line_of(HERE, marker)})"


def train():
    x = torch.ones(8, requires_grad=True)
    for _ in range(steps):
        y = Scale.apply(x)  # FORWARD_SCALE
        z = Shift.apply(y)  # FORWARD_SHIFT
        z.sum().backward()
        launch()  # outside backward: no forward op


print(f"ready {os.getpid()}", flush=True)
while not os.path.exists(go_file):
    time.sleep(0.01)
time.sleep(0.5)  # the agent's callbacks are on
train()
forward = collections.Counter({frame("train", "FORWARD_SCALE"): steps, frame("train", "FORWARD_SHIFT"): steps * 2, "": steps})
print("GTRACE_SOURCES " + json.dumps({"pid": os.getpid(), "arg": "forward_source", "api": "cudaLaunchKernel",
                                      "sources": forward}), flush=True)
time.sleep(0.5)  # gtrace reads the stacks' frames from the live process
