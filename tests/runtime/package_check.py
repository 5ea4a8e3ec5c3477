"""gtrace where users run it: the package, an install, and the GPU scripts' CPU smoke runs.

  tarball  scripts/package.sh, unpacked in a temp directory outside the checkout: gtrace and
           its agent need nothing beyond glibc (<= 2.34), libgcc_s and libstdc++ (ldd, objdump),
           the agent exports only its entry points, and with an empty environment
           (env -i, LD_LIBRARY_PATH=) from another directory `bin/gtrace --version` works and a
           `record` of a GPU-simulator program gets the packaged agent and links every GPU op;
           gpu_check_verify.py passes that trace's GPU checks and fails its Python ones (a C++
           program has no sources or torch ranges); the packaged gpu-check.sh and gpu-bench.sh
           run their CPU smoke modes (Debian's torch) with the packaged gtrace.
  install  cmake --install into a temp prefix: the same layout, --version and a capture from it.
  wheel    the package's wheel (the release build's dist/) pip-installed into a fresh venv: its files
           are the tarball's, `gtrace --version` from the venv's console command, and an attach
           from it to the demo job (torchrun, GPU simulator) that links every GPU op.
  scripts  the checkout's scripts/gpu-check.sh and gpu-bench.sh, CPU smoke modes.

Usage: package_check.py tarball|install|scripts|wheel --build BUILD --release-build DIR --source SOURCE
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

from kernel_state import leftover_bpf_objects

PYTHON = "/usr/bin/python3"  # Debian's, with torch 1.13
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""}
ALLOWED_LIBS = re.compile(r"^(linux-vdso|libc|libm|ld-linux-x86-64|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so")
GLIBC_FLOOR = (2, 34)  # RHEL 9


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}", flush=True)


def check_no_leftover_bpf():
    """Nothing this test's gtrace loaded is left in the kernel (kernel_state.py: what other
    captures running beside this test hold is theirs)."""
    left = leftover_bpf_objects()
    if left:
        fail(f"BPF objects left in the kernel after gtrace exited: {left}")


def run(cmd, cwd, env=None, timeout=300):
    """Runs with exactly env (nothing inherited); returns (rc, stdout+stderr)."""
    r = subprocess.run(cmd, cwd=cwd, env=env if env is not None else CLEAN_ENV, capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def check_layout(prefix):
    for rel in ["bin/gtrace", "lib/gtrace/libgtrace_agent.so", "share/doc/gtrace/README.md", "share/doc/gtrace/docs/usage.md",
                "share/gtrace/scripts/gpu-check.sh", "share/gtrace/scripts/gpu-bench.sh",
                "share/gtrace/scripts/gpu_check_jobs.py", "share/gtrace/scripts/gpu_check_suite.py",
                "share/gtrace/scripts/gpu_check_verify.py",
                "share/gtrace/scripts/gpu_profiler_check.py", "share/gtrace/scripts/gpu_profiler_job.py",
                "share/gtrace/scripts/gpu_bench.py", "share/gtrace/scripts/gpu_bench_workload.py",
                "share/gtrace/scripts/gpu_bench_torchrun.py",
                "share/gtrace/scripts/gpu_common.sh"]:
        if not os.path.isfile(os.path.join(prefix, rel)):
            fail(f"{rel} missing from {prefix}")
    for rel in ["bin/gtrace", "share/gtrace/scripts/gpu-check.sh", "share/gtrace/scripts/gpu-bench.sh"]:
        if not os.access(os.path.join(prefix, rel), os.X_OK):
            fail(f"{rel} is not executable")
    ok(f"layout of {prefix}")


def check_libraries(prefix):
    for rel in ["bin/gtrace", "lib/gtrace/libgtrace_agent.so"]:
        path = os.path.join(prefix, rel)
        rc, out = run(["ldd", path], cwd="/")
        libs = [line.split()[0] for line in out.splitlines() if line.strip()]
        bad = [lib for lib in libs if not ALLOWED_LIBS.match(os.path.basename(lib))]
        if rc != 0 or not libs or bad:
            fail(f"ldd {rel}: needs {bad or out.strip()} beyond glibc, libgcc_s and libstdc++")
        symbols = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
        versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", symbols)}
        if not versions or max(versions) > GLIBC_FLOOR:
            fail(f"{rel} needs glibc {'.'.join(map(str, max(versions)))}, above {'.'.join(map(str, GLIBC_FLOOR))}")
        ok(f"{rel}: ldd lists {', '.join(os.path.basename(lib) for lib in libs)}; "
           f"glibc <= {'.'.join(map(str, max(versions)))}")
    exports = subprocess.run(["nm", "-D", "--defined-only", os.path.join(prefix, "lib/gtrace/libgtrace_agent.so")],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    names = sorted(line.split()[-1] for line in exports if line.strip())
    entry_points = ("InitializeInjection", "InitializeInjectionNvtx2")  # CUDA's and NVTX's injection
    odd = [n for n in names if n not in entry_points and not n.startswith("gtrace_agent_")]
    if odd or any(e not in names for e in entry_points) or "gtrace_agent_announce" not in names:
        fail(f"the agent exports {names}; only {' and '.join(entry_points)} and gtrace_agent_* may be")
    ok(f"the agent exports {names}")


def check_version(gtrace, cwd, source):
    rc, out = run([gtrace, "--version"], cwd=cwd)
    head = out.splitlines()[0] if out else ""
    m = re.match(r"^gtrace \d+\.\d+\.\d+ \(commit ([0-9a-f]{12})(-dirty)?\)$", head)
    # The build's commit: HEAD, or an ancestor of it when the build predates the last commits.
    known = m and subprocess.run(["git", "-C", source, "merge-base", "--is-ancestor", m.group(1), "HEAD"]).returncode == 0
    if rc != 0 or not known:
        fail(f"{gtrace} --version: exit {rc}, first line {head!r} does not name a commit of {source}: {out}")
    if "BPF ring buffer:" not in out or "multi-uprobe links (uprobe_multi):" not in out:
        fail(f"--version lists no kernel features: {out}")
    ok(f"--version from {cwd} with an empty environment: {head}")


def check_capture(gtrace, cwd, build):
    """record of gpu_steps on the GPU simulator, with the environment emptied."""
    trace = os.path.join(cwd, "trace.json")
    rc, out = run([gtrace, "record", "-o", trace, "--sample-hz", "0", "--", "/usr/bin/env",
                   f"LD_LIBRARY_PATH={os.path.join(build, 'gpusim')}", os.path.join(build, "programs", "gpu_steps"),
                   "--steps", "10", "--kernels", "3"], cwd=cwd)
    if rc != 0 or not re.search(r"GPU: 1 agents \(1 active, 0 failed\), (\d+) kernels/copies/sets, \1 linked", out):
        fail(f"record from {cwd}: exit {rc}, the agent did not link every GPU op:\n{out}")
    check_no_leftover_bpf()
    ok(f"record with the agent from {cwd}: " + next(line for line in out.splitlines() if "GPU:" in line).strip())
    return trace


def check_verifier(scripts, trace, cwd):
    rc, out = run([PYTHON, os.path.join(scripts, "gpu_check_verify.py"), trace], cwd=cwd)
    states = {name: state for state, name in re.findall(r"^gpu-check: (PASS|FAIL|SKIP): ([a-z ]+):", out, re.M)}
    want = {"agent": "PASS", "gpu work": "PASS", "linked": "PASS", "sources": "FAIL", "ranges": "FAIL"}
    if rc != 1 or states != want:
        fail(f"gpu_check_verify.py on a C++ program's trace: exit {rc}, {states}, expected {want}:\n{out}")
    ok("gpu_check_verify.py: a simulator trace passes agent, gpu work and linked; fails sources and ranges")


def check_gpu_check_smoke(script, gtrace, cwd, env):
    rc, out = run(["bash", script, "--device", "cpu", PYTHON], cwd=cwd, env=env, timeout=480)
    print(out, flush=True)
    if rc != 0 or f"gpu-check: using {gtrace}:" not in out:
        fail(f"gpu-check.sh --device cpu exited {rc} or did not use {gtrace}")
    # The suite's flow on a CPU (gpu_check_suite.py): the GPU checks say SKIP, and what a CPU
    # shows must pass: one attach to the suite of jobs, report, five re-attaches, record = attach.
    for name in ("agent", "linked", "job kinds", "sources", "backward source", "memory at attach", "autograd links",
                 "report: nccl calls", "report: communication"):
        if not re.search(rf"^gpu-check: SKIP: {re.escape(name)}: no GPU", out, re.M):
            fail(f"gpu-check.sh --device cpu: no SKIP line for {name}")
    for name in ["ranges: Optimizer\\.step: [1-9]", "record = attach: torch ranges", "jobs alive: 4 of 4"] + [f"re-attach {i}: [1-9]" for i in range(1, 6)]:
        if not re.search(rf"^gpu-check: PASS: {name}", out, re.M):
            fail(f"gpu-check.sh --device cpu: no PASS line matching '{name}'")
    if not re.search(r"^gpu-check: PASS: 0 of \d+ checks failed", out, re.M):
        fail("gpu-check.sh --device cpu: the suite's checks did not all pass")
    with open(os.path.join(cwd, "gpu-check-out", "jobs.json")) as f:
        if set(json.load(f)["ready"]) != {"train", "gemm", "nccl", "copies"}:
            fail("gpu-check.sh --device cpu did not run the CPU's four jobs")
    for name in ["suite.json", "record.json", "report.json"] + [f"reattach-{i}.json" for i in range(1, 6)]:
        if not os.path.getsize(os.path.join(cwd, "gpu-check-out", name)):
            fail(f"gpu-check.sh left no {name}")
    # The job's own torch.profiler beside gtrace, plain and with KINETO_USE_DAEMON=1: the flow runs
    # (windows before, during and after a capture; the job ends normally); kernels need a GPU.
    for tag in ("profiler", "daemon"):
        for check in ("baseline", "window 1", "window 2", "window 3", "job alive"):
            if not re.search(rf"^gpu-check: PASS: {tag} {check}:", out, re.M):
                fail(f"gpu-check.sh --device cpu: no PASS line for '{tag} {check}'")
    ok(f"gpu-check.sh --device cpu ran with {gtrace}")


def check_gpu_bench_smoke(script, gtrace, cwd, env):
    rc, out = run(["bash", script, "--device", "cpu", "--tiny", "--keep-traces", "--bpf-stats", PYTHON], cwd=cwd, env=env,
                  timeout=480)
    print(out, flush=True)
    if rc != 0 or f"gpu-bench: using {gtrace}:" not in out:
        fail(f"gpu-bench.sh --device cpu --tiny exited {rc} or did not use {gtrace}")
    for w in ("loop", "transformer"):
        for phase in ("attaching gtrace (--bpf-stats)", "detaching gtrace", "torch.profiler"):
            if f"gpu-bench: {w}: {phase}" not in out:
                fail(f"gpu-bench.sh: the {w} workload never reached '{phase}'")
        row = re.search(rf"^{w} +10 +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)x +([\d.]+)x", out, re.M)
        if not row or any(float(x) <= 0 for x in row.groups()):
            fail(f"gpu-bench.sh: no complete table row for {w}")
        if not os.path.getsize(os.path.join(cwd, "gpu-bench-out", f"{w}-gtrace.pftrace")):
            fail(f"gpu-bench.sh left no trace of the {w} workload")
        if not re.search(rf"^{w} +10 .*\n +after detach: [\d.]+x \(95% interval [\d.]+-[\d.]+; the two untraced phases differ by [\d.]+%\)", out, re.M):
            fail(f"gpu-bench.sh: no after-detach line for {w}")
    own = re.findall(r"^ +default: gtrace's own CPU ([\d.]+) ms/step .* trace ([\d.]+) KiB/step", out, re.M)
    if len(own) != 2 or any(float(kib) <= 0 for _, kib in own):
        fail(f"gpu-bench.sh: no own-cost line (gtrace's CPU, trace bytes per step) for both workloads: {own}")
    # The torchrun workload: two ranks stepping through all three windows, and the report's verdict.
    for rank in (0, 1):
        if not re.search(rf"^torchrun +rank {rank}: [1-9]\d* steps attached, median ms untraced [\d.]+, gtrace [\d.]+, after [\d.]+", out, re.M):
            fail(f"gpu-bench.sh: no torchrun line for rank {rank}")
    if not re.search(r"^ +report: job verdict '[a-z_]+'", out, re.M):
        fail("gpu-bench.sh: no report verdict for the torchrun job")
    if len(re.findall(r"^ +default: torch_range_probe +[\d.]+ runs/step +\d+ ns/run$", out, re.M)) != 2:
        fail("gpu-bench.sh --bpf-stats did not print the torch range probe's runs for both workloads")
    if "targets not checked (--tiny: smoke run)" not in out:
        fail("gpu-bench.sh --tiny claimed a verdict on the targets")
    ok(f"gpu-bench.sh --device cpu --tiny ran every phase of the three workloads with {gtrace}")


def check_wheel(release, build, source, tmp):
    (wheel,) = glob.glob(os.path.join(release, "dist", "gtrace-*-py3-none-manylinux_2_34_x86_64.whl"))
    (tarball,) = glob.glob(os.path.join(release, "dist", "gtrace-*-linux-x86_64.tar.gz"))
    venv = os.path.join(tmp, "venv")
    rc, out = run(["/usr/bin/python3", "-m", "venv", venv], cwd=tmp)
    if rc != 0:
        fail(f"python3 -m venv: {out}")
    rc, out = run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--disable-pip-version-check", wheel], cwd=tmp,
                  env=dict(CLEAN_ENV, HOME=tmp))
    if rc != 0:
        fail(f"pip install {os.path.basename(wheel)}: exit {rc}:\n{out}")
    ok(f"pip installed {os.path.basename(wheel)} into a fresh venv")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "gtrace"))[0]
    with tarfile.open(tarball) as t:
        for rel in ("bin/gtrace", "lib/gtrace/libgtrace_agent.so"):
            member = next(m for m in t.getmembers() if m.name.endswith("/" + rel))
            if t.extractfile(member).read() != open(os.path.join(site, rel), "rb").read():
                fail(f"the wheel's {rel} is not the tarball's")
            if not os.access(os.path.join(site, rel), os.X_OK):
                fail(f"{rel} lost its executable bit in the install")
    ok("the wheel's bin/gtrace and agent are the tarball's files, executable")
    gtrace = os.path.join(venv, "bin", "gtrace")
    check_version(gtrace, tmp, source)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from demo_job import demo_job  # the demo job, as a user would attach to it
    with demo_job(build, source, "balanced", 29661) as (job, jobtmp):
        trace = os.path.join(jobtmp, "trace.json")
        rc, out = run([gtrace, "attach", "--pid", str(job), "-d", "4", "-o", trace, "--sample-hz", "0"], cwd=tmp,
                      env=dict(CLEAN_ENV, HOME=tmp), timeout=180)
        if rc != 0 or not re.search(r"GPU: 2 agents \(2 active, 0 failed\), (\d+) kernels/copies/sets, \1 linked", out):
            fail(f"attach from the wheel's gtrace: exit {rc}, not every GPU op linked by both ranks' agents:\n{out}")
        ok("attach from the venv's gtrace to the demo job: " + next(l for l in out.splitlines() if "GPU:" in l).strip())
    check_no_leftover_bpf()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["tarball", "install", "scripts", "wheel"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--release-build", required=True, help="scripts/package.sh's build directory (no test hooks)")
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("cannot run: needs root and a kernel with BTF", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    build, source = os.path.abspath(args.build), os.path.abspath(args.source)
    tmp = tempfile.mkdtemp(prefix=f"gtrace-{args.mode}-")
    try:
        cwd = os.path.join(tmp, "cwd")
        os.makedirs(cwd)
        if args.mode == "wheel":
            check_wheel(os.path.abspath(args.release_build), build, source, tmp)
            return
        if args.mode == "scripts":
            env = dict(CLEAN_ENV, GTRACE=os.path.join(build, "gtrace"))
            check_gpu_check_smoke(os.path.join(source, "scripts", "gpu-check.sh"), env["GTRACE"], cwd, env)
            check_gpu_bench_smoke(os.path.join(source, "scripts", "gpu-bench.sh"), env["GTRACE"], cwd, env)
            return
        if args.mode == "tarball":
            rc, out = run(["bash", os.path.join(source, "scripts", "package.sh"), "--build", os.path.abspath(args.release_build),
                           "--out", os.path.join(tmp, "dist")], cwd=source, env=dict(os.environ), timeout=900)
            tarballs = glob.glob(os.path.join(tmp, "dist", "gtrace-*-linux-x86_64.tar.gz"))
            wheels = glob.glob(os.path.join(tmp, "dist", "gtrace-*-py3-none-manylinux_2_34_x86_64.whl"))
            if rc != 0 or len(tarballs) != 1 or len(wheels) != 1 or out.split() != [tarballs[0], wheels[0]]:
                fail(f"package.sh: exit {rc}, made {tarballs} and {wheels}:\n{out}")
            with tarfile.open(tarballs[0]) as t:
                t.extractall(os.path.join(tmp, "unpacked"))
            (prefix,) = glob.glob(os.path.join(tmp, "unpacked", "gtrace-*"))
            ok(f"package.sh made {os.path.basename(tarballs[0])}")
        else:
            prefix = os.path.join(tmp, "prefix")
            rc, out = run(["cmake", "--install", build, "--prefix", prefix], cwd=source, env=dict(os.environ))
            if rc != 0:
                fail(f"cmake --install: exit {rc}:\n{out}")
        check_layout(prefix)
        check_libraries(prefix)
        gtrace = os.path.join(prefix, "bin", "gtrace")
        check_version(gtrace, cwd, source)
        trace = check_capture(gtrace, cwd, build)
        if args.mode == "tarball":
            scripts = os.path.join(prefix, "share", "gtrace", "scripts")
            check_verifier(scripts, trace, cwd)
            check_gpu_check_smoke(os.path.join(scripts, "gpu-check.sh"), gtrace, cwd, CLEAN_ENV)
            check_gpu_bench_smoke(os.path.join(scripts, "gpu-bench.sh"), gtrace, cwd, CLEAN_ENV)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
