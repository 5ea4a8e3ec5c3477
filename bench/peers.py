#!/usr/bin/env python3
"""gtrace beside the profilers a user would pick instead, on one training job (issue 27.5).

The job is bench/peers_workload.py: a GPT-2-shaped decoder trained on the CPU, torchrun with 2
ranks, gloo DDP, a DataLoader worker per rank, AdamW; each rank logs every step's start and end.
Each phase is a fresh job:

  untraced         nothing attached (run first and again last: the baseline is both windows)
  gtrace           build/gtrace attach --pid <torchrun agent> (default options) after warm-up
  py-spy           py-spy record --rate 100 --subprocesses --pid <agent> --format raw
  torch.profiler   in the ranks, activities=[CPU], with_stack False, then True; its schedule's
                   active steps are the window
  viztracer        every rank runs under viztracer (torchrun --no-python viztracer -- script)

Per phase: the median step time over the window (both ranks' steps), its ratio to untraced, the
tool's CPU per step (an attached tool: its own process tree; an in-process tool: the job's CPU
beyond untraced), the job's CPU per step, trace bytes per step covered, what was recorded, and
the CPUs other work took meanwhile (the machine is shared: a phase that others loaded is redone).
Targets: gtrace's ratio below torch.profiler with stacks and viztracer, and at most py-spy's
+ 0.01. Exit 0 whether targets are met or not; 1 with a one-line error if the bench failed.

  .venv/bin/python bench/peers.py [--steps 60] [--json FILE] [--keep DIR] [--phases ...]"""
import argparse
import json
import mmap
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "runtime"))
sys.path.insert(0, HERE)
from kernel_state import kill_tree, process_tree  # noqa: E402
from proc_stats import cpu_seconds  # noqa: E402

VENV = os.path.join(ROOT, ".venv", "bin")
PYTHON = os.path.join(VENV, "python")
WORKLOAD = os.path.join(HERE, "peers_workload.py")
GTRACE = os.path.join(ROOT, "build", "gtrace")
OTHERS_MAX = 0.15  # CPUs of other work during a window past which the bench measures it again
POLL_S = 0.02  # step-file polling: fine enough for ~100 ms steps, light enough not to load 2 cores


class BenchError(Exception):
    """The bench failed (not a target): one line, exit 1."""


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def tree_cpu(pid):
    """CPU seconds of a process and its live descendants (a job's ranks and DataLoader workers)."""
    return sum(cpu_seconds(p) for p in process_tree(pid))


def machine_busy():
    """CPU seconds all CPUs spent busy (not idle, iowait or stolen), from /proc/stat."""
    fields = [int(v) for v in read_text("/proc/stat").split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4] - fields[7]) / os.sysconf("SC_CLK_TCK")


def quiet(timeout, cores=0.2):
    """Wait (up to timeout) for a second in which other work keeps under `cores` CPUs busy: this
    2-core machine is shared (builds, test suites), and their load would read as a tool's cost."""
    deadline = time.monotonic() + timeout
    while True:
        b0 = machine_busy()
        time.sleep(1)
        busy = machine_busy() - b0
        if busy < cores or time.monotonic() > deadline:
            return busy


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:  # not yet written, or a process that is gone
        return ""


def alive(pid):
    return (read_text(f"/proc/{pid}/stat").rpartition(")")[2].split() or ["Z"])[0] != "Z"


def found(pattern, text):
    m = re.search(pattern, text)
    return m.group(1) if m else "?"


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


