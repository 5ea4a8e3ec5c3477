// One thread of another process, stopped alone with ptrace (the others keep running), and its
// native stack. Shared by `gtrace dump` (read and release) and the agent loader (check for a
// safe point, then hand the thread a call).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gtrace {

enum class StopResult {
    Stopped,      // seized and in a ptrace stop: detach it when done
    CannotAttach, // PTRACE_SEIZE refused (errno says why): nothing to undo
    Gone,         // seized, but it exited or never stopped: detach it anyway
};

// PTRACE_SEIZE + PTRACE_INTERRUPT, then waits for the stop. A signal to gtrace does not cut the
// wait short: the thread is about to stop and must be detached.
StopResult seize_and_stop(int tid);

struct NativeFrame {
    uint64_t ip = 0;
    std::string name; // from the ELF symbols, when asked for and known
};

// Innermost first: the stopped thread's IP, then return addresses (elfutils' libdwfl over
// ptrace, from .eh_frame; frame pointers where an object has none).
std::vector<NativeFrame> unwind_stopped(int tid, size_t max_frames, bool with_names);

} // namespace gtrace
