"""gtrace's cost on real training steps, against torch.profiler, for scripts/gpu-bench.sh.

For each workload (gpu_bench_workload.py) one process runs, and in that same process:
  untraced   2 x N steps with nothing attached (two phases in a row)
  gtrace     N steps with `gtrace attach --pid <it>` (default options) attached and recording
  after      N steps after gtrace has detached (its agent left dormant in the process)
  alsoI      for each --also option set: N untraced steps (baseI), then N steps with it attached
  profiler   N untraced steps, N inside torch.profiler with the CUDA activity only (Kineto's
             CUPTI side), then N with CPU + CUDA activities
The two untraced phases give the baseline (their steps together) and the run's own noise (how
far apart their medians are); each ratio is a phase's median step time over the baseline.
Targets: gtrace <= 1.05x on the transformer, <= 1.15x on the launch-bound loop, and below the
profiler (CPU + CUDA) on both; after detach the steps equal the untraced ones within the noise:
the bootstrap 95% interval of the ratio of medians holds 1, or the ratio is off by no more than
the two untraced phases differ (1% at least). Each gtrace phase also reports gtrace's own CPU
(its process, and the agent's thread in the job) per step and the trace's bytes per step in the
default format (Perfetto); gtrace's facts come from its --summary-json. The torchrun workload
(gpu_bench_torchrun.py): a 2-rank job on the one GPU attached through its torchrun agent; its
ratio per rank and the report's verdict.

Usage: gpu_bench.py --gtrace PATH --out DIR [--device cuda|cpu] [--tiny] [--steps N]
                    [--workloads loop,transformer,torchrun]
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import gpu_bench_torchrun

TARGETS = {"loop": 1.15, "transformer": 1.05}
WORKLOADS = ["loop", "transformer", "torchrun"]
HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(f"gpu-bench: {msg}", flush=True)


class Workload:
    def __init__(self, name, args):
        cmd = [sys.executable, os.path.join(HERE, "gpu_bench_workload.py"), name, "--device", args.device]
        if args.tiny:
            cmd.append("--tiny")
        self.stderr = open(os.path.join(args.out, f"{name}.log"), "w")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("ready"):
            sys.exit(f"gpu-bench: the {name} workload failed to start; see {self.stderr.name}")
        log(f"{name}: pid {self.p.pid}, {line.split(' ', 2)[2].strip()}")

    def run(self, command):
        """Sends a phase command; returns the step times (ms) of that phase."""
        self.p.stdin.write(command + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line.startswith("done"):
            sys.exit(f"gpu-bench: the workload died during '{command}'; see {self.stderr.name}")
        return [float(t) for t in line.split()[6].split(",")]

    def steps(self):
        """Steps the workload has run so far, timed or not."""
        self.p.stdin.write("count\n")
        self.p.stdin.flush()
        return int(self.p.stdout.readline().split()[1])

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait(timeout=300)


class Gtrace:
    """gtrace attach with default options, started on the running workload; ready once it is
    recording (and, on a GPU, once its agent is active in the process)."""

    def __init__(self, gtrace, pid, base, device, options=()):
        self.trace, self.summary, self.log_path = base + ".pftrace", base + ".summary.json", base + ".log"
        # Leading VAR=VALUE words go into gtrace's environment.
        env = dict(os.environ)
        options = list(options)
        while options and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", options[0]):
            var, value = options.pop(0).split("=", 1)
            env[var] = value
        # The default format; gtrace's facts from its summary (a GPU host may have no protobuf module).
        self.p = subprocess.Popen([gtrace, "attach", "--pid", str(pid), "-o", self.trace, "--summary-json", self.summary,
                                   "--force", *options],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        want = "GPU agent active" if device == "cuda" and "--no-gpu" not in options else "attached to PID"
        if want == "GPU agent active" and not any(o == "uprobes" or o.endswith("=uprobes") for o in options):
            want = "CUDA uprobes off"  # the agent records the calls: time the steps after the switch
        self.lines = []
        ready = threading.Event()

        def read():
            with open(self.log_path, "w") as f:
                for line in self.p.stderr:
                    f.write(line)
                    f.flush()
                    self.lines.append(line)
                    if want in line:
                        ready.set()
        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 120
        while not ready.wait(0.2):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.p.kill()
                sys.exit(f"gpu-bench: gtrace did not start recording ({want!r} not seen); see {self.log_path}:\n"
                         + "".join(self.lines[-5:]))

    def stop(self):
        """Ends the capture; returns its summary (the report, and `capture`: the trace's otherData)."""
        self.p.send_signal(signal.SIGINT)
        rc = self.p.wait(timeout=600)
        if rc != 0:
            sys.exit(f"gpu-bench: gtrace exited {rc}; see {self.log_path}")
        with open(self.summary) as f:
            return json.load(f)


def cpu_seconds(pid, thread_name=None):
    """User + system CPU seconds of process PID (all its threads, ended ones too), or of its
    threads named THREAD_NAME (the agent's inside a job)."""
    tick = os.sysconf("SC_CLK_TCK")

    def of(stat_path):
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    if thread_name is None:
        return of(f"/proc/{pid}/stat")
    total = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                if f.read().strip() == thread_name:
                    total += of(f"/proc/{pid}/task/{task}/stat")
        except OSError:
            continue
    return total


def agent_mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libgtrace_agent" in f.read()


def traced_phase(w, name, phase, options, args):
    """Attaches gtrace with OPTIONS, times a phase, detaches; returns (step times, otherData with
    gtrace's own CPU and the trace's bytes per step added)."""
    log(f"{name}: attaching gtrace ({' '.join(options) or 'default options'})")
    g = Gtrace(args.gtrace, w.p.pid, os.path.join(args.out, f"{name}-{phase}"), args.device, options)
    # gtrace's own CPU over the whole time it was recording (clock ticks: seconds, not one phase's
    # steps, give it its resolution), per step the job made meanwhile.
    cpu0 = (cpu_seconds(g.p.pid), cpu_seconds(w.p.pid, "gtrace-agent"), time.monotonic(), w.steps())
    time.sleep(args.settle)  # the job keeps stepping while the probes settle
    times = w.run(f"phase {phase} {args.steps}")
    cpu1 = (cpu_seconds(g.p.pid), cpu_seconds(w.p.pid, "gtrace-agent"), time.monotonic(), w.steps())
    log(f"{name}: detaching gtrace")
    other = g.stop()["capture"]
    other["steps_attached"] = max(1, w.steps() - cpu0[3])
    steps = max(1, cpu1[3] - cpu0[3])
    other["own_cpu"] = {"gtrace_ms_per_step": (cpu1[0] - cpu0[0]) * 1e3 / steps,
                        "gtrace_core_share": (cpu1[0] - cpu0[0]) / (cpu1[2] - cpu0[2]),
                        "agent_thread_ms_per_step": (cpu1[1] - cpu0[1]) * 1e3 / steps}
    other["trace_bytes_per_step"] = os.path.getsize(g.trace) / other["steps_attached"]
    if not args.keep_traces:
        os.unlink(g.trace)
    return times, other


def measure(name, args):
    w = Workload(name, args)
    phases = {}
    phases["untraced"] = w.run(f"phase untraced {args.steps}")
    phases["untraced-2"] = w.run(f"phase untraced-2 {args.steps}")  # the run's own noise between two phases
    stats = ["--bpf-stats"] if args.bpf_stats else []
    phases["gtrace"], other = traced_phase(w, name, "gtrace", stats, args)
    phases["after"] = w.run(f"phase after {args.steps}")
    other["agent_left_in_process"] = agent_mapped(w.p.pid)
    for kind in filter(None, args.floor.split(",")):
        from uprobe_floor import LAUNCH, Floor, gtrace_symbols
        with Floor(w.p.pid, LAUNCH if kind == "launch" else gtrace_symbols()) as floor:
            log(f"{name}: raw uprobe floor ({kind}): {len(floor.events)} tracefs uprobes on {len(floor.probes)} functions")
            time.sleep(args.settle)
            phases[f"floor-{kind}"] = w.run(f"phase floor-{kind} {args.steps}")
    extra = {}
    for i, spec in enumerate(args.also):
        # Its own untraced steps just before: this host's speed drifts between phases.
        phases[f"base{i}"] = w.run(f"phase base{i} {args.steps}")
        phases[f"also{i}"], extra[f"also{i}"] = traced_phase(w, name, f"also{i}", spec.split() + stats, args)
    # Last: once torch.profiler ran, Kineto keeps CUPTI's callback API, and a later gtrace phase
    # would measure gtrace without it.
    log(f"{name}: torch.profiler")
    phases["base-profiler"] = w.run(f"phase base-profiler {args.steps}")
    phases["profiler-cuda"] = w.run(f"profile-cuda {args.steps}")
    phases["profiler"] = w.run(f"profile {args.steps}")
    w.quit()
    other["also"] = extra
    return phases, other


def print_bpf_stats(label, other):
    """Runs per step: a program's runs over the steps the job made while gtrace was attached."""
    for prog, st in sorted(other.get("bpf_stats", {}).items()):
        if st["runs"]:
            print(f"{'':<18} {label}: {prog:<24} {st['runs'] / other['steps_attached']:10.1f} runs/step {st['ns_per_run']:7d} ns/run")


def ratio_ci(base, other, rounds=2000):
    """Bootstrap 95% interval of median(OTHER) / median(BASE)."""
    rng = random.Random(0)
    ratios = sorted(statistics.median(rng.choices(other, k=len(other))) / statistics.median(rng.choices(base, k=len(base)))
                    for _ in range(rounds))
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds)]


