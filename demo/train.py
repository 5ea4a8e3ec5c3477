"""Demo training job for gtrace: a small model trained with CPU torch under torchrun (gloo),
whose steps also make CUDA runtime calls (libcudart through ctypes, straight from the training
loop). With the real libcudart and no GPU they fail fast ("insufficient driver"), which is all
a uprobe needs; with the GPU simulator's libcudart (--cudart build/gpusim/libcudart.so.13) they
run on modelled streams, and --scenario shapes the step like a real bottleneck:

  balanced      copies, kernels, data loading and CPU work in proportion
  slow_loader   the DataLoader's items take long to make (data-loading bound)
  big_h2d       a large host-to-device copy every step (PCIe/copy bound)
  tiny_kernels  a thousand tiny kernels per step, each after a few µs of host work (launch-bound)
  long_kernels  long kernels and a synchronize each step (GPU bound)
  straggler     as balanced; the simulator makes one rank's kernels slower (GTSIM_SLOW_RANK)

  torchrun --nproc_per_node 2 demo/train.py [--steps N] [--go-file F] [--kernels LIB] [--scenario S]
                                            [--step-sleep S] [--slow-step N:SECONDS]
                                            [--epoch-steps N] [--eval-every N]
  python3 demo/train.py --scenario S --kernels LIB [...]   (one process, no torchrun: no RANK)

--go-file makes every rank wait (after set-up, before training) until the file exists, so a
test can attach first. In the scenarios, --epoch-steps N starts a new epoch every N steps (the
DataLoader forks a fresh worker and the last one exits, as in real training) and --eval-every N
starts a 20-step run of this script every N steps as a child beside the training (a CUDA process
with its own agent): processes that come and go. Each rank prints "GTRACE_COUNTS {json}" with
the CUDA calls it made and "GTRACE_SOURCES {json}" with the loop line each was made from.
"""
import argparse
import collections
import contextlib
import ctypes
import json
import os
import subprocess
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def load_cuda(cudart_path, kernels_path):
    """libcudart with argument types declared, and the addresses of the demo's kernel stubs."""
    rt = ctypes.CDLL(cudart_path)
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]
    kernels = ctypes.CDLL(kernels_path)
    kernels.demo_kernel_address.restype = ctypes.c_void_p
    return rt, [kernels.demo_kernel_address(i) for i in range(4)]


# Per scenario: bytes copied to the device per step, kernels per step, blocks per kernel (the
# simulator's kernel time grows with the grid), seconds the loader spends per item, and Python
# work before each launch (iterations of a sum: what PyTorch's op dispatch costs the host per
# kernel, a few µs, against a tiny kernel's 2 µs — what makes a real job launch-bound).
SCENARIOS = {
    "balanced": dict(h2d_bytes=4 << 20, kernels=4, blocks=20000, loader_delay=0.0, dispatch=0),
    "slow_loader": dict(h2d_bytes=4 << 20, kernels=4, blocks=20000, loader_delay=0.002, dispatch=0),
    "big_h2d": dict(h2d_bytes=192 << 20, kernels=4, blocks=20000, loader_delay=0.0, dispatch=0),
    # ~8 µs of host work per launch: the issuing loop is over half of the step on any host (at 600,
    # ~4 µs, it was twice the next part by a hair, and CI's slower runs judged the step mixed).
    "tiny_kernels": dict(h2d_bytes=1 << 20, kernels=1000, blocks=1, loader_delay=0.0, dispatch=1500),
    "long_kernels": dict(h2d_bytes=4 << 20, kernels=4, blocks=1500000, loader_delay=0.0, dispatch=0),
    "straggler": dict(h2d_bytes=4 << 20, kernels=4, blocks=400000, loader_delay=0.0, dispatch=0),
    # Each step ends in a record_function("metrics.flush") that takes a lock a metrics thread
    # holds for lock_hold seconds: the main thread is asleep there, not computing (Blocked).
    "blocked_lock": dict(h2d_bytes=4 << 20, kernels=4, blocks=20000, loader_delay=0.0, dispatch=0, lock_hold=0.03),
}


