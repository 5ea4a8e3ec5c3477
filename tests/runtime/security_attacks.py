#!/usr/bin/python3
"""Each attack a hostile local user can try on a privileged gtrace, played for real (issue 24):
an unprivileged user this test creates (gtrace-attacker) against the release package (no test
hooks) installed where only root can change it, with real BPF, ptrace and the GPU simulator.
"sudo" is gtrace run as root with that user's SUDO_UID/SUDO_GID; "capabilities" is a copy of the
release binary with the file capabilities gtrace's preflight names, run as that user.

  security_attacks.py ATTACK --release-build DIR --build DIR --source DIR

  no_test_hooks      the release gtrace and agent hold none of the GTRACE_TEST_* names (the test build does)
  loaded_libraries   --cupti and GTRACE_AGENT naming the user's library, under sudo and capabilities
  sudo_outputs       outputs in root-only places, --force over root's file, files made as the user
  path_helpers       a user's directory first in PATH: no helper run (the loader cache read instead)
  target_paths       LD_LIBRARY_PATH into a root-only directory; a link out of a user+mount namespace
  hostile_process    a process that maps libpython3.99999999999.so, a 1 TiB libc.so.6, hangs its
                     files on FUSE, floods its agent's ring: each costs only itself
  escapes            terminal escapes in a library directory, argv[0] and a trace's labels
  readers            report of a sparse 4 TiB file, of a file truncated while it is read
  other_users        capabilities against another user's process, --allow-other-users without root
"""
import argparse
import glob
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

ATTACKER = "gtrace-attacker"
STARTED = []


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    cleanup_processes()
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}", flush=True)


def cleanup_processes():
    for p in STARTED:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
            p.wait()


def attacker():
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        # Several security cases run at once on a fresh machine: another may create the user
        # between our lookup and our useradd, which then exits 9 ("already exists").
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER])
        if r.returncode not in (0, 9):
            raise RuntimeError(f"useradd {ATTACKER}: exit {r.returncode}")
        return pwd.getpwnam(ATTACKER)


def as_user(user, cmd):
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--inh-caps=-all"] + cmd


def sudo_env(user, extra=None):
    env = dict(os.environ, SUDO_UID=str(user.pw_uid), SUDO_GID=str(user.pw_gid), SUDO_USER=user.pw_name)
    env.update(extra or {})
    return env


