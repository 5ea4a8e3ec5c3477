// One-shot stacks of every thread of a process, for `gtrace dump`: each thread is stopped on
// its own for the few microseconds it takes to read its registers, unwind its native stack
// (elfutils libdwfl over ptrace, .eh_frame based) and walk its Python frames, then released at once.
// Threads are never left stopped: a thread is detached before the next one is touched, and
// the kernel releases a seized thread by itself if gtrace dies.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foundation/result.h"
#include "discover/python_runtime.h"
#include "gtrace/pystack.h"

namespace gtrace {

struct ThreadStack {
    uint32_t tid = 0;
    std::string name;
    std::vector<uint64_t> native;            // innermost first: the IP, then return addresses
    std::optional<gt_py_stack_event> python; // raw frames, when the process runs a known CPython
    std::string error;                       // why the thread could not be read (it exited, …)
};

// Reads every thread of pid. `python` is the process's interpreter layout, if any.
// `stop` is polled between threads: non-zero (a signal number) ends the dump cleanly.
std::vector<ThreadStack> read_thread_stacks(int pid, const std::optional<PythonRuntime>& python,
                                            const std::atomic<int>& stop);

} // namespace gtrace
