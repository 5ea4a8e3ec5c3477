"""A deliberately hung distributed job for `gtrace dump`: under torchrun with 3 ranks, rank 1
sleeps forever in hang_here() while ranks 0 and 2 wait for it in dist.barrier() — identical
stacks that the dump must group. Each rank prints "ready rank N" and GTRACE_BLOCK with the
frame it blocks in (innermost Python frame outside torch)."""
import json
import os
import time

import markers

import torch.distributed as dist

HERE = os.path.abspath(__file__)


def line_of(marker):
    return markers.line_of(HERE, marker)


def hang_here():
    while True:
        time.sleep(3600)  # SLEEP


def wait_for_peers():
    dist.barrier()  # BARRIER


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    where = f"hang_here ({HERE}:{line_of('SLEEP')})" if rank == 1 else f"wait_for_peers ({HERE}:{line_of('BARRIER')})"
    print("GTRACE_BLOCK " + json.dumps({"rank": rank, "frame": where}), flush=True)
    print(f"ready rank {rank}", flush=True)
    if rank == 1:
        hang_here()
    wait_for_peers()


main()