class World:
    """The release package under /opt (root's, 0755 all the way), the simulator and the test
    programs beside it (readable by the attacker), and a scratch directory the attacker owns."""

    def __init__(self, args):
        self.user = attacker()
        self.build, self.source = os.path.abspath(args.build), os.path.abspath(args.source)
        tarballs = glob.glob(os.path.join(args.release_build, "dist", "gtrace-*-linux-*.tar.gz"))
        if len(tarballs) != 1:
            fail(f"no single release package in {args.release_build}/dist (found {tarballs}); scripts/package.sh makes it")
        self.opt = tempfile.mkdtemp(prefix="gtrace-sec-", dir="/opt")
        os.chmod(self.opt, 0o755)
        with tarfile.open(tarballs[0]) as t:
            t.extractall(self.opt)
        (prefix,) = glob.glob(os.path.join(self.opt, "gtrace-*"))
        self.gtrace = os.path.join(prefix, "bin", "gtrace")
        self.agent = os.path.join(prefix, "lib", "gtrace", "libgtrace_agent.so")
        self.sim = os.path.join(self.opt, "sim")
        os.makedirs(self.sim)
        for f in glob.glob(os.path.join(self.build, "gpusim", "*.so*")):
            shutil.copy2(f, self.sim, follow_symlinks=True)
        for f in ["programs/libdemo_kernels.so", "programs/gpu_steps", "programs/cuda_calls"]:
            shutil.copy2(os.path.join(self.build, f), self.sim)
        for f in ["hostile_job.py", "sim_cuda.py"]:
            shutil.copy2(os.path.join(self.source, "tests", "programs", f), self.sim)
        for root, dirs, files in os.walk(self.opt):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
            for f in files:
                os.chown(os.path.join(root, f), 0, 0)
        self.scratch = tempfile.mkdtemp(prefix="gtrace-sec-user-")
        os.chmod(self.scratch, 0o755)
        os.chown(self.scratch, self.user.pw_uid, self.user.pw_gid)
        self.root_only = tempfile.mkdtemp(prefix="gtrace-sec-root-")  # 0700, root's

    def close(self):
        cleanup_processes()
        for d in [self.opt, self.scratch, self.root_only]:
            shutil.rmtree(d, ignore_errors=True)

    def user_path(self, *parts):
        return os.path.join(self.scratch, *parts)

    def user_file(self, path, text, mode=0o644):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def user_dir(self, path):
        os.makedirs(path, exist_ok=True)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return path

    def evil_library(self, marker):
        """A library of the attacker's whose constructor writes who loaded it to `marker`."""
        src = self.user_path("evil.c")
        self.user_file(src, '#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void evil(void) {\n'
                            f'  FILE* f = fopen("{marker}", "a");\n'
                            '  if (f) { fprintf(f, "uid=%d euid=%d\\n", getuid(), geteuid()); fclose(f); }\n}\n')
        lib = self.user_path("evil.so")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", lib, src], check=True)
        os.chown(lib, self.user.pw_uid, self.user.pw_gid)
        self.user_dir(os.path.dirname(marker))
        return lib

    def job(self, mode="plain", arg=None, user=None, env=None, wrap=None, cudart_dir=None):
        """hostile_job.py in MODE, as `user` (the attacker by default; "root" for root's), its
        libcudart.so.13 from `cudart_dir` (the simulator's by default)."""
        cmd = ["/usr/bin/python3", os.path.join(self.sim, "hostile_job.py"), cudart_dir or self.sim,
               os.path.join(self.sim, "libdemo_kernels.so"), mode] + ([arg] if arg else [])
        if wrap:
            cmd = wrap + cmd
        if user != "root":
            cmd = as_user(self.user, cmd)
        full_env = dict(os.environ, LD_LIBRARY_PATH=self.sim)
        full_env.update(env or {})
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                             start_new_session=True)
        STARTED.append(p)
        line = p.stdout.readline()
        m = re.match(r"ready (\d+)", line)
        if not m:
            fail(f"the {mode} job did not start: {line!r}{p.stdout.read() if p.poll() is not None else ''}")
        return p, int(m.group(1))

    def capabilities_gtrace(self):
        """A copy of the release gtrace with the capabilities preflight names (its agent beside it)."""
        prefix = os.path.join(self.opt, "caps")
        os.makedirs(os.path.join(prefix, "bin"))
        os.makedirs(os.path.join(prefix, "lib", "gtrace"))
        shutil.copy2(self.gtrace, os.path.join(prefix, "bin", "gtrace"))
        shutil.copy2(self.agent, os.path.join(prefix, "lib", "gtrace", "libgtrace_agent.so"))
        for d in [prefix, os.path.join(prefix, "bin"), os.path.join(prefix, "lib"), os.path.join(prefix, "lib", "gtrace")]:
            os.chmod(d, 0o755)
        binary = os.path.join(prefix, "bin", "gtrace")
        subprocess.run(["setcap", "cap_bpf,cap_perfmon,cap_sys_ptrace+ep", binary], check=True)
        return binary


def run(cmd, env=None, timeout=120, cwd="/"):
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, env=env if env is not None else dict(os.environ), capture_output=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(cmd)} did not end within {timeout} s")
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"), time.monotonic() - t0, r


def expect(cond, msg, detail=""):
    if not cond:
        fail(f"{msg}{(chr(10) + detail) if detail else ''}")
    ok(msg)


def trace_of(path):
    with open(path) as f:
        return json.load(f)


# --- the attacks ---

