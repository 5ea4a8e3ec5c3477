#include "foundation/printable.h"
#include "cli/dump_command.h"

#include <unistd.h>

#include <ctime>

#include <fmt/format.h>

#include "capture/preflight.h"
#include "collect/thread_stacks.h"
#include "decode/address_symbols.h"
#include "decode/python_frames.h"
#include "discover/proc_maps.h"
#include "discover/python_runtime.h"
#include "model/trace_model.h"
#include "output/dump_report.h"

namespace gtrace {

Result<void> run_dump(int pid, bool system_wide, const std::atomic<int>& stop) {
    if (auto r = check_target(pid); !r) return r.error();
    if (auto r = check_scope(pid, system_wide); !r) return r.error();
    if (auto r = check_ptrace_privileges(); !r) return r.error();

    TraceModel model;
    std::vector<int> tree = list_tree(pid, getpid()); // gtrace cannot stop its own threads
    for (int p : tree) {
        auto st = read_proc_stat(p);
        if (!st) continue;
        model.add_process(static_cast<uint32_t>(p), static_cast<uint32_t>(st->ppid), true, std::nullopt);
    }

    TargetFiles target_files;
    AddressSymbols addresses{target_files};
    PythonFrames python_frames;
    std::vector<DumpedThread> threads;
    for (const auto& [p, info] : model.processes()) {
        if (stop.load()) break;
        std::vector<Mapping> maps = read_maps(static_cast<int>(p));
        PythonDetection python = detect_python(static_cast<int>(p), maps, target_files);
        if (python.runtime) python_frames.set_runtime(p, *python.runtime);
        addresses.set_maps(p, maps);
        std::string owner = info.ranks.rank ? fmt::format("rank {}{}", *info.ranks.rank, info.forked_from ? " worker" : "")
                                            : fmt::format("pid {} ({})", p, short_command(info.cmdline, 40));
        for (const ThreadStack& ts : read_thread_stacks(static_cast<int>(p), python.runtime, stop)) {
            DumpedThread t;
            t.owner = owner;
            t.pid = p;
            t.tid = ts.tid;
            t.thread_name = ts.name;
            t.is_rank_main = info.ranks.rank && !info.forked_from && ts.tid == p;
            t.error = ts.error;
            if (ts.python) {
                std::vector<PyFrame> frames = python_frames.symbolize(*ts.python);
                for (const PyFrame& f : frames) t.python.push_back(f.text());
                if (const PyFrame* user = source_frame(frames)) t.caller = user->text();
            }
            for (size_t i = 0; i < ts.native.size(); ++i) {
                std::string name = addresses.name_at(p, i == 0 ? ts.native[i] : ts.native[i] - 1);
                t.native.push_back(name.empty() ? fmt::format("{:#x}", ts.native[i]) : name);
            }
            threads.push_back(std::move(t));
        }
    }
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    std::string heading = fmt::format("gtrace dump of PID {} and its children: {} processes, {} threads ({}){}", pid,
                                      model.processes().size(), threads.size(), stamp,
                                      stop.load() ? " — interrupted, partial" : "");
    print_safe(stdout, "{}", format_dump(heading, threads));
    return {};
}

} // namespace gtrace