class Job:
    """One torchrun job of the workload; `runner` replaces the script (viztracer wraps it)."""

    def __init__(self, args, work, steps=0, extra=(), runner=None):
        os.makedirs(work, exist_ok=True)
        self.prefix, self.log = os.path.join(work, "steps"), os.path.join(work, "job.log")
        cmd = [PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(args.port)]
        cmd += (runner or [WORKLOAD]) + ["--steps-file", self.prefix, "--steps", str(steps),
                                        "--warmup", str(args.warmup), *map(str, extra)]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                         start_new_session=True)
        self.pid = self.proc.pid

    def failed(self, what):
        lines = [line.strip() for line in read_text(self.log).splitlines() if line.strip()]
        errors = [line for line in lines if re.search(r"(Error|Exception)\b.*:", line)]  # the first: the rank's own, before torchrun's report
        return BenchError(f"{what} (exit {self.proc.poll()}): {(errors[:1] or lines[-1:] or ['no output'])[0]}")

    def wait_ready(self):
        wait_for(lambda: read_text(self.log).count("ready rank") == 2 or self.proc.poll() is not None,
                 180, "the ranks' 'ready'")
        if self.proc.poll() is not None:
            raise self.failed("the job exited before warm-up ended")

    def done(self, rank=0):
        """Steps this rank has finished."""
        return read_text(f"{self.prefix}.rank{rank}").count("\n")

    def steps(self, rank):
        """index -> (start_ns, end_ns, marked by torch.profiler)."""
        rows = (line.split() for line in read_text(f"{self.prefix}.rank{rank}").splitlines())
        return {int(f[0]): (int(f[1]), int(f[2]), f[3:] == ["P"]) for f in rows if len(f) >= 3}

    def measure(self, first, n, tool_pid=None):
        """Steps first .. first+n-1: their times on both ranks, and the CPU the job (and an
        attached tool) took between the end of step first-1 and the end of the last (rank 0)."""
        def reached(count):
            if self.proc.poll() is not None:
                raise self.failed(f"the job exited before step {count}")
            return self.done() >= count
        wait_for(lambda: reached(first), 300, f"step {first}")
        job0, tool0, t0 = tree_cpu(self.pid), tool_pid and tree_cpu(tool_pid), time.monotonic()
        all0, own0 = machine_busy(), sum(os.times()[:2])
        wait_for(lambda: reached(first + n), 60 + 10 * n, f"step {first + n}")
        job1, tool1, t1 = tree_cpu(self.pid), tool_pid and tree_cpu(tool_pid), time.monotonic()
        # what the rest of the machine took meanwhile (another job would slow this one)
        others = machine_busy() - all0 - (sum(os.times()[:2]) - own0) - (job1 - job0) - ((tool1 or 0) - (tool0 or 0))
        wait_for(lambda: self.done(1) >= first + n, 60, "rank 1's window")
        ranks = [self.steps(r) for r in (0, 1)]
        durations = [(s[i][1] - s[i][0]) / 1e6 for s in ranks for i in range(first, first + n)]
        return {"first_step": first, "steps": n, "durations_ms": durations, "window_s": t1 - t0,
                "others_cpus": others / (t1 - t0), "job_cpu_per_step": (job1 - job0) / n,
                "tool_cpu_per_step": (tool1 - tool0) / n if tool_pid else None}

    def wait_exit(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"the job did not exit within {timeout} s")
        if self.proc.returncode != 0:
            raise self.failed("the job failed")

    def stop(self):
        """Every process of the job gone (torchrun's ranks run in sessions of their own)."""
        pids = process_tree(self.pid)
        kill_tree(self.pid)
        self.proc.wait()
        wait_for(lambda: not any(alive(p) for p in pids), 30, "the job's processes to exit")


def wait_rusage(proc, timeout):
    """Wait for a tool we started; its whole-life CPU (its waited-for children included)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.1)
    raise BenchError(f"{os.path.basename(proc.args[0])} did not finish within {timeout} s of SIGINT")


def attached_phase(args, work, tool_cmd, ready_text, name):
    """A tool that attaches to the running job by PID: start it once the ranks are warm, measure
    from 1 s after it says it is attached, then SIGINT it and wait for its output."""
    job = Job(args, work)
    tool = None
    try:
        job.wait_ready()
        tool_log = os.path.join(work, f"{name}.log")
        with open(tool_log, "w") as log:
            tool = subprocess.Popen(tool_cmd(job.pid), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        t_start = time.monotonic()
        wait_for(lambda: ready_text in read_text(tool_log) or tool.poll() is not None, 300, f"{name} to attach")
        if tool.poll() is not None:
            raise BenchError(f"{name} exited {tool.returncode} before attaching: "
                             f"{read_text(tool_log).strip().splitlines()[-1:]}")
        t_ready = time.monotonic_ns()
        attach_s = (t_ready / 1e9) - t_start
        time.sleep(1.0)  # py-spy finds the subprocesses after it starts; gtrace's agents settle
        m = job.measure(job.done() + 1, args.steps, tool.pid)
        t_stop = time.monotonic_ns()
        tool.send_signal(signal.SIGINT)
        m["tool_total_cpu_s"] = wait_rusage(tool, 300)
        m["write_s"] = time.monotonic_ns() / 1e9 - t_stop / 1e9
        if tool.returncode != 0:
            raise BenchError(f"{name} exited {tool.returncode}: {read_text(tool_log).strip().splitlines()[-1:]}")
        # steps of rank 0 begun while the tool was recording: what its output covers
        m["covered_steps"] = sum(1 for s, _, _ in job.steps(0).values() if t_ready <= s <= t_stop)
        m["attach_s"], m["tool_log"] = attach_s, read_text(tool_log)
        return m
    finally:
        if tool is not None and tool.poll() is None:
            kill_tree(tool.pid)
            tool.wait()
        job.stop()


def finished_job(args, work, extra=(), runner=None, exit_timeout=300):
    """A job that runs the window in-process and exits (the in-process tools write at the end):
    3 steps past the window, so that it is still alive when the window's CPU is read."""
    job = Job(args, work, steps=args.warmup + args.settle + args.steps + 3, extra=extra, runner=runner)
    try:
        job.wait_ready()
        m = job.measure(args.warmup + args.settle, args.steps)
        job.wait_exit(exit_timeout)
        return job, m
    finally:
        job.stop()


