#!/usr/bin/python3
"""GPU agent life-cycle tests with real processes, real ptrace and real BPF (GPU simulator):

  cycles  100 load/start/detach cycles of the agent into a busy 8-thread process: no hang, no
          crash, and the process's own output (deterministic hashes, no failed call, no bad
          round of blocking system calls) is what it is without gtrace.
  record  `gtrace record -- CMD` and `gtrace attach` at the start of the same program give the
          same trace content: the same calls, the same GPU work (names, grids, sizes, streams,
          durations), every piece of it linked.
  kill9   gtrace killed with SIGKILL mid-capture and mid-injection (a thread stopped inside
          the borrowed dlopen call): the target keeps running, its agent goes dormant within
          a second (at all, within the 20 s waited, where /proc/pressure/cpu says the CPUs were
          contended meanwhile), nothing stays attached or stopped, and a later attach reuses
          the agent.

Every wait and bound here is stretched by GTRACE_TIMEOUT_SCALE (tests/runtime/README.md).

Usage: gpu_agent_lifecycle.py cycles|record|kill9 --build BUILD_DIR"""
import argparse
import atexit
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


STARTED = []  # every process this test started: killed on the way out, pass or fail


def kill_started():
    for p in STARTED:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(kill_started)


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


class Workload:
    """gpu_steps against the simulator, with busy threads, until its stop file exists."""

    def __init__(self, build, tmp, name, threads=4, busy=4):
        self.stop = os.path.join(tmp, f"stop-{name}")
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "gpusim"))
        self.p = subprocess.Popen([os.path.join(build, "programs", "gpu_steps"), "--until-file", self.stop, "--threads",
                                   str(threads), "--busy-threads", str(busy), "--step-sleep-ms", "2"],
                                  stdout=subprocess.PIPE, text=True, env=env)
        STARTED.append(self.p)
        if not self.p.stdout.readline().startswith("ready"):
            fail("gpu_steps did not start")
        self.pid = self.p.pid

    def finish(self):
        open(self.stop, "w").close()
        out, _ = self.p.communicate(timeout=60)
        line = next((x for x in out.splitlines() if x.startswith("GTRACE_GPU ")), None)
        if self.p.returncode != 0 or not line:
            fail(f"workload {self.pid} exited {self.p.returncode}: {out}")
        return json.loads(line[len("GTRACE_GPU "):])


def reference_hashes(build, busy):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "gpusim"))
    out = subprocess.run([os.path.join(build, "programs", "gpu_steps"), "--steps", "1", "--busy-threads", str(busy)],
                         capture_output=True, text=True, env=env, timeout=60).stdout
    return json.loads(out.split("GTRACE_GPU ", 1)[1])["busy"]


def threads_of(pid):
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def check_released(pid):
    for tid in threads_of(pid):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        if status["TracerPid"].strip() != "0":
            fail(f"thread {tid} of {pid} is still traced by {status['TracerPid'].strip()}")
        if status["State"].strip()[0] in "tT":
            fail(f"thread {tid} of {pid} is left stopped")


