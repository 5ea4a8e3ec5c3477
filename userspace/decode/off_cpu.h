// What a main thread that went to sleep waits in, from the stacks it went to sleep with (native
// innermost first, and Python innermost first): the name of its off-CPU slice, "blocked: KIND".
// Python's own frames name the wait best (a queue.get, a Lock.acquire, DataLoader's __next__);
// where they say nothing, the native frames (the innermost symbol that is a known wait).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "decode/python_frames.h"

namespace gtrace {

// Kinds: "a collective", "the DataLoader", "a CUDA sync", "a queue", "a future", "the GIL", "a
// lock", "sleep", "I/O", "a child process", or "other".
// `syscall`: the x86-64 system call it slept in (-1: none), for when neither stack says more.
std::string blocked_in(const std::vector<std::string>& native, const std::vector<PyFrame>& python, int syscall);

// The off-CPU slice's name for a kind ("blocked: a lock"), and back (empty if not such a name).
std::string off_cpu_slice_name(std::string_view kind);
std::string_view off_cpu_kind(std::string_view slice_name);

} // namespace gtrace