class MetricsThread:
    """Holds `lock` for `hold` seconds each time the step asks (go), as a metrics or checkpoint
    writer that shares a lock with the training loop would."""

    def __init__(self, hold):
        self.lock, self.go, self.held, self.hold = threading.Lock(), threading.Event(), threading.Event(), hold
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            self.go.wait()
            self.go.clear()
            with self.lock:
                self.held.set()
                time.sleep(self.hold)

    def flush(self):
        """The step's part: waits for the lock the thread holds. Returns [start, end] of the wait."""
        self.held.clear()
        self.go.set()
        self.held.wait()
        with torch.autograd.profiler.record_function("metrics.flush"):
            start = time.monotonic_ns()
            with self.lock:
                pass
            return [start, time.monotonic_ns()]


class Epochs:
    """Batches without end: a new epoch (and a new DataLoader worker, as PyTorch forks one per
    epoch) when one runs out. A job left running for hours must not stop at its dataset's end."""

    def __init__(self, loader):
        self.loader = loader
        self.batches = iter(loader)  # forks the DataLoader worker now

    def __next__(self):
        try:
            return next(self.batches)
        except StopIteration:
            self.batches = iter(self.loader)
            return next(self.batches)


class RandomData(Dataset):
    def __init__(self, delay=0.0):
        self.delay = delay

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.randint(0, 10, (), generator=g)


