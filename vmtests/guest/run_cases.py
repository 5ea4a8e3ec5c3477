#!/usr/bin/python3
"""Stage 2 of a vmtests guest: runs in the booted kernel, on the host's root filesystem (read-only,
under a tmpfs overlay). Records the kernel's BPF features, what `gtrace attach` does on it, then
runs each runtime case with tests/runtime/run_case.py. Every result is one JSON line on the second
serial port (the host reads that file); the cases' own output goes to the console log."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time


def emit(out, record):
    out.write(json.dumps(record) + "\n")
    out.flush()


def kallsyms():
    names = set()
    with open("/proc/kallsyms") as f:
        for line in f:
            names.add(line.split()[2])
    return names


def bpf_features():
    """What gtrace's BPF objects use, as this kernel offers it: bpftool's probes for map types
    and helpers, kallsyms for the multi-uprobe link (bpftool does not probe link types)."""
    probe = subprocess.run(["bpftool", "-j", "feature", "probe", "kernel"], capture_output=True, text=True)
    facts = json.loads(probe.stdout or "{}")
    maps = facts.get("map_types", {})
    kprobe = set(facts.get("helpers", {}).get("kprobe_available_helpers", []))
    return {
        "btf": os.path.exists("/sys/kernel/btf/vmlinux"),
        "ringbuf": maps.get("have_ringbuf_map_type", False),
        "task_storage": maps.get("have_task_storage_map_type", False),
        "attach_cookie": "bpf_get_attach_cookie" in kprobe,
        "bpf_loop": "bpf_loop" in kprobe,
        "uprobe_multi": "bpf_uprobe_multi_link_attach" in kallsyms(),
    }


def gtrace_attach_outcome(gtrace):
    """`gtrace attach` for 3 s to a process without CUDA: its exit code and stderr."""
    target = subprocess.Popen(["sleep", "60"])
    try:
        r = subprocess.run([gtrace, "attach", "--pid", str(target.pid), "-d", "3", "-q", "--no-gpu", "-f",
                            "-o", "/tmp/vmtests-attach.json"], capture_output=True, text=True, timeout=300)
        return {"exit_code": r.returncode, "stderr": r.stderr.strip().splitlines()}
    except subprocess.TimeoutExpired:
        return {"exit_code": None, "stderr": ["gtrace attach did not stop within 300 s"]}
    finally:
        target.kill()
        target.wait()


def run_case(cfg, case, timeout):
    build = cfg["build"]
    cmd = [sys.executable, f"{cfg['source']}/tests/runtime/run_case.py", case, "--gtrace", cfg["gtrace"],
           "--programs", f"{build}/programs", "--stubs", f"{build}/tests/stubs", "--source", cfg["source"],
           "--gpusim", f"{build}/gpusim"]
    name = os.path.basename(case).removesuffix(".toml")
    print(f"=== vmtests case {name}", flush=True)
    start = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        deadline = start + timeout
        for line in p.stdout:  # stream to the console while keeping the tail for the report
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
            if time.time() > deadline:
                raise subprocess.TimeoutExpired(cmd, timeout)
        rc = p.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        rc = "timeout"
    sys.stdout.flush()
    status = {0: "pass", 77: "skip"}.get(rc, "fail")
    reason = next((x for x in reversed(lines) if re.match(r"(FAIL|SKIPPED|cannot run)", x)), lines[-1] if lines else "")
    return {"type": "case", "case": name, "status": status, "exit_code": rc,
            "seconds": round(time.time() - start, 1), "reason": "" if status == "pass" else reason[:300]}


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    os.environ.update(cfg["env"])
    socket.sethostname(cfg["hostname"])  # the host's name, which its /etc/hosts resolves (gloo needs that)
    with open(cfg["results"], "w") as out:
        emit(out, {"type": "kernel", "release": os.uname().release, "features": bpf_features()})
        if cfg.get("command"):  # vmtests/run.sh --run: a command instead of the cases
            emit(out, {"type": "command", "exit_code": subprocess.run(cfg["command"], shell=True).returncode})
            emit(out, {"type": "done"})
            return
        emit(out, {"type": "attach", **gtrace_attach_outcome(cfg["gtrace"])})
        for case in cfg["cases"]:
            emit(out, run_case(cfg, case, cfg.get("case_timeout", 600)))
        emit(out, {"type": "done"})


if __name__ == "__main__":
    main()
