"""gpu-bench's third workload: a 2-rank torchrun job on the one GPU (gloo, DDP, a DataLoader with
workers), attached through its torchrun agent as a user would (`gtrace attach --pid <agent>`).

The ranks step without end and log each step's end time (CLOCK_MONOTONIC) and duration to
OUT/torchrun-rank-R.steps; the driver cuts three windows of wall time out of those logs —
untraced, with gtrace attached (after its agents are active and the probes settled), after gtrace
detached — and reports each rank's median step time per window and the report's verdict from
gtrace's --summary-json. `gpu_bench_torchrun.py rank ...` is the rank (torchrun starts it).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from gpu_check_jobs import die_with_parent  # no rank or torchrun left stepping on the GPU after the bench


def rank_main(args):
    die_with_parent()
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    device = "cuda:0" if args.device == "cuda" else "cpu"  # both ranks on the one GPU
    width, batch = (64, 16) if args.tiny else (1024, 256)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())]).to(device)
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.TensorDataset(torch.randn(64 * batch, width))
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=2, persistent_workers=True)
    with open(os.path.join(args.out, f"torchrun-rank-{rank}.steps"), "w") as log:
        while True:
            for (x,) in loader:
                t0 = time.perf_counter()
                loss = model(x.to(device)).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss.item()
                log.write(f"{time.monotonic():.6f} {(time.perf_counter() - t0) * 1e3:.4f}\n")
                log.flush()


def steps_in(out, rank, t0, t1):
    """Rank RANK's step times (ms) of the steps that ended between t0 and t1."""
    times = []
    with open(os.path.join(out, f"torchrun-rank-{rank}.steps")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and t0 <= float(parts[0]) <= t1:
                times.append(float(parts[1]))
    return times


def stepped(out, rank):
    path = os.path.join(out, f"torchrun-rank-{rank}.steps")
    return len(steps_in(out, rank, 0, float("inf"))) if os.path.exists(path) else 0


def measure(args, start_gtrace, log):
    """Runs the job and its three windows; returns {"phases": {phase: {rank: [ms]}}, "other": ...}."""
    import torch
    window = 4.0 if args.tiny else 10.0
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]  # torch 1.13 knows only this spelling
    if torch.__version__.startswith("1."):
        cmd += ["--redirects", "1", "--tee", "1"]  # torch 1.13's torchrun on Python 3.11 needs them
    cmd += [os.path.abspath(__file__), "rank", "--out", args.out, "--device", args.device] + (["--tiny"] if args.tiny else [])
    for r in (0, 1):
        path = os.path.join(args.out, f"torchrun-rank-{r}.steps")
        if os.path.exists(path):
            os.unlink(path)
    with open(os.path.join(args.out, "torchrun.log"), "w") as job_log:
        job = subprocess.Popen(cmd, stdout=job_log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 300
        while min(stepped(args.out, r) for r in (0, 1)) < 20:
            if job.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"gpu-bench: the torchrun job did not start stepping; see {args.out}/torchrun.log")
            time.sleep(0.5)
        log(f"torchrun: agent pid {job.pid}, 2 ranks stepping")
        windows = {}
        t = time.monotonic()
        time.sleep(window)
        windows["untraced"] = (t, time.monotonic())
        log("torchrun: attaching gtrace to the torchrun agent")
        g = start_gtrace(job.pid, "torchrun-gtrace")
        time.sleep(args.settle + 1.0)
        t = time.monotonic()
        time.sleep(window)
        windows["gtrace"] = (t, time.monotonic())
        log("torchrun: detaching gtrace")
        summary = g.stop()
        t = time.monotonic()
        time.sleep(window)
        windows["after"] = (t, time.monotonic())
    finally:
        job.terminate()  # torchrun stops its ranks; they die with it in any case
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    phases = {p: {r: steps_in(args.out, r, *w) for r in (0, 1)} for p, w in windows.items()}
    return {"phases": phases, "summary": summary}


def print_result(result):
    """The table's torchrun lines: per rank, median step ms per window and gtrace's ratio; the verdict."""
    phases, summary = result["phases"], result["summary"]
    for r in (0, 1):
        med = {p: statistics.median(phases[p][r]) if phases[p][r] else float("nan") for p in phases}
        print(f"{'torchrun':<12} rank {r}: {len(phases['gtrace'][r])} steps attached, median ms untraced {med['untraced']:.2f}, "
              f"gtrace {med['gtrace']:.2f}, after {med['after']:.2f}: gtrace {med['gtrace'] / med['untraced']:.2f}x, "
              f"after {med['after'] / med['untraced']:.2f}x")
    verdict = summary.get("verdict", {})
    print(f"{'':<18} report: job verdict {verdict.get('job')!r}; ranks {verdict.get('ranks')}; "
          f"lost events {summary.get('capture', {}).get('lost_events', 0)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["rank"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true")
    rank_main(ap.parse_args())
