#include "discover/thread_sleep.h"

#include <sched.h>

#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "discover/proc_tree.h"
#include "foundation/input_file.h"

namespace gtrace {
namespace {

constexpr size_t kMaxThreads = 4096;

// se.exec_start of a /proc/.../sched file, in ms (the file prints "ms.ns" of the task clock).
std::optional<double> exec_start_ms(const std::string& path) {
    std::string text = read_input_file(path, 8192);
    constexpr std::string_view key = "\nse.exec_start"; // at a line's start: the first line holds the thread's own name
    size_t at = text.find(key);
    if (at == std::string::npos) return std::nullopt;
    size_t colon = text.find(':', at);
    if (colon == std::string::npos) return std::nullopt;
    size_t start = text.find_first_not_of(' ', colon + 1);
    if (start == std::string::npos) return std::nullopt;
    double ms = 0;
    auto [end, ec] = std::from_chars(text.data() + start, text.data() + text.size(), ms);
    // 0: not known — the kernel zeroes it when it moves a task to another CPU (fair.c's
    // migrate_task_rq_fair), until the task runs again; "asleep since boot" it is not.
    if (ec != std::errc{} || !(ms > 0)) return std::nullopt;
    return ms;
}

// The task clock of `cpu` now: this thread's own se.exec_start once it runs there (updated as it
// is scheduled in). Unpinned when the CPU is not ours to run on (a cpuset): then only as good as
// the CPUs' clocks agree.
std::optional<double> now_ms_on(int cpu) {
    cpu_set_t before, there;
    bool moved = false;
    if (cpu >= 0 && cpu < CPU_SETSIZE && sched_getaffinity(0, sizeof before, &before) == 0) {
        CPU_ZERO(&there);
        CPU_SET(cpu, &there);
        moved = sched_setaffinity(0, sizeof there, &there) == 0;
        if (moved) sched_yield(); // scheduled in on `cpu`: exec_start is that CPU's clock now
    }
    auto now = exec_start_ms("/proc/thread-self/sched");
    if (moved) sched_setaffinity(0, sizeof before, &before);
    return now;
}

} // namespace

std::unordered_map<uint32_t, double> asleep_seconds(int pid) {
    std::unordered_map<uint32_t, double> out;
    std::map<int, std::optional<double>> now_by_cpu;
    size_t seen = 0;
    for (int tid : list_threads(pid)) {
        if (++seen > kMaxThreads) break;
        auto st = read_proc_stat(pid, tid);
        if (!st || (st->state != 'S' && st->state != 'D')) continue;
        auto last_ran = exec_start_ms("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/sched");
        if (!last_ran) continue;
        auto [it, fresh] = now_by_cpu.try_emplace(st->processor);
        if (fresh) it->second = now_ms_on(st->processor);
        if (it->second && *it->second >= *last_ran) out[static_cast<uint32_t>(tid)] = (*it->second - *last_ran) / 1e3;
    }
    return out;
}

} // namespace gtrace
