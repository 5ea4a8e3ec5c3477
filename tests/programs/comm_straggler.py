"""A 2-rank gloo job (under torchrun) in which one rank is late to every all_reduce: before each
step's all_reduce, rank --late-rank sleeps --sleep-ms. The other ranks wait for it inside the
all_reduce. Each rank prints "ready rank N", waits for --go-file, runs --steps steps of a small
model (forward, backward, all_reduce of the gradients, optimizer step), then prints
"GTRACE_COMM_TRUTH {json}": the late rank's measured mean sleep, the injected wait."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sleep-ms", type=float, default=30.0)
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--go-file")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 64)
    print(f"ready rank {rank}", flush=True)
    while a.go_file and not os.path.exists(a.go_file):
        time.sleep(0.01)
    slept = []
    for _ in range(a.steps):
        model(x).square().mean().backward()
        if rank == a.late_rank:
            t0 = time.monotonic()
            time.sleep(a.sleep_ms / 1000)
            slept.append(time.monotonic() - t0)
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
    if slept:
        print("GTRACE_COMM_TRUTH " + json.dumps({"rank": rank, "sleep_ms": 1000 * sum(slept) / len(slept), "steps": len(slept)}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
