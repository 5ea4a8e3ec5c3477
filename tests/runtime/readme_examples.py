"""The README, as a user follows it: every example command of its ```sh blocks runs as written, and
every exit code of the table in docs/usage.md ("## Exit codes") is provoked for real.

  gtrace lines   run through bash (so `$(...)` works as written) with the build's gtrace first on
                 PATH, in a temp dir, against a real torchrun job (demo/train.py on the GPU
                 simulator, `python3 -m torch.distributed.run`): the PID the README's sample
                 `gtrace ps` output gives the torchrun agent is replaced by the job's. Each must exit
                 0 and write the files it names (-o, --html, --json). The sample output's header,
                 ranks and hint line must be what gtrace ps prints for the job.
  scripts/demo.sh  runs as written in demo/scenarios (tests/runtime/demo_scenarios.py), with each
                 of its scenarios.
  scripts/test.sh  is this suite; scripts/package.sh runs in package/tarball. Run as nobody, demo.sh
                 and test.sh each print one line saying how to run them as root (sudo when there is
                 one, su when not) and exit 1.
  exit codes     each code of docs/usage.md's table is provoked and asserted (with a one-line
                 "gtrace: error:" on stderr for every code but 0); a code listed there that this test
                 cannot provoke fails it.

Usage: readme_examples.py --build BUILD --source SOURCE
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

from demo_job import demo_job, fail, require_root
from kernel_state import leftover_bpf_objects

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]


def ok(msg):
    print(f"ok: {msg}", flush=True)


def code_blocks(readme):
    """[(language, [lines])] of the README's fenced blocks, in order."""
    blocks, lang, lines = [], None, None
    for line in readme.splitlines():
        if line.startswith("```"):
            if lines is None:
                lang, lines = line[3:].strip(), []
            else:
                blocks.append((lang, lines))
                lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


def examples(blocks):
    """The command lines of the sh blocks, without their trailing comments."""
    out = []
    for lang, lines in blocks:
        if lang == "sh":
            out += [re.sub(r"\s+#\s.*$", "", line).strip() for line in lines if line.strip()]
    return out


def run(cmd, cwd, env=None, timeout=300, shell=False):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, shell=shell,
                       executable="/bin/bash" if shell else None)
    return r.returncode, r.stdout, r.stderr


def columns(header, row):
    """A `gtrace ps` row cut at the header's column starts: {PID: ..., PPID: ..., ...}."""
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    return {names[i]: row[starts[i]:starts[i + 1] if i + 1 < len(starts) else None].strip() for i in range(len(names))}


def check_ps_sample(blocks, real_out, agent_pid):
    """The README's sample `gtrace ps` output against the real one for the job; returns the
    sample's agent PID and every PID the sample shows."""
    sample = next((lines for lang, lines in blocks if not lang and lines and lines[0].startswith("PID ")), None)
    if not sample:
        fail("the README shows no sample gtrace ps output (a block starting with its header)")
    real = real_out.splitlines()
    if sample[0] != real[0]:
        fail(f"the README's gtrace ps header {sample[0]!r} is not gtrace's {real[0]!r}")
    rows = [columns(real[0], line) for line in sample[1:] if re.match(r"^\d+ ", line)]
    agent = next((r for r in rows if r["WHAT"] == "torchrun agent"), None)
    if not agent:
        fail("the README's sample gtrace ps output lists no torchrun agent")
    start = next(i for i, line in enumerate(real) if line.startswith(f"{agent_pid} "))
    got = [columns(real[0], line) for line in real[start:start + len(rows)]]
    for want, have in zip(rows, got):
        if (want["RANK"], want["WHAT"]) != (have["RANK"], have["WHAT"]) or \
                want["COMMAND"].split()[0] != re.sub(r"\.\d+$", "", have["COMMAND"].split()[0]):
            fail(f"the README's sample row {want} is not what gtrace ps prints for such a job: {have}")
    hints = [line for line in sample if line.startswith("Trace a job")]
    if not hints or hints[0] not in real:
        fail(f"the README's hint line {hints} is not gtrace ps's")
    ok(f"the README's sample gtrace ps output is gtrace's: {len(rows)} rows, header and hint")
    return agent["PID"], {r["PID"] for r in rows} | {r["PPID"] for r in rows}


