"""Reads a trace gtrace wrote, in any of its formats, as one shape: a Chrome-trace-like dict
{"traceEvents": [...], "otherData": {...}}, so that the runtime checks hold for every format.

  .json         gtrace's Chrome JSON, as it is
  .pftrace      Perfetto protobuf, decoded by Debian's protobuf runtime (python3-protobuf) with
                classes protoc generates from userspace/format/pftrace.proto — not by gtrace's own
                reader — and checked for what trace_processor relies on (check_pftrace)
  a directory   Kineto JSON, a file per rank (*.pt.trace.json, and other/ for processes without one)

Events come back as the JSON writer writes them: calls, ranges, GPU work and sampled frames as
"X" slices (GPU tracks and sample tracks with the JSON writer's pseudo thread ids), flows as an
"s"/"f" pair, memory as "C" counters, process and thread names as "M" metadata."""
import collections
import glob
import json
import os
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "..", "userspace", "format", "pftrace.proto")
SAMPLE_TID_OFFSET = 1 << 30
OFF_CPU_TID_OFFSET = 1 << 29  # a thread's "off CPU" track
GPU_TRACK_BASE = 1_000_000_000
CLOCK_MONOTONIC = 3
INCREMENTAL_CLOCKS = range(64, 72)  # gtrace's per-sequence delta clocks (an event takes the one just below it)
TRUNCATED = re.compile(r"^\[truncated: ")

_pb2 = None


def pftrace_pb2():
    """The classes protoc generates from pftrace.proto (compiled once per process)."""
    global _pb2
    if _pb2 is None:
        import importlib.util
        out = tempfile.mkdtemp(prefix="gtrace-pb2-")
        subprocess.run(["protoc", f"-I{os.path.dirname(PROTO)}", f"--python_out={out}", PROTO], check=True)
        spec = importlib.util.spec_from_file_location("pftrace_pb2", os.path.join(out, "pftrace_pb2.py"))
        _pb2 = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_pb2)
    return _pb2


def load_trace(path):
    if os.path.isdir(path):
        return load_kineto(path)
    if path.endswith(".pftrace") or path.endswith(".pftrace.partial"):
        return decode_pftrace(path)
    with open(path) as f:
        return json.load(f)  # must be complete, valid JSON whatever stopped the capture


def us(ns):
    return ns / 1000.0


def frame_text(function, path, line):
    return f"{function} ({path}:{line})" if path else function


def parse_launch(text, call):
    """The "launch" annotation back into the JSON writer's arguments."""
    m = re.match(r"grid \[(\d+),(\d+),(\d+)\] block \[(\d+),(\d+),(\d+)\] (.*)", text)
    if not m:
        return {"launch": text}
    args = {"grid": [int(x) for x in m.group(1, 2, 3)], "block": [int(x) for x in m.group(4, 5, 6)]}
    rest = m.group(7)
    if call:
        args["shared_mem"] = int(rest.split()[1])
    else:
        r = re.match(r"registers_per_thread (\d+) shared_memory (\d+)\+(\d+)( graph)?", rest)
        args.update(registers_per_thread=int(r.group(1)), shared_memory_static=int(r.group(2)),
                    shared_memory_dynamic=int(r.group(3)))
        if r.group(4):
            args["graph"] = True
    return args


class Sequence:
    def __init__(self):
        self.cleared = False
        self.tables = collections.defaultdict(dict)
        self.track = None
        self.clock = None
        self.incremental = {}  # incremental clock id -> its value
        self.offset = {}       # ... -> CLOCK_MONOTONIC less that value


