"""A 2-rank DistributedDataParallel job (gloo, under torchrun) whose rank 1 is slow on the CPU: it
spends --slow-ms of Python work before each backward. Rank 0 then waits, inside loss.backward(),
where DDP's reducer waits on its gradient buckets' all-reduce futures (not in Work::wait).

Each rank prints "ready rank N" and waits for --go-file. Rank 0 first measures its own backward
without the all-reduce (DDP's no_sync(): the compute alone), then both train --steps steps; rank 0
prints "GTRACE_DDP_TRUTH {json}": its mean step (`step_ms`), its mean time in backward
(`backward_ms`), its median backward alone (`compute_ms`), and how long a step it waits in the
all-reduce (`wait_ms`: from its bucket's issue to the all-reduce's end, timed by a comm hook around
DDP's default one; `wait_from_backward_ms`: backward less the compute alone, which a busy host
stretches)."""
import argparse
import os
import sys
import statistics
import json
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


def busy(ms):
    """Python work on the CPU (not a sleep): what a slow rank's data preparation looks like."""
    end = time.perf_counter() + ms / 1000
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--slow-ms", type=float, default=40.0)
    ap.add_argument("--go-file")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 256)
    # DDP's own all-reduce of each gradient bucket, timed: from its issue (backward's hook, when
    # the bucket's gradients are ready) to its end (the future DDP's reducer waits on) — how long
    # this rank's step waits for communication, whatever a busy host does to its compute.
    comm = []

    def timed_allreduce(process_group, bucket):
        issued = time.perf_counter()

        def ended(fut):
            comm.append((issued, time.perf_counter()))
            return fut.value()
        return default_hooks.allreduce_hook(process_group, bucket).then(ended)
    model.register_comm_hook(None, timed_allreduce)
    print(f"ready rank {rank}", flush=True)
    while a.go_file and not os.path.exists(a.go_file):
        time.sleep(0.01)
    # Rank 0's backward alone: no all-reduce, so no wait.
    alone = []
    for _ in range(10):
        with model.no_sync():
            loss = model(x).square().mean()
            t0 = time.perf_counter()
            loss.backward()
            alone.append(time.perf_counter() - t0)
        opt.zero_grad()
    dist.barrier()
    steps, backward, step_ends = [], [], []
    last = time.perf_counter()
    for _ in range(a.steps):
        loss = model(x).square().mean()
        if rank == 1:
            busy(a.slow_ms)
        t0 = time.perf_counter()
        loss.backward()  # BACKWARD
        backward.append(time.perf_counter() - t0)
        opt.step()
        opt.zero_grad()
        now = time.perf_counter()
        step_ends.append(now)
        steps.append(now - last)
        last = now
    if rank == 0:
        # Means, as the report's figures per step are (on a busy host a median leaves out the
        # steps stretched most, which the report counts); the compute alone is steady: its median.
        truth = {"step_ms": statistics.mean(steps[1:]) * 1e3, "backward_ms": statistics.mean(backward[1:]) * 1e3,
                 "compute_ms": statistics.median(alone) * 1e3}
        # Per step, from the first bucket's issue to the last one's end (one bucket here).
        per_step = {}
        for issued, ended in comm:
            step = sum(1 for t in step_ends if t < issued)
            first, last = per_step.get(step, (issued, ended))
            per_step[step] = (min(first, issued), max(last, ended))
        waits = [last - first for step, (first, last) in sorted(per_step.items()) if step > 0]
        truth["wait_ms"] = statistics.mean(waits) * 1e3
        truth["wait_from_backward_ms"] = truth["backward_ms"] - truth["compute_ms"]
        print("GTRACE_DDP_TRUTH " + json.dumps(truth), flush=True)
    dist.barrier()
    # No destroy_process_group: on torch 1.13 it can deadlock here. The barrier's Work holds the
    # comm hook's futures, whose tensors Python touched; gloo's worker thread lets go of it after
    # the barrier returned, and needs the GIL to free them — which the main thread holds while
    # ProcessGroupGloo's destructor joins that thread (seen: rank 0 in ~ProcessGroupGloo, its
    # worker in TensorImpl::destroy_pyobj_if_needed, for minutes). The process's exit ends it.
    sys.stdout.flush()
    os._exit(0)


main()