def no_test_hooks(w, args):
    def names(path):
        with open(path, "rb") as f:
            return set(re.findall(rb"GTRACE_TEST_[A-Z_]+", f.read()))
    for binary in [w.gtrace, w.agent]:
        found = names(binary)
        expect(not found, f"{os.path.relpath(binary, w.opt)} holds no test hook name", str(found))
    test_build = names(os.path.join(w.build, "gtrace"))
    expect(len(test_build) >= 5, f"the test build does hold them ({len(test_build)}: the check can fail)")


def loaded_libraries(w, args):
    marker = w.user_path("loot", "loaded")
    evil = w.evil_library(marker)
    root_job, root_pid = w.job(user="root")
    user_job, user_pid = w.job()
    out = w.user_path("out")
    w.user_dir(out)
    # sudo, --cupti: refused before attaching, naming the library and why.
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(root_pid), "--allow-other-users", "--cupti", evil, "-d", "2",
                            "-o", os.path.join(out, "a.json")], env=sudo_env(w.user))
    expect(rc == 2 and evil in err and "owned by uid" in err and len(err.strip().splitlines()) == 1,
           "sudo --cupti with the user's library: one line naming it, exit 2", f"exit {rc}: {err}")
    expect(not os.path.exists(os.path.join(out, "a.json")), "nothing was written")
    # sudo, GTRACE_AGENT: not read; the shipped agent is loaded.
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(user_pid), "-d", "2", "-o", os.path.join(out, "b.json")],
                           env=sudo_env(w.user, {"GTRACE_AGENT": evil, "GTRACE_TEST_HOLD_BORROWED_MS": "60000"}))
    expect(rc == 0 and "GPU agent active" in err, "sudo with GTRACE_AGENT set: the capture takes the shipped agent", err)
    # capabilities: GTRACE_AGENT and --cupti alike.
    caps = w.capabilities_gtrace()
    rc, _, err, _, _ = run(as_user(w.user, [caps, "attach", "--pid", str(user_pid), "-d", "2", "-o", os.path.join(out, "c.json")]),
                           env=dict(os.environ, GTRACE_AGENT=evil))
    expect(rc == 0 and "GPU agent active" in err, "capabilities with GTRACE_AGENT set: the shipped agent", err)
    rc, _, err, _, _ = run(as_user(w.user, [caps, "attach", "--pid", str(user_pid), "--cupti", evil, "-d", "1",
                                            "-o", os.path.join(out, "d.json")]))
    expect(rc == 2 and evil in err, "capabilities with --cupti: refused, exit 2", f"exit {rc}: {err}")
    # sudo, --cupti naming root's own library in a directory the job's user cannot read: root's,
    # but not one the job could load itself.
    hidden_dir = os.path.join(w.opt, "hidden")
    os.makedirs(hidden_dir, mode=0o700)
    hidden = os.path.join(hidden_dir, "libcupti.so.13")
    shutil.copy2(os.path.join(w.sim, "libcupti.so.13"), hidden)
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(user_pid), "--cupti", hidden, "-d", "1",
                            "-o", os.path.join(out, "e.json")], env=sudo_env(w.user))
    expect(rc == 2 and hidden in err and "could not load it itself" in err,
           "sudo --cupti with root's library the job cannot read: refused, exit 2", f"exit {rc}: {err}")
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(user_pid), "--cupti", os.path.join(w.sim, "libcupti.so.13"), "-d", "2",
                            "-o", os.path.join(out, "f.json")], env=sudo_env(w.user))
    expect(rc == 0 and "GPU agent active" in err, "sudo --cupti with a library root owns and the job can load: used", err)
    expect(not os.path.exists(marker), "the user's library was never loaded", open(marker).read() if os.path.exists(marker) else "")
    maps = open(f"/proc/{root_pid}/maps").read() + open(f"/proc/{user_pid}/maps").read()
    expect(evil not in maps, "no process maps it")


