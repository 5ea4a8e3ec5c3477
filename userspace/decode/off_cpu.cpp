#include "decode/off_cpu.h"

#include <array>
#include <utility>

namespace gtrace {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Python frames: (file path part, function part or "" for any) -> kind. Sources: CPython's
// Lib/queue.py, Lib/threading.py, Lib/multiprocessing/{queues,connection}.py,
// Lib/concurrent/futures/_base.py; torch/utils/data/dataloader.py, torch/distributed,
// torch/cuda/__init__.py (synchronize), torch/futures.
struct PyRule {
    std::string_view file, function, kind;
};
constexpr PyRule kPyRules[] = {
    {"torch/distributed/", "", "a collective"},
    {"torch/nn/parallel/distributed.py", "", "a collective"},
    {"torch/utils/data/", "", "the DataLoader"},
    {"torch/cuda/", "synchronize", "a CUDA sync"},
    {"torch/cuda/streams.py", "", "a CUDA sync"},
    {"torch/futures", "", "a future"},
    {"concurrent/futures/", "", "a future"},
    {"/queue.py", "", "a queue"},
    {"multiprocessing/queues.py", "", "a queue"},
    {"multiprocessing/connection.py", "", "a queue"},
    {"/threading.py", "", "a lock"},
};

// Native symbols (innermost first): a part of the name -> kind. The CUDA runtime's and driver's
// synchronizing calls; c10d, gloo and NCCL; c10::ivalue::Future; CPython's GIL (take_gil in
// Python/ceval_gil.c) and its locks (PyThread_acquire_lock*, Python/thread_pthread.h); glibc's
// waits.
struct NativeRule {
    std::string_view part, kind;
};
constexpr NativeRule kNativeRules[] = {
    {"Synchronize", "a CUDA sync"}, {"cudaMemcpy", "a CUDA sync"}, {"cuMemcpy", "a CUDA sync"},
    {"c10d::", "a collective"},     {"gloo::", "a collective"},     {"nccl", "a collective"},
    {"ivalue::Future", "a future"}, {"take_gil", "the GIL"},        {"PyThread_acquire_lock", "a lock"},
    {"pthread_mutex_lock", "a lock"}, {"__lll_lock_wait", "a lock"}, {"pthread_cond_", "a lock"},
    {"sem_wait", "a lock"},         {"sem_clockwait", "a lock"},    {"sem_timedwait", "a lock"},
    {"nanosleep", "sleep"},         {"usleep", "sleep"},            {"epoll_wait", "I/O"},
    {"poll", "I/O"},                {"select", "I/O"},              {"recv", "I/O"},
    {"__libc_read", "I/O"},         {"accept", "I/O"},              {"futex", "a lock"},
};

constexpr std::string_view kPrefix = "blocked: ";

// A frame of Python's or an installed package's code, not the user's own.
bool library_frame(const PyFrame& f) {
    return contains(f.filename, "/lib/python3") || contains(f.filename, "site-packages") ||
           contains(f.filename, "dist-packages") || f.filename.starts_with("<frozen");
}

} // namespace

std::string blocked_in(const std::vector<std::string>& native, const std::vector<PyFrame>& python, int syscall) {
    // The library frames the user's code called into, innermost first: the wait's own chain
    // (queue.get -> Condition.wait), not what encloses the user's code (a launcher's wrapper).
    size_t chain = 0;
    while (chain < python.size() && library_frame(python[chain])) ++chain;
    for (const PyRule& r : kPyRules) // the rules in priority order: Queue.get beats its Condition.wait
        for (size_t i = 0; i < chain; ++i)
            if (contains(python[i].filename, r.file) && (r.function.empty() || contains(python[i].qualname, r.function)))
                return std::string(r.kind);
    for (const std::string& symbol : native)
        for (const NativeRule& r : kNativeRules)
            if (contains(symbol, r.part)) return std::string(r.kind);
    // x86-64 numbers (arch/x86/entry/syscalls/syscall_64.tbl). A futex wait is a lock, a
    // condition or a semaphore: CPython's locks and GIL, glibc's mutexes and condition variables.
    switch (syscall) {
    case 202: return "a lock";                                      // futex
    case 35: case 230: return "sleep";                              // nanosleep, clock_nanosleep
    case 0: case 7: case 17: case 19: case 23: case 43: case 45:    // read poll pread64 readv select accept recvfrom
    case 47: case 232: case 270: case 271: case 281: case 288:      // recvmsg epoll_wait pselect6 ppoll epoll_pwait accept4
    case 299: case 441: return "I/O";                               // recvmmsg epoll_pwait2
    case 61: case 247: return "a child process";                    // wait4, waitid
    default: return "other";
    }
}

std::string off_cpu_slice_name(std::string_view kind) { return std::string(kPrefix) + std::string(kind); }

std::string_view off_cpu_kind(std::string_view slice_name) {
    return slice_name.starts_with(kPrefix) ? slice_name.substr(kPrefix.size()) : std::string_view{};
}

} // namespace gtrace
