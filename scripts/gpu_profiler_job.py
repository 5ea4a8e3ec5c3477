"""The job of scripts/gpu_profiler_check.py: a fixed training step (the same kernels every step)
in a loop, and torch.profiler windows (CPU and CUDA activities, as users run them) opened on
request: once DIR/window<N>.open exists it profiles one warm-up step and --active steps, and
writes DIR/window<N>.json — the kernels its profiler recorded, by name — then
DIR/window<N>.done. Prints "ready" once training, "window N recording" when its active steps
begin. Runs until DIR/stop exists."""
import argparse
import collections
import json
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule

ap = argparse.ArgumentParser()
ap.add_argument("--dir", required=True)
ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
ap.add_argument("--active", type=int, default=200)
args = ap.parse_args()
width = 1024 if args.device == "cuda" else 64
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)).to(args.device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, width, device=args.device)
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])


def step():
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if args.device == "cuda":
        torch.cuda.synchronize()


def window(n):
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=args.active)) as prof:
        for i in range(1 + args.active):
            if i == 1:
                print(f"window {n} recording", flush=True)
            step()
            prof.step()
    kernels = collections.Counter(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    with open(os.path.join(args.dir, f"window{n}.json"), "w") as f:
        json.dump({"active_steps": args.active, "kernels": sum(kernels.values()), "by_name": kernels}, f)
    open(os.path.join(args.dir, f"window{n}.done"), "w").close()


for _ in range(5):
    step()
print("ready", flush=True)
n = 0
while not os.path.exists(os.path.join(args.dir, "stop")):
    if os.path.exists(os.path.join(args.dir, f"window{n}.open")):
        window(n)
        n += 1
    step()
    time.sleep(0.001)
