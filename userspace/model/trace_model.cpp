#include "model/trace_model.h"

#include <fmt/format.h>

#include "foundation/redact.h"

namespace gtrace {

uint64_t ProcessInfo::total_calls() const { return calls.total(); }

std::string ProcessInfo::label() const {
    std::string prefix;
    if (ranks.rank) prefix = fmt::format("rank {} · ", *ranks.rank);
    if (forked_from) prefix += fmt::format("child of {} · ", *forked_from);
    std::string cmd = short_command(cmdline);
    if (cmd.empty()) cmd = "?";
    std::string where;
    if (container) where = container->ns_pid ? fmt::format(" · container {}, pid {}", container->name, container->ns_pid)
                                             : fmt::format(" · container {}", container->name);
    return fmt::format("{}{} (pid {}{})", prefix, cmd, pid, where);
}

int64_t ProcessInfo::sort_index() const {
    // Ranks first by rank (their workers right after them), then the rest by pid.
    if (ranks.rank) return static_cast<int64_t>(*ranks.rank) * 2 + (forked_from ? 1 : 0);
    return (int64_t{1} << 32) + pid;
}

ProcessInfo& TraceModel::add_process(uint32_t pid, uint32_t ppid, bool at_start,
                                     std::optional<uint32_t> forked_from) {
    auto [it, inserted] = processes_.try_emplace(pid);
    ProcessInfo& p = it->second;
    if (inserted || p.exited) {
        p = ProcessInfo{};
        p.pid = pid;
        p.ppid = ppid;
        p.attached_at_start = at_start;
        p.forked_from = forked_from;
        p.cmdline = command_line(pid);
        p.ranks = read_rank_env(static_cast<int>(pid));
        p.container = read_container_identity(static_cast<int>(pid));
        const ProcessInfo* forked_parent = forked_from ? find(*forked_from) : nullptr;
        // A fork that exited before its event was read has no /proc entry left: it was a copy of
        // its parent, command line, environment and namespaces alike.
        if (p.cmdline.empty() && forked_parent) {
            p.cmdline = forked_parent->cmdline;
            if (!p.ranks.rank) p.ranks = forked_parent->ranks;
            if (!p.container && forked_parent->container) // its PID in there is not known any more
                p.container = ContainerIdentity{0, forked_parent->container->name};
        }
        // Found in /proc with its tracked parent's command line: forked without exec (a
        // DataLoader worker, say), like the children BPF reports forking.
        const ProcessInfo* parent = find(ppid);
        if (!p.forked_from && at_start && parent && !p.cmdline.empty() && parent->cmdline == p.cmdline)
            p.forked_from = ppid;
    }
    return p;
}

std::string TraceModel::command_line(uint32_t pid) const {
    std::vector<std::string> argv = read_argv(static_cast<int>(pid));
    return join_argv(redact_secrets_ ? redact_argv(argv) : argv);
}

ProcessInfo* TraceModel::find(uint32_t pid) {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : &it->second;
}

const ProcessInfo* TraceModel::find(uint32_t pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : &it->second;
}

void TraceModel::refresh_identity(uint32_t pid, const std::vector<std::string>& exec_argv, bool exec_argv_only) {
    if (ProcessInfo* p = find(pid)) {
        std::string cmd = exec_argv_only ? std::string() : command_line(pid);
        if (cmd.empty() && !exec_argv.empty()) cmd = join_argv(redact_secrets_ ? redact_argv(exec_argv) : exec_argv);
        if (!cmd.empty()) p->cmdline = cmd;
        p->ranks = read_rank_env(static_cast<int>(pid));
        p->forked_from.reset(); // a new program now, not a copy of its parent
        // Thread names from before the exec are stale; threads are named again on their next call.
        for (auto& [tid, t] : p->threads) t.name.clear();
    }
}

void TraceModel::mark_exited(uint32_t pid, int exit_code) {
    if (ProcessInfo* p = find(pid)) {
        p->exited = true;
        p->exit_code = exit_code;
        p->allocations = {}; // its device memory went with it (a caching allocator frees nothing at exit)
    }
}

void TraceModel::record_call(ApiCall& call) {
    ProcessInfo* p = find(call.pid);
    if (!p) p = &add_process(call.pid, 0, false, std::nullopt);
    p->calls.add(call.api);
    if (call.api == GT_API_CUDA_MALLOC && call.ret == 0 && call.ptr && *call.ptr) {
        p->allocations[*call.ptr] = call.bytes.value_or(0);
    } else if (call.api == GT_API_CUDA_FREE && call.ptr) {
        if (auto it = p->allocations.find(*call.ptr); it != p->allocations.end()) {
            call.bytes = it->second;
            if (call.ret == 0) p->allocations.erase(it);
        }
    }
    ThreadInfo& t = p->threads[call.tid];
    t.calls++;
    // BPF sends a thread's name with its first event only; after an exec, ask /proc.
    if (!call.thread_name.empty()) t.name = call.thread_name;
    if (t.name.empty()) t.name = read_thread_name(static_cast<int>(call.pid), static_cast<int>(call.tid));
    if (t.name.empty()) t.name = fmt::format("thread {}", call.tid);
}

size_t TraceModel::live_processes() const {
    size_t n = 0;
    for (const auto& [pid, p] : processes_) n += !p.exited;
    return n;
}

uint64_t TraceModel::total_calls() const {
    uint64_t n = 0;
    for (const auto& [pid, p] : processes_) n += p.total_calls();
    return n;
}

std::array<uint64_t, GT_API_COUNT> TraceModel::calls_per_api() const {
    std::array<uint64_t, GT_API_COUNT> out{};
    for (const auto& [pid, p] : processes_)
        for (const auto& [api, n] : p.calls.by_api()) out[api] += n;
    return out;
}

uint64_t TraceModel::bpf_ring_lost() const {
    // Events the ring refused, per class. Calls never traced (no per-thread state, nesting too
    // deep: GT_CNT_ENTRY_STATE_FULL) are counted apart: no raising --buffer-size brings them back.
    uint64_t n = 0;
    for (unsigned i = 0; i < GT_EV_CLASS_COUNT; ++i) n += counters[i];
    return n;
}

uint64_t TraceModel::lost_events() const { return bpf_ring_lost() + agent_ring_lost + cupti_lost; }

const char* counter_name(unsigned index) {
    switch (index) {
    case GT_EV_API: return "lost_api_calls";
    case GT_EV_FUNC_NAME: return "lost_function_names";
    case GT_EV_PROC: return "lost_process_events";
    case GT_EV_MMAP: return "lost_mmap_events";
    case GT_CNT_ENTRY_STATE_FULL: return "calls_without_entry_state";
    case GT_CNT_RETURN_WITHOUT_ENTRY: return "returns_without_entry";
    case GT_CNT_TRACKED_FULL: return "processes_not_tracked";
    case GT_EV_PYSTACK: return "lost_python_stacks";
    case GT_EV_SAMPLE: return "lost_samples";
    case GT_EV_TORCH_RANGE: return "lost_torch_ranges";
    case GT_CNT_RANGES_OPEN_FULL: return "torch_ranges_not_remembered";
    case GT_EV_COLLECTIVE: return "lost_collectives";
    case GT_EV_NCCL: return "lost_nccl_calls";
    case GT_CNT_COLLECTIVES_OPEN_FULL: return "collectives_not_remembered";
    case GT_CNT_COLLECTIVES_NO_STATE: return "collectives_without_entry_state";
    case GT_EV_OFFCPU: return "lost_off_cpu";
    case GT_CNT_OFFCPU_SHORT: return "off_cpu_shorter_than_20us";
    case GT_CNT_OFFCPU_SHORT_NS: return "off_cpu_shorter_than_20us_ns";
    default: return nullptr;
    }
}

} // namespace gtrace
