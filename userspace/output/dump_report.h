// The text of `gtrace dump`: for each rank what it is blocked in, then every distinct stack
// once, with the ranks and threads that share it ("ranks 0,2 (2 threads)").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gtrace {

struct DumpedThread {
    std::string owner;      // "rank 0", "rank 0 worker", or "pid 123 (cmd)"
    bool is_rank_main = false; // the main thread of a rank process
    uint32_t pid = 0, tid = 0;
    std::string thread_name;
    std::vector<std::string> python; // innermost first
    // Where the user's code made the blocking call: the innermost frame outside torch and the
    // other libraries (decorators such as torch 2.x's _exception_logger sit in between).
    std::string caller;
    std::vector<std::string> native; // innermost first
    std::string error;
    std::optional<double> asleep_s; // asleep now, this long (discover/thread_sleep.h); none: running
};

std::string format_dump(const std::string& heading, const std::vector<DumpedThread>& threads);

} // namespace gtrace