def run_gtrace_examples(lines, blocks, gtrace, build, source, tmp):
    bin_dir = os.path.join(tmp, "bin")
    os.makedirs(bin_dir)
    os.symlink(gtrace, os.path.join(bin_dir, "gtrace"))
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    work = os.path.join(tmp, "examples")
    os.makedirs(work)
    with demo_job(build, source, "balanced", 29561) as (agent_pid, _):
        rc, out, err = run([gtrace, "ps"], cwd=work)
        if rc != 0:
            fail(f"gtrace ps exited {rc}: {err}")
        sample_agent, sample_pids = check_ps_sample(blocks, out, agent_pid)
        for line in lines:
            cmd = re.sub(rf"\b{sample_agent}\b", str(agent_pid), line)
            stray = [p for p in sample_pids - {sample_agent} if re.search(rf"\b{p}\b", cmd)]
            if stray:
                fail(f"README example {line!r} names sample PID(s) {stray} that stand for no process here")
            print(f"example: {cmd}", flush=True)
            rc, out, err = run(cmd, cwd=work, env=env, shell=True)
            print(out + err, flush=True)
            if rc != 0:
                fail(f"README example {line!r} exited {rc}")
            for path in re.findall(r"(?:-o|--output|--html|--json|--summary-json|--folded)\s+(\S+)", cmd):
                if not os.path.isfile(os.path.join(work, path)):
                    fail(f"README example {line!r} did not write {path}")
            if line.startswith("gtrace ps") and not re.search(rf"(?m)^{agent_pid} +\d+ +- +torchrun agent ", out):
                fail(f"README example {line!r} did not list the job's torchrun agent {agent_pid}")
            ok(f"README example: {line}")


def check_root_refusals(source, tmp):
    """demo.sh and test.sh as nobody: one line naming how to run them as root; with and without sudo."""
    copy = os.path.join(tmp, "checkout")
    os.makedirs(os.path.join(copy, "scripts"))
    for name in ("demo.sh", "test.sh", "need_root.sh"):
        shutil.copy(os.path.join(source, "scripts", name), os.path.join(copy, "scripts", name))
    fake = os.path.join(tmp, "fake-sudo")
    os.makedirs(fake)
    with open(os.path.join(fake, "sudo"), "w") as f:
        f.write("#!/bin/sh\nexit 99\n")
    os.chmod(os.path.join(fake, "sudo"), 0o755)
    os.chmod(tmp, 0o755)
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        for path, want in ((f"{fake}:/usr/bin:/bin", rf"; run: sudo {re.escape(script)}$"),
                           ("/usr/bin:/bin", rf"; run it as root \(there is no sudo here\): su -c '{re.escape(script)}'$")):
            if os.path.exists("/usr/bin/sudo") and path == "/usr/bin:/bin":
                continue  # a real sudo is there: the no-sudo wording cannot be had
            rc, out, err = run(NOBODY + ["env", f"PATH={path}", "bash", script], cwd=copy)
            lines = [x for x in err.splitlines() if x.strip()]
            if rc != 1 or out or len(lines) != 1 or not re.search(rf"^\w+: needs root \(.*\)" + want, lines[0]):
                fail(f"{script} as nobody (PATH={path}): exit {rc}, stdout {out!r}, stderr {err!r}")
            ok(f"{script} as nobody: {lines[0]}")


def free_pid():
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    return next(p for p in range(pid_max - 1, 1, -1) if not os.path.exists(f"/proc/{p}"))


