// One capture, from attach to the finished trace: wires discover → attach → collect → decode →
// model → output and runs the event loop until the duration, a signal, or the tree's end.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "attach/bpf_session.h"
#include "attach/cuda_probes.h"
#include "attach/comm_probes.h"
#include "attach/torch_probes.h"
#include "foundation/result.h"
#include "collect/agent_channel.h"
#include "collect/ring_reader.h"
#include "decode/kernel_names.h"
#include "decode/python_frames.h"
#include "decode/python_stacks.h"
#include "discover/python_runtime.h"
#include "model/trace_model.h"
#include "model/gpu_join.h"
#include "model/gpu_memory.h"
#include "output/admission_filter.h"
#include "output/capture_registry.h"
#include "output/flight_recorder.h"
#include "output/sample_tracks.h"
#include "output/trace_formats.h"

namespace gtrace {

struct CaptureOptions {
    int pid = 0;
    std::optional<double> duration_s;
    std::string output;
    TraceFormat format = kDefaultTraceFormat;
    bool force = false;
    bool quiet = false;
    uint64_t ring_buffer_bytes = 64ull << 20;
    uint32_t py_stack_every = 1;
    uint32_t sample_hz = 100;
    std::string folded; // write folded stacks here when set
    bool gpu = true;     // load the agent (CUPTI) into processes that use CUDA
    bool agent_calls = true; // --api-capture agent*: agents record their process's calls; uprobes come off
    uint32_t call_source = GT_CALLS_FROM_CALLBACKS; // enum gt_call_source: how the agents take them
    bool launched = false; // gtrace record: agents arrive through CUDA_INJECTION64_PATH
    std::string cupti;   // --cupti: libcupti path(s) to try first
    bool system_wide = false; // --system-wide: a tree that is the whole host is allowed (see check_scope)
    bool redact = true;       // hide secret values of command lines (--no-redact: keep them)
    // Scripted captures: what goes into the trace, and when the capture stops on its own.
    double delay_s = 0;                                 // --delay: record from this long after attach
    std::optional<std::pair<uint32_t, uint32_t>> steps; // --steps A:B: from the A-th to the B-th step after attach
    std::string step_marker = "^Optimizer\\.step";      // --step-marker: the torch range that ends a step
    uint64_t max_events = 0;                            // --max-events: stop after this many (0: no limit)
    int trigger_signal = 0;                             // --trigger: start, then stop, on this signal
    std::string summary_json;                           // --summary-json: facts and findings at the end
    bool bpf_stats = false;                             // --bpf-stats: runs and run time per BPF program
    // --flight-recorder: keep the last window in memory, write it out on SIGUSR1 or a slow step.
    std::optional<double> flight_window_s;
    uint64_t flight_max_bytes = 512ull << 20; // --flight-memory
    double slow_step_factor = 0;              // --on-slow-step (0: off)
};

struct CaptureResult {
    std::string stop_reason;
    std::string output;
    uint64_t lost = 0;
    std::string script_incomplete; // why --steps did not reach its last step; empty when it did
    bool tree_exited = false;      // it stopped because every traced process had exited
    nlohmann::json facts;          // the trace's otherData: stop reason, window, losses, GPU side
    // A write failed mid-capture (disk full, quota, I/O error): the one line that says so. The
    // capture stopped and the trace was cut short; nothing else is written or printed.
    std::string write_failure;
    bool write_failure_reported = false; // already printed (record prints it before the command ends)
};

// Set by the CLI's SIGINT/SIGTERM handler; the capture loop stops at the next wakeup.
extern std::atomic<int> g_stop_signal;
// Counted by the CLI's --trigger signal handler: the first opens the capture, the second ends it.
extern std::atomic<int> g_trigger_count;

// What the capture writes, for the line that starts it: "writing OUT", or what the flight
// recorder keeps and when it dumps it.
std::string output_description(const CaptureOptions& options);

struct FlightControl; // capture_flight.cpp

class Capture final : public EventSink, public AgentSink {
public:
    ~Capture() override;
    static Result<std::unique_ptr<Capture>> attach(const CaptureOptions& options);
    Result<CaptureResult> run();
    // The config launched processes pass to their agent (GTRACE_AGENT_CONFIG).
    std::string agent_config() const;
    const std::string& agent_library_path() const { return agent_path_; }

    void on_gpu_record(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns) override;
    void on_agent_state(uint32_t pid, const gt_agent_ring& ring) override;

