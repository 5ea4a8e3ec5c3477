#!/usr/bin/python3
"""How many events a second gtrace keeps up with (issue "Capture at scale", point 1).

For each offered rate, bench/rate_loop runs on the GPU simulator (its libcudart and libcupti,
LD_LIBRARY_PATH=BUILD/gpusim) in PROCS processes of THREADS threads, and `gtrace attach` (the
agent records the calls in its CUPTI callbacks with their Python-less stacks, and the GPU ops;
default .pftrace output, default ring sizes) traces it for the whole run. An event is a CUDA call
or a GPU op (a launch is two; a graph replay of K kernels is 1 + K). Reported per rate: events
offered (what the loop made, from its own count), events kept (calls and GPU ops in gtrace's
facts), lost by source (BPF ring, agents' rings, CUPTI: otherData.lost), and gtrace's CPU time
per second of capture (user + sys, from /proc) and per event.

Target: 1,000,000 events/s kept with zero lost at the default ring size, gtrace using at most
one core. Modes: `launch` (cudaLaunchKernel: calls with their stacks and kernels), `graph`
(cudaGraphLaunch of a 66-kernel graph: mostly GPU records, as in the issue's H100 job).

With --python N, N Python processes join the tree (bench/py_workload.py stack: cudaLaunchKernel
through ctypes, ~50 Python frames deep, as fast as they can; the stub is no registered kernel, so
a call and no GPU op), paced at --python-rate calls a second each for the whole run: their calls
have Python frames above them, and are added to the offered and kept counts (a Python loop makes
tens of thousands of calls a second, not a million: the rate_loop processes make up the rest).
The trace is then read back (protobuf classes from userspace/format/pftrace.proto, packet by
packet) and each Python process's calls are counted with and without their whole stack: the 45
recursive frames and the loop that made the call.

Usage: capture_rate.py BUILD_DIR [--mode launch|graph] [--rates 100000,250000,...]
                       [--seconds S] [--procs P] [--threads T] [--python N] [--python-rate R]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from proc_stats import cpu_seconds

SIM_ENV = {"GTSIM_KERNEL_BASE_NS": "100", "GTSIM_KERNEL_NS_PER_BLOCK": "0", "GTSIM_LAUNCH_LATENCY_NS": "1000"}
GRAPH_NODES = 66


def run_rate(build, mode, rate, seconds, procs, threads, python=0, python_rate=20000):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "gpusim"), **SIM_ENV)
    per_event = 1 + (GRAPH_NODES if mode == "graph" else 1)
    calls_per_thread = rate / per_event / (procs * threads)
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        # One parent so that one gtrace attach covers every process (a tree, as torchrun's ranks).
        loop = [os.path.join(build, "bench", "rate_loop"), "--seconds", str(seconds), "--rate", str(calls_per_thread),
                "--threads", str(threads), "--go-file", go] + (["--graph", str(GRAPH_NODES)] if mode == "graph" else [])
        py_calls = int(python_rate * seconds)
        py = ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_workload.py"), "stack",
              str(py_calls), go, os.path.join(build, "gpusim", "libcudart.so.13"), str(python_rate)]
        script = "import subprocess,sys\n" \
                 f"ps=[subprocess.Popen({loop!r}) for _ in range({procs})]\n" \
                 f"ps+=[subprocess.Popen({py!r}) for _ in range({python})]\n" \
                 "sys.exit(max(p.wait() for p in ps))\n"
        parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
        readies = [parent.stdout.readline() for _ in range(procs + python)]
        assert all(r.startswith("ready") for r in readies), readies
        py_pids = {int(r.split()[1]) for r in readies[procs:]} if python else set()
        summary = os.path.join(tmp, "summary.json")
        gtrace = subprocess.Popen([os.path.join(build, "gtrace"), "attach", "--pid", str(parent.pid), "-q", "-o",
                                   os.path.join(tmp, "trace.pftrace"), "--summary-json", summary],
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline and not os.path.exists(os.path.join(tmp, "trace.pftrace.partial")):
            time.sleep(0.05)
        time.sleep(1.0)  # the agents are loaded and their callbacks on (the uprobes come off)
        cpu0, t0 = cpu_seconds(gtrace.pid), time.time()
        open(go, "w").close()
        out = [parent.stdout.readline() for _ in range(procs + 2 * python)]  # a Python process: paced_seconds, ns_per_op
        parent.wait()
        # gtrace stops when every traced process exited; its CPU until then (the records drain).
        cpu1 = cpu0
        while gtrace.poll() is None:
            try:
                cpu1 = cpu_seconds(gtrace.pid)
            except OSError:
                break
            time.sleep(0.05)
        wall = time.time() - t0
        err = gtrace.stderr.read()
        if gtrace.returncode != 0:
            raise SystemExit(f"gtrace exited {gtrace.returncode}: {err.strip()[-400:]}")
        with open(summary) as f:
            facts = json.load(f)
        stacks = python_call_stacks(os.path.join(tmp, "trace.pftrace"), py_pids) if python else (0, 0)
    loop_out = [line for line in out if line.startswith("offered")]
    py_spans = [float(line.split()[-1]) for line in out if line.startswith("paced_seconds")]
    offered_calls = sum(int(line.split("calls=")[1].split()[0]) for line in loop_out)
    py_seconds = max(py_spans, default=0)
    py_events = py_calls * len(py_spans)  # calls only: py_workload launches a stub no module registered (no GPU op)
    behind = sum(int(line.split("behind_ticks=")[1].split()[0]) for line in loop_out)
    span = max(seconds, py_seconds)
    capture = facts.get("capture", facts)
    gpu = capture.get("gpu", {})
    kept_calls = sum(capture.get("calls", {}).values())
    kept_ops = gpu.get("gpu_ops", 0)
    lost = capture["lost"]  # by source: the BPF ring (per event class), the agents' rings, CUPTI
    return {"offered": (offered_calls * per_event + py_events) / span, "behind_ticks": behind, "kept": (kept_calls + kept_ops) / span,
            "py_events_per_s": py_events / py_seconds if py_seconds else 0, "py_seconds": py_seconds,
            "py_calls_in_trace": stacks[0], "py_calls_with_whole_stack": stacks[1], "calls": kept_calls, "ops": kept_ops, "lost_bpf": lost["bpf_ring"]["total"], "lost_agent": lost["agent_ring"],
            "lost_cupti": lost["cupti"], "cpu_per_s": (cpu1 - cpu0) / wall,
            "ns_per_event": (cpu1 - cpu0) * 1e9 / max(1, kept_calls + kept_ops)}


def python_call_stacks(trace_path, pids):
    """(calls of the processes `pids` in the trace, those of them whose Python stack holds the 45
    recursive at_depth frames under stack_bench's loop), read packet by packet."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "runtime"))
    from trace_formats import pftrace_pb2
    pb2 = pftrace_pb2()
    track_pid, tables, default_track = {}, {}, {}
    calls = whole = 0
    with open(trace_path, "rb") as f:
        data = f.read()
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        size, pos = _varint(data, pos)
        if tag != 0x0A:  # Trace.packet = 1, length-delimited
            raise SystemExit(f"{trace_path}: unexpected field tag {tag} at the top level")
        p = pb2.TracePacket.FromString(data[pos:pos + size])
        pos += size
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & 1:
            tables[seq] = {"callstacks": {}, "frames": {}, "function_names": {}}
        if p.HasField("trace_packet_defaults") and p.trace_packet_defaults.HasField("track_event_defaults"):
            default_track[seq] = p.trace_packet_defaults.track_event_defaults.track_uuid
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("thread"):
            track_pid[p.track_descriptor.uuid] = p.track_descriptor.thread.pid
        if p.HasField("interned_data"):
            t = tables.setdefault(seq, {"callstacks": {}, "frames": {}, "function_names": {}})
            for kind in t:
                for entry in getattr(p.interned_data, kind):
                    t[kind][entry.iid] = entry
        if not p.HasField("track_event") or p.track_event.type != p.track_event.TYPE_SLICE_BEGIN:
            continue
        te = p.track_event
        if track_pid.get(te.track_uuid if te.HasField("track_uuid") else default_track.get(seq)) not in pids:
            continue
        calls += 1  # a Python process's slices are its CUDA calls (no GPU op, no torch range here)
        if not te.HasField("callstack_iid"):
            continue
        t = tables[seq]
        names = [t["function_names"][t["frames"][fid].function_name_id].str
                 for fid in t["callstacks"][te.callstack_iid].frame_ids]
        # Outermost first; 3.11+ names a function by its qualified name (stack_bench.<locals>.loop).
        if names.count(b"at_depth") >= 45 and names[-1].endswith(b"loop") and b"stack_bench" in names:
            whole += 1
    return calls, whole


def _varint(data, pos):
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--mode", choices=["launch", "graph"], default="launch")
    ap.add_argument("--rates", default="100000,250000,500000,1000000,2000000")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--python", type=int, default=0, help="Python processes launching with their stacks, beside the loops")
    ap.add_argument("--python-rate", type=float, default=20000, help="calls a second each Python process makes")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("capture_rate: run as root (gtrace attach needs it)")
    print(f"mode {args.mode}, {args.procs} processes x {args.threads} threads, {args.seconds:g} s per rate, "
          f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'offered/s':>12} {'kept/s':>12} {'calls':>10} {'gpu ops':>10} {'lost:bpf':>9} {'agent':>9} {'cupti':>9} "
          f"{'gtrace CPU':>11} {'ns/event':>9} {'behind':>7}")
    for rate in (float(r) for r in args.rates.split(",")):
        r = run_rate(args.build, args.mode, rate, args.seconds, args.procs, args.threads, args.python, args.python_rate)
        print(f"{r['offered']:12,.0f} {r['kept']:12,.0f} {r['calls']:10,} {r['ops']:10,} {r['lost_bpf']:9,} "
              f"{r['lost_agent']:9,} {r['lost_cupti']:9,} {r['cpu_per_s']:10.2f}c {r['ns_per_event']:9.0f} "
              f"{r['behind_ticks']:7}", flush=True)
        if args.python:
            print(f"    of which Python: {r['py_events_per_s']:,.0f} calls/s over {r['py_seconds']:.1f} s; in the trace "
                  f"{r['py_calls_in_trace']:,} calls, {r['py_calls_with_whole_stack']:,} with their whole Python stack",
                  flush=True)
    print("target: 1,000,000 events/s kept, 0 lost, gtrace CPU <= 1.00 core (lost: by the BPF ring, the agents' "
          "rings, CUPTI; behind: ticks in which the loop itself could not offer its rate)")


if __name__ == "__main__":
    main()
