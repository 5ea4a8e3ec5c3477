#!/usr/bin/python3
"""Does `gtrace report` read a 10-million-event trace in <= 10 s and <= 2 GiB peak RSS?

Generates a trace shaped like the ones `gtrace attach` writes for a torchrun job with the CUPTI
agent on (rank processes with `process_labels` carrying their rank, a DataLoader worker forked
from each, the torchrun agent; per step and rank: the batch's HtoD copy, K kernel launches with
correlation ids and their kernels, an NCCL all-reduce, a memset, the blocking `cudaMemcpy` DtoH of
`loss.item()`, each GPU op with its two flow events, main-thread timer-sample slices, torch
record_function ranges, GPU memory counters; metadata and otherData at the end), streaming it
straight to bench/out/ (reused while the parameters are the same), then runs
`gtrace report TRACE --json OUT` under /usr/bin/time -v and prints wall time, peak RSS and
events/s against the targets.

The machine is shared: the 1-minute load average is printed before each run, and the verdict
is taken on the median of --runs runs.

Usage: report_scale.py [--events N] [--ranks R] [--launches K] [--build DIR] [--runs N] [--regenerate]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

GENERATOR_VERSION = 2  # bump when the shape of the generated trace changes
TARGET_S = 10.0
TARGET_RSS = 2 << 30
SAMPLE_TID_OFFSET = 1 << 30  # kSampleTrackTidOffset
GPU_TRACK_BASE = 1_000_000_000  # kGpuTrackBase

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ampere_sgemm_128x64_tn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_tn_align4>"
    "(cutlass_80_tensorop_s1688gemm_128x128_16x4_tn_align4::Params)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    "(int, float, float const*, float const*, float const*, float*, float*, float*)",
    "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
    "(float*, float const*, int, int, int, bool const*, int, bool)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
    "ampere_sgemm_64x32_sliced1x4_nn",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4> >(TensorListMetadata<4>)",
]
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
SITES = ["forward (model.py:{})", "backward (/usr/lib/python3/dist-packages/torch/_tensor.py:{})",
         "step (/usr/lib/python3/dist-packages/torch/optim/adam.py:{})"]
LOADER = "__next__ (/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:633)"
LOADER_INNER = "_next_data (/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:677)"


def us(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


class Rank:
    def __init__(self, rank, launches):
        self.rank = rank
        self.pid = 41000 + rank * 37
        self.worker = self.pid + 1
        self.launches = launches
        self.t = 5_000_000_000_000 + rank * 1_337  # CLOCK_MONOTONIC ns
        self.corr = 0
        self.flow = rank * 1_000_000_000
        self.allocated = 2 << 30

    def step(self, i, out):
        """Appends one training step's events to out; returns the number of events."""
        start = len(out)
        pid, tid, w = self.pid, self.pid, out.append
        stid, gt, ct = pid + SAMPLE_TID_OFFSET, GPU_TRACK_BASE + 7, GPU_TRACK_BASE + 13
        n = 0
        gpu = []  # (cat, name, start, end, corr, extra args, call start, call end, tid)
        t0 = self.t
        loader_end = t0 + 1_000_000 + (i * 7919 % 200_000)  # a GPU-bound job: waits ~1 ms per batch
        w(f'{{"name":"{LOADER}","cat":"sample","ph":"X","pid":{pid},"tid":{stid},"ts":{us(t0)},"dur":{us(loader_end - t0)}}}')
        w(f'{{"name":"{LOADER_INNER}","cat":"sample","ph":"X","pid":{pid},"tid":{stid},"ts":{us(t0 + 10_000)},"dur":{us(loader_end - t0 - 20_000)}}}')
        w(f'{{"name":"_worker_loop (/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py:308)","cat":"sample",'
          f'"ph":"X","pid":{self.worker},"tid":{self.worker + SAMPLE_TID_OFFSET},"ts":{us(t0)},"dur":{us(loader_end - t0)}}}')
        n += 3
        t = loader_end
        gpu_free = t

        def call(name, dur, args, source):
            nonlocal t, n
            self.corr += 1
            stack = f',"source":"{source}","py_stack":["{source}","<module> (train.py:60)"]'
            w(f'{{"name":"{name}","cat":"cuda_api","ph":"X","pid":{pid},"tid":{tid},"ts":{us(t)},"dur":{us(dur)},'
              f'"args":{{"ret":0,"correlation":{self.corr}{args}{stack}}}}}')
            n += 1
            start = t
            t += dur + 1_500
            return start, start + dur

        # The batch to the GPU, then the memory it took.
        s, e = call("cudaMemcpyAsync", 9_000, ',"stream":"0x0","bytes":4194304,"kind":"HtoD"', "to (train.py:38)")
        gs = max(e, gpu_free) + 2_000
        gpu_free = gs + 350_000
        gpu.append(("gpu_memcpy", "Memcpy HtoD", gs, gpu_free, self.corr,
                    ',"bytes":4194304,"kind":"HtoD","bandwidth_GBps":11.984', s, e, gt))
        self.allocated += 4194304
        w(f'{{"name":"GPU memory (device {self.rank})","cat":"gpu_memory","ph":"C","pid":{pid},"ts":{us(t)},'
          f'"args":{{"allocated_bytes":{self.allocated},"device":{self.rank}}}}}')
        n += 1
        s, e = call("cudaMemsetAsync", 4_000, ',"stream":"0x0","bytes":1048576,"ptr":"0x7f3a00000000"', "zero_grad (train.py:39)")
        gs = max(e, gpu_free) + 2_000
        gpu_free = gs + 20_000
        gpu.append(("gpu_memset", "Memset", gs, gpu_free, self.corr, ',"bytes":1048576', s, e, gt))

        # Forward, backward, optimizer: K launches and their kernels.
        opt_start = None
        for k in range(self.launches):
            if k == self.launches * 3 // 4:
                opt_start = t
            kname = KERNELS[(k * 5 + i) % len(KERNELS)]
            site = SITES[k * 3 // self.launches].format(20 + k % 40)
            s, e = call("cudaLaunchKernel", 5_000 + (k * 131 % 4_000),
                        f',"kernel":"{kname}","grid":[{64 + k % 64},1,1],"block":[256,1,1],"shared_mem":0,"stream":"0x0"', site)
            gs = max(e + 3_000, gpu_free + 1_000)
            gpu_free = gs + (1_500 if k % 3 else 40_000 + (k * 977 % 60_000))
            gpu.append(("kernel", kname, gs, gpu_free, self.corr,
                        f',"grid":[{64 + k % 64},1,1],"block":[256,1,1],"registers_per_thread":32,'
                        f'"shared_memory_static":0,"shared_memory_dynamic":0', s, e, gt))
        s, e = call("cudaLaunchKernel", 6_000, f',"kernel":"{NCCL}","grid":[2,1,1],"block":[512,1,1],"shared_mem":0,'
                    '"stream":"0x55d0c0a1b2c0"', "all_reduce (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:2050)")
        gs = max(e + 3_000, gpu_free)
        gpu_free = gs + 900_000
        gpu.append(("kernel", NCCL, gs, gpu_free, self.corr, ',"grid":[2,1,1],"block":[512,1,1],"registers_per_thread":96,'
                    '"shared_memory_static":0,"shared_memory_dynamic":0', s, e, ct))
        w(f'{{"name":"Optimizer.step#Adam.step","cat":"torch_range","ph":"X","pid":{pid},"tid":{tid},"ts":{us(opt_start)},'
          f'"dur":{us(t - opt_start)},"args":{{"seq":{i},"op_id":{i * 4 + 1}}}}}')
        n += 1

        # loss.item(): the blocking copy every step ends with.
        t0_sync = t
        gs = max(t, gpu_free) + 2_000
        gpu_free = gs + 3_000
        s, e = call("cudaMemcpy", gpu_free + 4_000 - t, ',"bytes":4,"kind":"DtoH"', "train_step (train.py:44)")
        gpu.append(("gpu_memcpy", "Memcpy DtoH", gs, gpu_free, self.corr, ',"bytes":4,"kind":"DtoH","bandwidth_GBps":0.001',
                    s, e, gt))
        t = gpu_free + 4_000 + 1_500
        w(f'{{"name":"train_step (train.py:41)","cat":"sample","ph":"X","pid":{pid},"tid":{stid},"ts":{us(loader_end)},'
          f'"dur":{us(t0_sync - loader_end)}}}')
        w(f'{{"name":"forward (model.py:20)","cat":"sample","ph":"X","pid":{pid},"tid":{stid},"ts":{us(loader_end + 50_000)},'
          f'"dur":{us((t0_sync - loader_end) // 3)}}}')
        self.allocated -= 4194304
        w(f'{{"name":"GPU memory (device {self.rank})","cat":"gpu_memory","ph":"C","pid":{pid},"ts":{us(t)},'
          f'"args":{{"allocated_bytes":{self.allocated},"device":{self.rank}}}}}')
        w(f'{{"name":"ProfilerStep#{i}","cat":"torch_range","ph":"X","pid":{pid},"tid":{tid},"ts":{us(loader_end)},'
          f'"dur":{us(t - loader_end)},"args":{{"seq":{i}}}}}')
        n += 4

        # The agent's records come in a batch: each GPU op, then its flow pair.
        for cat, name, gs, ge, corr, extra, cs, ce, gtid in gpu:
            dev = f',"device":{self.rank},"context":1,"stream":{gtid - GPU_TRACK_BASE}'
            w(f'{{"name":"{name}","cat":"{cat}","ph":"X","pid":{pid},"tid":{gtid},"ts":{us(gs)},"dur":{us(ge - gs)},'
              f'"args":{{"correlation":{corr}{dev}{extra}}}}}')
            self.flow += 1
            api = "cudaLaunchKernel" if cat == "kernel" else "cudaMemcpy"
            w(f'{{"name":"{api}","cat":"ac2g","ph":"s","id":{self.flow},"pid":{pid},"tid":{tid},"ts":{us(cs + (ce - cs) // 2)}}}')
            w(f'{{"name":"{api}","cat":"ac2g","ph":"f","bp":"e","id":{self.flow},"pid":{pid},"tid":{gtid},"ts":{us(gs)},'
              f'"args":{{"correlation":{corr},"launch_tid":{tid}}}}}')
            n += 3
        self.t = t
        assert n == len(out) - start
        return n

    def metadata(self):
        def meta(name, pid, tid, args):
            return json.dumps({"args": args, "name": name, "ph": "M", "pid": pid, "tid": tid}, separators=(",", ":"))
        cmd = f"/usr/bin/python3 -u train.py --epochs 100"
        labels = {"cmdline": cmd, "local_rank": self.rank, "ppid": 40000, "rank": self.rank, "world_size": 8}
        worker_labels = {"cmdline": cmd, "forked_from": self.pid, "local_rank": self.rank, "ppid": self.pid,
                         "rank": self.rank, "world_size": 8}
        return [
            meta("process_name", self.pid, 0, {"name": f"python3 (rank {self.rank})"}),
            meta("process_sort_index", self.pid, 0, {"sort_index": self.rank}),
            meta("process_labels", self.pid, 0, {"labels": json.dumps(labels, separators=(",", ":"))}),
            meta("thread_name", self.pid, self.pid, {"name": "python3"}),
            meta("process_name", self.worker, 0, {"name": f"pt_data_worker (rank {self.rank})"}),
            meta("process_sort_index", self.worker, 0, {"sort_index": 1000 + self.rank}),
            meta("process_labels", self.worker, 0, {"labels": json.dumps(worker_labels, separators=(",", ":"))}),
            meta("thread_name", self.pid, self.pid + SAMPLE_TID_OFFSET, {"name": "python3 (samples)"}),
            meta("thread_name", self.worker, self.worker + SAMPLE_TID_OFFSET, {"name": "pt_data_worker (samples)"}),
            meta("thread_name", self.pid, GPU_TRACK_BASE + 7, {"name": f"GPU {self.rank} · stream 7"}),
            meta("thread_name", self.pid, GPU_TRACK_BASE + 13, {"name": f"GPU {self.rank} · stream 13"}),
        ]


CATEGORY = re.compile(r'"cat":"([a-z_0-9]+)"')


def generate(path, events, ranks, launches):
    """Writes the trace to path (through a temporary file); returns its events per category."""
    tmp = path + ".partial"
    rs = [Rank(r, launches) for r in range(ranks)]
    n = 0
    mix = {}
    with open(tmp, "w", buffering=16 << 20) as f:
        f.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        first = True
        i = 0
        while n < events:
            out = []
            for r in rs:
                n += r.step(i, out)
            if i == 0:  # every step has the same mix
                for e in out:
                    cat = CATEGORY.search(e).group(1)
                    mix[cat] = mix.get(cat, 0) + 1
            f.write(("" if first else ",\n") + ",\n".join(out))
            first = False
            i += 1
        meta = [m for r in rs for m in r.metadata()]
        meta.append(json.dumps({"args": {"name": "torchrun"}, "name": "process_name", "ph": "M", "pid": 40000, "tid": 0},
                               separators=(",", ":")))
        f.write(",\n" + ",\n".join(meta))
        mix = {cat: count * i for cat, count in mix.items()}
        mix["metadata"] = len(meta)
        other = {"tool": "gtrace", "version": "0.1.0", "root_pid": 40000, "clock": "CLOCK_MONOTONIC",
                 "start_unix_ms": 1795000000000, "duration_s": 60.0, "stop_reason": "duration", "lost_events": 0,
                 "samples": 0, "sample_hz": 100, "generated_by": "bench/report_scale.py",
                 "gpu": {"enabled": True, "agents": ranks, "agents_active": ranks}}
        f.write("\n],\n\"otherData\":" + json.dumps(other, separators=(",", ":")) + "}\n")
    os.rename(tmp, path)
    return mix


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000, help="events in the trace (default 10000000)")
    ap.add_argument("--ranks", type=int, default=4, help="rank processes, 2 to 8 (default 4)")
    ap.add_argument("--launches", type=int, default=200, help="kernel launches per step and rank (default 200)")
    ap.add_argument("--build", default=os.path.join(here, "..", "build"), help="build directory holding gtrace")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of gtrace report (default 3)")
    ap.add_argument("--regenerate", action="store_true", help="write the trace again even if it exists")
    a = ap.parse_args()
    if not 2 <= a.ranks <= 8:
        sys.exit("--ranks must be 2 to 8")
    gtrace = os.path.join(a.build, "gtrace")
    if not os.access(gtrace, os.X_OK):
        sys.exit(f"{gtrace} not found: build it, or give --build DIR")
    if not os.access("/usr/bin/time", os.X_OK):
        sys.exit("/usr/bin/time not found: run scripts/setup.sh (package time)")

    out_dir = os.path.join(here, "out")
    os.makedirs(out_dir, exist_ok=True)
    trace = os.path.join(out_dir, f"report_scale-{a.events}ev-{a.ranks}r-{a.launches}k-v{GENERATOR_VERSION}.json")
    mix_file = trace + ".mix.json"
    if a.regenerate or not os.path.exists(trace) or not os.path.exists(mix_file):
        started = time.monotonic()
        print(f"generating {trace} ...", flush=True)
        mix = generate(trace, a.events, a.ranks, a.launches)
        with open(mix_file, "w") as f:
            json.dump(mix, f)
        print(f"  {sum(mix.values())} events, {os.path.getsize(trace) / 1e9:.2f} GB in {time.monotonic() - started:.0f} s",
              flush=True)
    with open(mix_file) as f:
        mix = json.load(f)
    n = sum(mix.values())
    size = os.path.getsize(trace)

    summary = os.path.join(out_dir, "report_scale-summary.json")
    # Read once first so that the timed run finds the file in the page cache, as after a capture.
    with open(trace, "rb") as f:
        while f.read(64 << 20):
            pass
    runs = []
    for run in range(a.runs):
        load = os.getloadavg()[0]
        p = subprocess.run(["/usr/bin/time", "-v", gtrace, "report", trace, "--json", summary, "--force"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"gtrace report failed ({p.returncode}):\n{p.stderr}")
        figures = {key: float(re.search(pattern, p.stderr).group(1)) for key, pattern in (
            ("user", r"User time \(seconds\): (\S+)"), ("sys", r"System time \(seconds\): (\S+)"),
            ("rss", r"Maximum resident set size \(kbytes\): (\d+)"))}
        wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", p.stderr).group(1)
        figures["wall"] = sum(float(v) * 60 ** i for i, v in enumerate(reversed(wall.split(":"))))
        figures["rss"] *= 1024
        runs.append(figures)
        print(f"run {run + 1}: wall {figures['wall']:.2f} s (user {figures['user']:.2f} s, sys {figures['sys']:.2f} s), "
              f"peak RSS {figures['rss'] / 2**20:.0f} MiB   [load average before: {load:.2f}]", flush=True)
    wall_s = statistics.median(r["wall"] for r in runs)
    rss = max(r["rss"] for r in runs)
    with open(summary) as f:
        ranks = json.load(f)["ranks"]
    steps = sum(r["steps"] for r in ranks)

    print(f"trace: {n} events, {size / 1e9:.2f} GB, {a.ranks} ranks, {steps} steps found "
          f"(verdicts: {', '.join(sorted({r['verdict'] for r in ranks}))})")
    print("  " + ", ".join(f"{cat} {count}" for cat, count in sorted(mix.items(), key=lambda kv: -kv[1])))
    print(f"gtrace report, median of {len(runs)}: wall {wall_s:.2f} s   target <= {TARGET_S:.0f} s   "
          f"{'OK' if wall_s <= TARGET_S else 'MISSED'}")
    print(f"  peak RSS {rss / 2**20:.0f} MiB (the most of any run)   target <= {TARGET_RSS >> 20} MiB   "
          f"{'OK' if rss <= TARGET_RSS else 'MISSED'}")
    print(f"  {n / wall_s / 1e6:.2f} M events/s, {size / wall_s / 1e6:.0f} MB/s")
    if len(ranks) != a.ranks or steps == 0:
        sys.exit("the report did not find every rank's steps: the generated trace or the reader is wrong")
    return 0 if wall_s <= TARGET_S and rss <= TARGET_RSS else 1


if __name__ == "__main__":
    sys.exit(main())
