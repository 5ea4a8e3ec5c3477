"""Checks on the NVTX ranges of tests/programs/nvtx_steps (`[expect.nvtx]`, tests/runtime/README.md).

Each step of the program's main thread is "train_step" (domain gtrace_test, category 7, payload
the step number) holding "forward" then "backward" (default domain); its "nvtx_worker" thread
pushes "worker_step" and starts an "io" range that the main thread ends. The program prints
GTRACE_NVTX {"steps": N} when it ends by itself. `exact = true` (record mode): every one of the N
steps is in the trace; otherwise (attach) at least `min_steps` consecutive ones are. `train_step_domain` (default
gtrace_test): the domain train_step must show ("" in attach mode: the domain was created before). `module` (attach): otherData.nvtx
must say the program's table was served."""
import json
import re


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    raise SystemExit(1)


def nvtx_ranges(events):
    # gtrace's JSON and pftrace: category nvtx; Kineto: user_annotation (read as torch_range) with NVTX's arguments
    return [e for e in events if e.get("ph") == "X" and
            (e.get("cat") == "nvtx" or (e.get("cat") == "torch_range" and e.get("args", {}).get("kind") in ("push_pop", "start_end")))]


def inside(inner, outer):
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 0.001


def check_nvtx(trace, spec, program_lines):
    made = [json.loads(line[line.find("GTRACE_NVTX ") + 12:]) for line in program_lines if "GTRACE_NVTX " in line]
    if not made and spec.get("exact"):
        fail("the program printed no GTRACE_NVTX")
    steps = made[0]["steps"] if made else None  # a program killed at the end printed nothing
    ranges = nvtx_ranges(trace["traceEvents"])
    by_name = {}
    for e in ranges:
        by_name.setdefault(e["name"], []).append(e)
    counts = {n: len(by_name.get(n, [])) for n in ("train_step", "forward", "backward", "worker_step", "io")}
    if spec.get("exact"):
        if any(c != steps for c in counts.values()):
            fail(f"NVTX ranges {counts}, the program made {steps} of each")
    else:
        low = spec.get("min_steps", 1)
        if any(c < low or (steps is not None and c > steps) for c in counts.values()):
            fail(f"NVTX ranges {counts}: expected at least {low} of each (and at most the program's {steps})")
    main_tid = {(e["pid"], e["tid"]) for e in by_name["train_step"]}
    if len(main_tid) != 1:
        fail(f"train_step ranges on threads {main_tid}, expected one")
    pid, tid = main_tid.pop()
    # The program creates its domain at its start: after attach that handle is null (NVTX without a
    # tool), so its ranges read as the default domain's (docs/trace-formats.md: NVTX ranges).
    domain = spec.get("train_step_domain", "gtrace_test")
    payloads = []
    for e in sorted(by_name["train_step"], key=lambda e: e["ts"]):
        a = e.get("args", {})
        if a.get("domain") != domain or a.get("category") != 7 or a.get("kind") != "push_pop":
            fail(f"train_step arguments {a}: expected domain {domain!r}, category 7, kind push_pop")
        payloads.append(int(a["payload"]))
        inner = [x for x in by_name["forward"] + by_name["backward"] if x["tid"] == tid and inside(x, e)]
        names = [x["name"] for x in sorted(inner, key=lambda x: x["ts"])]
        if names != ["forward", "backward"] and spec.get("exact"):
            fail(f"train_step {a['payload']} holds {names}, expected forward then backward")
    if payloads != list(range(payloads[0], payloads[0] + len(payloads))) or (spec.get("exact") and payloads[0] != 0):
        fail(f"train_step payloads {payloads}: expected consecutive step numbers")
    # After attach a capture's first and last steps may be cut: a train_step pushed before attach,
    # or popped after the agent stopped, is not recorded while its forward and backward are.
    first = min(e["ts"] for e in by_name["train_step"])
    last = max(e["ts"] + e["dur"] for e in by_name["train_step"])
    for e in by_name["forward"] + by_name["backward"]:
        if e.get("args", {}).get("domain") != "" or e["tid"] != tid:
            fail(f"{e['name']} on tid {e['tid']} with {e.get('args')}: expected the default domain on the main thread {tid}")
        if (spec.get("exact") or first <= e["ts"] <= last) and not any(inside(e, s) for s in by_name["train_step"]):
            fail(f"{e['name']} at {e['ts']} is not inside a train_step")
    worker = {e["tid"] for e in by_name["worker_step"]}
    if len(worker) != 1 or tid in worker:
        fail(f"worker_step on threads {worker}: expected one thread other than the main thread {tid}")
    for e in by_name["io"]:
        a = e.get("args", {})
        if a.get("kind") != "start_end" or e["tid"] not in worker or a.get("end_tid") != tid:
            fail(f"io range on tid {e['tid']} with {a}: expected start/end, started by the worker, ended by {tid}")
    print(f"ok: NVTX: {counts} (program: {steps} steps), nested and on their threads, payloads {payloads[0]}..{payloads[-1]}")
    if "module" in spec:
        modules = trace["otherData"]["nvtx"]["modules"]
        served = [m for m in modules if re.search(spec["module"], m["module"]) and m["captured"]]
        if not served:
            fail(f"otherData.nvtx.modules {modules}: none matching /{spec['module']}/ captured")
        print(f"ok: NVTX module outcome: {served[0]['outcome']}")
