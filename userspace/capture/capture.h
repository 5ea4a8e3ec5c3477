// One capture, from attach to the finished trace: wires discover → attach → collect → decode →
// model → output, hands each event class to its handler, and runs the loop until the duration,
// a signal, the script's end, or the tree's end.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <chrono>

#include <nlohmann/json.hpp>

#include "capture/call_events.h"
#include "capture/capture_options.h"
#include "capture/capture_script.h"
#include "capture/deferred_error.h"
#include "capture/flight_dumps.h"
#include "capture/gpu_events.h"
#include "capture/process_events.h"
#include "capture/range_events.h"
#include "capture/sample_events.h"
#include "capture/stack_definitions.h"
#include "analyze/live_trace.h"
#include "collect/ring_reader.h"
#include "foundation/result.h"
#include "output/capture_registry.h"

namespace gtrace {

class Capture final : public EventSink {
public:
    ~Capture() override;
    static Result<std::unique_ptr<Capture>> attach(const CaptureOptions& options);
    Result<CaptureResult> run();
    // The config launched processes pass to their agent (GTRACE_AGENT_CONFIG).
    std::string agent_config() const { return gpu_.agent_config(); }
    const std::string& agent_library_path() const { return gpu_.agent_library_path(); }

    // The ring buffer's events, each to the handler of its class.
    void on_api(const gt_api_event& e) override { calls_.on_api(e); }
    void on_func_name(const gt_func_name_event& e) override { calls_.on_func_name(e); }
    void on_proc(const gt_proc_event& e) override { processes_.on_proc(e); }
    void on_mmap(const gt_mmap_event& e) override { processes_.on_mmap(e); }
    // Definitions go to their own ring (capture/stack_definitions.h); one here is taken as well.
    void on_pystack(const gt_py_stack_event& e) override { stacks_.define(e); }
    void on_sample(const gt_sample_event& e) override { samples_.on_sample(e); }
    void on_torch_range(const gt_torch_range_event& e) override { ranges_.on_torch_range(e); }
    void on_collective(const gt_collective_event& e) override { ranges_.on_collective(e); }
    void on_off_cpu(const gt_offcpu_event& e) override { samples_.on_off_cpu(e); }

private:
    Capture(const CaptureOptions& o, std::unique_ptr<BpfSession> bpf, std::chrono::steady_clock::time_point started,
            uint64_t start_wall_unix_ms);
    Result<void> open_writer();
    std::string stop_reason() const; // empty: go on
    void print_status(double elapsed_s);
    void publish_collective_counts(uint64_t read_until_ns); // for gtrace dump, while the capture runs
    Result<CaptureResult> finish(const std::string& reason, double elapsed_s);
    double seconds_running() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(); }
    // capture_summary.cpp
    nlohmann::json other_data(const std::string& stop_reason, double elapsed_s) const;
    nlohmann::json bpf_stats_facts() const;
    void print_summary(const CaptureResult& r, double elapsed_s) const;

    // What the capture owns, each part given to the handlers below that use it (no part is
    // shared through a hub): the stages' state in pipeline order, then the event handlers.
    const CaptureOptions options_;
    const std::chrono::steady_clock::time_point started_;
    const uint64_t start_wall_unix_ms_; // read with started_
    std::optional<uint64_t> cpu_pressure_at_start_us_; // discover/cpu_pressure.h; nullopt without PSI
    TargetFiles target_files_; // a target's files, opened as it sees them (before what reads them)
    std::unique_ptr<BpfSession> bpf_;
    CudaProbes cuda_probes_{*bpf_, target_files_};
    TorchProbes torch_probes_{*bpf_, target_files_, options_.autograd_links};
    CommProbes comm_probes_{*bpf_, target_files_};
    std::optional<AgentChannel> agents_; // the GPU side's, opened by gpu_ when it is on
    AddressSymbols addresses_{target_files_};
    KernelNames kernel_names_{addresses_};
    PythonFrames python_frames_;
    PythonStacks stacks_{python_frames_}; // interned by BPF: defined once, named by id after
    TraceModel model_{options_.redact};
    std::unique_ptr<LiveTrace> analysis_; // the report's spans, built as the events go to the writer (which holds it: declared before)
    AdmissionFilter writer_; // the script's admission in front of the format's writer
    GpuJoin join_{[this](const CallRef& call, const GpuOp& op) { writer_.flow(call, op); }};
    GpuMemory memory_{[this](const MemorySample& m) { writer_.memory(m); }};
    BackwardPasses backward_; // gives autograd threads' launches the stack that began the pass
    AutogradLinks autograd_;  // --autograd-links: a backward launch's forward op
    CollectiveCounts collective_counts_; // per process group, published for gtrace dump
    DeferredError errors_;    // the first failure inside an event callback ends the loop

    CallEvents calls_{{options_, model_, stacks_, kernel_names_, backward_, autograd_, writer_, memory_, join_, agents_, cuda_probes_,
                       errors_}};
    CaptureScript script_{options_, model_, writer_};
    NvtxEvents nvtx_{options_, target_files_, writer_, script_};
    GpuEvents gpu_{{options_, model_, *bpf_, cuda_probes_, target_files_, agents_, writer_, join_, memory_}, calls_, nvtx_};
    ProcessObservers lifecycle_; // every component above with per-process state (registered in the constructor)
    ProcessEvents processes_{
        {options_, model_, *bpf_, target_files_, addresses_, python_frames_, cuda_probes_, torch_probes_, comm_probes_, errors_},
        calls_, gpu_, lifecycle_};
    SampleEvents samples_{options_, model_, stacks_, addresses_, writer_};
    RangeEvents ranges_{stacks_, backward_, autograd_, collective_counts_, writer_, script_};
    std::unique_ptr<FlightDumps> flight_; // --flight-recorder
    std::optional<RingReader> reader_;
    std::unique_ptr<StackDefinitions> stack_definitions_; // into stacks_, on a thread of its own (after it: stopped first)
    RegisteredCapture registration_; // lists the partial trace if this gtrace is killed
    std::optional<CaptureRegistry> publisher_; // where the collective counts go (opened at the first)
    bool publish_failed_ = false;
    uint64_t read_until_ns_ = 0; // CLOCK_MONOTONIC: every ring record emitted before it has been read
    uint64_t calls_at_last_status_ = 0;
};

} // namespace gtrace
