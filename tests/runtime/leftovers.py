#!/usr/bin/python3
"""Processes the test suite left running. A test that kills a torchrun agent's process group but
not its ranks (torch 2.x starts each in a session of its own) leaves jobs that step until the
machine stops, taking the CPU from every test after it: under qemu's emulation (vmtests) that is
the difference between 3 minutes and a timeout.

scripts/test.sh exports GTRACE_SUITE_ID to everything the suite starts; processes still carrying
it afterwards are the suite's leftovers (a test that clears its programs' environment hides them).

  leftovers.py check ID [--spare PID]   each process whose environment holds GTRACE_SUITE_ID=ID,
                                        but PID's tree (a stage running beside the suite) and this
                                        one's ancestors: named, killed with its tree; exit 1 if any
  leftovers.py busy [SECONDS]           the processes using more than 20% of a CPU over SECONDS
"""
import json
import os
import sys
import time

from kernel_state import kill_tree, process_tree

CLK_TCK = os.sysconf("SC_CLK_TCK")


def stat_of(pid):
    """(parent, start ticks since boot, CPU ticks, command line) or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]), cmd


def processes():
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (s := stat_of(int(entry))) is not None and s[3]:  # kernel threads have no cmdline
            out[int(entry)] = s
    return out


def has_env(pid, entry):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:
        return False


def ancestors(pid):
    out = []
    while pid > 1 and (s := stat_of(pid)) is not None:
        out.append(pid)
        pid = s[0]
    return out


def busy(seconds=1.0):
    before = processes()
    time.sleep(seconds)
    after = processes()
    rows = []
    for pid, s in after.items():
        if pid in before and before[pid][1] == s[1]:
            share = (s[2] - before[pid][2]) / CLK_TCK / seconds
            if share > 0.2:
                rows.append((share, pid, s[3]))
    return sorted(rows, reverse=True)


def main():
    if len(sys.argv) in (3, 5) and sys.argv[1] == "check":
        marker = f"GTRACE_SUITE_ID={sys.argv[2]}".encode()
        spared = set(ancestors(os.getpid()))
        if len(sys.argv) == 5 and sys.argv[3] == "--spare":
            spared.update(process_tree(int(sys.argv[4])))
        left = {pid: s for pid, s in processes().items() if pid not in spared and has_env(pid, marker)}
        # Report the roots only: a leftover's children go with it.
        roots = [pid for pid, s in sorted(left.items()) if s[0] not in left]
        now = time.clock_gettime(time.CLOCK_BOOTTIME)
        for pid in roots:
            print(f"leftovers: pid {pid} ({sum(1 for p in process_tree(pid) if p in left)} processes), up "
                  f"{now - left[pid][1] / CLK_TCK:.0f} s: {left[pid][3][:200]}", flush=True)
            kill_tree(pid)
        if roots:
            print(f"leftovers: the suite left {len(roots)} process trees running (killed now); the test that "
                  "started each must stop its whole tree (tests/runtime/kernel_state.py kill_tree)", flush=True)
        return 1 if roots else 0
    if len(sys.argv) >= 2 and sys.argv[1] == "busy":
        for share, pid, cmd in busy(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0):
            print(f"{share * 100:5.0f}%  {pid:>7}  {cmd[:160]}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