def print_own_cost(label, other):
    cpu = other.get("own_cpu", {})
    gpu = other.get("gpu", {})
    print(f"{'':<18} {label}: gtrace's own CPU {cpu.get('gtrace_ms_per_step', 0):.3f} ms/step "
          f"({100 * cpu.get('gtrace_core_share', 0):.1f}% of a core), agent thread in the job "
          f"{cpu.get('agent_thread_ms_per_step', 0):.3f} ms/step; trace {other.get('trace_bytes_per_step', 0) / 1024:.1f} KiB/step "
          f"(Perfetto); lost events {other.get('lost_events', 0)}, GPU ops {gpu.get('gpu_ops', 0)}, "
          f"linked {gpu.get('joined_to_call', 0)}")
    own = gpu.get("agent_self_time")
    if isinstance(own, dict) and own.get("callbacks"):
        steps = other["steps_attached"]
        print(f"{'':<18} {label}: agent in the job's threads: {own['callbacks'] / steps:.1f} CUDA callbacks/step, "
              f"{own['ns_per_callback']:.0f} ns each (walks included); {own['py_walks'] / steps:.1f} Python walks/step, "
              f"{own['ns_per_py_walk']:.0f} ns each")
    print_bpf_stats(label, other)


def ratio_table(results, args):
    """Prints the table; returns the verdict lines (PASS/FAIL per target)."""
    print()
    print(f"median step time (ms) per phase, device {args.device}" + (", tiny workloads" if args.tiny else ""))
    print(f"{'workload':<12} {'steps':>5} {'untraced':>9} {'gtrace':>9} {'after':>9} {'profiler':>9}"
          f"   {'gtrace x':>8} {'profiler x':>10}   target")
    verdicts = []
    for name, (phases, other) in results.items():
        if name == "torchrun":
            continue
        med = {p: statistics.median(t) for p, t in phases.items()}
        untraced = phases["untraced"] + phases["untraced-2"]
        base = statistics.median(untraced)
        g, prof = med["gtrace"] / base, med["profiler"] / base
        target = TARGETS[name]
        print(f"{name:<12} {len(phases['gtrace']):5d} {med['untraced']:9.2f} {med['gtrace']:9.2f} {med['after']:9.2f} {med['profiler']:9.2f}"
              f"   {g:7.2f}x {prof:9.2f}x   <= {target:.2f}x and < profiler")
        # After detach: equal to the untraced steps within the run's noise — the interval of the
        # ratio holds 1, or it is off by no more than the two untraced phases differ (1% at least).
        lo, hi = ratio_ci(untraced, phases["after"])
        after, noise = med["after"] / base, abs(med["untraced-2"] / med["untraced"] - 1)
        after_ok = lo <= 1 <= hi or abs(after - 1) <= max(noise, 0.01)
        print(f"{'':<18} after detach: {after:.3f}x (95% interval {lo:.3f}-{hi:.3f}; the two untraced phases differ "
              f"by {100 * noise:.1f}%); the agent "
              f"{'stays in the process, dormant' if other.get('agent_left_in_process') else 'is not in the process'}")
        print(f"{'':<18} torch.profiler CUDA activity only: {med['profiler-cuda'] / base:.2f}x, "
              f"{med['profiler-cuda'] / med['base-profiler']:.2f}x over the untraced steps just before")
        print_own_cost("default", other)
        for kind in filter(None, args.floor.split(",")):
            print(f"{'':<18} raw uprobe floor ({kind}, tracefs p:+r:, no BPF): {med[f'floor-{kind}'] / base:.2f}x")
        for i, spec in enumerate(args.also):
            own = statistics.median(phases[f"also{i}"]) / med[f"base{i}"]
            print(f"{'':<18} gtrace {spec}: {statistics.median(phases[f'also{i}']) / base:.2f}x, "
                  f"{own:.2f}x over its own untraced steps just before")
            print_own_cost(f"also{i}", other["also"][f"also{i}"])
        if args.tiny:
            continue
        ok = g <= target and g < prof
        verdicts.append(f"gpu-bench: {'PASS' if ok else 'FAIL'}: {name}: gtrace {g:.2f}x (target <= {target:.2f}x), "
                        f"torch.profiler {prof:.2f}x")
        verdicts.append(f"gpu-bench: {'PASS' if after_ok else 'FAIL'}: {name}: after detach {after:.3f}x, interval "
                        f"{lo:.3f}-{hi:.3f}, untraced phases {100 * noise:.1f}% apart (equal within the run's noise)")
    if "torchrun" in results:
        gpu_bench_torchrun.print_result(results["torchrun"])
    print()
    if args.tiny:
        verdicts.append("gpu-bench: targets not checked (--tiny: smoke run)")
    return verdicts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gtrace", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--steps", type=int, default=None, help="steps per phase (default 200 loop / 50 transformer; 10 with --tiny)")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds between gtrace ready and its timed steps")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--also", action="append", default=[],
                    help="an extra gtrace phase with these options (e.g. '--no-gpu --py-stacks off --sample-hz 0')")
    ap.add_argument("--floor", default="", help="launch,all: phases under the raw uprobe floor (tracefs p:/r:, no BPF) "
                    "on the three launch functions / on gtrace's whole probe table")
    ap.add_argument("--bpf-stats", action="store_true", help="run every gtrace phase with --bpf-stats and print them")
    ap.add_argument("--keep-traces", action="store_true", help="keep each phase's trace in the out directory")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {}
    steps = args.steps
    failed = []
    for name in args.workloads.split(","):
        if name not in WORKLOADS:
            sys.exit(f"gpu-bench: unknown workload '{name}'; pick from {', '.join(WORKLOADS)}")
        try:  # a workload that fails costs its own results only
            if name == "torchrun":
                results[name] = gpu_bench_torchrun.measure(
                    args, lambda pid, base: Gtrace(args.gtrace, pid, os.path.join(args.out, base), args.device), log)
                continue
            args.steps = steps or (10 if args.tiny else 200 if name == "loop" else 50)
            results[name] = measure(name, args)
        except SystemExit as e:
            failed.append(f"gpu-bench: FAIL: {name}: {e.code}")
    verdicts = ratio_table(results, args) + failed
    for v in verdicts:
        print(v)
    sys.exit(1 if any(": FAIL:" in v for v in verdicts) else 0)


if __name__ == "__main__":
    main()
