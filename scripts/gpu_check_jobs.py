"""The jobs scripts/gpu-check.sh attaches to, one kind per process, each on every launch path a
training step uses:

  train    DataLoader, AdamW, batches copied to the device, loss.item() (a copy back and a sync)
  gemm     bf16 GEMMs through cuBLAS/cuBLASLt: square, a long K (split-K and its reduce kernel,
           the workspace memsets cuBLASLt issues through the driver), with bias, batched
  compile  a torch.compile'd function: Triton kernels, launched through cuLaunchKernelEx
  graph    an MLP's forward captured as a CUDA graph, replayed
  nccl     a training loop whose gradients NCCL averages (world size 1 on the one GPU; gloo with
           --device cpu), and an all_gather and a broadcast each step
  copies   copies and sets of every kind a step makes: pageable and pinned HtoD and DtoH, DtoD,
           a strided copy, cudaMemsetAsync and cuMemsetD8Async (through ctypes, as libraries do)

`gpu_check_jobs.py KIND [--device cuda|cpu] [--steps N]`: warms up, prints "ready" (train: with
torch's reserved bytes), then steps until killed, or N steps and exits.
`gpu_check_jobs.py suite --kinds A,B,... --out DIR [--device D]`: starts each kind as a child,
writes DIR/jobs.json once each is ready or has failed, prints "ready" and waits; SIGTERM ends it
and its children (which die with it in any case). On --device cpu, compile and graph are not
started (they need a GPU here).
"""
import argparse
import ctypes
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

torch = None  # imported by the jobs only: the suite's own process must map no CUDA library

GPU_ONLY = {"compile", "graph"}
KINDS = ["train", "gemm", "compile", "graph", "nccl", "copies"]


def train_step(model, opt, x):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()  # gpu_check_verify.py looks for this line in the backward thread's launches
    opt.step()
    return loss


def mlp(width, device):
    return torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.ReLU(),
                               torch.nn.Linear(4 * width, width)).to(device)


def job_train(device):
    width = 1024 if device == "cuda" else 64
    model = mlp(width, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64 * 256, width)),
                                         batch_size=256, shuffle=True)
    batches = iter(())

    def step():
        nonlocal batches
        try:
            (x,) = next(batches)
        except StopIteration:
            batches = iter(loader)
            (x,) = next(batches)
        train_step(model, opt, x.to(device)).item()
    return step


