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


def kill_tree(root):
    """SIGKILL to a process and every descendant, whatever session or group each is in (torch 2.x's
    torchrun starts its ranks in sessions of their own: a killpg of the agent's leaves them running)."""
    import signal
    for pid in reversed(process_tree(root)):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def bpf_holders():
    """("prog_id"|"map_id", id) -> pids of the live processes holding an fd to that program (a
    link's fd counts for its program) or map, from /proc/*/fdinfo. bpftool's own "pids" field
    needs a bpftool built with skeletons, which Debian's is not."""
    holders = collections.defaultdict(set)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{entry}/fd/{fd}").startswith("anon_inode:bpf"):
                    continue
                with open(f"/proc/{entry}/fdinfo/{fd}") as f:
                    for line in f:
                        key, _, value = line.partition(":")
                        if key in ("prog_id", "map_id"):
                            holders[(key, int(value))].add(int(entry))
            except (OSError, ValueError):
                pass
    return holders


def leftover_bpf_objects():
    """gtrace's programs, maps and uprobes still in the kernel. The kernel frees them
    asynchronously (RCU) after their last fd closes: allow 5 s (another case's capture, beside
    this one, may be ending). Objects that only live processes outside this runner's process
    tree hold are another capture's (a case running beside this one, a soak), not this case's
    leftovers; one held by no process, or by one of the case's processes, is a leftover."""
    left = []
    for _ in range(50):
        progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout or "[]")
        maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True).stdout or "[]")
        perf = json.loads(subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True, text=True).stdout or "[]")
        holders, ours = bpf_holders(), set(process_tree(os.getpid()))

        def foreign(kind, object_id):
            pids = holders.get((kind, object_id))
            return bool(pids) and not pids & ours

        # A program is another capture's if it holds it, or one of its perf events (uprobes) does.
        foreign_perf = [p for p in perf if p.get("pid") is not None and p["pid"] not in ours]
        foreign_progs = {p["id"] for p in progs if foreign("prog_id", p["id"])} | {p.get("prog_id") for p in foreign_perf}
        foreign_maps = {m for p in progs if p["id"] in foreign_progs for m in p.get("map_ids", [])}
        left = sorted(p.get("name", "") for p in progs if p.get("name") in GTRACE_PROG_NAMES and p["id"] not in foreign_progs)
        left += sorted("map " + m.get("name", "") for m in maps if m.get("name") in GTRACE_MAP_NAMES
                       and m["id"] not in foreign_maps and not foreign("map_id", m["id"]))
        left += sorted("uprobe " + p.get("filename", "") for p in perf if "cuda" in p.get("filename", "")
                       and p not in foreign_perf)
        left += sorted(f"/dev/shm/{d}" for d in os.listdir("/dev/shm")
                       if d.startswith("gtrace-") and not os.path.exists(f"/proc/{d[7:]}"))
        if not left:
            return left
        time.sleep(0.1)
    return left