def sudo_outputs(w, args):
    _, pid = w.job()
    etc = tempfile.mkdtemp(prefix="gtrace-sec-", dir="/etc")
    os.chmod(etc, 0o755)
    try:
        base = [w.gtrace, "attach", "--pid", str(pid), "--no-gpu", "-d", "1", "-q"]
        rc, _, err, _, _ = run(base + ["-o", os.path.join(etc, "preload")], env=sudo_env(w.user))
        expect(rc == 8 and not os.listdir(etc), "sudo -o in a root-only directory: refused (exit 8), nothing created", err)
        victim = os.path.join(etc, "victim.json")
        with open(victim, "w") as f:
            f.write("root's\n")
        os.chmod(victim, 0o644)
        rc, _, err, _, _ = run(base + ["-o", victim, "--force"], env=sudo_env(w.user))
        st = os.stat(victim)
        expect(rc == 8 and st.st_uid == 0 and open(victim).read() == "root's\n",
               "sudo --force over root's file in a root-only directory: refused, the file untouched", err)
        mine = os.path.join(w.user_path("out"), "t.json")
        w.user_dir(os.path.dirname(mine))
        rc, _, err, _, _ = run(base + ["-o", mine, "--summary-json", mine + ".summary"], env=sudo_env(w.user))
        expect(rc == 0 and os.stat(mine).st_uid == w.user.pw_uid and os.stat(mine + ".summary").st_uid == w.user.pw_uid,
               "sudo in the user's directory: the files are theirs", err)
    finally:
        shutil.rmtree(etc, ignore_errors=True)


def path_helpers(w, args):
    marker = w.user_path("loot", "ran")
    w.user_dir(os.path.dirname(marker))
    bin_dir = w.user_dir(w.user_path("bin"))
    for name in ["ldconfig", "sh", "bash", "readelf", "nm", "objdump", "gdb", "ps", "mount", "umount", "id", "getent"]:
        w.user_file(os.path.join(bin_dir, name), f"#!/bin/sh\necho {name} >> {marker}\n", 0o755)
    _, pid = w.job()
    out = w.user_dir(w.user_path("out"))
    env = sudo_env(w.user, {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"})
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(pid), "-d", "2", "-o", os.path.join(out, "t.json")], env=env)
    expect(rc == 0, "sudo with the user's directory first in PATH: the capture runs", err)
    expect(not os.path.exists(marker), "no program of the user's ran", open(marker).read() if os.path.exists(marker) else "")