def job_gemm(device):
    dt, s = torch.bfloat16, 1 if device == "cuda" else 16  # bf16 on a CPU is slow: small shapes there
    square = [torch.randn(2048 // s, 2048 // s, device=device, dtype=dt) for _ in range(2)]
    long_k = [torch.randn(64, 65536 // s, device=device, dtype=dt), torch.randn(65536 // s, 64, device=device, dtype=dt)]
    lin = torch.nn.Linear(1024 // s, 1024 // s, device=device, dtype=dt)
    x = torch.randn(512 // s, 1024 // s, device=device, dtype=dt)
    batched = [torch.randn(16, 256 // s, 256 // s, device=device, dtype=dt) for _ in range(2)]

    def step():
        square[0] @ square[1]
        long_k[0] @ long_k[1]
        lin(x)
        torch.bmm(*batched)
    return step


def job_compile(device):
    @torch.compile
    def fused(x, y):
        return torch.nn.functional.gelu(x * y + 1.0).sum(dim=-1)
    x, y = torch.randn(4096, 512, device=device), torch.randn(4096, 512, device=device)

    def step():
        fused(x, y)
    return step


def job_graph(device):
    model = mlp(512, device)
    static_in = torch.randn(64, 512, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_in)  # warm up outside the capture, as torch's docs ask
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        model(static_in)

    def step():
        static_in.normal_()
        graph.replay()
    return step


def job_nccl(device):
    import torch.distributed as dist
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)
    model = mlp(512, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(128, 512, device=device)
    gathered = torch.empty(1024, device=device)
    part = torch.ones(1024, device=device)
    avg = dist.ReduceOp.AVG if device == "cuda" else dist.ReduceOp.SUM  # gloo has no AVG

    def step():
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=avg)
        opt.step()
        if device == "cuda":
            dist.all_gather_into_tensor(gathered, part)
        else:
            dist.all_gather([gathered[:1024]], part)  # gloo has no all_gather_into_tensor on torch 1.13
        dist.broadcast(part, src=0)
    return step


def job_copies(device):
    n = 1 << 20
    host = torch.randn(n)
    if device == "cpu":
        other = torch.empty(n)

        def step():
            other.copy_(host)
        return step
    pinned, pinned_back = torch.randn(n).pin_memory(), torch.empty(n).pin_memory()
    dev, dev2 = torch.empty(n, device=device), torch.empty(n, device=device)
    grid, grid2 = torch.randn(1024, 1024, device=device), torch.empty(1024, 1024, device=device)
    cudart = ctypes.CDLL(loaded_library("libcudart.so"))
    libcuda = ctypes.CDLL("libcuda.so.1")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def step():
        dev.copy_(host)                                  # pageable HtoD
        dev.copy_(pinned, non_blocking=True)             # pinned HtoD, async
        dev.cpu()                                        # pageable DtoH
        pinned_back.copy_(dev, non_blocking=True)        # pinned DtoH, async
        dev2.copy_(dev)                                  # DtoD
        grid2[:, :512].copy_(grid[:, :512])              # strided DtoD
        rc = (cudart.cudaMemsetAsync(ctypes.c_void_p(dev.data_ptr()), 0, ctypes.c_size_t(4 * n), stream),
              libcuda.cuMemsetD8Async(ctypes.c_uint64(dev2.data_ptr()), ctypes.c_ubyte(1), ctypes.c_size_t(4 * n), stream))
        if any(rc):
            raise RuntimeError(f"cudaMemsetAsync, cuMemsetD8Async returned {rc}")
        torch.cuda.synchronize()
    return step


def loaded_library(stem):
    """The path of the copy of a library this process mapped (torch's own libcudart, say)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith(stem):
                return path
    sys.exit(f"gpu-check: no {stem} mapped in the copies job")


def run_job(kind, device, steps):
    global torch
    torch = importlib.import_module("torch")
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu-check: torch sees no CUDA device")
    step = globals()[f"job_{kind}"](device)
    for _ in range(3):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved() if device == "cuda" else 0
    print(f"ready {kind} reserved={reserved}", flush=True)
    done = 0
    while steps is None or done < steps:
        step()
        done += 1
        time.sleep(0.005)  # keeps each job's GPU ops well inside the agent's ring


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """In a child, before exec: the kernel kills it when its parent dies, however that dies (a
    timeout's SIGKILL included), so that no job is left stepping on the GPU."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_suite(kinds, device, out):
    """Starts each kind; once every job is ready or has failed (150 s at most: torch.compile's
    first compile takes a while), writes DIR/jobs.json — {"ready": {kind: pid}, "failed": {kind:
    why}} — and prints "ready". A job that failed costs only its own checks."""
    children = {}
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    for kind in kinds:
        job_env = dict(env, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0") if kind == "nccl" else dict(env)
        if kind == "compile":
            job_env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # compiled in the job: no pool of worker processes left behind
        log = open(os.path.join(out, f"job-{kind}.log"), "w")
        children[kind] = subprocess.Popen([sys.executable, os.path.abspath(__file__), kind, "--device", device],
                                          stdout=log, stderr=subprocess.STDOUT, env=job_env, preexec_fn=die_with_parent)

    def end(*_):
        for p in children.values():
            p.kill()
        sys.exit(0)
    signal.signal(signal.SIGTERM, end)
    deadline = time.monotonic() + 150
    waiting, failed = set(kinds), {}
    while waiting:
        for kind in sorted(waiting):
            with open(os.path.join(out, f"job-{kind}.log")) as f:
                if any(line.startswith("ready") for line in f):
                    waiting.discard(kind)
                    continue
            if children[kind].poll() is not None or time.monotonic() > deadline:
                failed[kind] = "exited" if children[kind].poll() is not None else "not ready in 150 s"
                children[kind].kill()
                waiting.discard(kind)
        time.sleep(0.2)
    with open(os.path.join(out, "jobs.json"), "w") as f:
        json.dump({"ready": {k: p.pid for k, p in children.items() if k not in failed}, "failed": failed}, f)
    print("ready", flush=True)
    while True:
        signal.pause()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=KINDS + ["suite"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--steps", type=int)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    if args.kind != "suite":
        return run_job(args.kind, args.device, args.steps)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        sys.exit(f"gpu-check: unknown job kinds {unknown}; pick from {KINDS}")
    run_suite([k for k in kinds if args.device == "cuda" or k not in GPU_ONLY], args.device, args.out)


if __name__ == "__main__":
    main()