def run_untraced(args, work):
    _, m = finished_job(args, work)
    return dict(m, bytes=0, covered_steps=args.steps, recorded="nothing")


def run_gtrace(args, work):
    wait_for(lambda: os.access(GTRACE, os.X_OK), 300, f"{GTRACE} (being rebuilt?)")
    out = os.path.join(work, "gtrace.pftrace")
    m = attached_phase(args, work, lambda pid: [GTRACE, "attach", "--pid", str(pid), "-o", out, *args.gtrace_args.split()],
                       "gtrace: attached", "gtrace")
    m["bytes"] = os.path.getsize(out)
    samples, calls = found(r"samples: (\d+)", m["tool_log"]), found(r"CUDA API calls: (\d+)", m["tool_log"])
    m["recorded"] = f"{samples} samples (Python+native stacks), torch ranges, {calls} CUDA calls"
    return m


def run_pyspy(args, work):
    out = os.path.join(work, "pyspy.txt")
    m = attached_phase(args, work, lambda pid: [os.path.join(VENV, "py-spy"), "record", "--rate", "100",
                                                "--subprocesses", "--pid", str(pid), "-o", out, "--format", "raw"],
                       "Sampling process", "py-spy")
    m["bytes"] = os.path.getsize(out)
    m["recorded"] = found(r"Samples: (\d+)", m["tool_log"]) + " samples (Python stacks, folded)"
    return m


def run_torch_profiler(args, work, mode):
    first, traces = args.warmup + args.settle, os.path.join(work, "traces")
    job, m = finished_job(args, work, ["--torch-profiler", mode, "--profile-start", first,
                                       "--profile-steps", args.steps, "--trace-dir", traces])
    marked = sorted(i for i, (_, _, p) in job.steps(0).items() if p)
    if marked != list(range(first, first + args.steps)):
        raise BenchError(f"torch.profiler's active steps are {marked[:1]}..{marked[-1:]}, not the window")
    events = 0
    for name in os.listdir(traces):
        with open(os.path.join(traces, name)) as f:
            events += len(json.load(f).get("traceEvents", []))
    m.update(bytes=dir_bytes(traces), covered_steps=args.steps)
    m["recorded"] = (f"{events // args.steps} events/step: aten ops, record_function ranges, "
                     + ("a Python stack per op" if mode == "cpu_stack" else "no stacks"))
    return m


VIZ_EVENT = re.compile(rb'\{"pid": \d+, "tid": \d+, "ts": ([0-9.]+)')


def viz_window(path, t0_ns, t1_ns):
    """Events of a viztracer JSON that start inside [t0, t1] (its ts: CLOCK_MONOTONIC in us, the
    steps' clock), and their bytes (each event up to the next one's start)."""
    events = size = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        inside = None
        for m in VIZ_EVENT.finditer(data):
            if inside is not None:
                events, size = events + 1, size + m.start() - inside
            inside = m.start() if t0_ns <= float(m.group(1)) * 1000 <= t1_ns else None
    return events, size