    void on_api(const gt_api_event& e) override;
    void on_func_name(const gt_func_name_event& e) override;
    void on_proc(const gt_proc_event& e) override;
    void on_mmap(const gt_mmap_event& e) override;
    void on_pystack(const gt_py_stack_event& e) override;
    void on_sample(const gt_sample_event& e) override;
    void on_torch_range(const gt_torch_range_event& e) override;
    void on_collective(const gt_collective_event& e) override;

private:
    explicit Capture(const CaptureOptions& o); // capture_flight.cpp, where FlightControl is whole
    Result<void> track_tree(uint64_t root_start_ticks);
    Result<void> scan(int pid);
    void rescan_pending();
    void check_liveness();
    void detect_python(int pid, const std::vector<Mapping>& maps);
    void forget_python(uint32_t pid);
    void print_status(double elapsed_s);
    nlohmann::json other_data(const std::string& stop_reason, double elapsed_s) const;
    nlohmann::json bpf_stats_facts() const;
    Result<CaptureResult> finish(const std::string& reason, double elapsed_s);
    void print_summary(const CaptureResult& r, double elapsed_s) const;
    // Scripted captures (capture_script.cpp)
    void start_script();
    void poll_script();
    void on_step_marker(uint32_t pid, const std::string& range, uint64_t end_ns);
    nlohmann::json script_facts() const;
    std::string script_incomplete() const;
    // Flight recorder (capture_flight.cpp)
    Result<void> open_writer();
    void poll_flight();
    void on_flight_step(uint64_t end_ns);
    void schedule_dump(const std::string& reason, uint64_t trigger_ns);
    void start_dump();
    void collect_dump(bool wait);
    nlohmann::json flight_facts(int dump, const std::string& reason, uint64_t trigger_ns) const;
    void finish_flight(const std::string& reason, nlohmann::json& facts);
    void report_final_dump(const CaptureResult& result);
    // GPU side (capture_gpu.cpp)
    Result<void> start_gpu();
    void inject_if_cuda(int pid, const std::vector<Mapping>& maps);
    void warn_no_gpu(uint32_t pid, const std::string& why);
    void poll_gpu();
    void finish_gpu();
    nlohmann::json gpu_facts() const;
    void print_gpu_summary() const;
    // Calls recorded by the agents (capture_calls.cpp)
    void take_call(ApiCall& call);
    void update_call_capture();
    void set_agent_layout(uint32_t pid, const gt_py_layout& layout);
    void forget_agent_calls(uint32_t pid);
    bool recorded_by_agent(const ApiCall& call) const;
    void on_agent_call(uint32_t pid, const gt_gpu_header& h);
    nlohmann::json api_capture_facts() const;

    CaptureOptions options_;
    AdmissionFilter writer_; // the script's admission in front of the format's writer
    std::unique_ptr<BpfSession> bpf_;
    std::unique_ptr<CudaProbes> probes_;
    std::unique_ptr<TorchProbes> torch_probes_;
    std::unique_ptr<CommProbes> comm_probes_;
    std::optional<RingReader> reader_;
    AddressSymbols addresses_;
    KernelNames kernel_names_{addresses_};
    PythonFrames python_frames_;
    PythonStacks stacks_{python_frames_}; // interned by BPF: defined once, named by id after
    std::set<uint32_t> python_unsupported_; // warned once, not examined again until exec
    SampleTracks samples_{writer_, options_.sample_hz};
    std::optional<AgentChannel> agents_;
    std::string agent_path_;
    std::optional<UprobeLink> agent_link_;
    std::map<uint32_t, gt_py_layout> py_layouts_; // as BPF has them (with their epoch), for the agents
    std::set<uint32_t> requested_calls_;          // agents asked to record calls
    std::map<uint32_t, uint64_t> calls_since_;    // agents recording calls, since (CLOCK_MONOTONIC)
    uint64_t agent_calls_ = 0, uprobe_calls_ = 0, uprobe_calls_dropped_ = 0, uprobe_switches_ = 0;
    GpuJoin join_{[this](const CallRef& call, const GpuOp& op) { writer_.flow(call, op); }};
    GpuMemory memory_{[this](const MemorySample& m) { writer_.memory(m); }};
    std::map<uint32_t, int> injection_tries_; // pid -> attempts; -1 once asked (or given up)
    std::map<uint32_t, std::chrono::steady_clock::time_point> injected_at_; // dlopen handed over, mailbox not yet seen
    std::map<uint32_t, std::string> gpu_warnings_;
    TraceModel model_{options_.redact};
    std::set<int> pending_scan_;
    bool waiting_for_cuda_ = false;
    std::optional<Error> deferred_error_; // a probe failure inside an event callback
    std::chrono::steady_clock::time_point started_;
    uint64_t start_wall_unix_ms_ = 0;
    uint64_t calls_at_last_status_ = 0;
    uint64_t torch_ranges_ = 0, collectives_ = 0;
    std::regex step_regex_;
    uint64_t started_ns_ = 0; // CLOCK_MONOTONIC when the capture loop began
    uint64_t window_open_ns_ = 0, window_close_ns_ = UINT64_MAX;
    uint32_t lead_pid_ = 0;     // the process whose steps --steps counts (rank 0, or the first with steps)
    int64_t markers_seen_ = 0;  // step markers of the lead process after attach
    int triggers_seen_ = 0;
    std::string stop_request_;  // set when the script's end is reached
    RegisteredCapture registration_; // lists the partial trace if this gtrace is killed
    FlightRecorder* flight_ = nullptr;               // --flight-recorder: the writer behind writer_
    std::unique_ptr<FlightControl> flight_control_;  // its triggers and the dump being written
};

} // namespace gtrace
