"""NCCL's API called through the real library of the pip wheel (nvidia-nccl), with no GPU: a call
on a null communicator returns ncclInvalidArgument (4) after NCCL read its arguments, which is all
a probe on the API needs. Each step makes every call gtrace/comm.h probes, with arguments unique
to it; prints "ready <pid>" and runs until killed (or --steps N).

The library is found as torch finds it: the nvidia.nccl package's lib/libnccl.so.2."""
import ctypes
import os
import sys
import time

import nvidia.nccl

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 10**9
lib = ctypes.CDLL(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))
size_t, none = ctypes.c_size_t, None
# ncclDataType_t and ncclRedOp_t (nccl.h)
UINT8, INT32, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = 1, 2, 6, 7, 8, 9
SUM, MAX, MIN = 0, 2, 3
print(f"ready {os.getpid()}", flush=True)
for _ in range(steps):
    results = [
        lib.ncclAllReduce(none, none, size_t(1 << 20), FLOAT32, SUM, none, none),
        lib.ncclAllGather(none, none, size_t(4096), BFLOAT16, none, none),
        lib.ncclReduceScatter(none, none, size_t(1000), FLOAT16, MAX, none, none),
        lib.ncclBroadcast(none, none, size_t(77), UINT8, 2, none, none),
        lib.ncclReduce(none, none, size_t(10), FLOAT64, MIN, 1, none, ctypes.c_void_p(0x5000)),
        lib.ncclGroupStart(),
        lib.ncclSend(none, size_t(5), BFLOAT16, 1, none, none),
        lib.ncclRecv(none, size_t(6), INT32, 3, none, none),
        lib.ncclGroupEnd(),
        lib.ncclAlltoAll(none, none, size_t(300), FLOAT16, none, none),
        lib.ncclGather(none, none, size_t(40), INT32, 2, none, ctypes.c_void_p(0x6000)),
        lib.ncclScatter(none, none, size_t(50), UINT8, 1, none, none),
    ]
    assert results[0] == 4, results  # ncclInvalidArgument: the null communicator
    time.sleep(0.01)
