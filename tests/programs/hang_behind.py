"""A hung job whose stacks all look alike: under torchrun with 4 gloo ranks, every rank loops over
two process groups (a second group of every rank, then the world), all-reducing on each at one
line. Once --skip-file exists, rank 3 leaves out the all_reduce on the second group: ranks 0-2
then wait in it for rank 3, and rank 3 waits in the world's all_reduce for them — every rank in
all_reduce at the same line, rank 3 one collective behind on the second group (and one ahead on
the world). Prints "ready rank N" once its groups exist."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    skip_file = sys.argv[sys.argv.index("--skip-file") + 1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    second = dist.new_group(list(range(dist.get_world_size())))
    world = dist.group.WORLD
    t = torch.ones(1)
    print(f"ready rank {rank}", flush=True)
    skipped = False
    while True:
        groups = [second, world]
        if rank == 3 and not skipped and os.path.exists(skip_file):
            groups, skipped = [world], True
        for g in groups:
            dist.all_reduce(t, group=g)  # ALL_REDUCE
        time.sleep(0.02)


main()
