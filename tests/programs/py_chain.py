"""Ground truth for Python stacks: a known chain of functions ending in ctypes calls to the
real libcudart (ctypes releases the GIL around the call, as PyTorch does around its ops), made
from the main thread and from a second Python thread. Prints, for each call site, the expected
stack (innermost first, "qualname (file:line)") as a GTRACE_PYSTACK line, then GTRACE_COUNTS.

  python py_chain.py CUDART GO_FILE [THEN_EXEC_PYTHON]

With THEN_EXEC_PYTHON, the process then execs that interpreter on this script (another
CPython version, same PID), which makes the same calls again once GO_FILE.exec exists (the case
creates it when gtrace says the new image's calls carry their stacks).
"""
import ctypes
import json
import os
import sys
import threading
import time

import markers

cudart = ctypes.CDLL(sys.argv[1])
go_file = sys.argv[2]
# GTRACE_TEST_THREADS: how many Python threads besides the main one run the chain at once.
SECOND_THREADS = int(os.environ.get("GTRACE_TEST_THREADS", "1"))
HERE = os.path.abspath(__file__)
QUAL = sys.version_info >= (3, 11)  # co_qualname exists from 3.11


def name(cls, fn):
    return f"{cls}.{fn}" if QUAL and cls else fn


def line_of(marker):
    return markers.line_of(HERE, marker)


class Model:
    def forward(self, depth):
        return step(depth)  # CALL_STEP


def step(depth):
    if depth > 0:
        return step(depth - 1)  # RECURSE
    ptr = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(ptr), 4096)  # CUDA_CALL
    return 1


def run(thread_main, depth):
    calls = 0
    for _ in range(5):
        calls += Model().forward(depth)  # CALL_FORWARD
    return calls


def expected(entry_name, entry_line, depth):
    frames = [f"step ({HERE}:{line_of('CUDA_CALL')})"]
    frames += [f"step ({HERE}:{line_of('RECURSE')})"] * depth
    frames += [f"{name('Model', 'forward')} ({HERE}:{line_of('CALL_STEP')})",
               f"run ({HERE}:{line_of('CALL_FORWARD')})",
               f"{entry_name} ({HERE}:{entry_line})"]
    return frames


def thread_body(out):
    out.append(run(True, 7))  # THREAD_RUN


def main():
    print(f"ready {os.getpid()}", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.01)
    calls = run(False, 3)  # MAIN_RUN
    results = []
    threads = [threading.Thread(target=thread_body, args=(results,), name=f"second-{i}") for i in range(SECOND_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls += sum(results)
    print("GTRACE_PYSTACK " + json.dumps({"thread": "main", "count": 5,
          "stack": expected("main", line_of("MAIN_RUN"), 3) + [f"<module> ({HERE}:{line_of('MAIN')})"]}), flush=True)
    print("GTRACE_PYSTACK " + json.dumps({"thread": "second", "count": 5 * SECOND_THREADS,
          "stack": expected("thread_body", line_of("THREAD_RUN"), 7)}), flush=True)
    print("GTRACE_COUNTS " + json.dumps({"pid": os.getpid(), "calls": {"cudaMalloc": calls}}), flush=True)
    if len(sys.argv) > 3:
        # gtrace reads code objects from the live image shortly after each call; an exec at once
        # would replace them first (those stacks are then dropped and counted, never shown wrong).
        # 0.5 s was too short for it beside two CPU hogs on 2 cores.
        time.sleep(2.0)
        os.execv(sys.argv[3], [sys.argv[3], HERE, sys.argv[1], go_file + ".exec"])
    time.sleep(1.0)  # gtrace reads code objects from the live process; a real job outlives its calls


main()  # MAIN
