"""One training workload for scripts/gpu-bench.sh, stepping until told to quit; gpu_bench.py
drives it over stdin/stdout so that every phase is measured in this same process:

  phase NAME N    time the next N steps under NAME; answers "done NAME <step ms> ..."
  profile N       time N steps under torch.profiler (CPU + CUDA activities), after a warm-up
  profile-cuda N  the same with the CUDA activity only (Kineto's CUPTI side, no CPU ops)
  count           answers "count <steps run so far>" (every step, timed or not)
  quit

Between phases it keeps stepping (untimed), so that gtrace attaches to, and detaches from, a busy
job. Workloads:
  loop         launch-bound: 48 tiny Linear layers (64 wide), batch 8, AdamW
  transformer  GPT-2-small-sized decoder from torch.nn: 12 layers, d_model 768, 12 heads,
               seq 512, batch 8, vocab 50257, bf16 autocast, AdamW
--tiny shrinks both (a smoke test on a CPU: --device cpu --tiny).
"""
import argparse
import inspect
import queue
import sys
import threading
import time

import torch
from torch import nn


# torch 2.x: the mask is causal, so attention may use its fused causal kernels (torch 1.13 has no hint).
CAUSAL_HINT = {"is_causal": True} if "is_causal" in inspect.signature(nn.TransformerEncoder.forward).parameters else {}


def build_loop(device, tiny):
    layers, width, batch = (4, 16, 2) if tiny else (48, 64, 8)
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device=device)

    def step():
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


class Decoder(nn.Module):
    """GPT-2 small's shape: token + position embeddings, pre-norm causal self-attention blocks,
    a tied LM head."""

    def __init__(self, vocab, seq, width, heads, layers):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq, width)
        block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.blocks(self.tokens(ids) + self.positions(pos), mask=self.causal, **CAUSAL_HINT)
        return self.head(self.norm(h))


def build_transformer(device, tiny):
    vocab, seq, width, heads, layers, batch = (1000, 32, 64, 2, 2, 2) if tiny else (50257, 512, 768, 12, 12, 8)
    model = Decoder(vocab, seq, width, heads, layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(vocab, (batch, seq + 1), device=device)  # inputs ids[:, :-1], targets ids[:, 1:]

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, vocab).float(), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def timed(step, device):
    """One step's wall time in ms, the GPU work included (loss.item() waits for it, as a training
    loop that logs its loss does)."""
    t0 = time.perf_counter()
    step().item()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def report(name, times):
    times = sorted(times)
    median = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
    print(f"done {name} {median:.4f} {times[0]:.4f} {times[-1]:.4f} {len(times)} " + ",".join(f"{t:.4f}" for t in times),
          flush=True)


def profiled(step, device, steps, warmup, cpu=True):
    from torch.profiler import ProfilerActivity, profile, schedule
    activities = ([ProfilerActivity.CPU] if cpu or device != "cuda" else []) + \
        ([ProfilerActivity.CUDA] if device == "cuda" else [])
    times = []
    with profile(activities=activities, schedule=schedule(wait=0, warmup=warmup, active=steps)) as prof:
        for i in range(warmup + steps):
            t = timed(step, device)
            if i >= warmup:
                times.append(t)
            prof.step()
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["loop", "transformer"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps before 'ready' (allocator, autotuning, clocks settle)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu-bench: torch sees no CUDA device")
    torch.manual_seed(0)
    step = (build_loop if args.workload == "loop" else build_transformer)(args.device, args.tiny)
    for _ in range(args.warmup):
        timed(step, args.device)

    commands = queue.Queue()

    def read_commands():
        for line in sys.stdin:
            commands.put(line.split())
        commands.put(["quit"])
    threading.Thread(target=read_commands, daemon=True).start()
    print(f"ready {args.workload} torch {torch.__version__} on {args.device}", flush=True)
    steps = 0

    def counted_step():
        nonlocal steps
        steps += 1
        return step()

    def counted():
        return timed(counted_step, args.device)
    while True:
        try:
            cmd = commands.get_nowait()
        except queue.Empty:
            counted()  # between phases: keep the job busy
            continue
        if cmd[0] == "quit":
            return
        if cmd[0] == "phase":
            report(cmd[1], [counted() for _ in range(int(cmd[2]))])
        elif cmd[0] == "count":
            print(f"count {steps}", flush=True)
        elif cmd[0] == "profile":
            report("profiler", profiled(counted_step, args.device, int(cmd[1]), warmup=5))
        elif cmd[0] == "profile-cuda":
            report("profiler-cuda", profiled(counted_step, args.device, int(cmd[1]), warmup=5, cpu=False))
        else:
            sys.exit(f"gpu-bench workload: unknown command {cmd}")


if __name__ == "__main__":
    main()
