// What the event handlers of one capture share: its options, where events go (the writer and the
// process model), the probes, and the decoders' state that more than one event class reads.
#pragma once
#include <chrono>
#include <memory>
#include <optional>

#include "attach/bpf_session.h"
#include "attach/comm_probes.h"
#include "attach/cuda_probes.h"
#include "attach/torch_probes.h"
#include "capture/capture_options.h"
#include "collect/agent_channel.h"
#include "decode/address_symbols.h"
#include "discover/target_files.h"
#include "decode/kernel_names.h"
#include "decode/python_frames.h"
#include "decode/python_stacks.h"
#include "foundation/result.h"
#include "model/autograd_links.h"
#include "model/backward_passes.h"
#include "model/gpu_join.h"
#include "model/gpu_memory.h"
#include "model/trace_model.h"
#include "output/admission_filter.h"

namespace gtrace {

struct CaptureState {
    explicit CaptureState(const CaptureOptions& o) : options(o) {}
    CaptureState(const CaptureState&) = delete; // the join and memory callbacks point into it
    CaptureState& operator=(const CaptureState&) = delete;

    const CaptureOptions options;
    AdmissionFilter writer; // the script's admission in front of the format's writer
    TraceModel model{options.redact};
    std::unique_ptr<BpfSession> bpf;
    std::unique_ptr<CudaProbes> cuda_probes;
    std::unique_ptr<TorchProbes> torch_probes;
    std::unique_ptr<CommProbes> comm_probes;
    TargetFiles target_files; // a target's files, opened as it sees them (before what reads them)
    AddressSymbols addresses{target_files};
    KernelNames kernel_names{addresses};
    PythonFrames python_frames;
    PythonStacks stacks{python_frames}; // interned by BPF: defined once, named by id after
    std::optional<AgentChannel> agents; // the GPU side's, when it is on
    GpuJoin join{[this](const CallRef& call, const GpuOp& op) { writer.flow(call, op); }};
    GpuMemory memory{[this](const MemorySample& m) { writer.memory(m); }};
    BackwardPasses backward; // gives autograd threads' launches the stack that began the pass
    AutogradLinks autograd;  // --autograd-links: a backward launch's forward op
    std::chrono::steady_clock::time_point started;
    uint64_t start_wall_unix_ms = 0;

    // A failure inside an event callback: the capture loop ends with the first one.
    std::optional<Error> deferred_error;
    void defer(const Error& e) {
        if (!deferred_error) deferred_error = e;
    }
    double seconds_running() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
};

} // namespace gtrace