def provoke_exit_codes(usage, gtrace, build, tmp):
    table = usage[usage.index("## Exit codes"):]
    table = table[:table.index("\n\n", table.index("| code |"))]
    listed = [int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)]
    work = os.path.join(tmp, "codes")
    os.makedirs(work)
    existing = os.path.join(work, "exists.json")
    open(existing, "w").write("{}\n")
    not_trace = os.path.join(work, "notes.txt")
    open(not_trace, "w").write("not a trace\n")
    lonely = os.path.join(work, "lonely")  # gtrace without its agent beside it
    os.makedirs(lonely)
    shutil.copy(gtrace, lonely)
    gpu_steps = [os.path.join(build, "programs", "gpu_steps"), "--steps", "1000000", "--kernels", "3"]
    gpu_env = {"LD_LIBRARY_PATH": os.path.join(build, "gpusim")}
    sleeper = subprocess.Popen(["sleep", "600"])
    busy = subprocess.Popen(gpu_steps, env=dict(os.environ, **gpu_env), stdout=subprocess.DEVNULL)

    def t(name):
        return os.path.join(work, name)

    provoke = {
        0: ([gtrace, "--version"], {}, None),
        1: ([os.path.join(lonely, "gtrace"), "record", "-o", t("t1.json"), "--", *gpu_steps], gpu_env, None),
        2: ([gtrace, "attach", "--duration", "5"], {}, None),
        3: ([gtrace, "attach", "--pid", str(free_pid()), "-o", t("t3.json")], {}, None),
        4: ([gtrace, "attach", "--pid", "{short}", "-o", t("t4.json")], {"GTRACE_TEST_ATTACH_DELAY_MS": "1500"}, None),
        5: ([gtrace, "attach", "--pid", "2", "-o", t("t5.json")], {}, None),
        6: (NOBODY + [gtrace, "attach", "--pid", str(sleeper.pid), "-o", "/tmp/gtrace-readme-nobody.json"], {}, None),
        7: ([gtrace, "attach", "--pid", str(sleeper.pid), "-o", t("t7.json")], {"GTRACE_TEST_KERNEL_BTF": "/nonexistent/vmlinux"}, None),
        8: ([gtrace, "attach", "--pid", str(sleeper.pid), "-o", t("missing-dir/t.json")], {}, None),
        9: ([gtrace, "attach", "--pid", str(sleeper.pid), "-o", existing], {}, None),
        10: ([gtrace, "record", "-o", t("t10.json"), "--", "/nonexistent/train"], {}, None),
        11: ([gtrace, "report", not_trace], {}, None),
        12: ([gtrace, "attach", "--pid", str(sleeper.pid), "--steps", "1:2", "-d", "1", "-o", t("t12.json")], {}, None),
        # A file size limit: the trace outgrows it mid-capture (EFBIG), as a full disk would.
        13: ([gtrace, "attach", "--pid", str(busy.pid), "-o", t("t13.json"), "-d", "20"], {}, 256 << 10),
    }
    try:
        for code in listed:
            if code not in provoke:
                fail(f"docs/usage.md lists exit code {code}, which this test cannot provoke: teach it how")
            cmd, env, fsize = provoke[code]
            short = None
            if "{short}" in cmd:
                short = subprocess.Popen(["sleep", "0.5"])
                cmd = [str(short.pid) if a == "{short}" else a for a in cmd]
            limit = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))) if fsize else None
            r = subprocess.run(cmd, cwd=work, env=dict(os.environ, **env), capture_output=True, text=True, timeout=120,
                               preexec_fn=limit)
            if short:
                short.wait()
            errors = [x for x in r.stderr.splitlines() if x.startswith("gtrace: error:")]
            if r.returncode != code or (code != 0 and len(errors) != 1):
                fail(f"exit code {code}: {' '.join(cmd)} exited {r.returncode}, stderr:\n{r.stderr}")
            ok(f"exit code {code}: {errors[0] if errors else r.stdout.splitlines()[0]}")
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()
    if leftover_bpf_objects():
        fail(f"BPF objects left in the kernel: {leftover_bpf_objects()}")
    ok(f"every exit code docs/usage.md lists was provoked: {listed}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    require_root()
    build, source = os.path.abspath(args.build), os.path.abspath(args.source)
    gtrace = os.path.join(build, "gtrace")
    readme = open(os.path.join(source, "README.md")).read()
    blocks = code_blocks(readme)
    lines = examples(blocks)
    gtrace_lines = [x for x in lines if x.split()[0] == "gtrace"]
    scripts = {x.split()[0] for x in lines if x.split()[0] != "gtrace"}
    unknown = scripts - {"scripts/demo.sh", "scripts/test.sh", "scripts/package.sh"}
    if unknown or not gtrace_lines:
        fail(f"README examples this test does not know how to run: {sorted(unknown)}, gtrace lines: {gtrace_lines}")
    tmp = tempfile.mkdtemp(prefix="gtrace-readme-")
    try:
        run_gtrace_examples(gtrace_lines, blocks, gtrace, build, source, tmp)
        check_root_refusals(source, tmp)
        provoke_exit_codes(open(os.path.join(source, "docs", "usage.md")).read(), gtrace, build, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS", flush=True)


if __name__ == "__main__":
    sys.exit(main())
