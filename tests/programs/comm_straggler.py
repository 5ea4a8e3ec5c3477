"""A 2-rank gloo job (under torchrun) in which one rank is late to every all_reduce: before each
step's all_reduce, rank --late-rank sleeps --sleep-ms. The other ranks wait for it inside the
all_reduce. Each rank prints "ready rank N", waits for --go-file, runs --steps steps of a small
model (forward, backward, one all_reduce of the flattened gradients, optimizer step), then the
late rank prints "GTRACE_COMM_TRUTH {json}": its measured mean sleep per step (`sleep_ms`: the
injected wait) and that plus its own mean time inside the all_reduce (`blocked_ms`), and, from
what the other ranks measured themselves (each writes its figures beside --go-file), the first
other rank's mean time inside the all_reduce (`other_all_reduce_ms`) and its mean wait for the
late rank (`other_wait_ms`: the late rank's arrival less its own, each taken on CLOCK_MONOTONIC
just before the call). On a busy host the late rank reaches its call later than its sleep alone
says, so these, not the sleep, are what the other rank's figures are held to.

A timestamp taken in Python is not the call's entry in C++: a rank preempted between the two moves
its own figure and not gtrace's. So each rank also reads its thread's run delay (the kernel's time
runnable but not running, /proc/thread-self/schedstat) from just before its timestamp to the
call's return, and the truth carries what that allows: `other_wait_slack_ms` (both ranks' run
delay, mean per step) and `other_all_reduce_slack_ms` (the other rank's own).

--throw instead makes the late rank never come: the others' all_reduce times out after
--timeout-s, and gloo throws the error through Work::wait; they catch it, print "caught
RuntimeError", and every rank exits 0 (a probe that broke C++ unwinding would abort them)."""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist


def run_delay_s():
    """This thread's time runnable but not running so far (0 where the kernel does not say)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sleep-ms", type=float, default=30.0)
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--go-file")
    ap.add_argument("--throw", action="store_true")
    ap.add_argument("--timeout-s", type=float, default=2.0)
    a = ap.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout_s))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 64)
    print(f"ready rank {rank}", flush=True)
    while a.go_file and not os.path.exists(a.go_file):
        time.sleep(0.01)
    if a.throw:
        if rank != a.late_rank:
            try:
                dist.all_reduce(torch.ones(4))
            except RuntimeError:
                print("caught RuntimeError", flush=True)
        else:
            time.sleep(2 * a.timeout_s)
        os._exit(0)  # the group is broken: no orderly shutdown
    slept, reduced, arrivals, delayed = [], [], [], []
    for _ in range(a.steps):
        model(x).square().mean().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        if rank == a.late_rank:
            t0 = time.monotonic()
            time.sleep(a.sleep_ms / 1000)
            slept.append(time.monotonic() - t0)
        d0 = run_delay_s()
        t0 = time.monotonic()
        arrivals.append(t0)
        dist.all_reduce(grads)
        reduced.append(time.monotonic() - t0)
        delayed.append(run_delay_s() - d0)
        offset = 0
        for p in model.parameters():
            p.grad.copy_(grads[offset:offset + p.grad.numel()].view_as(p.grad))
            offset += p.grad.numel()
        opt.step()
        opt.zero_grad()
    figures = os.path.join(os.path.dirname(os.path.abspath(a.go_file)), f"comm-figures-{rank}.json") if a.go_file else None
    if figures and rank != a.late_rank:
        with open(figures + ".tmp", "w") as f:
            json.dump({"arrivals": arrivals, "all_reduce_s": reduced, "run_delay_s": delayed}, f)
        os.rename(figures + ".tmp", figures)
    if slept:
        sleep_ms, reduce_ms = 1000 * sum(slept) / len(slept), 1000 * sum(reduced) / len(reduced)
        truth = {"rank": rank, "sleep_ms": sleep_ms, "blocked_ms": sleep_ms + reduce_ms, "steps": len(slept)}
        other = figures and os.path.join(os.path.dirname(figures), f"comm-figures-{0 if rank else 1}.json")
        deadline = time.monotonic() + 30
        while other and not os.path.exists(other) and time.monotonic() < deadline:
            time.sleep(0.01)
        if other and os.path.exists(other):
            o = json.load(open(other))
            waits = [max(0.0, mine - theirs) for mine, theirs in zip(arrivals, o["arrivals"])]
            truth["other_wait_ms"] = 1000 * sum(waits) / len(waits)
            truth["other_all_reduce_ms"] = 1000 * sum(o["all_reduce_s"]) / len(o["all_reduce_s"])
            truth["other_wait_slack_ms"] = 1000 * (sum(delayed) + sum(o["run_delay_s"])) / len(delayed)
            truth["other_all_reduce_slack_ms"] = 1000 * sum(o["run_delay_s"]) / len(o["run_delay_s"])
        print("GTRACE_COMM_TRUTH " + json.dumps(truth), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