def decode_pftrace(path, problems=None):
    """The trace as Chrome-like events. `problems`: a list to collect what a strict reader
    (trace_processor) would object to; None: raise on the first."""
    pb2 = pftrace_pb2()
    trace = pb2.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())

    def problem(text):
        if problems is None:
            raise ValueError(f"{path}: {text}")
        problems.append(text)

    seqs = collections.defaultdict(Sequence)
    tracks, events, other = {}, [], {}
    open_slices = collections.defaultdict(list)
    flow_starts, flow_ends = {}, {}
    attributes = {}
    interned_kinds = ["event_categories", "event_names", "debug_annotation_names", "debug_annotation_string_values",
                      "source_locations", "source_paths", "function_names", "frames", "callstacks"]

    def lookup(seq, kind, iid):
        value = seq.tables[kind].get(iid)
        if value is None:
            problem(f"interned {kind} iid {iid} used but not defined on its sequence")
        return value

    def interned_str(seq, kind, iid):
        v = lookup(seq, kind, iid)
        if v is None:
            return "?"
        return v.str.decode() if kind in ("debug_annotation_string_values", "source_paths", "function_names") else v.name

    def track_ids(uuid):
        """(pid, tid) the JSON writer would give the track's events."""
        t = tracks[uuid]
        if t.HasField("thread"):
            return t.thread.pid, t.thread.tid
        parent = tracks.get(t.parent_uuid)
        if parent is None:
            problem(f"track {uuid} has parent {t.parent_uuid}, which has no descriptor")
            return 0, 0
        if parent.HasField("thread"):
            offset = OFF_CPU_TID_OFFSET if t.name == "off CPU" else SAMPLE_TID_OFFSET
            return parent.thread.pid, parent.thread.tid + offset
        m = re.match(r"GPU (\d+) · stream (\d+)", t.name)
        tid = GPU_TRACK_BASE + int(m.group(1)) * 100000 + int(m.group(2)) % 100000 if m else 0
        return parent.process.pid, tid

    for p in trace.packet:
        sid = p.trusted_packet_sequence_id
        if not p.HasField("trusted_packet_sequence_id"):
            problem("a packet without trusted_packet_sequence_id")
        seq = seqs[sid]
        if p.sequence_flags & 1:
            seq.__init__()
            seq.cleared = True
        uses_interning = p.HasField("track_event")
        if uses_interning and not (p.sequence_flags & 2):
            problem(f"sequence {sid}: a track event without SEQ_NEEDS_INCREMENTAL_STATE")
        if p.sequence_flags & 2 and not seq.cleared:
            problem(f"sequence {sid}: a packet needs incremental state before any packet cleared it")
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            seq.clock = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
            seq.track = d.track_event_defaults.track_uuid if d.HasField("track_event_defaults") else None
        if p.HasField("clock_snapshot"):
            clocks = {c.clock_id: c for c in p.clock_snapshot.clocks}
            for cid in INCREMENTAL_CLOCKS:
                if cid not in clocks:
                    continue
                if CLOCK_MONOTONIC not in clocks or not clocks[cid].is_incremental:
                    problem(f"sequence {sid}: incremental clock {cid} is not tied to CLOCK_MONOTONIC")
                seq.incremental[cid] = clocks[cid].timestamp  # the clock's value then ...
                seq.offset[cid] = clocks[CLOCK_MONOTONIC].timestamp - clocks[cid].timestamp  # ... and MONOTONIC's
        if p.HasField("interned_data"):
            for kind in interned_kinds:
                for entry in getattr(p.interned_data, kind):
                    if entry.iid == 0:
                        problem(f"interned {kind} with iid 0")
                    old = seq.tables[kind].get(entry.iid)
                    if old is not None and old != entry:
                        problem(f"interned {kind} iid {entry.iid} redefined")
                    seq.tables[kind][entry.iid] = entry
        ts = None
        if p.HasField("timestamp"):
            clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else seq.clock
            if clock in INCREMENTAL_CLOCKS:
                if clock not in seq.incremental:
                    problem(f"sequence {sid}: a timestamp on incremental clock {clock} before its clock snapshot")
                    seq.incremental[clock], seq.offset[clock] = 0, 0
                seq.incremental[clock] += p.timestamp
                ts = seq.incremental[clock] + seq.offset[clock]
            elif clock == CLOCK_MONOTONIC:
                ts = p.timestamp
            else:
                problem(f"a timestamp on clock {clock}")
        if p.HasField("trace_attributes"):
            for a in p.trace_attributes.attribute:
                attributes[a.key] = a.string_value if a.HasField("string_value") else a.long_value
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                problem(f"track {d.uuid}: its parent {d.parent_uuid} is not described before it")
            tracks[d.uuid] = d
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        uuid = te.track_uuid if te.HasField("track_uuid") else seq.track
        if uuid not in tracks:
            problem(f"an event on track {uuid}, which has no descriptor before it")
            continue
        if ts is None:
            problem("a track event without a timestamp")
            continue
        pid, tid = track_ids(uuid)
        if te.type == te.TYPE_COUNTER:
            t = tracks[uuid]
            m = re.search(r"device (\d+)", t.name)
            args = {"allocated_bytes": te.counter_value}
            if m:
                args["device"] = int(m.group(1))
            events.append({"name": t.name, "cat": "gpu_memory", "ph": "C", "pid": pid, "ts": us(ts), "args": args})
            continue
        if te.type == te.TYPE_SLICE_END:
            if not open_slices[uuid]:
                problem(f"track {uuid}: a slice end without a begin")
                continue
            ev = open_slices[uuid].pop()
            ev["dur"] = us(ts) - ev["ts"]
            if ev["dur"] < 0:
                problem(f"track {uuid}: a slice ends before it begins")
            continue
        cat = interned_str(seq, "event_categories", te.category_iids[0]) if te.category_iids else ""
        args = {}
        if cat == "cuda_api,agent":  # the agent recorded the call (the JSON writer's recorded_by)
            cat, args["recorded_by"] = "cuda_api", "agent"
        name = interned_str(seq, "event_names", te.name_iid) if te.HasField("name_iid") else te.name
        for a in te.debug_annotations:
            key = interned_str(seq, "debug_annotation_names", a.name_iid)
            if a.HasField("string_value_iid"):
                value = interned_str(seq, "debug_annotation_string_values", a.string_value_iid)
            elif a.HasField("pointer_value"):
                value = hex(a.pointer_value)
            else:
                value = getattr(a, a.WhichOneof("value"))
            if key == "launch":
                args.update(parse_launch(value, cat == "cuda_api"))
            else:
                args[key] = value
        for fid in te.flow_ids:
            if fid in flow_starts:
                problem(f"flow {fid} starts twice")
            flow_starts[fid] = (pid, tid, ts, name)
        for fid in te.terminating_flow_ids:
            if fid in flow_ends:
                problem(f"flow {fid} ends twice")
            flow_ends[fid] = (pid, tid, ts, name)
        if te.type == te.TYPE_INSTANT:
            continue
        if te.type != te.TYPE_SLICE_BEGIN:
            problem(f"track event of type {te.type}")
            continue
        if cat == "cuda_api":
            args.setdefault("ret", 0)
            if te.flow_ids:
                args["correlation"] = te.flow_ids[0] & 0xFFFFFFFF
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            if te.terminating_flow_ids:
                args["correlation"] = te.terminating_flow_ids[0] & 0xFFFFFFFF
            m = re.match(r"GPU (\d+) · stream (\d+)", tracks[uuid].name)
            args["device"], args["stream"] = int(m.group(1)), int(m.group(2))
        if te.HasField("callstack_iid"):
            cs = lookup(seq, "callstacks", te.callstack_iid)
            frames = []
            for fid in (cs.frame_ids if cs else []):
                f = lookup(seq, "frames", fid)
                if f is None:
                    continue
                text = frame_text(interned_str(seq, "function_names", f.function_name_id),
                                  interned_str(seq, "source_paths", f.source_path_iid) if f.source_path_iid else "",
                                  f.line_number)
                frames.append(text)
            args["py_stack"] = list(reversed(frames))  # innermost first, the truncation marker last
        if te.HasField("source_location_iid"):
            loc = lookup(seq, "source_locations", te.source_location_iid)
            if loc:
                args["source"] = frame_text(loc.function_name, loc.file_name, loc.line_number)
        elif args.get("py_stack"):  # no source location: the user's line is the stack's innermost frame
            args["source"] = args["py_stack"][0]
        ev = {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": us(ts), "args": args}
        events.append(ev)
        open_slices[uuid].append(ev)
    for uuid, stack in open_slices.items():
        for ev in stack:
            problem(f"track {uuid}: slice {ev['name']} never ends")
            ev["dur"] = 0.0
    for fid, end in flow_ends.items():
        start = flow_starts.get(fid)
        if start is None:
            problem(f"flow {fid} ends but never starts")
            continue
        if start[2] > end[2]:
            problem(f"flow {fid} ends before it starts")
        events.append({"name": start[3], "cat": "ac2g", "ph": "s", "id": fid, "pid": start[0], "tid": start[1], "ts": us(start[2])})
        events.append({"name": start[3], "cat": "ac2g", "ph": "f", "bp": "e", "id": fid, "pid": end[0], "tid": end[1],
                       "ts": us(end[2]), "args": {"correlation": fid & 0xFFFFFFFF, "launch_tid": start[1]}})
    for uuid, t in tracks.items():
        if t.HasField("process"):
            pr = t.process
            labels = {}
            for label in pr.process_labels:
                k, _, v = label.partition("=")
                labels[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
            if pr.cmdline:
                labels["cmdline"] = pr.cmdline[0]
            events.append({"name": "process_name", "ph": "M", "pid": pr.pid, "tid": 0, "args": {"name": pr.process_name}})
            events.append({"name": "process_labels", "ph": "M", "pid": pr.pid, "tid": 0, "args": {"labels": json.dumps(labels)}})
        elif t.HasField("thread"):
            events.append({"name": "thread_name", "ph": "M", "pid": t.thread.pid, "tid": t.thread.tid,
                           "args": {"name": t.thread.thread_name}})
        else:
            pid, tid = track_ids(uuid)
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": t.name}})
    if attributes.get("tool") != "gtrace":
        problem("no trace_attributes packet says tool = gtrace")
    if "other_data" in attributes:
        other = json.loads(attributes["other_data"])
    elif not path.endswith(".partial"):
        problem("no trace_attributes packet holds the capture's facts (other_data)")
    if not path.endswith(".partial") and not ({"cut", "recovered"} & set(other)):
        for fid in sorted(set(flow_starts) - set(flow_ends))[:20]:  # a whole trace ends each flow it starts
            problem(f"flow {fid} starts but never ends")
    return {"traceEvents": events, "otherData": other, "attributes": attributes,
            "dangling_flows": len(set(flow_starts) - set(flow_ends))}


def check_pftrace(path):
    """What trace_processor relies on: descriptors before use, sequence flags and incremental
    state, interned ids defined on their sequence, slices balanced, flows paired. Returns the
    decoded trace; raises with every problem found."""
    problems = []
    trace = decode_pftrace(path, problems)
    if problems:
        raise ValueError(f"{path}: {len(problems)} problems: " + "; ".join(problems[:10]))
    return trace


KINETO_CATEGORIES = {"cuda_runtime": "cuda_api", "cuda_driver": "cuda_api", "user_annotation": "torch_range",
                     "python_function": "sample"}
# Rows the Kineto writer adds for Holistic Trace Analysis (docs/trace_readers.md), not events of
# the JSON writer: the GPU spans of ranges, CUPTI's synchronization records, CPU collectives' lanes.
KINETO_FOR_HTA_ONLY = {"gpu_user_annotation", "cuda_sync", "cpu_collective"}
COLLECTIVE_LANE_BASE = 1_000_000_000  # a lane's tid: this + its host thread's


def load_kineto(directory):
    """The rank files (and other/) of a Kineto directory as one Chrome-like trace, categories as
    gtrace's JSON names them (the file's own in "kineto_cat"; GPU rows keep pid = device)."""
    events, other = [], {}
    files = sorted(glob.glob(os.path.join(directory, "*.pt.trace.json")) + glob.glob(os.path.join(directory, "other", "*.pt.trace.json")))
    if not files:
        raise ValueError(f"{directory}: no *.pt.trace.json files")
    for path in files:
        with open(path) as f:
            t = json.load(f)
        # GPU rows (and flow ends) sit on pid = device: back on the file's process, as the JSON
        # writer has them; the device stays in "kineto_pid".
        hosts = {e["pid"] for e in t["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_labels"}
        host = hosts.pop() if len(hosts) == 1 else None
        for e in t["traceEvents"]:
            cat = e.get("cat")
            if cat in KINETO_FOR_HTA_ONLY or (cat == "cpu_op" and "phase" not in e.get("args", {})) or \
                    (e.get("ph") == "M" and e.get("tid", 0) >= COLLECTIVE_LANE_BASE):
                continue  # the rows HTA needs that the JSON writer has no twin of (a torch range's cpu_op twin)
            if cat == "cpu_op":
                e["kineto_cat"], e["cat"] = cat, "collective"
                e["args"].pop("correlation", None)  # its lane's, for HTA
            if e.get("cat") in KINETO_CATEGORIES and not e["name"].startswith("ProfilerStep#"):
                e["kineto_cat"], e["cat"] = e["cat"], KINETO_CATEGORIES[e["cat"]]
            if e.get("cat") == "cuda_api":
                e.setdefault("args", {}).setdefault("ret", 0)
            if host is not None and (e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") or
                                     (e.get("cat") == "ac2g" and e["ph"] == "f")):
                e["kineto_pid"], e["pid"] = e["pid"], host
                if e["ph"] == "f":
                    e.setdefault("args", {})["correlation"] = e["id"]
            events.append(e)
        other = t.get("otherData", other)
    return {"traceEvents": events, "otherData": other, "files": files}
