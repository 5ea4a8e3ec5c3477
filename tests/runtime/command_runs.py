"""Extra gtrace runs of a runtime case (`[[runs]]`), and checks on what a case leaves behind:
processes (`pid_file_alive`, `pid_file_gone`) and files' bytes (`files_lack`, `files_contain`).
Keys are documented in tests/runtime/README.md."""
import os
import re
import signal
import subprocess
import time


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    raise SystemExit(1)


def run_process(cmd, env, timeout, cwd):
    """Runs cmd; returns (exit code or 124 on timeout, peak RSS in MiB, stderr, stdout)."""
    with open(os.path.join(cwd, ".run.err"), "w+b") as err, open(os.path.join(cwd, ".run.out"), "w+b") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, env=dict(os.environ, **env))
        deadline = time.time() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)  # the rusage of this child alone
            if pid:
                break
            if time.time() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                status = None
                break
            time.sleep(0.02)
        p.returncode = 0  # reaped here, not by Popen
        code = 124 if status is None else os.waitstatus_to_exitcode(status)
        err.seek(0), out.seek(0)
        result = code, usage.ru_maxrss / 1024, err.read().decode(errors="replace"), out.read().decode(errors="replace")
    os.unlink(os.path.join(cwd, ".run.err")), os.unlink(os.path.join(cwd, ".run.out"))
    return result


def check_outcome(what, code, err, out, expect):
    """`exit_code`, `stderr` and `stdout` patterns, `stderr_lines` (non-blank)."""
    if code != expect.get("exit_code", 0):
        fail(f"{what} exited {code}, expected {expect.get('exit_code', 0)}")
    for pattern in expect.get("stderr", []):
        if not re.search(pattern, err):
            fail(f"{what}: stderr does not match /{pattern}/")
    for pattern in expect.get("stdout", []):
        if not re.search(pattern, out):
            fail(f"{what}: stdout does not match /{pattern}/")
    if "stderr_lines" in expect:
        n = len([x for x in err.splitlines() if x.strip()])
        if n != expect["stderr_lines"]:
            fail(f"{what}: stderr has {n} lines, expected {expect['stderr_lines']}")


def run_one(i, run, gtrace, cwd):
    """One gtrace command: `args` (after the gtrace binary) or a whole `command`, with `command_env`
    added to the environment; its exit code, stderr lines and patterns, and the peak memory of
    the process (`max_rss_mib`)."""
    cmd = run["command"] if "command" in run else [gtrace] + run["args"]
    print(f"run {i}: {' '.join(cmd)}", flush=True)
    started = time.time()
    code, rss, err, out = run_process(cmd, run.get("command_env", {}), run.get("timeout", 60), cwd)
    for line in err.splitlines():
        print(f"  [gtrace] {line}", flush=True)
    if code == 124:
        fail(f"run {i} did not end within {run.get('timeout', 60)} s")
    check_outcome(f"run {i}: gtrace", code, err, out, run)
    if "max_rss_mib" in run and rss > run["max_rss_mib"]:
        fail(f"run {i}: gtrace used {rss:.0f} MiB, expected at most {run['max_rss_mib']}")
    for path in run.get("files_exist", []):
        if not os.path.exists(path):
            fail(f"run {i}: {path} was not written")
    print(f"ok: run {i}: exit {code}, {rss:.0f} MiB at most, {time.time() - started:.1f} s", flush=True)


def run_all(runs, gtrace, cwd):
    for i, run in enumerate(runs):
        run_one(i, run, gtrace, cwd)


def read_pid(path):
    with open(path) as f:
        return int(f.read().strip())


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def check_pid_files(expect):
    """`pid_file_alive`: the process whose PID the file holds still runs (then it is killed);
    `pid_file_gone`: it has exited."""
    for path in expect.get("pid_file_alive", []):
        pid = read_pid(path)
        if not alive(pid):
            fail(f"process {pid} ({path}) is gone, expected it to keep running")
        os.kill(pid, signal.SIGKILL)
        print(f"ok: process {pid} kept running after gtrace returned")
    for path in expect.get("pid_file_gone", []):
        pid = read_pid(path)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            fail(f"process {pid} ({path}) still runs, expected it stopped")
        print(f"ok: process {pid} was stopped")


def check_file_bytes(expect):
    """`files_lack` / `files_contain` {path = text}: the file's raw bytes (whatever the format)."""
    for path, text in expect.get("files_lack", {}).items():
        with open(path, "rb") as f:
            if text.encode() in f.read():
                fail(f"{path} contains {text!r}")
        print(f"ok: {path} does not contain {text!r}")
    for path, text in expect.get("files_contain", {}).items():
        with open(path, "rb") as f:
            if text.encode() not in f.read():
                fail(f"{path} does not contain {text!r}")
        print(f"ok: {path} contains {text!r}")