def target_paths(w, args):
    # LD_LIBRARY_PATH into a root-only directory holding a CUDA runtime.
    secret = os.path.join(w.root_only, "secret")
    os.makedirs(secret)
    shutil.copy2(os.path.join(w.sim, "libcudart.so.13"), secret)
    _, pid = w.job(env={"LD_LIBRARY_PATH": f"{w.sim}:{secret}"})
    out = w.user_dir(w.user_path("out"))
    trace = os.path.join(out, "a.json")
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(pid), "-d", "2", "-o", trace], env=sudo_env(w.user))
    expect(rc == 0, "sudo: the capture of a job naming a root-only directory runs", err)
    probed = trace_of(trace)["otherData"]["probed_objects"]
    secret_st = os.stat(os.path.join(secret, "libcudart.so.13"))
    expect(not any(secret in o["path"] or (o.get("device"), o.get("inode")) == (secret_st.st_dev, secret_st.st_ino) for o in probed),
           "nothing in the root-only directory was listed or probed", json.dumps(probed))
    # A user + mount namespace: its runtime is its own copy, bind-mounted where the host's is;
    # its library directory holds an absolute link to that path.
    copy = w.user_path("libcudart-own.so.13")
    shutil.copy2(os.path.join(w.sim, "libcudart.so.13"), copy)
    os.chown(copy, w.user.pw_uid, w.user.pw_gid)
    libdir = w.user_dir(w.user_path("lib"))
    os.symlink(os.path.join(w.sim, "libcudart.so.13"), os.path.join(libdir, "libcudart.so.13"))
    host_st = os.stat(os.path.join(w.sim, "libcudart.so.13"))
    copy_st = os.stat(copy)
    wrap = ["unshare", "-Urm", "sh", "-c", f'mount --bind "{copy}" "{w.sim}/libcudart.so.13" && exec "$0" "$@"']
    _, pid = w.job(wrap=wrap, env={"LD_LIBRARY_PATH": f"{libdir}:{w.sim}"})
    trace = os.path.join(out, "b.json")
    rc, _, err, _, _ = run([w.gtrace, "attach", "--pid", str(pid), "-d", "2", "-o", trace, "--api-capture", "uprobes", "--no-gpu"],
                           env=sudo_env(w.user))
    expect(rc == 0, "sudo: the capture of a job in its own user and mount namespace runs", err)
    data = trace_of(trace)
    probed = data["otherData"]["probed_objects"]
    keys = {(o.get("device"), o.get("inode")) for o in probed}
    expect((host_st.st_dev, host_st.st_ino) not in keys, "the host's runtime, where the job's link points outside its root, is not probed",
           json.dumps(probed))
    expect((copy_st.st_dev, copy_st.st_ino) in keys, "the job's own runtime is", json.dumps(probed))
    calls = [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cuda_api"]
    expect(len(calls) > 0, f"and its calls are in the trace ({len(calls)})")


def hostile_process(w, args):
    out = w.user_dir(w.user_path("out"))
    # A library named like CPython 3.99999999999 that exports _PyRuntime.
    lib = w.user_path("libpython3.99999999999.so")
    src = w.user_path("py.c")
    w.user_file(src, "char _PyRuntime[4096];\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", lib, src], check=True)
    # A sparse terabyte named libc.so.6.
    libc_dir = w.user_dir(w.user_path("fake"))
    huge = os.path.join(libc_dir, "libc.so.6")
    with open(huge, "wb") as f:
        f.truncate(1 << 40)
    os.chown(huge, w.user.pw_uid, w.user.pw_gid)
    # A directory on FUSE whose server never answers, in a job's LD_LIBRARY_PATH.
    fuse_dir = w.user_dir(w.user_path("fuse"))
    jobs = {}
    for name, mode, arg, env in [("python-name", "python-name", lib, None), ("huge-libc", "huge-libc", huge, None),
                                 ("ring-flood", "ring-flood", "500000", None),
                                 ("fuse", "plain", None, {"LD_LIBRARY_PATH": f"{fuse_dir}:{w.sim}"})]:
        jobs[name] = w.job(mode, arg, env=env)  # the FUSE job has loaded its libraries before the mount
    fuse_fd = os.open("/dev/fuse", os.O_RDWR)
    subprocess.run(["mount", "-t", "fuse", "-o", f"fd={fuse_fd},rootmode=40000,user_id={w.user.pw_uid},group_id={w.user.pw_gid},allow_other",
                    "gtrace-hang", fuse_dir], pass_fds=[fuse_fd], check=True)
    try:
        # Each hostile job under a capture of its own, as its owner would run gtrace on it (sudo).
        results = {}
        for name, (proc, pid) in jobs.items():
            fused = name == "fuse"
            path = os.path.join(out, f"{name}.json")
            cmd = ["/usr/bin/time", "-f", "maxrss_kib=%M", w.gtrace, "attach", "--pid", str(pid), "-d", "6", "-o", path]
            t0 = time.monotonic()
            p = subprocess.Popen(cmd, env=sudo_env(w.user), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if fused:  # Ctrl-C while the job's files hang: heard at once, the trace still whole
                time.sleep(1.0)
                p.send_signal(signal.SIGINT)
            try:
                _, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                fail(f"{name}: gtrace did not end within 60 s")
            took = time.monotonic() - t0
            rss = int(re.search(r"maxrss_kib=(\d+)", err).group(1))
            results[name] = (p.returncode, err, took, rss, path)
            print(f"{name}: exit {p.returncode} in {took:.1f} s, max RSS {rss / 1024:.0f} MiB", flush=True)
        for name, (rc, err, took, rss, path) in results.items():
            expect(rc == 0, f"{name}: the capture completed (exit 0)", err)
            data = trace_of(path)
            expect("otherData" in data, f"{name}: the trace is whole")
            expect(rss < 400 * 1024, f"{name}: gtrace stayed under 400 MiB ({rss // 1024} MiB)")
        rc, err, took, rss, path = results["fuse"]
        skipped = trace_of(path)["otherData"].get("processes_skipped", [])
        expect(took < 8, f"fuse: Ctrl-C during a hung file system ended gtrace in {took:.1f} s")
        expect(any("did not answer" in s.get("reason", "") for s in skipped), "fuse: the job was skipped for it", json.dumps(skipped))
        calls = [e for e in trace_of(results["python-name"][4])["traceEvents"] if e.get("cat") == "cuda_api"]
        expect(len(calls) > 0, f"python-name: its calls are traced all the same ({len(calls)})")
        gpu = trace_of(results["huge-libc"][4])["otherData"]["gpu"]
        expect(gpu.get("agents_active", gpu.get("active", 0)) >= 1 or "GPU agent active" in results["huge-libc"][1],
               "huge-libc: the agent was still injected", results["huge-libc"][1])
        flood = trace_of(results["ring-flood"][4])
        states = flood["otherData"]["gpu"].get("memory_at_attach", {})
        per_pid = max((len(v) for v in states.values()), default=0)
        corrupt = flood["otherData"]["gpu"].get("ring_records_corrupt", 0)
        expect(per_pid <= 1, f"ring-flood: at most one memory state per device kept ({per_pid})")
        expect(corrupt >= 1000, f"ring-flood: the flood was counted, not kept ({corrupt} records refused)")
        expect(os.path.getsize(results["ring-flood"][4]) < 20 << 20, "ring-flood: the trace did not swell")
    finally:
        os.close(fuse_fd)  # the connection goes: whatever waited on it returns
        subprocess.run(["umount", "-l", fuse_dir])


def escapes(w, args):
    evil = "\x1b]0;pwned\x07\x1b[2J"
    libdir = w.user_dir(w.user_path(f"lib{evil}"))
    for lib in glob.glob(os.path.join(w.sim, "lib*.so*")):  # the simulator whole: its runtime finds the rest beside it
        shutil.copy2(lib, libdir)
    _, pid = w.job(env={"LD_LIBRARY_PATH": f"{libdir}:{w.sim}"}, wrap=["bash", "-c", f'exec -a "{evil}python" "$0" "$@"'],
                   cudart_dir=libdir)
    out = w.user_dir(w.user_path("out"))
    trace = os.path.join(out, "t.json")
    rc, _, _, _, r = run([w.gtrace, "attach", "--pid", str(pid), "-d", "2", "-o", trace], env=sudo_env(w.user))
    expect(rc == 0, "the capture ran", r.stderr.decode(errors="replace"))
    said = r.stdout + r.stderr
    expect(b"\x1b" not in said and b"\x07" not in said, "no raw ESC or BEL in what gtrace printed (live lines, summary, report)")
    expect(b"\\x1b]0;pwned" in said, "the escapes are shown, escaped", said.decode(errors="replace"))
    crafted = w.user_path("crafted.json")
    events = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 7, "args": {"name": f"rank 0 {evil}"}},
              {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_api", "pid": 7, "tid": 7, "ts": 1, "dur": 1, "args": {"ret": 0}}]
    w.user_file(crafted, json.dumps({"traceEvents": events, "otherData": {"tool": "gtrace", "clock": "CLOCK_MONOTONIC"}}))
    rc, _, _, _, r = run([w.gtrace, "report", crafted], env=sudo_env(w.user))
    expect(b"\x1b" not in r.stdout + r.stderr, f"report of a crafted trace: no raw ESC (exit {rc})",
           (r.stdout + r.stderr).decode(errors="replace"))


def readers(w, args):
    sparse = w.user_path("huge.json")
    with open(sparse, "wb") as f:
        f.write(b'{"traceEvents":[')
        f.truncate(4 << 40)
    os.chown(sparse, w.user.pw_uid, w.user.pw_gid)
    rc, _, err, took, _ = run([w.gtrace, "report", sparse], env=sudo_env(w.user), timeout=60)
    expect(rc == 11 and took < 5 and "holes" in err, f"report of a 4 TiB sparse trace: exit 11 in {took:.1f} s", err)
    zeros = w.user_path("zeros.json")
    with open(zeros, "wb") as f:
        f.truncate(64 << 20)
    rc, _, err, took, _ = run([w.gtrace, "report", zeros], timeout=60)
    expect(rc == 11 and took < 5, f"report of a file of zeros: exit 11 in {took:.1f} s", err)
    # Truncated while it is read: a big trace, cut to a page while report goes through it.
    for events in [600_000, 2_000_000, 5_000_000]:
        big = w.user_path("big.json")
        with open(big, "w") as f:
            f.write('{"traceEvents":[')
            line = '{"ph":"X","name":"cudaLaunchKernel","cat":"cuda_api","pid":1,"tid":1,"ts":%d,"dur":2,"args":{"ret":0}},\n'
            for i in range(0, events, 10000):
                f.write("".join(line % (j * 3) for j in range(i, min(events, i + 10000))))
            f.write('{"ph":"M","name":"process_name","pid":1,"tid":1,"args":{"name":"p"}}],"otherData":{"tool":"gtrace"}}\n')
        p = subprocess.Popen([w.gtrace, "report", big], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.15)
        os.truncate(big, 4096)
        _, err = p.communicate(timeout=120)
        err = err.decode(errors="replace")
        if p.returncode == 0 and "truncated" not in err:
            print(f"report finished before the cut ({events} events): again, bigger", flush=True)
            continue
        expect(p.returncode == 11 and "truncated" in err and len(err.strip().splitlines()) == 1,
               f"report of a trace truncated under it: one line, exit 11 (not SIGBUS: {p.returncode})", err)
        return
    fail("report always finished before the trace was cut")


def other_users(w, args):
    root_job, root_pid = w.job(user="root")
    caps = w.capabilities_gtrace()
    out = w.user_dir(w.user_path("out"))
    rc, _, err, _, _ = run(as_user(w.user, [caps, "attach", "--pid", str(root_pid), "--no-gpu", "-d", "1",
                                            "-o", os.path.join(out, "a.json")]))
    expect(rc == 6 and "belongs to uid 0" in err, "capabilities: another user's process is refused (exit 6)", f"exit {rc}: {err}")
    rc, _, err, _, _ = run(as_user(w.user, [caps, "attach", "--pid", str(root_pid), "--no-gpu", "--allow-other-users", "-d", "1",
                                            "-o", os.path.join(out, "b.json")]))
    expect(rc == 6 and "needs root" in err, "capabilities: --allow-other-users is refused (exit 6)", f"exit {rc}: {err}")
    rc, _, err, _, _ = run(as_user(w.user, [caps, "dump", "--pid", str(root_pid)]))
    expect(rc == 6, "capabilities: dump of another user's process is refused", f"exit {rc}: {err}")
    _, user_pid = w.job()
    rc, _, err, _, _ = run(as_user(w.user, [caps, "attach", "--pid", str(user_pid), "--no-gpu", "-d", "1",
                                            "-o", os.path.join(out, "c.json")]))
    expect(rc == 0, "capabilities: the user's own process is traced", err)
    plain = os.path.join(w.opt, "plain-gtrace")
    shutil.copy2(w.gtrace, plain)
    rc, _, err, _, _ = run(as_user(w.user, [plain, "attach", "--pid", str(user_pid), "-d", "1", "-o", os.path.join(out, "d.json")]))
    expect(rc == 6 and "chmod 0750" in err and "world" not in err, "the preflight's advice is the group-restricted set-up", err)


ATTACKS = {f.__name__: f for f in [no_test_hooks, loaded_libraries, sudo_outputs, path_helpers, target_paths, hostile_process,
                                   escapes, readers, other_users]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attack", choices=sorted(ATTACKS))
    ap.add_argument("--release-build", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("cannot run: needs root and a kernel with BTF", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    w = World(args)
    try:
        ATTACKS[args.attack](w, args)
    finally:
        w.close()
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
