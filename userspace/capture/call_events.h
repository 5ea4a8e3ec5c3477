// CUDA calls: from the uprobes (BPF ring) or from the process's own agent (its ring), each
// written, counted in the model and handed to the GPU join. Also decides where each process's
// calls come from (call_events.cpp says why).
#pragma once
#include <chrono>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "attach/cuda_probes.h"
#include "capture/capture_options.h"
#include "capture/deferred_error.h"
#include "collect/agent_channel.h"
#include "decode/kernel_names.h"
#include "decode/python_stacks.h"
#include "model/autograd_links.h"
#include "model/backward_passes.h"
#include "model/event_stream.h"
#include "model/gpu_join.h"
#include "model/gpu_memory.h"
#include "model/trace_model.h"
#include "gtrace/events.h"
#include "foundation/process_observer.h"

namespace gtrace {

class CallEvents final : public ProcessObserver {
public:
    // What it works with: each call is named (stacks, kernel names, the backward pass it is in,
    // its forward op), counted (model), written (out), and handed on (memory, join); the CUDA
    // uprobes and the agents are switched as the processes need.
    struct Uses {
        const CaptureOptions& options;
        TraceModel& model;
        PythonStacks& stacks;
        KernelNames& kernel_names;
        BackwardPasses& backward;
        AutogradLinks& autograd;
        EventConsumer& out;
        GpuMemory& memory;
        GpuJoin& join;
        std::optional<AgentChannel>& agents; // none without the GPU side
        CudaProbes& cuda_probes;
        DeferredError& errors;
    };
    explicit CallEvents(Uses uses) : s_(uses) {}

    void on_api(const gt_api_event& e);          // a call the uprobes saw
    void on_func_name(const gt_func_name_event& e) { s_.kernel_names.on_func_name(e); }
    void on_agent_call(uint32_t pid, const gt_gpu_header& h); // a call or Python stack from an agent
    void agent_stopped_calls(uint32_t pid, uint64_t ts_ns);   // its agent records no call begun from then on
    // Uprobes on or off, and agents asked to record calls, as the processes now need;
    // `gpu_warnings`: processes whose GPU side failed (they keep the uprobes).
    void update_sources(const std::map<uint32_t, std::string>& gpu_warnings);
    void set_python_layout(uint32_t pid, const gt_py_layout& layout);
    void forget_process(uint32_t pid);
    void process_exec(uint32_t pid) override { forget_process(pid); }
    void process_exited(uint32_t pid) override { forget_process(pid); }
    // pid's agent ring just became ours: ask it for the calls before its session begins.
    void agent_adopted(uint32_t pid);

    nlohmann::json facts() const;
    void print_summary() const;

private:
    void take(ApiCall& call);
    bool recorded_by_agent(const ApiCall& call);
    bool lagging_for_test();

    Uses s_;
    std::map<uint32_t, gt_py_layout> py_layouts_; // as BPF has them (with their epoch), for the agents
    std::set<uint32_t> requested_calls_;          // agents asked to record calls
    std::set<uint32_t> agent_call_pids_;          // processes with a call the agent recorded, exited ones too
    std::map<uint32_t, uint64_t> calls_since_;    // agents recording calls, since (CLOCK_MONOTONIC)
    std::map<uint32_t, uint64_t> calls_until_;    //   and until, for those that stopped (CUPTI's callbacks given up)
    std::chrono::steady_clock::time_point last_sources_update_{};
    uint64_t agent_calls_ = 0, uprobe_calls_ = 0, uprobe_calls_dropped_ = 0, uprobe_switches_ = 0;
};

} // namespace gtrace
