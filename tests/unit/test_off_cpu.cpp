// What a sleeping main thread waits in, from its stacks and system call (decode/off_cpu.h).
#include <catch2/catch.hpp>

#include "decode/off_cpu.h"

using namespace gtrace;

namespace {
PyFrame lib(const char* qualname, const char* file) { return {qualname, std::string("/usr/lib/python3.11/") + file, 1}; }
PyFrame user(const char* qualname) { return {qualname, "/home/u/train.py", 40}; }
} // namespace

TEST_CASE("a sleeping thread's wait is named by the library chain its code called, then the native stack, then the syscall") {
    // queue.get waits in a Condition: the queue names it, not threading's lock.
    CHECK(blocked_in({}, {lib("Condition.wait", "threading.py"), lib("Queue.get", "queue.py"), user("step")}, 202) == "a queue");
    CHECK(blocked_in({}, {lib("Lock.acquire", "threading.py"), user("step")}, 202) == "a lock");
    // A launcher's wrapper outside the user's code says nothing about the wait.
    CHECK(blocked_in({}, {user("step"), {"wrapper", "/venv/lib/python3.11/site-packages/torch/distributed/elastic/x.py", 3}}, 35) ==
          "sleep");
    CHECK(blocked_in({}, {{"__next__", "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 630}, user("step")}, 7) ==
          "the DataLoader");
    // Native frames where Python says nothing (a C call such as `with lock:`, or no interpreter).
    CHECK(blocked_in({"libc.so.6+0x85f16", "cudaStreamSynchronize"}, {}, 202) == "a CUDA sync");
    CHECK(blocked_in({"c10::ivalue::Future::wait()"}, {user("step")}, 202) == "a future");
    CHECK(blocked_in({"take_gil"}, {}, 202) == "the GIL");
    // The system call when the stacks are unnamed (glibc without frame pointers).
    CHECK(blocked_in({"libc.so.6+0x85f16"}, {user("step")}, 202) == "a lock");
    CHECK(blocked_in({}, {}, 230) == "sleep");
    CHECK(blocked_in({}, {}, 232) == "I/O");
    CHECK(blocked_in({}, {}, 61) == "a child process");
    CHECK(blocked_in({}, {}, -1) == "other");
    CHECK(off_cpu_kind(off_cpu_slice_name("a lock")) == "a lock");
    CHECK(off_cpu_kind("Optimizer.step") == "");
}
