#!/usr/bin/python3
"""Runs one declarative runtime case (tests/runtime/cases/*.toml): start the test programs,
run gtrace against them with real BPF, and check its exit code, messages and trace.
Case keys are documented in tests/runtime/README.md."""
import argparse
import collections
import json
import math
import os
import pwd
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

import command_runs
import flight_checks
import gpu_checks
import json_checks
import nvtx_checks
import trace_formats
from kernel_state import kill_tree, leftover_bpf_objects, process_tree

class Stream:
    """Collects a pipe's lines in the background and lets the caller wait for a pattern."""

    def __init__(self, pipe, echo_prefix):
        self.lines, self.cond = [], threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(pipe, echo_prefix), daemon=True)
        self.thread.start()

    def _read(self, pipe, prefix):
        for raw in pipe:
            line = raw.decode(errors="replace").rstrip("\n")
            print(f"{prefix}{line}", flush=True)
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def wait_for(self, pattern, timeout, count=1):
        """The match in the `count`-th line matching `pattern`, once there is one; None at the timeout."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                matches = [m for m in (re.search(pattern, line) for line in self.lines) if m]
                if len(matches) >= count:
                    return matches[count - 1]
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def text(self):
        self.thread.join(timeout=5)
        return "\n".join(self.lines)


def scaled(seconds):
    """A case's timeout, stretched on a slow machine (vmtests under emulation: GTRACE_TIMEOUT_SCALE=4)."""
    return seconds * float(os.environ.get("GTRACE_TIMEOUT_SCALE", "1"))


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check_bpf_available():
    reasons = []
    if os.geteuid() != 0:
        reasons.append("not running as root")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        reasons.append("kernel has no BTF")
    if reasons:
        print("cannot run BPF runtime test: " + ", ".join(reasons), flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)


