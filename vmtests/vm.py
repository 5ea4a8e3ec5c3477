#!/usr/bin/python3
"""vmtests: boots Debian's kernels under qemu on the host's own root filesystem (read-only, with a
tmpfs overlay), runs gtrace's BPF runtime cases inside each, and prints one row per kernel.
See vmtests/README.md; `vmtests/run.sh --help` for the options."""
import argparse
import fcntl
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import tomllib

import kernel_fetch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "runtime"))
import leftovers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
GUEST_TMPFS = ("/tmp", "/var/tmp", "/run", "/root", "/dev/shm")  # guest/init: the host's files there are hidden
CANNOT_RUN = 77  # ctest's skip code, used only with GTRACE_ALLOW_SKIP=1


class CannotRun(Exception):
    pass


def parse_args():
    ap = argparse.ArgumentParser(prog="vmtests/run.sh", description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every kernel in vmtests/kernels.toml, every case")
    ap.add_argument("--kernel", action="append", default=[], metavar="NAME", help="this kernel, every case (repeatable)")
    ap.add_argument("--ci", action="store_true", help="the kernels and cases of kernels.toml's [ci] (the default)")
    ap.add_argument("--build", default=f"{SOURCE}/build", help="build tree with the test programs (default: build/)")
    ap.add_argument("--gtrace", help="gtrace binary to test (default: dist/gtrace-*.tar.gz if there is one, "
                                     "else the build tree's)")
    ap.add_argument("--package", help="gtrace tarball to test (scripts/package.sh)")
    ap.add_argument("--cases", default="", metavar="REGEX", help="only the runtime cases whose name matches")
    ap.add_argument("--case-dir", default=f"{SOURCE}/tests/runtime/cases", help="where the cases are (default: "
                    "tests/runtime/cases)")
    ap.add_argument("--run", metavar="CMD", help="run this shell command in the guest instead of the cases, "
                    "and print its output (to look around in a kernel)")
    ap.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto",
                    help="auto: KVM where it can boot a stock kernel, else TCG (software emulation)")
    ap.add_argument("--every-case", action="store_true", help="under TCG too, the cases kernels.toml's [tcg_exclude] "
                    "leaves out")
    ap.add_argument("--smp", type=int, help="the guest's CPUs (default: 2 under KVM; 1 under TCG, where a second "
                    "vCPU has been seen to stop taking timer interrupts while the first waited for it: HOST_STALL)")
    ap.add_argument("--mem", default="4G")
    ap.add_argument("--timeout", type=int, help="seconds per kernel boot (default 1800; --ci: 600, so that "
                    "a hang is reported, with its case, within ctest's 900)")
    ap.add_argument("--case-timeout", type=int, help="seconds per case inside the guest (default 600; --ci: 240)")
    ap.add_argument("--cache", default=f"{HERE}/.cache", help="downloads, kernels and logs (default vmtests/.cache)")
    ap.add_argument("--offline", action="store_true", help="use the cached kernels; do not ask the archive")
    return ap.parse_args()


def pick_gtrace(args):
    """The gtrace under test: --gtrace, --package, dist/gtrace-*.tar.gz, or the build tree's."""
    if args.gtrace:
        return os.path.abspath(args.gtrace), "--gtrace"
    tarball = args.package or next(iter(sorted(glob.glob(f"{SOURCE}/dist/gtrace-*.tar.gz"))[-1:]), None)
    if tarball:
        dest = f"{args.cache}/package/{os.path.basename(tarball).removesuffix('.tar.gz')}"
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        with tarfile.open(tarball) as t:
            t.extractall(dest, filter="data")
        found = [p for p in glob.glob(f"{dest}/**/gtrace", recursive=True) if os.access(p, os.X_OK) and os.path.isfile(p)]
        if len(found) != 1:
            raise CannotRun(f"{tarball} holds {len(found)} executables named gtrace, expected one")
        return found[0], tarball
    path = f"{os.path.abspath(args.build)}/gtrace"
    if not os.access(path, os.X_OK):
        raise CannotRun(f"no gtrace in {args.build}: build it (cmake --build build) or give --gtrace/--package")
    return path, "build tree"


