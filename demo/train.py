"""Demo training job for gtrace: a small model trained with CPU torch under torchrun (gloo),
whose steps also make real CUDA runtime calls (libcudart through ctypes; on a machine without a
GPU they fail fast with "insufficient driver", which is all a uprobe needs).

  torchrun --nproc_per_node 2 demo/train.py [--steps N] [--go-file F] [--kernels LIB]

--go-file makes every rank wait (after set-up, before training) until the file exists, so a
test can attach first. Each rank prints "GTRACE_COUNTS {json}" with the CUDA calls it made.
"""
import argparse
import ctypes
import json
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Cuda:
    """Counts every CUDA call it makes through ctypes."""

    def __init__(self, cudart_path, kernels_path):
        self.rt = ctypes.CDLL(cudart_path)
        self.kernels = ctypes.CDLL(kernels_path)
        self.kernels.demo_kernel_address.restype = ctypes.c_void_p
        self.calls = {}

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def launch(self, kernel_index, grid, block, stream=0):
        class Dim3(ctypes.Structure):
            _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

        fn = self.rt.cudaLaunchKernel
        fn.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        fn(self.kernels.demo_kernel_address(kernel_index), Dim3(*grid), Dim3(*block), None, 0, stream)
        self._count("cudaLaunchKernel")

    def memcpy_h2d(self, nbytes):
        buf = ctypes.create_string_buffer(nbytes)
        self.rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.rt.cudaMemcpy(ctypes.c_void_p(0x7F0000000000), buf, nbytes, 1)
        self._count("cudaMemcpy")

    def malloc_free(self, nbytes):
        ptr = ctypes.c_void_p()
        self.rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        self.rt.cudaMalloc(ctypes.byref(ptr), nbytes)
        self._count("cudaMalloc")
        self.rt.cudaFree(ptr)
        self._count("cudaFree")

    def synchronize(self):
        self.rt.cudaDeviceSynchronize()
        self._count("cudaDeviceSynchronize")


class RandomData(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.randint(0, 10, (), generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--go-file")
    p.add_argument("--cudart", default="/usr/local/cuda/lib64/libcudart.so")
    p.add_argument("--kernels", required=True)
    p.add_argument("--step-sleep", type=float, default=0.0)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    cuda = Cuda(args.cudart, args.kernels)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(RandomData(), batch_size=32, num_workers=1)
    print(f"ready rank {rank} pid {os.getpid()}", flush=True)
    while args.go_file and not os.path.exists(args.go_file):
        time.sleep(0.02)

    batches = iter(loader)  # forks this rank's DataLoader worker
    for step in range(args.steps):
        x, y = next(batches)
        cuda.memcpy_h2d(x.numel() * 4)
        cuda.launch(0, (step + 1, 1, 1), (128, 1, 1))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        cuda.launch(1, (step + 1, 2, 1), (256, 1, 1))
        opt.zero_grad()
        loss.backward()
        cuda.launch(2, (step + 1, 3, 1), (256, 1, 1))
        opt.step()
        cuda.launch(3, (step + 1, 4, 1), (512, 1, 1))
        if step % 10 == 0:
            cuda.malloc_free(1 << 20)
        cuda.synchronize()
        if args.step_sleep:
            time.sleep(args.step_sleep)
    del batches
    print("GTRACE_COUNTS " + json.dumps({"pid": os.getpid(), "rank": rank, "calls": cuda.calls}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
