// The traced process tree: entered at attach, followed through fork, exec and exit, each process's
// mappings scanned for CUDA, libtorch and the interpreter (probes attach, agents are loaded).
#pragma once
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "capture/call_events.h"
#include "attach/bpf_session.h"
#include "attach/comm_probes.h"
#include "attach/cuda_probes.h"
#include "attach/torch_probes.h"
#include "capture/capture_options.h"
#include "capture/deferred_error.h"
#include "decode/address_symbols.h"
#include "decode/python_frames.h"
#include "discover/target_files.h"
#include "model/trace_model.h"
#include "capture/gpu_events.h"
#include "capture/skipped_processes.h"
#include "discover/proc_maps.h"
#include "foundation/process_observer.h"

namespace gtrace {

class ProcessEvents {
public:
    // What it works with: the model of the tree, the BPF session that tracks it, the probes and
    // readers each process's mappings feed.
    struct Uses {
        const CaptureOptions& options;
        TraceModel& model;
        BpfSession& bpf;
        TargetFiles& target_files;
        AddressSymbols& addresses;
        PythonFrames& python_frames;
        CudaProbes& cuda_probes;
        TorchProbes& torch_probes;
        CommProbes& comm_probes;
        DeferredError& errors;
    };
    // `lifecycle`: every component with per-process state, told of each fork, exec and exit.
    ProcessEvents(Uses uses, CallEvents& calls, GpuEvents& gpu, const ProcessObservers& lifecycle)
        : s_(uses), calls_(calls), gpu_(gpu), lifecycle_(lifecycle) {}

    // Enters the tree of options.pid (started at `root_start_ticks`) and probes what it mapped.
    Result<void> track_tree(uint64_t root_start_ticks);
    void on_proc(const gt_proc_event& e);
    void on_mmap(const gt_mmap_event& e);
    void rescan_pending(); // the processes whose mappings changed since the last batch
    void rescan_all();     // every live process at the next batch; exits whose event was lost
    bool waiting_for_cuda() const { return waiting_for_cuda_; }
    // Processes that exited at least `after` ago (each returned once): the writers' per-thread
    // state of them can go then, once their last GPU records and samples are in.
    std::vector<uint32_t> take_gone(std::chrono::steady_clock::duration after);
    const SkippedProcesses& skipped() const { return skipped_; }

private:
    Result<void> scan(int pid);
    // Runs one per-process step; what it throws (a hostile process's maps, libraries, names)
    // skips that process, never the capture.
    template <typename Step>
    void guarded(int pid, const char* step, Step&& run);
    // A privileged gtrace traces only the processes of the user it acts for (all four uids),
    // unless root asked for others (--allow-other-users); else the reason to skip it.
    std::string not_ours(int pid) const;
    void skip(uint32_t pid, const std::string& reason);
    void detect_python(int pid, const std::vector<Mapping>& maps);
    void forget_python(uint32_t pid); // what the observers do not hold: the BPF layout, the warnings
    void exited(uint32_t pid, int exit_code);
    static std::vector<std::string> exec_argv(const gt_proc_event& e); // what BPF read at the exec
    static uint64_t code_fingerprint(const std::vector<Mapping>& maps); // of the executable file mappings

    Uses s_;
    CallEvents& calls_;
    GpuEvents& gpu_;
    const ProcessObservers& lifecycle_;
    std::set<int> pending_scan_;
    std::map<uint32_t, uint64_t> scanned_code_; // pid -> the code mappings its last scan probed
    std::deque<std::pair<uint32_t, std::chrono::steady_clock::time_point>> gone_; // exits, oldest first
    std::set<uint32_t> python_unsupported_; // warned once, not examined again until exec
    SkippedProcesses skipped_;
    bool waiting_for_cuda_ = false;
};

} // namespace gtrace