def substitute(value, ctx):
    if isinstance(value, list):
        return [substitute(v, ctx) for v in value]
    if isinstance(value, dict):
        return {substitute(k, ctx): substitute(v, ctx) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    return re.sub(r"\{([a-z_]+(?::[a-z0-9_]+)?)\}", lambda m: str(ctx[m.group(1)]), value)


def free_port():
    """A TCP port nothing listens on now: cases run side by side, so none names a fixed one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_trace(path):
    """Any format, as the JSON writer's events; a .pftrace is checked for what trace_processor
    relies on, a JSON or Kineto file must be complete, valid JSON whatever stopped the capture."""
    if path.endswith(".pftrace"):
        trace = trace_formats.check_pftrace(path)
        print(f"ok: {path}: valid Perfetto trace ({len(trace['traceEvents'])} events)")
        return trace
    return trace_formats.load_trace(path)


def counts_from_output(lines):
    counts = {}
    for line in lines:
        idx = line.find("GTRACE_COUNTS ")
        if idx >= 0:
            record = json.loads(line[idx + len("GTRACE_COUNTS "):])
            per_pid = counts.setdefault(record["pid"], {})  # a process that execs prints once per image
            for api, n in record["calls"].items():
                per_pid[api] = per_pid.get(api, 0) + n
    return counts


def check_py_stacks(calls, program_lines):
    """Each GTRACE_PYSTACK line names a stack (innermost first) and how many calls were made
    from it: exactly that many calls must carry a py_stack starting with it, names and lines."""
    expected = [json.loads(line[line.find("GTRACE_PYSTACK ") + 15:]) for line in program_lines if "GTRACE_PYSTACK " in line]
    if not expected:
        fail("the program printed no GTRACE_PYSTACK")
    want = collections.Counter()  # records with the same stack (e.g. before and after an exec) add up
    for x in expected:
        want[tuple(x["stack"])] += x["count"]
    for x in expected:
        n = sum(1 for c in calls if c["args"].get("py_stack", [])[:len(x["stack"])] == x["stack"])
        x["count"] = want[tuple(x["stack"])]
        if n != x["count"]:
            sample = next((c["args"].get("py_stack") for c in calls if "py_stack" in c["args"]), None)
            fail(f"{n} calls carry the {x['thread']} stack, expected {x['count']}:\n  want {x['stack']}\n  e.g. {sample}")
        if "source" in x and not all(c["args"].get("source") == x["source"] for c in calls
                                     if c["args"].get("py_stack", [])[:len(x["stack"])] == x["stack"]):
            fail(f"calls from the {x['thread']} stack lack source {x['source']}")
        print(f"ok: {n} calls with the exact {x['thread']} Python stack ({len(x['stack'])} frames)")


def check_folded(path, hot):
    """Folded lines are "rank N;outer;...;inner COUNT": the hot function must be the innermost
    Python frame of at least min_share of each rank's samples."""
    total, in_hot = collections.Counter(), collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            total[frames[0]] += int(count)
            if frames[-1].startswith(hot["function"] + " ("):
                in_hot[frames[0]] += int(count)
    for rank in hot["ranks"]:
        key = f"rank {rank}"
        if total[key] < hot.get("min_samples", 1):
            fail(f"{key}: only {total[key]} samples")
        share = in_hot[key] / total[key]
        # A share measured from n samples varies by sqrt(p(1-p)/n): beside a CPU hog a rank gets a
        # third of the samples (126 seen), where 90% reads as 88% one run in five. Two standard
        # errors below min_share still says the function holds min_share of the time.
        p = hot["min_share"]
        floor = p - 2 * math.sqrt(p * (1 - p) / total[key])
        if share < floor:
            fail(f"{key}: {hot['function']} in {share:.1%} of {total[key]} samples, expected at least {p:.0%} "
                 f"(less two standard errors: {floor:.1%})")
        print(f"ok: {key}: {hot['function']} in {share:.1%} of {total[key]} samples")


def check_trace(trace, expect, program_lines):
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    calls = [e for e in events if e["ph"] == "X" and e.get("cat") == "cuda_api"]
    for e in calls:
        if e["dur"] < 0 or "ret" not in e["args"]:
            fail(f"malformed call event {e}")

    exclude = re.compile(expect["exclude_threads"]) if "exclude_threads" in expect else None
    if expect.get("counts") in ("exact_pids", "per_pid"):
        want = counts_from_output(program_lines)
        if not want:
            fail("the programs printed no GTRACE_COUNTS")
        got = collections.defaultdict(collections.Counter)
        for e in calls:
            if exclude and exclude.search(threads.get((e["pid"], e["tid"]), "")):
                continue
            got[e["pid"]][e["name"]] += 1
        for pid, per_api in want.items():
            if dict(got.get(pid, {})) != per_api:
                fail(f"pid {pid} ({names.get(pid)}): trace has {dict(got.get(pid, {}))}, program made {per_api}")
            print(f"ok: pid {pid}: exact counts {sum(per_api.values())} calls")
        extra = set(got) - set(want)
        if expect.get("counts") == "exact_pids" and extra:
            fail(f"calls from unexpected pids {extra}")
    if expect.get("counts") == "with_losses":
        made = sum(sum(c.values()) for c in counts_from_output(program_lines).values())
        other = trace["otherData"]
        lost = other["counters"]["lost_api_calls"] + other["counters"]["calls_without_entry_state"]
        if lost == 0:
            fail("expected lost events with this buffer size, none were counted")
        if len(calls) + lost != made:
            fail(f"{len(calls)} calls in the trace + {lost} lost != {made} calls made")
        if other["lost_events"] < lost:
            fail(f"otherData.lost_events {other['lost_events']} < {lost}")
        print(f"ok: {len(calls)} traced + {lost} lost = {made} made")

    if expect.get("py_stacks"):
        check_py_stacks(calls, program_lines)
    if expect.get("no_py_stacks"):
        with_stack = [c for c in calls if "py_stack" in c["args"]]
        if with_stack:
            fail(f"{len(with_stack)} calls carry Python frames, expected none: {with_stack[0]['args']['py_stack']}")
        print(f"ok: none of {len(calls)} calls carries Python frames")
    if expect.get("sources"):
        for line in program_lines:
            if "GTRACE_SOURCES " in line:
                record = json.loads(line[line.find("GTRACE_SOURCES ") + 15:])
                arg = record.get("arg", "source")  # or another argument naming a Python line (forward_source)
                got = collections.Counter(str(c["args"].get(arg, "")) for c in calls if c["pid"] == record["pid"]
                                          and c["name"] == record.get("api", c["name"]))
                if dict(got) != record["sources"]:
                    fail(f"pid {record['pid']}: {arg} {dict(got)}, expected {record['sources']}")
                print(f"ok: pid {record['pid']}: every call's {arg} is the line the program expects")

    if "agent_call_sources" in expect:  # calls the agent recorded carry stacks it walked in the process
        agent = [c for c in calls if c["args"].get("recorded_by") == "agent"]
        if not agent:
            fail("no call in the trace was recorded by the agent")
        bad = [c for c in agent if not re.search(expect["agent_call_sources"], c["args"].get("source", ""))]
        if bad:
            fail(f"{len(bad)} of {len(agent)} agent-recorded calls have no source matching /{expect['agent_call_sources']}/: "
                 f"{bad[0]['name']} {bad[0]['args']}")
        print(f"ok: {len(agent)} agent-recorded calls, each with a source matching /{expect['agent_call_sources']}/")

    for pattern in expect.get("process_names", []):
        if not any(re.search(pattern, n) for n in names.values()):
            fail(f"no process named like /{pattern}/ in {sorted(names.values())}")
    for pattern in expect.get("process_names_absent", []):
        if any(re.search(pattern, n) for n in names.values()):
            fail(f"a process is named like /{pattern}/: {[n for n in names.values() if re.search(pattern, n)]}")
    for pattern, n in expect.get("process_name_counts", {}).items():
        matching = [x for x in names.values() if re.search(pattern, x)]
        if len(matching) != n:
            fail(f"{len(matching)} processes named like /{pattern}/ ({matching}), expected {n}")
    for pattern, minimum in expect.get("thread_min_calls", {}).items():
        n = sum(1 for e in calls if re.search(pattern, threads.get((e["pid"], e["tid"]), "")))
        if n < minimum:
            fail(f"{n} calls on threads /{pattern}/, expected at least {minimum}")
    ranges = [e for e in events if e["ph"] == "X" and e.get("cat") == "torch_range"]
    for pattern, n in expect.get("range_counts", {}).items():
        matching = [r for r in ranges if re.search(pattern, r["name"])]
        if len(matching) != n:
            fail(f"{len(matching)} torch ranges named like /{pattern}/, expected {n}: {sorted({r['name'] for r in ranges})}")
        print(f"ok: {n} torch ranges named like /{pattern}/")
    for kernel in expect.get("kernels", []):
        if not any(e["args"].get("kernel") == kernel for e in calls):
            fail(f"no launch of kernel {kernel!r}; saw {sorted({e['args'].get('kernel') for e in calls if 'kernel' in e['args']})}")
    for name, args in expect.get("call_args", {}).items():
        if not any(e["name"] == name and all(e["args"].get(k) == v for k, v in args.items()) for e in calls):
            fail(f"no {name} call with args {args}")
    collectives = [e for e in events if e["ph"] == "X" and e.get("cat") == "collective"]
    for name, args in expect.get("collective_args", {}).items():
        for want in args if isinstance(args, list) else [args]:
            if not any(e["name"] == name and all(e["args"].get(k) == v for k, v in want.items()) for e in collectives):
                seen = [e["args"] for e in collectives if e["name"] == name][:3]
                fail(f"no {name} collective slice with args {want}; saw {seen}")
        print(f"ok: {name} slices with the expected args")
    other = trace.get("otherData", {})
    for key, value in expect.get("other_data", {}).items():  # "a.b" looks inside otherData.a
        got = other
        for part in key.split("."):
            got = got.get(part) if isinstance(got, dict) else None
        if got != value:
            fail(f"otherData.{key} is {got!r}, expected {value!r}")
    for key, pattern in expect.get("other_data_match", {}).items():  # a regex on the value's text
        got = other
        for part in key.split("."):
            got = got.get(part) if isinstance(got, dict) else None
        if got is None or not re.search(pattern, str(got)):
            fail(f"otherData.{key} is {got!r}, expected to match /{pattern}/")
    if "stop_reason" in expect and not re.search(expect["stop_reason"], other.get("stop_reason", "")):
        fail(f"stop_reason {other.get('stop_reason')!r} does not match /{expect['stop_reason']}/")
    if "lost_events" not in other or "counters" not in other:
        fail("trace metadata lacks the loss counters")


def run_gtrace(gtrace, g, ctx, tmp):
    """Runs one gtrace command ([gtrace] or a [[then]] step); returns its exit code, stderr,
    stdout and pid."""
    cmd = [gtrace] + substitute(g["args"], ctx)
    if g.get("user"):
        cmd = ["setpriv", f"--reuid={g['user']}", f"--regid={g['user']}", "--clear-groups",
               "--inh-caps=-all"] + cmd
    env = dict(os.environ, **substitute(g.get("env", {}), ctx))
    mask = int(g["umask"], 8) if "umask" in g else None
    print("run:", " ".join(cmd), f"(umask {g['umask']})" if mask is not None else "", flush=True)
    nofile = g.get("nofile")  # [soft, hard] descriptor limits gtrace starts with

    def preexec():
        if mask is not None:
            os.umask(mask)
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, tuple(nofile))

    gp = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp,
                          preexec_fn=preexec if mask is not None or nofile else None)
    gerr = Stream(gp.stderr, "[gtrace] ")
    gout = Stream(gp.stdout, "[gtrace:out] ")
    if g.get("on_attached"):
        pattern, count = g.get("attached_pattern", r"attached to PID"), g.get("attached_count", 1)
        if not gerr.wait_for(pattern, scaled(g.get("timeout", 120)), count):
            gp.kill()
            fail(f"gtrace never printed /{pattern}/" + (f" {count} times" if count > 1 else ""))
        for action in substitute(g["on_attached"], ctx):
            run_action(action)
    # on_stderr: [{pattern, count, actions}]: actions once gtrace printed the count-th line
    # matching pattern (an ordering — "this is ready" — where a case would otherwise sleep). A
    # pattern never printed fails the case once gtrace has ended.
    hooks_done = []
    for hook in g.get("on_stderr", []):
        def later(hook=hook):
            if gerr.wait_for(hook["pattern"], scaled(g.get("timeout", 120)), hook.get("count", 1)):
                for action in substitute(hook["actions"], ctx):
                    run_action(action)
                hooks_done.append(hook["pattern"])
        threading.Thread(target=later, daemon=True).start()
    if "signal_after" in g:
        time.sleep(g["signal_after"])
        gp.send_signal(getattr(signal, "SIG" + g.get("signal", "INT")))
    try:
        rc = gp.wait(timeout=scaled(g.get("timeout", 120)))
    except subprocess.TimeoutExpired:
        gp.kill()
        fail("gtrace did not stop in time")
    err_text = gerr.text()
    time.sleep(0.1)  # a hook whose line came last runs its actions
    for hook in g.get("on_stderr", []):
        if hook["pattern"] not in hooks_done:
            fail(f"gtrace never printed /{hook['pattern']}/" + (f" {hook['count']} times" if hook.get("count", 1) > 1 else "") +
                 " (on_stderr)")
    return rc, err_text, gout.text(), gp.pid


