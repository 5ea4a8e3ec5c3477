#include "foundation/printable.h"
#include "cli/dump_command.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "capture/preflight.h"
#include "collect/thread_stacks.h"
#include "decode/address_symbols.h"
#include "decode/python_frames.h"
#include "discover/proc_maps.h"
#include "discover/python_runtime.h"
#include "discover/thread_sleep.h"
#include "model/trace_model.h"
#include "foundation/json_file.h"
#include "foundation/output_file.h"
#include "foundation/privilege.h"
#include "output/clocks.h"
#include "output/dump_report.h"
#include "output/dump_groups.h"
#include "output/dump_standing.h"

namespace gtrace {

namespace {

nlohmann::json thread_json(const DumpedThread& t) {
    return {{"owner", t.owner}, {"pid", t.pid}, {"tid", t.tid}, {"name", t.thread_name}, {"python", t.python},
            {"caller", t.caller}, {"native", t.native}, {"error", t.error},
            {"asleep_s", t.asleep_s ? nlohmann::json(*t.asleep_s) : nlohmann::json()}};
}

} // namespace

Result<void> run_dump(const DumpOptions& options, const std::atomic<int>& stop) {
    const int pid = options.pid;
    const bool system_wide = options.system_wide;
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
        // Before any thread is stopped: a ptrace stop wakes a sleeping thread.
        const auto asleep = asleep_seconds(static_cast<int>(p));
        for (const ThreadStack& ts : read_thread_stacks(static_cast<int>(p), python.runtime, stop)) {
            DumpedThread t;
            t.owner = owner;
            t.pid = p;
            t.tid = ts.tid;
            t.thread_name = ts.name;
            t.is_rank_main = info.ranks.rank && !info.forked_from && ts.tid == p;
            t.error = ts.error;
            if (auto it = asleep.find(ts.tid); it != asleep.end()) t.asleep_s = it->second;
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
    const std::string host = host_name();
    std::vector<RankStanding> standings = rank_standings(threads, host);
    // What a capture running on this host counted per process group: a rank behind on one.
    std::set<uint32_t> rank_pids;
    for (const auto& s : standings) rank_pids.insert(s.pid);
    PublishedCounts counts = published_group_counts(rank_pids);
    // The job stood still, and the capture publishes that it saw so within a second or two.
    for (int tries = 0; tries < 30 && counts.awaiting_capture(monotonic_now_ns()) && !stop.load(); ++tries) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        counts = published_group_counts(rank_pids);
    }
    std::string group_lines = judge_group_lags(standings, counts, monotonic_now_ns());
    print_safe(stdout, "{}", format_dump(heading, threads));
    if (!standings.empty()) print_safe(stdout, "\n{}", format_standings(standings));
    if (!group_lines.empty()) print_safe(stdout, "{}", group_lines);
    if (options.json_path.empty()) return {};
    nlohmann::json out = {{"tool", "gtrace dump"}, {"heading", heading}, {"host", host}, {"root_pid", pid},
                          {"ranks", standings_json(standings)}, {"odd_ones_out", odd_ones_out(standings)},
                          {"threads", nlohmann::json::array()}};
    for (const auto& t : threads) out["threads"].push_back(thread_json(t));
    return write_output(options.json_path, out.dump(1) + "\n", options.force);
}

Result<void> run_dump_merge(const std::vector<std::string>& paths) {
    std::vector<RankStanding> ranks;
    for (const auto& path : paths) {
        auto j = read_json_file(path, 64 << 20, "a dump's JSON");
        if (!j) return j.error();
        auto part = standings_from_json(*j, path);
        if (!part) return part.error();
        ranks.insert(ranks.end(), part->begin(), part->end());
    }
    std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    // A rank twice (the same node's dump given twice, or two nodes claiming one rank): once.
    ranks.erase(std::unique(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank == b.rank; }), ranks.end());
    print_safe(stdout, "gtrace dump --merge: {} dump{}, {} ranks\n\n{}", paths.size(), paths.size() == 1 ? "" : "s", ranks.size(),
               format_standings(ranks));
    return {};
}

} // namespace gtrace