def pick_accel(wanted):
    """KVM only where it runs stock kernels: a PVM host (kvm_pvm) runs only guests built for PVM,
    and Debian's kernels hang there before their first message."""
    kvm_ok = os.access("/dev/kvm", os.R_OK | os.W_OK) and not os.path.exists("/sys/module/kvm_pvm")
    if wanted == "kvm" and not kvm_ok:
        raise CannotRun("--accel kvm: /dev/kvm is missing, not accessible, or PVM (kvm_pvm), which boots no stock kernel")
    if wanted == "auto":
        return "kvm" if kvm_ok else "tcg"
    return wanted


def select_cases(spec, config, args, accel):
    """The runtime cases for a kernel, and the ones left out with the reason."""
    chosen, left_out = [], {}
    for path in sorted(glob.glob(f"{os.path.abspath(args.case_dir)}/*.toml")):
        name = os.path.basename(path).removesuffix(".toml")
        with open(path, "rb") as f:
            case = tomllib.load(f)
        if args.cases and not re.search(args.cases, name):
            continue
        if args.ci and name not in config["ci"]["cases"]:
            continue  # the CI subset: kernels.toml says why
        if name in spec.get("exclude", {}):
            left_out[name] = spec["exclude"][name]
        elif accel == "tcg" and name in config["tcg_exclude"] and not args.every_case:
            left_out[name] = "under TCG: " + config["tcg_exclude"][name]
        elif spec["expect"] == "unsupported" and case.get("needs_bpf", True):
            left_out[name] = "needs BPF, which this kernel cannot give gtrace"
        else:
            chosen.append(path)
    return chosen, left_out


def kept_dirs(paths):
    """The host directories the guest must still see under its tmpfs mounts (a checkout in /tmp,
    as a CI clone may be): the top directory of each path below one; guest/init binds them back."""
    keep = set()
    for path in map(os.path.abspath, paths):
        for d in GUEST_TMPFS:
            if path == d:
                raise CannotRun(f"{path} is a directory the guest mounts a tmpfs over; use another directory")
            if path.startswith(d + "/"):
                top = d + "/" + path[len(d) + 1:].split("/")[0]
                if any(c in top for c in ", \t\n"):
                    raise CannotRun(f"{top}: a directory the guest must bind back may not hold commas or spaces")
                keep.add(top)
    return sorted(keep)


# What a guest's console says when a virtual CPU stopped getting timer interrupts: the emulation
# under it stalled, whatever runs inside. Seen on this project's machines (a PVM microVM, so TCG)
# with two multi-threaded TCG vCPUs: vCPU 1 silent, vCPU 0 in a soft lockup inside gtrace's system
# call (waiting for vCPU 1), for minutes. A boot that says so is tried once more.
HOST_STALL = ("timer wakeup didn't happen", "Possible timer handling issue")


class GuestStalled(Exception):
    pass