def stop_programs(programs):
    for p in programs:
        if p.poll() is None:
            kill_tree(p.pid)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def check_files(expect):
    """Checks on the files a run left: contents, modes, owners, JSON validity."""
    for path, text in expect.get("file_contents", {}).items():
        with open(path) as f:
            got = f.read()
        if got != text:
            fail(f"{path} holds {got[:200]!r}, expected {text!r}")
    for path, other in expect.get("files_identical", {}).items():
        with open(path, "rb") as a, open(other, "rb") as b:
            if a.read() != b.read():
                fail(f"{path} differs from {other}")
    for path in expect.get("files_present", []):
        if not os.path.isfile(path):
            fail(f"{path} is missing")
    for path, mode in expect.get("file_modes", {}).items():
        got = os.lstat(path).st_mode & 0o7777
        if got != int(mode, 8):
            fail(f"{path} has mode {got:04o}, expected {mode}")
    for path, user in expect.get("file_owners", {}).items():
        st = os.lstat(path)
        want = pwd.getpwnam(user)
        if (st.st_uid, st.st_gid) != (want.pw_uid, want.pw_gid):
            fail(f"{path} is owned by {st.st_uid}:{st.st_gid}, expected {user} ({want.pw_uid}:{want.pw_gid})")
    for path in expect.get("json_files", []):
        with open(path) as f:
            json.load(f)
    if expect.get("file_contents") or expect.get("file_modes") or expect.get("file_owners") or expect.get("json_files"):
        print("ok: files as expected")