def slow_step(args, step):
    """--slow-step N:SECONDS: step N takes SECONDS longer (the flight recorder's test)."""
    if step == args.slow_step[0]:
        print(f"slow step {step} begins", flush=True)
        time.sleep(args.slow_step[1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--go-file")
    p.add_argument("--cudart", default="/usr/local/cuda/lib64/libcudart.so")
    p.add_argument("--kernels", required=True)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--scenario", choices=sorted(SCENARIOS))
    p.add_argument("--slow-step", metavar="N:SECONDS",
                   help="make step N (from 0) slow on purpose: sleep SECONDS in it, before its optimizer step")
    p.add_argument("--epoch-steps", type=int, default=0,
                   help="scenarios: a new epoch every N steps (the DataLoader's worker exits and a fresh one is forked)")
    p.add_argument("--gpu-range", metavar="NAME",
                   help="wrap each step's copy and launches in torch's record_function(NAME)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="scenarios: every N steps a 20-step run of this script in a child process (a CUDA process that comes and goes)")
    args = p.parse_args()
    args.slow_step = tuple(float(x) for x in args.slow_step.split(":")) if args.slow_step else (-1, 0)
    if args.scenario:
        return train_scenario(args, SCENARIOS[args.scenario])

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    rt, kernels = load_cuda(args.cudart, args.kernels)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(RandomData(), batch_size=32, num_workers=1)
    print(f"ready rank {rank} pid {os.getpid()}", flush=True)
    while args.go_file and not os.path.exists(args.go_file):
        time.sleep(0.02)

    batches = Epochs(loader)  # forks this rank's DataLoader worker
    calls, sources = collections.Counter(), collections.Counter()
    here = os.path.abspath(__file__)

    def made(api, depth=1):
        """Counts a CUDA call made on the caller's previous line (for the tests' ground truth)."""
        line = sys._getframe(depth).f_lineno - 1
        calls[api] += 1
        sources[f"main ({here}:{line})"] += 1

    device = ctypes.c_void_p(0x7F0000000000)
    for step in range(args.steps):
        x, y = next(batches)
        host = x.numpy()
        rt.cudaMemcpy(device, host.ctypes.data, host.nbytes, 1)  # cudaMemcpyHostToDevice
        made("cudaMemcpy")
        rt.cudaLaunchKernel(kernels[0], Dim3(step + 1, 1, 1), Dim3(128, 1, 1), None, 0, None)
        made("cudaLaunchKernel")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        rt.cudaLaunchKernel(kernels[1], Dim3(step + 1, 2, 1), Dim3(256, 1, 1), None, 0, None)
        made("cudaLaunchKernel")
        opt.zero_grad()
        loss.backward()
        rt.cudaLaunchKernel(kernels[2], Dim3(step + 1, 3, 1), Dim3(256, 1, 1), None, 0, None)
        made("cudaLaunchKernel")
        slow_step(args, step)
        opt.step()
        rt.cudaLaunchKernel(kernels[3], Dim3(step + 1, 4, 1), Dim3(512, 1, 1), None, 0, None)
        made("cudaLaunchKernel")
        if step % 10 == 0:
            ptr = ctypes.c_void_p()
            rt.cudaMalloc(ctypes.byref(ptr), 1 << 20)
            made("cudaMalloc")
            rt.cudaFree(ptr)
            made("cudaFree")
        rt.cudaDeviceSynchronize()
        made("cudaDeviceSynchronize")
        if args.step_sleep:
            time.sleep(args.step_sleep)
    del batches
    print("GTRACE_COUNTS " + json.dumps({"pid": os.getpid(), "rank": rank, "calls": calls}), flush=True)
    print("GTRACE_SOURCES " + json.dumps({"pid": os.getpid(), "sources": sources}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def start_evaluation(args):
    """--eval-every: this script for 20 steps, alone (no rank), beside the training."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GTRACE_TRUTH_LOG")}
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--scenario", args.scenario, "--steps", "20",
                             "--cudart", args.cudart, "--kernels", args.kernels, "--step-sleep", str(args.step_sleep)],
                            stdout=subprocess.DEVNULL, env=env)


def train_scenario(args, sc):
    """The scenario loop: copy the batch in, run the step's kernels next to the CPU model, sync.
    Without torchrun (no RANK in the environment) it trains alone: no process group, no DDP."""
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(rank)
    rt, kernels = load_cuda(args.cudart, args.kernels)
    device = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(device), sc["h2d_bytes"]) != 0:
        device = ctypes.c_void_p(0x7F0000000000)  # the real libcudart without a GPU: calls fail fast
    host = ctypes.create_string_buffer(sc["h2d_bytes"])
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(RandomData(sc["loader_delay"]), batch_size=32, num_workers=1)
    print(f"ready rank {rank} pid {os.getpid()}" if distributed else f"ready pid {os.getpid()}", flush=True)
    while args.go_file and not os.path.exists(args.go_file):
        time.sleep(0.02)
    batches = Epochs(loader)
    # Ground truth for the tests (GTRACE_TRUTH_LOG): per step, when the wait for the batch began
    # and ended and when the optimizer step returned, on CLOCK_MONOTONIC like the trace. One file
    # per rank (PREFIX.RANK), or PREFIX.pidPID for a process without a rank.
    suffix = rank if distributed else f"pid{os.getpid()}"
    truth = open(f"{os.environ['GTRACE_TRUTH_LOG']}.{suffix}", "w", buffering=1) if "GTRACE_TRUTH_LOG" in os.environ else None
    evaluation = None
    metrics = MetricsThread(sc["lock_hold"]) if sc.get("lock_hold") else None
    blocked = None
    for step in range(args.steps):
        if args.epoch_steps and step and step % args.epoch_steps == 0:
            batches = Epochs(loader)  # the old iterator's worker exits; the new epoch's is forked
        if args.eval_every and step and step % args.eval_every == 0 and (evaluation is None or evaluation.poll() is not None):
            evaluation = start_evaluation(args)
        loader_start = time.monotonic_ns()
        x, y = next(batches)
        loader_end = time.monotonic_ns()
        with torch.autograd.profiler.record_function(args.gpu_range) if args.gpu_range else contextlib.nullcontext():
            rt.cudaMemcpy(device, host, sc["h2d_bytes"], 1)  # cudaMemcpyHostToDevice
            for k in range(sc["kernels"]):  # the simulator times a kernel by its grid
                if sc["dispatch"]:
                    sum(range(sc["dispatch"]))  # the host's work per op before its launch
                rt.cudaLaunchKernel(kernels[k % 4], Dim3(sc["blocks"], 1, 1), Dim3(128, 1, 1), None, 0, None)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        slow_step(args, step)
        opt.step()
        if step % 10 == 0:  # activations of a bigger batch every 10 steps: memory over time has a shape
            scratch = ctypes.c_void_p()
            rt.cudaMalloc(ctypes.byref(scratch), 256 << 20)
        elif step % 10 == 5:
            rt.cudaFree(scratch)
        if truth:
            truth.write(json.dumps({"loader": [loader_start, loader_end], "optimizer_end": time.monotonic_ns(),
                                    **({"blocked": blocked} if blocked else {})}) + "\n")
        rt.cudaDeviceSynchronize()
        if metrics:
            blocked = metrics.flush()  # in the next step's span: steps end where the optimizer's do
        if args.step_sleep:
            time.sleep(args.step_sleep)
    del batches
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
