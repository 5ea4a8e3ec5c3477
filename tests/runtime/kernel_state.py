"""What a runtime case checks in the system after gtrace: processes of a tree, and gtrace's BPF
programs, maps and uprobes (and its /dev/shm directories) that must be gone."""
import collections
import json
import os
import subprocess
import time

GTRACE_PROG_NAMES = {"cuda_api_enter", "cuda_api_exit", "agent_announce", "on_fork", "on_exec", "on_exit", "on_mmap"}
GTRACE_MAP_NAMES = {"tracked", "events", "counters", "calls", "agent_slots"}


def process_tree(root):
    children = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children[int(f.read().rpartition(")")[2].split()[1])].append(int(entry))
            except OSError:
                pass
    out = [root]
    for pid in out:
        out.extend(children.get(pid, []))
    return out


def leftover_bpf_objects():
    """gtrace's programs, maps and uprobes still in the kernel. The kernel frees them
    asynchronously (RCU) after their last fd closes: allow 3 s."""
    left = []
    for _ in range(30):
        progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout or "[]")
        maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True).stdout or "[]")
        perf = json.loads(subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True, text=True).stdout or "[]")
        left = sorted(p.get("name", "") for p in progs if p.get("name") in GTRACE_PROG_NAMES)
        left += sorted("map " + m.get("name", "") for m in maps if m.get("name") in GTRACE_MAP_NAMES)
        left += sorted("uprobe " + p.get("filename", "") for p in perf if "cuda" in p.get("filename", ""))
        left += sorted(f"/dev/shm/{d}" for d in os.listdir("/dev/shm")
                       if d.startswith("gtrace-") and not os.path.exists(f"/proc/{d[7:]}"))
        if not left:
            return left
        time.sleep(0.1)
    return left