def agent_ring_fds(pid):
    """The agent's ring memfds open in pid: one while a session is on, none once it is dormant."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:gtrace-ring"):
                found.append(fd)
        except OSError:
            pass
    return found


def cycles(build):
    ref = reference_hashes(build, 4)
    with tempfile.TemporaryDirectory() as tmp:
        w = Workload(build, tmp, "cycles", threads=4, busy=4)  # 8 threads besides main
        t0 = time.time()
        r = subprocess.run([os.path.join(build, "programs", "agent_cycles"), str(w.pid),
                            os.path.join(build, "libgtrace_agent.so"), "100"], capture_output=True, text=True, timeout=600)
        print(r.stdout.strip(), r.stderr.strip(), f"({time.time() - t0:.1f} s)", flush=True)
        if r.returncode != 0 or "cycles ok 100" not in r.stdout:
            fail(f"agent_cycles failed: {r.stderr.strip()}")
        check_released(w.pid)
        out = w.finish()
    if out["busy"] != ref or out["bad_rounds"] or out["failed"]:
        fail(f"the workload's output changed: {out} (reference hashes {ref})")
    print(f"ok: 100 cycles, output unchanged: {out}")


def start_gtrace(build, pid, tmp, name, env=None):
    return started(subprocess.Popen([os.path.join(build, "gtrace"), "attach", "--pid", str(pid), "-o",
                             os.path.join(tmp, f"{name}.json"), "--sample-hz", "0"],
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {}))))


def started(p):
    STARTED.append(p)
    return p


def wait_for_line(proc, pattern, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        print("[gtrace]", line.rstrip(), flush=True)
        if pattern in line:
            return True
    return False


def cpu_pressure_us():
    """/proc/pressure/cpu's "some" total (µs a runnable task waited for a CPU); None without PSI."""
    try:
        line = open("/proc/pressure/cpu").readline()
        return int(line.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def cpu_contended(before_us, seconds):
    """The share of the last `seconds` in which a runnable task waited for a CPU (0 without PSI)."""
    after_us = cpu_pressure_us()
    if before_us is None or after_us is None or seconds <= 0:
        return 0.0
    return min(1.0, (after_us - before_us) / 1e6 / seconds)


SCALE = float(os.environ.get("GTRACE_TIMEOUT_SCALE", "1"))


def wait_until(cond, timeout, what):
    deadline = time.time() + timeout * SCALE
    while time.time() < deadline:
        if cond():
            return time.time()
        time.sleep(0.02)
    fail(what)


def kill9(build):
    ref = reference_hashes(build, 2)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. mid-capture
        w = Workload(build, tmp, "capture", threads=2, busy=2)
        g = start_gtrace(build, w.pid, tmp, "capture")
        if not wait_for_line(g, "GPU agent active"):
            fail("the agent never became active")
        rings = agent_ring_fds(w.pid)
        if len(rings) != 1:
            fail(f"expected one ring memfd in the target, found {rings}")
        pressure_before = cpu_pressure_us()
        g.kill()
        killed = time.time()
        # Not waiting for gtrace first: a killed gtrace takes seconds to finish exiting.
        gone = wait_until(lambda: not agent_ring_fds(w.pid), 20, "the agent did not notice that gtrace died")
        contended = cpu_contended(pressure_before, gone - killed)
        g.wait()
        print(f"ok: agent went dormant {gone - killed:.2f} s after gtrace was killed"
              f"{' (CPUs contended meanwhile: ' + format(contended, '.0%') + ' by /proc/pressure/cpu)' if contended else ''}", flush=True)
        # The agent looks every 200 ms (kWatchMs): within 1 s, stretched by GTRACE_TIMEOUT_SCALE,
        # unless runnable tasks waited for a CPU a tenth of that time or more: then the 20 s waited.
        bound = 1.0 * SCALE
        if gone - killed > bound and contended < 0.1:
            fail(f"the agent took {gone - killed:.2f} s (more than {bound:g} s) to go dormant on an uncontended host")
        check_released(w.pid)

        # 2. mid-injection: gtrace dies while a thread is stopped inside the borrowed dlopen call
        w2 = Workload(build, tmp, "inject", threads=2, busy=2)
        g = start_gtrace(build, w2.pid, tmp, "inject", {"GTRACE_TEST_HOLD_BORROWED_MS": "4000"})
        stopped = lambda: any(open(f"/proc/{w2.pid}/task/{t}/stat").read().rpartition(")")[2].split()[0] == "t"
                              for t in threads_of(w2.pid))
        wait_until(stopped, 60, "gtrace never stopped a thread to load the agent")
        g.kill()
        g.wait()
        time.sleep(1.5)
        if w2.p.poll() is not None:
            fail(f"the target died after gtrace was killed mid-injection (exit {w2.p.returncode})")
        check_released(w2.pid)
        maps = open(f"/proc/{w2.pid}/maps").read()
        print(f"ok: target alive after a kill mid-injection; agent loaded: {'libgtrace_agent' in maps}", flush=True)

        # 3. a later attach reuses the (dormant) agents
        for wl in (w, w2):
            g = start_gtrace(build, wl.pid, tmp, f"again-{wl.pid}")
            if not wait_for_line(g, "GPU agent active"):
                fail(f"a later attach to {wl.pid} got no active agent")
            time.sleep(1 * SCALE)  # the workload launches a kernel every 2 ms
            g.send_signal(signal.SIGINT)
            rest = g.communicate(timeout=120)[1]
            print(rest, flush=True)
            if "1 agents (1 active" not in rest or g.returncode != 0:
                fail(f"the later capture of {wl.pid} did not get GPU data")
            trace = json.load(open(os.path.join(tmp, f"again-{wl.pid}.json")))
            if not any(e.get("cat") == "kernel" for e in trace["traceEvents"]):
                fail("the later capture has no kernels")
            check_released(wl.pid)
        for wl in (w, w2):
            out = wl.finish()
            if out["busy"] != ref or out["bad_rounds"] or out["failed"]:
                fail(f"workload {wl.pid} output changed: {out} (reference {ref})")
        print("ok: both targets finished with unchanged output")


def trace_content(path):
    """What a trace says, without pids, tids and times."""
    events = json.load(open(path))["traceEvents"]
    calls = collections.Counter(e["name"] for e in events if e.get("cat") == "cuda_api")
    gpu = collections.Counter((e["cat"], e["name"], str(e["args"].get("grid")), e["args"].get("bytes"), e["args"]["stream"],
                               round(e["dur"])) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    flows = sum(1 for e in events if e.get("cat") == "ac2g" and e["ph"] == "f")
    return calls, gpu, flows


def record_vs_attach(build):
    # One thread: which thread gets which grid and stream must not depend on scheduling.
    program = [os.path.join(build, "programs", "gpu_steps"), "--steps", "40", "--kernels", "5", "--threads", "1"]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "gpusim"))
    gtrace = os.path.join(build, "gtrace")
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([gtrace, "record", "-q", "-o", f"{tmp}/record.json", "--sample-hz", "0", "--"] + program,
                           env=env, timeout=300)
        if r.returncode != 0:
            fail(f"gtrace record exited {r.returncode}")
        go = f"{tmp}/go"
        w = started(subprocess.Popen(program + ["--go-file", go], stdout=subprocess.PIPE, text=True, env=env))
        if not w.stdout.readline().startswith("ready"):
            fail("gpu_steps did not start")
        g = start_gtrace(build, w.pid, tmp, "attach")
        if not wait_for_line(g, "GPU agent active"):
            fail("the agent never became active")
        open(go, "w").close()  # the program's CUDA work starts now
        g.communicate(timeout=300)
        w.wait(timeout=60)
        rec, att = trace_content(f"{tmp}/record.json"), trace_content(f"{tmp}/attach.json")
    for what, a, b in zip(("CUDA calls", "GPU work", "flows"), rec, att):
        if a != b:
            only = lambda x, y: x if not isinstance(x, dict) else sorted((x - y).items())[:5]
            fail(f"{what} differ between record and attach: only in record {only(a, b)}, only in attach {only(b, a)}")
    print(f"ok: record and attach-at-start agree: {sum(rec[0].values())} calls, {sum(rec[1].values())} GPU ops, {rec[2]} flows")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test", choices=["cycles", "record", "kill9"])
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("cannot run: needs root (ptrace and BPF)", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    {"cycles": cycles, "record": record_vs_attach, "kill9": kill9}[a.test](a.build)
    print("PASS")


if __name__ == "__main__":
    main()
