"""The step breakdown a scenario really had, from sources independent of gtrace: the GPU
simulator's log of every kernel and copy (GTSIM_LOG) and the demo's own timing of each wait for
a batch and for a lock (GTRACE_TRUTH_LOG). Credited in the profiler's priority order (Kernel,
Memcpy, …, DataLoader, Blocked) over the same steps gtrace reported, it must match gtrace's
figures. (Blocked is checked only where the demo waits for a lock: elsewhere the truth knows no
sleeps, and gtrace's few short ones are within the tolerance.)"""
import bisect
import glob
import json

CHECKED = ("Kernel", "Memcpy", "DataLoader", "Blocked")


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def subtract(intervals, taken):
    """intervals minus taken (both unions)."""
    out, j = [], 0
    for s, e in intervals:
        cur = s
        while j < len(taken) and taken[j][1] <= cur:
            j += 1
        k = j
        while k < len(taken) and taken[k][0] < e:
            if taken[k][0] > cur:
                out.append([cur, taken[k][0]])
            cur = max(cur, taken[k][1])
            k += 1
        if cur < e:
            out.append([cur, e])
    return out


def clipped_ns(intervals, lo, hi, starts=None):
    """Time of a union of intervals (sorted, disjoint) inside [lo, hi)."""
    starts = starts if starts is not None else [s for s, _ in intervals]
    i = max(0, bisect.bisect_right(starts, lo) - 1)
    total = 0
    while i < len(intervals) and intervals[i][0] < hi:
        s, e = intervals[i]
        total += max(0, min(e, hi) - max(s, lo))
        i += 1
    return total


def load_sources(sim_log, truth_prefix):
    gpu = {}  # pid -> {"Kernel": [...], "Memcpy": [...]}
    with open(sim_log) as f:
        for line in f:
            op = json.loads(line)
            kind = {"kernel": "Kernel", "memcpy": "Memcpy"}.get(op.get("kind"))
            if kind:
                start = op["mono_start"]
                gpu.setdefault(op["pid"], {"Kernel": [], "Memcpy": []})[kind].append([start, start + op["end"] - op["start"]])
    loaders = {}  # "0" for rank 0, "pid123" for a process without a rank -> (loader intervals, optimizer ends)
    for path in glob.glob(truth_prefix + ".*"):
        key = path.rsplit(".", 1)[1]
        steps = [json.loads(line) for line in open(path) if line.strip()]
        loaders[key] = ([s["loader"] for s in steps], [s["optimizer_end"] for s in steps], [s["blocked"] for s in steps if "blocked" in s])
    return gpu, loaders


def compare(summary, sim_log, truth_prefix, tolerance=0.05, truth_shares=None):
    """Returns a list of failures (empty: every checked share within tolerance of the truth).
    truth_shares, if given, is filled with each rank's true shares of its steps: name -> {part: share}."""
    gpu, loaders = load_sources(sim_log, truth_prefix)
    failures = []
    for r in summary["ranks"]:
        ops = gpu.get(r["pid"])
        key = str(r["rank"]) if r["rank"] is not None else f"pid{r['pid']}"
        if ops is None or key not in loaders:
            failures.append(f"{r['name']}: no ground truth (sim ops for pid {r['pid']}, loader log {key})")
            continue
        kernel = union(ops["Kernel"])
        memcpy = subtract(union(ops["Memcpy"]), kernel)
        loader = subtract(subtract(union(loaders[key][0]), kernel), memcpy)
        # The demo's own timing of its waits for a lock (blocked_lock): asleep, nothing above it.
        blocked = subtract(subtract(subtract(union(loaders[key][2]), kernel), memcpy), loader)
        truth_parts = {"Kernel": kernel, "Memcpy": memcpy, "DataLoader": loader, "Blocked": blocked}
        starts = {c: [s for s, _ in v] for c, v in truth_parts.items()}
        ends = sorted(loaders[key][1])
        totals, truth, wall, matched = {c: 0.0 for c in CHECKED}, {c: 0.0 for c in CHECKED}, 0.0, 0
        for step in r["per_step"]:
            lo = r["clock_origin_ns"] + round(step["start_ms"] * 1e6)  # times in the report count from the capture's start
            hi = lo + round(step["wall_ms"] * 1e6)
            # The step must be one the program made: it ends where an optimizer step returned.
            if not any(abs(e - hi) < 1_000_000 for e in ends):
                continue
            matched += 1
            wall += hi - lo
            for c in CHECKED:
                totals[c] += step["breakdown_ms"][c] * 1e6
                truth[c] += clipped_ns(truth_parts[c], lo, hi, starts[c])
        if matched < max(3, len(r["per_step"]) // 2):
            failures.append(f"{r['name']}: only {matched} of {len(r['per_step'])} steps end where an optimizer step returned")
            continue
        if truth_shares is not None:
            truth_shares[r["name"]] = {c: truth[c] / wall for c in CHECKED}
        for c in CHECKED:
            got, want = totals[c] / wall, truth[c] / wall
            print(f"{r['name']}: {c}: gtrace {got * 100:.1f}%, truth {want * 100:.1f}% of {matched} steps", flush=True)
            if abs(got - want) > tolerance:
                failures.append(f"{r['name']}: {c} {got * 100:.1f}% of the step, truth {want * 100:.1f}%")
    return failures
