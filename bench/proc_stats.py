"""What a bench reads about a running process from /proc: resident memory, CPU time, open fds,
threads. A process that is gone reads as None (fds, threads) or 0 (memory, CPU)."""
import os


def status_field(pid, name):
    """A field of /proc/PID/status as its first number ("VmRSS" gives kB), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mib(pid):
    return (status_field(pid, "VmRSS") or 0) / 1024


def threads(pid):
    return status_field(pid, "Threads")


def cpu_seconds(pid):
    """user + sys of a process (its threads included), from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    """How many fds the process has open, or None once it is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