def check_run(expect, rc, err_text, out_text, program_lines):
    """The [expect] checks of one gtrace run (see tests/runtime/README.md)."""
    if rc != expect.get("exit_code", 0):
        fail(f"gtrace exited {rc}, expected {expect.get('exit_code', 0)}")
    for pattern in expect.get("stderr", []):
        if not re.search(pattern, err_text):
            fail(f"stderr does not match /{pattern}/")
    for pattern in expect.get("stderr_absent", []):
        if re.search(pattern, err_text):
            fail(f"stderr matches /{pattern}/, it must not")
    for pattern in expect.get("stdout", []):
        if not re.search(pattern, out_text):
            # CI logs keep a test's head and tail: the lines that did not match go with the verdict.
            tail = "\n    ".join(out_text.rstrip().splitlines()[-8:])
            fail(f"stdout does not match /{pattern}/; its last lines:\n    {tail}")
    for pattern in expect.get("stdout_absent", []):
        if re.search(pattern, out_text):
            fail(f"stdout matches /{pattern}/, it must not")
    if "stderr_lines" in expect:
        n = len([x for x in err_text.splitlines() if x.strip()])
        if n != expect["stderr_lines"]:
            fail(f"stderr has {n} lines, expected {expect['stderr_lines']}")
    for path in expect.get("files_absent", []):
        if os.path.lexists(path):
            fail(f"{path} exists but gtrace should not have written it")
    for d, allowed in expect.get("dir_contents", {}).items():
        present = sorted(os.listdir(d))
        if present != sorted(allowed):
            fail(f"{d} holds {present}, expected {sorted(allowed)} (no half-written files)")
    check_files(expect)
    for pattern in expect.get("program_output", []):  # a line the programs printed
        if not any(re.search(pattern, line) for line in program_lines):
            fail(f"no program printed a line matching /{pattern}/")
    json_checks.check_json_files(expect, program_lines)
    if "trace" in expect:
        check_trace(load_trace(expect["trace"]), expect, program_lines)
    if "gpu_truth" in expect:
        gpu_checks.check_gpu(load_trace(expect["trace"]), expect)
    if "flight" in expect:
        flight_checks.check_flight(expect["flight"], load_trace)
    if "nvtx" in expect:
        # record: the command is gtrace's child, and prints on gtrace's stdout
        nvtx_checks.check_nvtx(load_trace(expect["trace"]), expect["nvtx"], program_lines + out_text.splitlines())
    if expect.get("dump_blocks"):
        for line in program_lines:
            if "GTRACE_BLOCK " in line:
                block = json.loads(line[line.find("GTRACE_BLOCK ") + 13:])
                want = f"rank {block['rank']}: "
                got = [x for x in out_text.splitlines() if x.startswith(want)]
                if len(got) != 1 or block["frame"] not in got[0]:
                    fail(f"dump line for rank {block['rank']} is {got}, expected it to name {block['frame']}")
                print(f"ok: {got[0]}")
    if "folded_hot" in expect:
        check_folded(expect["folded"], expect["folded_hot"])
    if expect.get("no_leftover_bpf", True):
        left = leftover_bpf_objects()
        if left:
            fail(f"BPF objects left in the kernel after gtrace exited: {left}")
    command_runs.check_pid_files(expect)
    command_runs.check_file_bytes(expect)


