// The GPU side of a capture: loading the agent into processes that use CUDA (ptrace, or CUDA's
// injection hook in launch mode), reading their rings, writing GPU ops, and joining each to its
// CPU call. Calls the agents record go to CallEvents.
#pragma once
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capture/call_events.h"
#include "attach/bpf_session.h"
#include "attach/cuda_probes.h"
#include "capture/capture_options.h"
#include "collect/agent_channel.h"
#include "discover/target_files.h"
#include "model/event_stream.h"
#include "model/gpu_join.h"
#include "model/gpu_memory.h"
#include "model/trace_model.h"
#include "capture/nvtx_events.h"
#include "discover/proc_maps.h"
#include "foundation/process_observer.h"

namespace gtrace {

class GpuEvents final : public AgentSink, public ProcessObserver {
public:
    // What it works with: the agents' channel (it opens it: `agents`), the probes and files that
    // find a process's CUDA, the model, and where GPU work goes (out, join, memory).
    struct Uses {
        const CaptureOptions& options;
        TraceModel& model;
        BpfSession& bpf;
        CudaProbes& cuda_probes;
        TargetFiles& target_files;
        std::optional<AgentChannel>& agents;
        EventConsumer& out;
        GpuJoin& join;
        GpuMemory& memory;
    };
    GpuEvents(Uses uses, CallEvents& calls, NvtxEvents& nvtx) : s_(uses), calls_(calls), nvtx_(nvtx) {}

    Result<void> start(); // the agent library found, its announce probe on, the channel open
    // Loads or asks the agent of a process that has CUDA mapped; true: scan it again soon (the
    // agent is loading, or was busy answering).
    bool inject_if_cuda(int pid, const std::vector<Mapping>& maps);
    void poll();   // the agents' rings and states
    // pid exited: its agent's last records read, its ring and pipe let go, its pid free for
    // a new process (which is asked afresh).
    void process_exited(uint32_t pid) override;
    void finish(); // detaches every agent, its last records read
    void update_lost(); // the agents' losses (their rings, CUPTI) into the model

    void on_gpu_record(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns) override;
    void on_agent_state(uint32_t pid, const gt_agent_ring& ring) override;
    void on_records_lost(uint32_t pid) override { s_.out.gpu_records_lost(pid); }

    // The config launched processes pass to their agent (GTRACE_AGENT_CONFIG).
    std::string agent_config() const;
    const std::string& agent_library_path() const { return agent_path_; }
    const std::map<uint32_t, std::string>& warnings() const { return warnings_; }
    nlohmann::json facts() const;
    nlohmann::json job_windows_json() const;
    void print_summary() const;

private:
    // The --cupti paths the agent of pid may load, and those it may not (privileged mode).
    std::pair<std::string, std::vector<std::string>> cupti_for(int pid);
    void warn_no_gpu(uint32_t pid, const std::string& why);
    void on_memory_state(uint32_t pid, const gt_gpu_memory_state& m);

    Uses s_;
    CallEvents& calls_;
    NvtxEvents& nvtx_;
    std::string agent_path_;
    std::optional<UprobeLink> agent_link_;
    std::map<uint32_t, int> injection_tries_; // pid -> attempts; -1 once asked (or given up)
    // Windows of a job's own CUPTI client (its profiler) the agents recorded beside (job_profiler.h).
    struct JobProfilerWindow {
        uint32_t pid;
        uint64_t from_ns, to_ns, buffers_lost; // CLOCK_MONOTONIC; to 0: open at the agent's stop
        bool found_open, found_by_kinds;
    };
    std::vector<JobProfilerWindow> job_windows_;
    void on_job_window(uint32_t pid, const gt_gpu_shared_cupti& w);
    void on_callbacks_yielded(uint32_t pid, const gt_gpu_callbacks_yielded& y);
    nlohmann::json callbacks_yielded_ = nlohmann::json::object(); // pid -> when, what was said
    nlohmann::json beside_subscribers_ = nlohmann::json::object(); // pid -> what was said (multi-subscriber mode)
    std::string job_window_text(const JobProfilerWindow& w) const;
    double since_start_s(uint64_t monotonic_ns) const; // seconds after started_ns_ (0 before it)
    uint64_t started_ns_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count()); // CLOCK_MONOTONIC: the windows' times are given from it
    std::map<uint32_t, int> reasked_;         // pid -> times asked again after its agent withdrew its offer
    std::map<uint32_t, std::chrono::steady_clock::time_point> injected_at_; // dlopen handed over, mailbox not yet seen
    std::map<uint32_t, std::string> warnings_;
    nlohmann::json memory_at_attach_ = nlohmann::json::object(); // pid -> the agent's figures per device
    // An agent sends one memory state per device at its start: the process's own records in its
    // ring could send any number. One per (process, device) below kMaxDevices is taken; the rest
    // are counted with the rings' corrupt records.
    static constexpr uint32_t kMaxDevices = 64;
    std::set<std::pair<uint32_t, uint32_t>> memory_states_seen_;
    uint64_t memory_states_refused_ = 0;
};

} // namespace gtrace
