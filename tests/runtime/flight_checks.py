"""Checks on the dumps of a --flight-recorder capture (`[expect.flight]`, tests/runtime/README.md).

The dumps of `-o OUT.ext` are OUT-1.ext, OUT-2.ext, ... and each must be a valid, complete trace
whose otherData.flight_recorder says why it was written and which window it holds; no event in
it may end before its window (a window is what it says it is); and beside it, OUT-N.report.txt."""
import os
import re


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    raise SystemExit(1)


def dump_paths(output):
    stem, ext = os.path.splitext(output)
    paths = []
    while os.path.exists(f"{stem}-{len(paths) + 1}{ext}"):
        paths.append(f"{stem}-{len(paths) + 1}{ext}")
    return paths


def step_times(events, marker):
    """Per pid, the times between the ends of consecutive step-marker ranges, in seconds."""
    ends = {}
    for e in events:
        if e.get("cat") == "torch_range" and e.get("ph") == "X" and re.search(marker, e["name"]):
            ends.setdefault(e["pid"], []).append(e["ts"] + e["dur"])
    return {pid: [(b - a) / 1e6 for a, b in zip(sorted(t), sorted(t)[1:])] for pid, t in ends.items()}


def check_dump(path, trace):
    fr = trace.get("otherData", {}).get("flight_recorder")
    if not fr:
        fail(f"{path}: otherData has no flight_recorder")
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    if not events:
        fail(f"{path}: no slices")
    start_us = fr["window_from_ns"] / 1000
    early = [e for e in events if e["ts"] + e.get("dur", 0) < start_us - 1]
    if early:
        fail(f"{path}: {len(early)} slices end before the window's start ({fr['window_from_ns']} ns), e.g. {early[0]}")
    report = os.path.splitext(path)[0] + ".report.txt"
    if not os.path.isfile(report):
        fail(f"{path}: no {report} beside it")
    print(f"ok: {path}: {len(events)} slices in a {fr['window_s']:.1f} s window, reason {fr['reason']!r}", flush=True)
    return fr, events


def check_flight(flight, load_trace):
    paths = dump_paths(flight["output"])
    if len(paths) < flight.get("min_dumps", 1):
        fail(f"{len(paths)} flight recorder dumps of {flight['output']}, expected at least {flight.get('min_dumps', 1)}")
    dumps = []
    for path in paths:
        trace = load_trace(path)
        dumps.append((path, *check_dump(path, trace)))
    for pattern in flight.get("reasons", []):
        if not any(re.search(pattern, fr["reason"]) for _, fr, _ in dumps):
            fail(f"no dump's reason matches /{pattern}/: {[fr['reason'] for _, fr, _ in dumps]}")
    if "max_window_s" in flight:
        for path, fr, _ in dumps:
            if fr["window_s"] > flight["max_window_s"]:
                fail(f"{path}: a {fr['window_s']:.1f} s window, expected at most {flight['max_window_s']} s")
    if "slow_step" in flight:
        want = flight["slow_step"]
        slow = [(p, fr, ev) for p, fr, ev in dumps if fr["reason"].startswith("slow step")]
        if not slow:
            fail(f"no dump for a slow step: {[fr['reason'] for _, fr, _ in dumps]}")
        path, fr, events = slow[0]
        times = step_times(events, want["marker"])
        longest = max((max(t) for t in times.values() if t), default=0)
        if longest < want["min_s"]:
            fail(f"{path}: the longest step in the dump takes {longest:.3f} s, expected the slow one (>= {want['min_s']} s): {times}")
        print(f"ok: {path} holds the slow step ({longest:.3f} s)", flush=True)
        # Recording went on: a later dump holds calls made after this dump's window.
        later = [ev for p, f, ev in dumps if f["window_end_ns"] > fr["window_end_ns"]]
        end_us = fr["window_end_ns"] / 1000
        if not any(e.get("cat") == "cuda_api" and e["ts"] > end_us for ev in later for e in ev):
            fail(f"no later dump holds a call made after {path}'s window: did recording go on?")
        print("ok: recording went on after the slow step's dump", flush=True)