def run_viztracer(args, work):
    """The ranks under viztracer's command line (torchrun --no-python), as a user runs it: it
    records from the start; the window's share of its files is counted by timestamp."""
    first, traces = args.warmup + args.settle, os.path.join(work, "traces")
    os.makedirs(traces)  # else both ranks' viztracer make it, and one fails (FileExistsError)
    runner = ["--no-python", os.path.join(VENV, "viztracer"), "--pid_suffix", "--output_dir", traces,
              "--tracer_entries", str(args.viz_entries), "--", WORKLOAD]
    job, m = finished_job(args, work, runner=runner, exit_timeout=600)  # its JSON at exit: large, slow
    log = read_text(job.log)
    entries = [int(n) for n in re.findall(r"Total Entries: (\d+)", log)]
    events = size = 0
    for rank, pid in re.findall(r"ready rank (\d) pid (\d+)", log):
        path, steps = os.path.join(traces, f"result_{pid}.json"), job.steps(int(rank))
        if not os.path.exists(path):
            raise BenchError(f"viztracer wrote no trace for rank {rank}")
        e, b = viz_window(path, steps[first][0], steps[first + args.steps - 1][1])
        events, size = events + e, size + b
    m.update(bytes=size, covered_steps=args.steps, files_bytes=dir_bytes(traces))
    m["recorded"] = (f"{events // args.steps} events/step: every Python and C function call"
                     + (" (buffer wrapped: raise --viz-entries)" if max(entries, default=0) >= args.viz_entries else ""))
    return m


def machine():
    model = re.search(r"model name\s*:\s*(.*)", read_text("/proc/cpuinfo"))
    torch_version = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    return {"cpus": os.cpu_count(), "cpu": model.group(1) if model else "?", "kernel": os.uname().release,
            "torch": torch_version}


def fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def report(results, baseline_ms, base_job_cpu):
    print(f"{'phase':<16}{'median ms':>10}{'x untraced':>11}{'tool CPU s/step':>16}{'job CPU s/step':>15}"
          f"{'bytes/step':>12}{'others':>7}  recorded")
    for name in PHASES:
        r = results.get(name)
        if r is None:
            continue
        if "error" in r:
            print(f"{name:<16}  failed: {r['error']}")
            continue
        print(f"{name:<16}{r['median_ms']:>10.1f}{fmt(r['ratio'], '.3f'):>11}{fmt(r['tool_cpu_per_step'], '.4f'):>16}"
              f"{r['job_cpu_per_step']:>15.4f}{r['bytes_per_step']:>12.0f}{r['others_cpus']:>7.2f}  {r['recorded']}")
    print(f"baseline: {baseline_ms:.1f} ms (median of both untraced windows), job CPU {fmt(base_job_cpu, '.4f')} s/step;"
          f" others: CPUs busy with other work in the window (above {OTHERS_MAX}: read that row with care)")
    for name in ("gtrace", "py-spy"):
        r = results.get(name)
        if r and "error" not in r:
            print(f"{name}: attached in {r['attach_s']:.1f} s, wrote in {r['write_s']:.1f} s, "
                  f"{r['tool_total_cpu_s']:.2f} CPU s over its whole run (attach and write included), "
                  f"{r['covered_steps']} steps covered")
    r = results.get("viztracer")
    if r and "error" not in r:
        print(f"viztracer: its files hold the whole run, imports included: {r['files_bytes'] / 1e6:.0f} MB "
              f"(bytes/step above: the window's events only)")


def check_targets(results):
    def ratio_of(name):
        r = results.get(name)
        return (r or {}).get("ratio"), f"{name} {'not run' if r is None else 'failed'}"

    (g, g_why), checks = ratio_of("gtrace"), []
    for name, label, met in (("torch-cpu-stack", "< torch.profiler (with_stack)", lambda a, b: a < b),
                             ("viztracer", "< viztracer", lambda a, b: a < b),
                             ("py-spy", "<= py-spy + 0.01", lambda a, b: a <= b + 0.01)):
        other, why = ratio_of(name)
        verdict = None if g is None or other is None else met(g, other)
        line = (f"gtrace {label}: not checked ({g_why if g is None else why})" if verdict is None else
                f"gtrace {label}: {'met' if verdict else 'NOT met'} ({g:.3f}x against {other:.3f}x)")
        print(line)
        checks.append({"target": f"gtrace {label}", "met": verdict})
    return checks


