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
import json
import os
import sys
import time

import torch

import markers
from sim_cuda import SimCuda

HERE = os.path.abspath(__file__)
QUAL = sys.version_info >= (3, 11)

gpusim, kernels_path, go_file = sys.argv[1:4]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 5


cuda = SimCuda(gpusim, kernels_path)


def launch():
    if cuda.launch() != 0:
        raise SystemExit("autograd_links: a launch failed")


def launching_function(launches):
    """An autograd Function whose backward (an engine node) makes `launches` launches."""
    class Launching(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            for _ in range(launches):
                launch()
            return grad
    return Launching


Scale, Shift = launching_function(1), launching_function(2)


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