def boot(spec, image, cfg_path, run_dir, args, accel, log):
    """Runs the guest to its end; returns its wall time, or raises on a timeout."""
    smp = args.smp or (2 if accel == "kvm" else 1)
    cmd = ["qemu-system-x86_64", "-machine", "q35", "-smp", str(smp), "-m", args.mem,
           "-display", "none", "-monitor", "none", "-no-reboot", "-nic", "none",
           "-serial", f"file:{run_dir}/console.log", "-serial", f"file:{run_dir}/results.jsonl",
           "-kernel", image.vmlinuz, "-initrd", image.initrd,
           "-append", f"console=ttyS0 quiet panic=-1 {spec.get('cmdline', '')} "
                      f"{'vmtests.keep=' + ','.join(args.keep) if getattr(args, 'keep', None) else ''} -- "
                      f"/usr/bin/python3 {HERE}/guest/run_cases.py {cfg_path}",
           "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"]
    cmd += ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg,thread=multi", "-cpu", "max"]
    start = time.time()
    progress = Progress(run_dir, spec["name"], log)
    with open(f"{run_dir}/qemu.log", "w") as qlog:
        q = subprocess.Popen(cmd, stdout=qlog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            while (rc := q.poll()) is None:  # each case's end logged as it comes: a hang shows where
                if time.time() - start > args.timeout:
                    raise TimeoutError(f"the guest did not finish within {args.timeout} s; "
                                       f"running then: {progress.running or 'no case'}; console.log ends:\n"
                                       + progress.console_tail())
                time.sleep(2)
                progress.poll()
                if progress.stall:
                    raise GuestStalled(progress.stall)
            progress.poll()
        finally:  # also when this script is stopped (SIGTERM from ctest's timeout)
            if q.poll() is None:
                q.kill()
                q.wait()
    if rc != 0:
        raise RuntimeError(f"qemu exited {rc}: {open(f'{run_dir}/qemu.log').read().strip()[-300:]}")
    return time.time() - start


class Progress:
    """Follows a running guest's results and console: logs each case as it starts and ends."""

    def __init__(self, run_dir, kernel, log):
        self.run_dir, self.kernel, self.log = run_dir, kernel, log
        self.seen_results, self.seen_console, self.running, self.finished = 0, 0, None, set()
        self.stall = None  # the console line that says the host stalled the guest's CPUs

    def poll(self):
        records = read_results(f"{self.run_dir}/results.jsonl")
        for r in records[self.seen_results:]:
            if r.get("type") == "case":
                self.log(f"kernel {self.kernel}: case {r['case']}: {r['status']} ({r.get('seconds', 0):.0f} s)"
                         + (f": {r['reason'][:200]}" if r["status"] != "pass" and r.get("reason") else ""))
                self.running = None
                self.finished.add(r["case"])
        self.seen_results = len(records)
        try:
            with open(f"{self.run_dir}/console.log", "rb") as f:
                f.seek(self.seen_console)
                data = f.read()
        except FileNotFoundError:
            return
        complete = data[:data.rfind(b"\n") + 1]
        self.seen_console += len(complete)
        complete = complete.decode(errors="replace")
        for line in complete.splitlines():
            if self.stall is None and any(s in line for s in HOST_STALL):
                self.stall = line.strip()
            name = line.removeprefix("=== vmtests case ").strip()
            if line.startswith("=== vmtests case ") and name not in self.finished:
                self.running = name

    def console_tail(self, lines=30):
        return console_tail(self.run_dir, lines)


def console_tail(run_dir, lines=30):
    """The guest console's last lines (a panic, the OOM killer, the case it was in)."""
    try:
        with open(f"{run_dir}/console.log", errors="replace") as f:
            return "\n".join(f.read().replace("\r", "").splitlines()[-lines:])
    except FileNotFoundError:
        return "(none)"


def read_results(path):
    records = []
    with open(path, errors="replace") as f:
        for line in f:
            try:
                records.append(json.loads(line.strip("\r\n")))
            except json.JSONDecodeError:
                pass
    return records


def judge(spec, records, console_tail=""):
    """Whether the kernel did what kernels.toml expects; the problems if not."""
    problems = []
    attach = next((r for r in records if r["type"] == "attach"), None)
    cases = [r for r in records if r["type"] == "case"]
    if not any(r["type"] == "done" for r in records):
        problems.append("the guest stopped before its last case; console.log ends:\n"
                        + "\n".join("             | " + l for l in console_tail.splitlines()[-12:]))
    if attach is None:
        problems.append("no gtrace attach result")
    elif spec["expect"] == "works":
        if attach["exit_code"] != 0 or attach["stderr"]:
            problems.append(f"gtrace attach exited {attach['exit_code']}: {' | '.join(attach['stderr'])[:300]}")
    else:
        lines = attach["stderr"]
        if attach["exit_code"] != 7 or len(lines) != 1 or not re.search(spec["message"], lines[0]):
            problems.append(f"expected exit 7 and one line matching /{spec['message']}/, "
                            f"got exit {attach['exit_code']}: {lines}")
    known = spec.get("known_failures", {})
    problems += [f"{c['case']}: {c['reason']}" for c in cases if c["status"] == "fail" and c["case"] not in known]
    return problems


def gtrace_outcome(spec, records):
    kern = next((r for r in records if r["type"] == "kernel"), {"features": {}})
    attach = next((r for r in records if r["type"] == "attach"), None)
    if attach is None:
        return "not run"
    if attach["exit_code"] == 0 and not attach["stderr"]:
        return "works (multi-uprobe links)" if kern["features"].get("uprobe_multi") else "works (per-probe uprobe links)"
    first = attach["stderr"][0] if attach["stderr"] else ""
    return f"exit {attach['exit_code']}: {first.removeprefix('gtrace: error: ')}"


def run_kernel(spec, config, args, gtrace, accel, log):
    run_dir = f"{args.cache}/run/{spec['name']}"
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    image = kernel_fetch.prepare(spec, args.cache, f"{run_dir}/initrd.cpio", args.offline, log)
    cases, left_out = select_cases(spec, config, args, accel)
    cfg = {"gtrace": gtrace, "build": os.path.abspath(args.build), "source": SOURCE, "results": "/dev/ttyS1",
           "cases": cases, "case_timeout": args.case_timeout, "hostname": socket.gethostname(), "command": args.run,
           "env": {"GTRACE_TIMEOUT_SCALE": "4"} if accel == "tcg" else {}}
    with open(f"{run_dir}/config.json", "w") as f:
        json.dump(cfg, f)
    by_reason = {}
    for name, why in left_out.items():
        by_reason.setdefault(why, []).append(name)
    for why, names in by_reason.items():
        log(f"kernel {spec['name']}: left out {', '.join(names)}: {why}")
    log(f"kernel {spec['name']}: booting {image.package} {image.version} ({accel}, {len(cases)} cases)")
    if accel == "tcg":  # emulation is slowed most by what else runs: say so beside a timeout
        for share, pid, cmd in leftovers.busy():
            log(f"kernel {spec['name']}: the host is busy beside it: pid {pid} at {share * 100:.0f}% CPU: {cmd[:120]}")
    row = {"kernel": spec["name"], "release": image.release, "left_out": len(left_out), "log": f"{run_dir}/console.log"}
    for attempt in (1, 2):
        try:
            row["seconds"] = boot(spec, image, f"{run_dir}/config.json", run_dir, args, accel, log)
        except GuestStalled as e:
            row["seconds"] = None
            row["problems"] = [f"the host stalled the guest's CPUs twice (its console: {e}); no verdict on this kernel"]
            if attempt == 1:
                log(f"kernel {spec['name']}: the host stalled the guest's CPUs (its console: {e}): the virtualization "
                    "under the guest, not what runs in it; booting it again")
                shutil.copy(f"{run_dir}/console.log", f"{run_dir}/console.stalled.log")
                continue
        except (TimeoutError, RuntimeError) as e:
            row["seconds"] = None
            row["problems"] = [str(e)]
        else:
            row.pop("problems", None)
        break
    records = read_results(f"{run_dir}/results.jsonl")
    kern = next((r for r in records if r["type"] == "kernel"), None)
    row["release"] = kern["release"] if kern else image.release
    row["features"] = kern["features"] if kern else {}
    row["gtrace"] = gtrace_outcome(spec, records)
    row["cases"] = [r for r in records if r["type"] == "case"]
    if args.run:
        with open(f"{run_dir}/console.log", errors="replace") as f:
            print(f.read().replace("\r", ""), end="")
        command = next((r for r in records if r["type"] == "command"), {"exit_code": None})
        row["problems"] = row.get("problems", []) + ([] if command["exit_code"] == 0 else
                                                     [f"the command exited {command['exit_code']}"])
        return row
    row["problems"] = row.get("problems", []) + judge(spec, records, console_tail(run_dir, 12))
    for c in row["cases"]:
        if c["status"] == "skip":
            log(f"kernel {spec['name']}: case {c['case']} skipped: {c['reason']}")
        if c["status"] == "pass" and c["case"] in spec.get("known_failures", {}):  # a race can pass
            log(f"kernel {spec['name']}: case {c['case']} passed, though listed in known_failures: "
                "take it out once it keeps passing")
        if c["status"] == "fail" and c["case"] in spec.get("known_failures", {}):
            c["status"] = "known"
            log(f"kernel {spec['name']}: case {c['case']} failed as known: {spec['known_failures'][c['case']]}")
    return row


def print_table(rows):
    feature_names = ["btf", "ringbuf", "task_storage", "attach_cookie", "bpf_loop", "uprobe_multi"]
    print()
    print(f"{'kernel':<10} {'release':<22} {'pass':>4} {'fail':>4} {'skip':>4} {'out':>4} {'time':>6}  verdict")
    for r in rows:
        n = {s: sum(1 for c in r["cases"] if c["status"] == s) for s in ("pass", "fail", "skip", "known")}
        secs = f"{r['seconds']:.0f}s" if r.get("seconds") else "-"
        verdict = "OK" if not r["problems"] else "FAILED"
        print(f"{r['kernel']:<10} {r['release']:<22} {n['pass']:>4} {n['fail']:>4} {n['skip']:>4} {r['left_out']:>4} "
              f"{secs:>6}  {verdict}" + (f" ({n['known']} known failures)" if n["known"] else ""))
        if r["cases"]:
            print("           cases: " + ", ".join(f"{c['case']} {c['status']} {c.get('seconds', 0):.0f}s" for c in r["cases"]))
        missing = [f for f in feature_names if r["features"] and not r["features"].get(f)]
        print(f"           BPF features missing: {', '.join(missing) or 'none'}; gtrace: {r['gtrace']}")
        for p in r["problems"]:
            print(f"           problem: {p}")
        if r["problems"]:
            print(f"           console log: {r['log']}")


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, so the guest is stopped too
    args.cache = os.path.abspath(args.cache)
    with open(f"{HERE}/kernels.toml", "rb") as f:
        config = tomllib.load(f)
    specs = config["kernel"]
    unknown = set(args.kernel) - {s["name"] for s in specs}
    if unknown:
        print(f"vmtests: unknown kernel {sorted(unknown)}; kernels.toml has {[s['name'] for s in specs]}", file=sys.stderr)
        return 2
    args.ci = args.ci or not (args.all or args.kernel)
    args.timeout = args.timeout or (600 if args.ci else 1800)
    args.case_timeout = args.case_timeout or (240 if args.ci else 600)
    chosen = [s for s in specs if args.all or s["name"] in args.kernel or (args.ci and s["name"] in config["ci"]["kernels"])]
    log = lambda msg: print(f"vmtests: {msg}", flush=True)
    try:
        if not shutil.which("qemu-system-x86_64"):
            raise CannotRun("qemu-system-x86_64 is missing; install qemu-system-x86 (scripts/setup.sh does)")
        if os.geteuid() != 0:
            raise CannotRun("not root: the 9p share of / must read every file the tests use")
        os.makedirs(args.cache, exist_ok=True)
        lock = open(f"{args.cache}/vmtests.lock", "w")  # one run at a time: they share run/ and the CPUs
        fcntl.flock(lock, fcntl.LOCK_EX)
        gtrace, origin = pick_gtrace(args)
        args.keep = kept_dirs((gtrace, args.build, args.cache, args.case_dir, SOURCE))
        accel = pick_accel(args.accel)
        log(f"gtrace under test: {gtrace} ({origin}); accelerator: {accel}")
        rows = [run_kernel(spec, config, args, gtrace, accel, log) for spec in chosen]
    except (CannotRun, kernel_fetch.FetchError) as e:
        print(f"vmtests: cannot run: {e}", file=sys.stderr, flush=True)
        return CANNOT_RUN if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1
    print_table(rows)
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