PHASES = {"untraced": run_untraced, "gtrace": run_gtrace, "py-spy": run_pyspy,
          "torch-cpu": lambda a, w: run_torch_profiler(a, w, "cpu"),
          "torch-cpu-stack": lambda a, w: run_torch_profiler(a, w, "cpu_stack"),
          "viztracer": run_viztracer, "untraced-end": run_untraced}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="measured steps per phase (default 60)")
    ap.add_argument("--warmup", type=int, default=5, help="the job's warm-up steps before 'ready'")
    ap.add_argument("--settle", type=int, default=5, help="steps after warm-up before an in-process window")
    ap.add_argument("--port", type=int, default=29711, help="torchrun's --master-port")
    ap.add_argument("--viz-entries", type=int, default=20_000_000, help="viztracer's --tracer_entries")
    ap.add_argument("--quiet-wait", type=float, default=20, help="seconds to wait for other work to calm down before each phase")
    ap.add_argument("--retries", type=int, default=1, help="times to redo a phase whose window other work loaded")
    ap.add_argument("--phases", default=",".join(PHASES), help="comma-separated subset of " + ",".join(PHASES))
    ap.add_argument("--gtrace-args", default="", help="options added to gtrace attach's (to see what each costs)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--keep", help="keep the traces and logs in this directory")
    args = ap.parse_args()
    phases = args.phases.split(",")
    if set(phases) - set(PHASES) or not {"untraced", "untraced-end"} & set(phases):
        ap.error(f"--phases: a subset of {','.join(PHASES)} with untraced or untraced-end")

    info = machine()
    print(f"peers: {info['cpus']} CPUs ({info['cpu']}), kernel {info['kernel']}, torch {info['torch']}, "
          f"no GPU use (CPU job); {args.steps} measured steps per phase", flush=True)
    tmp = args.keep or tempfile.mkdtemp(prefix="gtrace-peers-")
    results = {}
    try:
        for name in PHASES:
            if name not in phases:
                continue
            for attempt in range(args.retries + 1):  # this machine is shared: redo a window others loaded
                busy = quiet(args.quiet_wait)
                print(f"peers: {name} ..." + (" again" if attempt else "")
                      + (f" (not quiet: {busy:.2f} CPUs busy)" if busy >= 0.2 else ""), flush=True)
                work = os.path.join(tmp, f"{name}.{attempt}" if attempt else name)
                shutil.rmtree(work, ignore_errors=True)
                try:
                    r = PHASES[name](args, work)
                except BenchError as e:
                    if name != "viztracer":  # viztracer may not cope with a multi-process job: its row says why
                        raise BenchError(f"{name}: {e}")
                    r = {"error": str(e)}
                if name not in results or r.get("others_cpus", 0) < results[name].get("others_cpus", 0):
                    results[name] = r  # the least disturbed window
                if results[name].get("others_cpus", 0) < OTHERS_MAX:
                    break
    except KeyboardInterrupt:
        print("peers: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the bench failed, not a target: one line, nonzero
        print(f"peers: error: {e if isinstance(e, BenchError) else repr(e)}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    base = [d for n in ("untraced", "untraced-end") if n in results for d in results[n]["durations_ms"]]
    baseline_ms = statistics.median(base)
    base_job_cpu = statistics.mean(results[n]["job_cpu_per_step"] for n in ("untraced", "untraced-end") if n in results)
    for name, r in results.items():
        if "error" in r:
            continue
        r["median_ms"] = statistics.median(r["durations_ms"])
        r["ratio"] = r["median_ms"] / baseline_ms
        r["bytes_per_step"] = r["bytes"] / max(1, r["covered_steps"])
        if r["tool_cpu_per_step"] is None and not name.startswith("untraced"):
            r["tool_cpu_per_step"] = r["job_cpu_per_step"] - base_job_cpu  # in-process: the job's extra CPU
        r.pop("tool_log", None)
    print()
    report(results, baseline_ms, base_job_cpu)
    checks = check_targets(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "steps": args.steps, "baseline_ms": baseline_ms, "phases": results,
                       "targets": checks}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
