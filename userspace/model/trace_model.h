// What a capture learned about the traced tree: processes with their labels, threads with their
// names, per-process call counts, losses. Owned by the capture; read by the writers.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "decode/api_call.h"
#include "discover/pid_namespace.h"
#include "discover/proc_tree.h"
#include "gtrace/cuda_api.h"
#include "gtrace/events.h"

namespace gtrace {

struct ThreadInfo {
    std::string name;
    uint64_t calls = 0;
};

// Calls per CUDA API of one process: the few it uses (a process calls a dozen of the ~200 APIs;
// a dense array was 1.6 KB for every process that ever lived, DataLoader workers included).
class ApiCounts {
public:
    void add(gt_cuda_api api) {
        for (auto& [a, n] : counts_)
            if (a == api) {
                ++n;
                return;
            }
        counts_.emplace_back(api, 1);
    }
    uint64_t total() const {
        uint64_t n = 0;
        for (const auto& [a, c] : counts_) n += c;
        return n;
    }
    uint64_t operator[](gt_cuda_api api) const {
        for (const auto& [a, n] : counts_)
            if (a == api) return n;
        return 0;
    }
    const std::vector<std::pair<gt_cuda_api, uint64_t>>& by_api() const { return counts_; }

private:
    std::vector<std::pair<gt_cuda_api, uint64_t>> counts_;
};

struct ProcessInfo {
    uint32_t pid = 0;
    uint32_t ppid = 0;
    std::string cmdline; // argv joined by spaces, secret values hidden unless --no-redact
    RankEnv ranks;
    std::optional<ContainerIdentity> container; // in another PID namespace
    // Forked from a tracked process and not exec'ed since (a DataLoader worker, say).
    std::optional<uint32_t> forked_from;
    bool attached_at_start = false; // found in /proc when gtrace attached
    bool exited = false;
    int exit_code = 0;
    ApiCounts calls;
    std::map<uint32_t, ThreadInfo> threads;
    std::unordered_map<uint64_t, uint64_t> allocations; // device pointer -> bytes, while live

    uint64_t total_calls() const;
    // "rank 1 · python train.py (pid 1234)"; in a container "(pid 1234 · container NAME, pid 7)"
    std::string label() const;
    // Orders ranks first, by rank; then everything else by pid.
    int64_t sort_index() const;
};

class TraceModel {
public:
    // Command lines are kept with secret values hidden (foundation/redact.h); false: --no-redact.
    explicit TraceModel(bool redact_secrets = true) : redact_secrets_(redact_secrets) {}

    // A process seen in /proc at attach time, or reported by BPF later. One found at attach time
    // with its parent's command line counts as forked from it.
    ProcessInfo& add_process(uint32_t pid, uint32_t ppid, bool at_start, std::optional<uint32_t> forked_from);
    ProcessInfo* find(uint32_t pid);
    const ProcessInfo* find(uint32_t pid) const;
    // Re-read cmdline and rank environment (after exec); `exec_argv` (as BPF read it at the exec)
    // names a process that is gone before /proc could be read.
    void refresh_identity(uint32_t pid, const std::vector<std::string>& exec_argv = {}, bool exec_argv_only = false);
    void mark_exited(uint32_t pid, int exit_code);
    // Counts the call, names its thread, and gives a cudaFree the size its cudaMalloc had.
    void record_call(ApiCall& call);

    const std::map<uint32_t, ProcessInfo>& processes() const { return processes_; }
    size_t live_processes() const;
    uint64_t total_calls() const;
    std::array<uint64_t, GT_API_COUNT> calls_per_api() const;

    // Losses and the other BPF counters (enum gt_counter), plus records the agents dropped.
    std::array<uint64_t, GT_CNT_COUNT> counters{};
    uint64_t agent_ring_lost = 0; // GPU records and calls the agents' rings had no room for
    uint64_t cupti_lost = 0;      // records CUPTI dropped (no activity buffer: the agent held too many)
    uint64_t bpf_ring_lost() const; // every event class the BPF ring refused
    uint64_t lost_events() const;   // all three sources

private:
    std::string command_line(uint32_t pid) const;

    bool redact_secrets_ = true;
    std::map<uint32_t, ProcessInfo> processes_;
};

const char* counter_name(unsigned index);

} // namespace gtrace