def own_state_mounted():
    """Whether /run/gtrace is a test's own empty tmpfs (tests/runtime/own_state.sh mounts it)."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == "/run/gtrace" and "gtrace-test-state" in line.split(" - ", 1)[-1] for line in f)


def main():
    # Run by hand as by ctest: in a state directory of its own, never reading the entries other
    # captures on this machine left in /run/gtrace (a kill -9 elsewhere adds a line to stderr).
    if os.geteuid() == 0 and not own_state_mounted():
        own_state = os.path.join(os.path.dirname(os.path.abspath(__file__)), "own_state.sh")
        os.execv("/bin/sh", ["sh", own_state, sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--gtrace", required=True)
    ap.add_argument("--programs", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--gpusim", required=True)
    opts = ap.parse_args()
    with open(opts.case, "rb") as f:
        case = tomllib.load(f)
    print(f"case: {os.path.basename(opts.case)}: {case.get('description', '')}", flush=True)
    if case.get("needs_bpf", True):
        check_bpf_available()

    if "interpreter" in case:  # e.g. a pyenv CPython that may not be installed here
        import glob
        found = sorted(glob.glob(case["interpreter"]))
        if not found:  # a test that cannot run fails, unless skips were asked for
            print(f"cannot run: no interpreter matches {case['interpreter']} on this machine", flush=True)
            sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    # `torch = ["1.13", "2"]`: the whole case once per PyTorch, {python} the interpreter that
    # has it: Debian's (torch 1.13) or the project's venv (pip torch 2.x, scripts/setup.sh).
    # `formats = [...]`: the whole case once per trace format, {format} and {ext} naming it.
    for torch in case.get("torch", [None]):
        if torch:
            python = TORCH_PYTHONS[torch](opts.source)
            if not os.path.exists(python):
                print(f"cannot run: no {python} for torch {torch}; scripts/setup.sh makes it", flush=True)
                sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
            print(f"torch: {torch} ({python})", flush=True)
        for fmt in case.get("formats", [None]):
            if fmt:
                print(f"format: {fmt}", flush=True)
            run_once(case, opts, found[-1] if "interpreter" in case else None, fmt, torch)
    print("PASS", flush=True)


TORCH_PYTHONS = {"1.13": lambda source: "/usr/bin/python3", "2": lambda source: os.path.join(source, ".venv", "bin", "python")}


FORMAT_EXTENSIONS = {"json": ".json", "pftrace": ".pftrace", "kineto": ".kineto"}


def run_once(case, opts, interpreter, fmt, torch=None):
    tmp = tempfile.mkdtemp(prefix="gtrace-case-")
    nobody = pwd.getpwnam("nobody")
    ctx = {"tmp": tmp, "programs": opts.programs, "stubs": opts.stubs, "source": opts.source,
           "gtrace": opts.gtrace, "python": "/usr/bin/python3", "gpusim": opts.gpusim,
           "uid:nobody": nobody.pw_uid, "gid:nobody": nobody.pw_gid, "pid:runner": os.getpid(), "port": free_port()}
    if fmt:  # {partial}: what a killed capture leaves beside its output (Kineto: the directory itself)
        ctx["format"], ctx["ext"], ctx["partial"] = fmt, FORMAT_EXTENSIONS[fmt], "" if fmt == "kineto" else ".partial"
    if interpreter:
        ctx["interpreter"] = interpreter
    if torch:  # {python} runs this PyTorch; {torch} names it ("1.13", "2")
        ctx["python"], ctx["torch"] = TORCH_PYTHONS[torch](opts.source), torch
    for d in case.get("make_dirs", []):
        os.makedirs(substitute(d, ctx), exist_ok=True)
    for d, user in case.get("user_dirs", {}).items():  # a directory of that user's, reachable by them
        d = substitute(d, ctx)
        os.makedirs(d, mode=0o700)
        owner = pwd.getpwnam(user)
        os.chown(d, owner.pw_uid, owner.pw_gid)
        os.chmod(tmp, 0o711)
    for src, dst in case.get("copy_files", {}).items():
        dst = substitute(dst, ctx)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(substitute(src, ctx), dst)
    for path in case.get("make_files", []):
        with open(substitute(path, ctx), "w") as f:
            f.write("existing\n")
    for link, target in case.get("make_links", {}).items():
        os.symlink(substitute(target, ctx), substitute(link, ctx))
    for path in case.get("make_fifos", []):
        os.mkfifo(substitute(path, ctx))

    programs, streams, mounted = [], [], []
    try:
        for fs in case.get("tmpfs", []):  # a small file system, to fill
            d = substitute(fs["dir"], ctx)
            os.makedirs(d, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={fs['size']},mode=0755", "tmpfs", d], check=True)
            mounted.append(d)
        for prog in case.get("program", []):
            env = dict(os.environ, **substitute(prog.get("env", {}), ctx))
            p = subprocess.Popen(substitute(prog["command"], ctx), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=env, start_new_session=True)
            s = Stream(p.stdout, f"[{prog['name']}] ")
            programs.append(p)
            streams.append(s)
            ready = prog.get("ready", "ready")
            for pattern in ready if isinstance(ready, list) else [ready]:
                if not s.wait_for(pattern, scaled(prog.get("ready_timeout", 90))):
                    fail(f"program {prog['name']} never printed /{pattern}/")
            ctx[f"pid:{prog['name']}"] = p.pid
            for action in prog.get("after_ready", []):
                run_action(substitute(action, ctx))

        command_runs.run_all(substitute(case.get("runs", []), ctx), opts.gtrace, tmp)
        if "gtrace" not in case:  # runs only
            expect = substitute(case.get("expect", {}), ctx)
            command_runs.check_pid_files(expect)
            command_runs.check_file_bytes(expect)
            if case.get("needs_bpf", True) and leftover_bpf_objects():
                fail(f"BPF objects left in the kernel after gtrace exited: {leftover_bpf_objects()}")
            print("PASS", flush=True)
            return
        g = case["gtrace"]
        rc, err_text, out_text, gpid = run_gtrace(opts.gtrace, g, ctx, tmp)
        ctx["pid:gtrace"] = gpid
        thens = case.get("then", [])

        expect = case.get("expect", {})
        if expect.get("programs_alive"):
            for i, p in enumerate(programs):
                if p.poll() is not None:
                    fail(f"program {i} exited {p.returncode} while gtrace ran; it must keep running")
            print("ok: the traced programs kept running")
        if expect.get("no_stopped_processes"):
            for p in programs:
                for pid in process_tree(p.pid):
                    for tid in os.listdir(f"/proc/{pid}/task"):
                        with open(f"/proc/{pid}/task/{tid}/stat") as f:
                            state = f.read().rpartition(")")[2].split()[0]
                        if state in ("t", "T"):
                            fail(f"thread {tid} of pid {pid} left stopped (state {state})")
            print("ok: no thread of the job is stopped")
        if not thens:  # later runs may need the programs
            if expect.get("counts") or expect.get("program_exit_codes"):  # the programs run to their end
                for p in programs:
                    try:
                        p.wait(timeout=scaled(case.get("program_timeout", 60)))
                    except subprocess.TimeoutExpired:
                        pass
            stop_programs(programs)
            for s in streams:
                s.text()
        program_lines = [line for s in streams for line in s.lines]

        check_run(substitute(expect, ctx), rc, err_text, out_text, program_lines)
        for i, step in enumerate(thens):
            print(f"then #{i + 1}: {step.get('description', '')}", flush=True)
            rc, err_text, out_text, _ = run_gtrace(opts.gtrace, step, ctx, tmp)
            check_run(substitute(step.get("expect", {}), ctx), rc, err_text, out_text, program_lines)
        for i, code in enumerate(expect.get("program_exit_codes", [])):
            if programs[i].returncode != code:
                fail(f"program {i} exited {programs[i].returncode}, expected {code}")
    finally:
        for p in programs:
            if p.poll() is None:
                kill_tree(p.pid)
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for mount in reversed(mounted):
            if subprocess.run(["umount", mount]).returncode != 0:
                subprocess.run(["umount", "-l", mount])
        shutil.rmtree(tmp, ignore_errors=True)


def run_action(action):
    kind, _, arg = action.partition(":")
    if kind == "touch":
        open(arg, "a").close()
    elif kind == "sleep":
        time.sleep(float(arg))
    else:
        fail(f"unknown action {action}")


if __name__ == "__main__":
    main()
