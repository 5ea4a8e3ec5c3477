"""A traced process that attacks the gtrace tracing it (tests/runtime/security_attacks.py): it
launches kernels on the GPU simulator like any job, and does one hostile thing.

  python hostile_job.py GPUSIM_DIR DEMO_KERNELS MODE [ARG]

  plain                 nothing hostile (the well-behaved neighbour)
  python-name LIB       maps LIB (named libpython3.99999999999.so, exporting _PyRuntime)
  huge-libc FILE        maps FILE (named libc.so.6, a sparse terabyte) PROT_EXEC, whole
  ring-flood N          once the gtrace agent is active in it, appends N GT_GPU_MEMORY_STATE
                        records to the agent's ring (whose memory the process holds), half of
                        them for device numbers no host has; prints "flooded N" when done

It prints "ready PID" once hostile, and launches until killed."""
import ctypes
import mmap
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_cuda import SimCuda  # noqa: E402

GT_AGENT_DATA_OFFSET = 4096
GT_GPU_MEMORY_STATE = 9
RECORD = struct.Struct("<HHIQQQQQIBB2x")  # struct gt_gpu_memory_state: 56 bytes
HEAD, TAIL, DATA_BYTES = 40, 48, 32      # offsets in struct gt_agent_ring


def ring_address():
    """The start of the agent's ring mapping in this process (a memfd named gtrace-ring)."""
    with open("/proc/self/maps") as f:
        for line in f:
            if "gtrace-ring" in line:
                return int(line.split("-")[0], 16)
    return None


def flood(n):
    base = None
    while base is None:  # the agent shares its ring once gtrace takes it
        base = ring_address()
        if base is None:
            time.sleep(0.05)
    cap = ctypes.c_uint64.from_address(base + DATA_BYTES).value
    head = ctypes.c_uint64.from_address(base + HEAD)
    tail = ctypes.c_uint64.from_address(base + TAIL)
    data = base + GT_AGENT_DATA_OFFSET
    for i in range(n):
        device = 0 if i % 2 == 0 else 1000 + i  # half for device 0, half for devices no host has
        record = RECORD.pack(GT_GPU_MEMORY_STATE, RECORD.size, 0, time.monotonic_ns(), 1 << 30, 8 << 30, 0, 0, device, 1, 0)
        while head.value + RECORD.size - tail.value > cap:  # room: gtrace reads as it goes
            time.sleep(0.001)
        at = head.value % cap
        if at + RECORD.size > cap:  # no record wraps: skip to the start, as the agent pads
            head.value += cap - at
            continue
        ctypes.memmove(data + at, record, RECORD.size)
        head.value += RECORD.size
    print(f"flooded {n}", flush=True)


def main():
    gpusim, kernels, mode = sys.argv[1:4]
    arg = sys.argv[4] if len(sys.argv) > 4 else None
    cuda = SimCuda(gpusim, kernels)
    keep = []
    if mode == "python-name":
        keep.append(ctypes.CDLL(arg))
    elif mode == "huge-libc":
        with open(arg, "rb") as f:
            keep.append(mmap.mmap(f.fileno(), os.path.getsize(arg), prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE))
    print(f"ready {os.getpid()}", flush=True)
    flooded = False
    while True:
        cuda.launch()
        cuda.cudart.cudaDeviceSynchronize()
        if mode == "ring-flood" and not flooded and ring_address() is not None:
            flood(int(arg))
            flooded = True
        time.sleep(0.01)


main()
