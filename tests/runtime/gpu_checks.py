"""GPU checks of a runtime case against the GPU simulator's ground truth (GTSIM_LOG): every
kernel and copy the simulator executed while the agent was active is in the trace with its
modelled duration (within 1 us), its stream, and a flow from the very CPU call that issued it
(each launch has a unique grid, each copy its size and direction)."""
import collections
import json
import re


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    raise SystemExit(1)


def load_truth(path):
    ops = []
    with open(path) as f:
        for line in f:
            op = json.loads(line)
            if op["kind"] in ("kernel", "memcpy", "memset"):
                ops.append(op)
    return ops


def call_containing(calls_by_thread, pid, tid, ts):
    for c in calls_by_thread.get((pid, tid), []):
        if c["ts"] <= ts <= c["ts"] + c["dur"]:
            return c
    return None


def check_gpu(trace, expect):
    """expect["gpu_truth"]: the GTSIM_LOG file; expect["gpu_window"]: "all" (launch mode: every
    op) or "attached" (ops whose correlation lies within what the trace saw, per process)."""
    events = trace["traceEvents"]
    gpu = [e for e in events if e["ph"] == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = [e for e in events if e["ph"] == "X" and e.get("cat") == "cuda_api"]
    by_thread = collections.defaultdict(list)
    for c in calls:
        by_thread[(c["pid"], c["tid"])].append(c)
    starts = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {(e["pid"], e["args"]["correlation"]): e for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    in_trace = {(e["pid"], e["args"]["correlation"], e["args"]["grid"][0] if "grid" in e["args"] else e["args"]["bytes"]): e
                for e in gpu}
    # One call per CUPTI call: while the uprobes come off, a call seen by both them and the
    # agent must be in the trace once. (Uprobe-recorded calls alone can share an id: two driver
    # calls a runtime call without a probe of its own made — rare, seen once, not asserted.)
    by_id = collections.defaultdict(list)
    for c in calls:
        if c.get("args", {}).get("correlation"):
            by_id[(c["pid"], c["args"]["correlation"])].append(c["args"].get("recorded_by"))
    twice = [k for k, who in by_id.items() if len(who) > 1 and "agent" in who]
    if twice:
        fail(f"{len(twice)} correlation ids are on a call the agent recorded and on another, e.g. {twice[:3]}")
    # A thread is in one outermost CUDA call at a time (nested calls are not events): two calls of
    # one thread that overlap are one call recorded twice — by the uprobes and by the agent,
    # whether or not the uprobes' copy carries a correlation id.
    overlapping = []
    for (pid, tid), thread_calls in by_thread.items():
        thread_calls.sort(key=lambda c: c["ts"])
        for a, b in zip(thread_calls, thread_calls[1:]):
            if b["ts"] < a["ts"] + a["dur"]:
                overlapping.append((pid, tid, a["name"], a["args"].get("recorded_by"), b["name"], b["args"].get("recorded_by"), a["ts"]))
    if overlapping:
        fail(f"{len(overlapping)} pairs of one thread's CUDA calls overlap (a call recorded twice?), e.g. {overlapping[:3]}")
    truth = load_truth(expect["gpu_truth"])
    if not truth:
        fail("the simulator logged no GPU work")
    # In a container the simulator logs the PID its namespace gave it; the trace's process label
    # names both ("(pid HOST · container NAME, pid INNER)").
    inner = {}
    for e in events:
        if e["ph"] == "M" and e.get("name") == "process_name":
            m = re.search(r"\(pid (\d+) · container .*, pid (\d+)\)$", e["args"]["name"])
            if m:
                inner[int(m.group(2))] = int(m.group(1))
    traced = {e["pid"] for e in events}
    for op in truth:
        if op["pid"] not in traced and op["pid"] in inner:
            op["pid"] = inner[op["pid"]]
    kinds = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
    attached = expect.get("gpu_window", "all") == "attached"
    process_window, kind_window = {}, {}
    if attached:
        # Per process and kind, from the first to the last linked op: a call already in flight
        # when the agent switched CUPTI's callbacks on (or still in flight at the end) cannot carry
        # its id, and the agent enables the activity kinds one after another (kernels, then
        # copies, then sets), as any CUPTI client must: a copy issued between the first two calls
        # is not recorded while the kernels beside it are.
        # A kind with no linked op at all is held to the process's window: none missing then.
        def widen(window, key, corr):
            lo, hi = window.get(key, (1 << 62, 0))
            window[key] = (min(lo, corr), max(hi, corr))
        for (pid, corr) in ends:
            widen(process_window, pid, corr)
        for e in gpu:
            if (e["pid"], e["args"]["correlation"]) in ends:
                widen(kind_window, (e["pid"], e["cat"]), e["args"]["correlation"])
        unlinked = {e["pid"] for e in gpu} - set(process_window)
        if unlinked:
            fail(f"processes {sorted(unlinked)} have GPU work in the trace but none of it is linked to a call")
    checked = collections.Counter()
    for op in truth:
        if attached:
            lo, hi = kind_window.get((op["pid"], kinds[op["kind"]])) or process_window.get(op["pid"], (1, 0))
            if not lo <= op["correlation"] <= hi:
                continue
        key = (op["pid"], op["correlation"], op["grid"][0] if op["kind"] == "kernel" else op["bytes"])
        e = in_trace.get(key)
        if e is None:
            fail(f"simulated {op['kind']} {key} (stream {op['stream']}) is missing from the trace")
        if e["cat"] != kinds[op["kind"]] or e["args"]["stream"] != op["stream"]:
            fail(f"{key}: trace has {e['cat']} on stream {e['args']['stream']}, simulated {op['kind']} on {op['stream']}")
        want_us = (op["end"] - op["start"]) / 1000.0
        if abs(e["dur"] - want_us) > 1.0:
            fail(f"{key}: duration {e['dur']} us, modelled {want_us} us")
        if abs(e["ts"] - op["mono_start"] / 1000.0) > 50:
            fail(f"{key}: starts at {e['ts']} us, simulated at {op['mono_start'] / 1000.0} us (clock offset)")
        flow_end = ends.get((op["pid"], op["correlation"]))
        if flow_end is None:
            fail(f"{key}: no flow from its CPU call")
        flow_start = starts.get(flow_end["id"])
        call = flow_start and call_containing(by_thread, flow_start["pid"], flow_start["tid"], flow_start["ts"])
        # Without the callback API (another tool holds it) calls carry no id: the flow still must
        # start inside the right call, which the grid or size below proves.
        if call is None or call["args"].get("correlation", op["correlation"]) != op["correlation"]:
            fail(f"{key}: the flow does not start in the call that issued it ({call})")
        if call["args"].get("recorded_by") == "agent":
            # Recorded in the agent's callback: the call's own correlation id is the proof (the
            # arguments are the GPU op's, from the same CUPTI).
            if call["args"].get("correlation") != op["correlation"]:
                fail(f"{key}: linked to an agent-recorded call with correlation {call['args'].get('correlation')}")
        elif op["kind"] == "kernel" and call["args"].get("grid") != op["grid"]:
            fail(f"kernel {key} linked to a launch with grid {call['args'].get('grid')}, simulated grid {op['grid']}")
        elif op["kind"] != "kernel" and call["args"].get("bytes") != op["bytes"]:
            fail(f"{op['kind']} {key} linked to a call of {call['args'].get('bytes')} bytes, simulated {op['bytes']}")
        checked[op["kind"]] += 1
    minimum = expect.get("gpu_min_ops", 1)
    if sum(checked.values()) < minimum:
        fail(f"only {dict(checked)} simulated ops checked, expected at least {minimum}")
    print(f"ok: every simulated op in the window is in the trace, timed, on its stream, linked to its call: {dict(checked)}")
    if "gpu_unlinked_max" in expect:  # ops the agent recorded but could not link, whatever the reason
        unlinked = trace["otherData"]["gpu"]["unlinked"]
        if sum(unlinked.values()) > expect["gpu_unlinked_max"]:
            fail(f"GPU ops left unlinked {unlinked}, expected at most {expect['gpu_unlinked_max']} in all")
        print(f"ok: GPU ops left unlinked {unlinked}, at most {expect['gpu_unlinked_max']}")
