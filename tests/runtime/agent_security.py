#!/usr/bin/python3
"""The dormant agent cannot be used by another local user (real processes, ptrace, BPF; GPU simulator).

A root process that gtrace traced earlier keeps a dormant agent. As `nobody`, this test then
plays the attack that once worked — a fake /dev/shm/gtrace-* directory with a request file and a
symlink where the agent created its ring, aimed at a root-only file — and tries the agent's real
channel too: writing its mailbox (process_vm_writev) and taking its fds (pidfd_getfd). Then it
checks that the victim file is untouched, that nothing was created as root, that the agent
stayed dormant, and that a real gtrace still gets the GPU side afterwards.

Usage: agent_security.py --build BUILD_DIR"""
import argparse
import ctypes
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

NOBODY = pwd.getpwnam("nobody")
STARTED = []


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    for p in STARTED:
        if p.poll() is None:
            p.kill()
    sys.exit(1)


def ring_fds(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:gtrace-ring"):
                out.append(fd)
        except OSError:
            pass
    return out


def capture(build, pid, tmp, name, seconds):
    """A capture that ends `seconds` after its agent said it is active (not after a fixed time:
    beside CPU hogs the agent took longer than a 1.5 s capture to answer)."""
    out = os.path.join(tmp, f"{name}.json")
    g = subprocess.Popen([os.path.join(build, "gtrace"), "attach", "--pid", str(pid), "-o", out, "--sample-hz", "0"],
                         stderr=subprocess.PIPE, text=True)
    STARTED.append(g)
    lines, active = [], threading.Event()

    def read():  # on a thread: a capture whose agent never answers must fail, not hang
        for line in g.stderr:
            lines.append(line)
            if "GPU agent active in pid" in line:
                active.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if active.wait(timeout=90):
        time.sleep(seconds)
    g.send_signal(signal.SIGINT)
    try:
        g.wait(timeout=120)
    except subprocess.TimeoutExpired:
        fail(f"the {name} capture did not end on SIGINT")
    reader.join(timeout=10)
    printed = "".join(lines)
    print(printed, flush=True)
    if g.returncode != 0 or "1 agents (1 active" not in printed:
        fail(f"the {name} capture got no active agent (exit {g.returncode})")


def mailbox_address(pid, agent):
    """The runtime address of gtrace_agent_mailbox in pid (as gtrace computes it)."""
    syms = subprocess.run(["readelf", "-Ws", agent], capture_output=True, text=True).stdout
    vaddr = next(int(l.split()[1], 16) for l in syms.splitlines() if l.split()[-1:] == ["gtrace_agent_mailbox"])
    segs = subprocess.run(["readelf", "-Wl", agent], capture_output=True, text=True).stdout
    for line in segs.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[5], 16)
            if va <= vaddr < va + filesz:
                file_off = vaddr - va + off
    st = os.stat(agent)
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and int(f[4]) == st.st_ino and "x" not in f[1]:
            start, end = (int(x, 16) for x in f[0].split("-"))
            moff = int(f[2], 16)
            if moff <= file_off < moff + (end - start):
                return start + file_off - moff
    fail("the agent is not mapped in the target")


ATTACKER = r"""
import ctypes, os, sys
pid, mailbox = int(sys.argv[1]), int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
payload = ctypes.create_string_buffer(b"owner=1.1;ring=65536", 2048)
local, remote = iovec(ctypes.addressof(payload), 2048), iovec(mailbox + 8, 2048)
n = libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print("process_vm_writev", n, os.strerror(ctypes.get_errno()))
pidfd = libc.syscall(434, pid, 0)  # pidfd_open
fd = libc.syscall(438, pidfd, 3, 0) if pidfd >= 0 else -1  # pidfd_getfd
print("pidfd_getfd", fd, os.strerror(ctypes.get_errno()))
sys.exit(0 if n < 0 and fd < 0 else 1)
"""


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY.pw_gid)
    os.setuid(NOBODY.pw_uid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    build = ap.parse_args().build
    if os.geteuid() != 0:
        print("cannot run: needs root (ptrace, BPF, and a nobody user to play the attacker)", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    agent = os.path.join(build, "libgtrace_agent.so")
    tmp = tempfile.mkdtemp(prefix="gtrace-security-")
    os.chmod(tmp, 0o755)
    fake_dir = None
    try:
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("root's secret, must not change\n")
        os.chmod(victim, 0o600)
        before = (hashlib.sha256(open(victim, "rb").read()).hexdigest(), os.stat(victim))

        stop = os.path.join(tmp, "stop")
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "gpusim"))
        target = subprocess.Popen([os.path.join(build, "programs", "gpu_steps"), "--until-file", stop, "--step-sleep-ms", "2"],
                                  stdout=subprocess.PIPE, text=True, env=env)
        STARTED.append(target)
        if not target.stdout.readline().startswith("ready"):
            fail("gpu_steps did not start")
        pid = target.pid
        capture(build, pid, tmp, "first", 1.5)  # leaves a dormant agent in a root process
        deadline = time.time() + 3
        while ring_fds(pid) and time.time() < deadline:
            time.sleep(0.05)
        if ring_fds(pid):
            fail("the agent did not go dormant after the capture")

        # The attack of the report, as nobody: a forged request and a symlink to the victim.
        fake_dir = f"/dev/shm/gtrace-{os.getpid()}x"
        attack = (f"mkdir {fake_dir} && ln -s {victim} {fake_dir}/agent-{pid}.ring.new && "
                  f"ln -s {victim} {fake_dir}/agent-{pid}.ring && "
                  f"echo 'dir={fake_dir};owner={os.getpid()}' > {fake_dir}/request-{pid}")
        r = subprocess.run(["/bin/sh", "-c", attack], preexec_fn=as_nobody, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"could not stage the attack as nobody: {r.stderr}")
        # The real channel, as nobody: write the mailbox, take the agent's fds.
        r = subprocess.run([sys.executable, "-c", ATTACKER, str(pid), str(mailbox_address(pid, agent))],
                           preexec_fn=as_nobody, capture_output=True, text=True)
        print(r.stdout.strip(), flush=True)
        if r.returncode != 0:
            fail(f"nobody could write the agent's mailbox or take its fds: {r.stdout} {r.stderr}")
        time.sleep(1.5)  # a dormant agent reads its mailbox every 100 ms

        after = (hashlib.sha256(open(victim, "rb").read()).hexdigest(), os.stat(victim))
        if before[0] != after[0] or before[1].st_size != after[1].st_size or before[1].st_mtime_ns != after[1].st_mtime_ns:
            fail(f"the victim file changed: {before[1]} -> {after[1]}")
        owned_by_root = [n for n in os.listdir(fake_dir) if os.lstat(os.path.join(fake_dir, n)).st_uid == 0]
        if owned_by_root:
            fail(f"something was created as root in the attacker's directory: {owned_by_root}")
        if ring_fds(pid):
            fail("the dormant agent started a session for the attacker")
        print("ok: victim untouched, nothing created as root, the agent stayed dormant", flush=True)

        capture(build, pid, tmp, "second", 1.5)  # the agent still serves gtrace
        open(stop, "w").close()
        target.wait(timeout=60)
        if target.returncode != 0:
            fail(f"the target exited {target.returncode}")
        print("ok: a real gtrace still gets the GPU side afterwards")
        print("PASS")
    finally:
        for p in STARTED:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        if fake_dir:
            shutil.rmtree(fake_dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
