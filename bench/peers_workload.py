"""The training job of bench/peers.py, one rank of it under torchrun: a GPT-2-shaped small decoder
(nanoGPT's blocks: pre-norm causal self-attention and a GELU MLP, learned positions, a tied LM
head) trained on the CPU with DistributedDataParallel over gloo, a DataLoader with one worker
process (synthetic tokens), AdamW.

  python -m torch.distributed.run --nproc-per-node 2 bench/peers_workload.py --steps-file PREFIX [options]

Every step appends "INDEX START_NS END_NS" (CLOCK_MONOTONIC, as time.monotonic_ns) to
PREFIX.rankR, so that the bench reads step times over any window from outside, without touching
the tool being measured. After the warm-up steps each rank prints "ready rank R pid P".
--steps 0 (the default) steps until killed; otherwise the job runs that many steps and exits
cleanly (what torch.profiler and viztracer need to write their traces).
--torch-profiler cpu|cpu_stack: steps --profile-start .. + --profile-steps run inside
torch.profiler.profile(activities=[CPU], with_stack=...) with a schedule (wait, 2 warm-up steps,
then active for the measured steps) and tensorboard_trace_handler(--trace-dir): the way its
users run it. Those measured steps are marked "P" at the end of their line.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq, width, heads, layers):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx, targets):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


class Tokens(torch.utils.data.IterableDataset):
    """Endless synthetic token sequences (seq + 1 tokens: inputs and shifted targets)."""

    def __init__(self, vocab, seq):
        self.vocab, self.seq = vocab, seq

    def __iter__(self):
        g = torch.Generator().manual_seed(1234 + int(os.environ.get("RANK", "0")))
        while True:
            yield torch.randint(0, self.vocab, (self.seq + 1,), generator=g)


def train_step(model, opt, batch):
    x, y = batch[:, :-1], batch[:, 1:]
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps-file", required=True, help="prefix of the per-rank step files (PREFIX.rankR)")
    ap.add_argument("--steps", type=int, default=0, help="steps to run, then exit (0: until killed)")
    ap.add_argument("--warmup", type=int, default=5, help="steps before 'ready'")
    ap.add_argument("--torch-profiler", choices=["cpu", "cpu_stack"])
    ap.add_argument("--profile-start", type=int, default=5, help="first step under the profiler (its wait)")
    ap.add_argument("--profile-steps", type=int, default=50, help="active (recorded, measured) steps")
    ap.add_argument("--trace-dir", help="torch.profiler's tensorboard_trace_handler directory")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = nn.parallel.DistributedDataParallel(GPT(args.vocab, args.seq, args.width, args.heads, args.layers))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    loader = torch.utils.data.DataLoader(Tokens(args.vocab, args.seq), batch_size=args.batch, num_workers=1,
                                         persistent_workers=True, prefetch_factor=4)
    batches = iter(loader)
    out = open(f"{args.steps_file}.rank{rank}", "a", buffering=1)

    prof = None
    if args.torch_profiler:
        # 2 warm-up steps before the active ones (the profiler's own start-up stays out of them)
        warmup = 2
        wait = max(0, args.profile_start - warmup)
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            with_stack=args.torch_profiler == "cpu_stack",
            schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=args.profile_steps, repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(args.trace_dir))
        prof.start()
        first_active = wait + warmup
    step = 0
    while args.steps == 0 or step < args.steps:
        t0 = time.monotonic_ns()
        train_step(model, opt, next(batches))
        t1 = time.monotonic_ns()
        mark = " P" if prof is not None and first_active <= step < first_active + args.profile_steps else ""
        out.write(f"{step} {t0} {t1}{mark}\n")
        if prof is not None:
            prof.step()
        step += 1
        if step == args.warmup:
            print(f"ready rank {rank} pid {os.getpid()}", flush=True)
    if prof is not None:
        prof.stop()
    out.close()
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
