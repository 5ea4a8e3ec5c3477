// What a capture is asked to do (filled from gtrace attach's and record's options by cli/) and
// what it returns. Each default is written here once; --help shows these values.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gtrace/agent.h"
#include "analyze/live_trace.h"
#include "analyze/trace_data.h"
#include "decode/torch_range.h"
#include "output/trace_formats.h"

namespace gtrace {

struct CaptureOptions {
    int pid = 0;
    std::optional<double> duration_s;
    std::string output;
    TraceFormat format = kDefaultTraceFormat;
    bool force = false;
    bool quiet = false;
    uint64_t ring_buffer_bytes = 64ull << 20; // --buffer-size
    uint32_t py_stack_every = 1;              // --py-stacks: 1 = all, N = every Nth call, 0 = off
    uint32_t sample_hz = 100;                 // --sample-hz
    std::string folded; // write folded stacks here when set
    bool gpu = true;     // load the agent (CUPTI) into processes that use CUDA
    bool agent_calls = true; // --api-capture agent*: agents record their process's calls; uprobes come off
    uint32_t call_source = GT_CALLS_FROM_CALLBACKS; // enum gt_call_source: how the agents take them
    bool launched = false; // gtrace record: agents arrive through CUDA_INJECTION64_PATH
    std::string cupti;   // --cupti: libcupti path(s) to try first
    bool system_wide = false; // --system-wide: a tree that is the whole host is allowed (see check_scope)
    bool allow_other_users = false; // --allow-other-users: root through sudo may trace others' processes
    bool redact = true;       // hide secret values of command lines (--no-redact: keep them)
    bool autograd_links = false; // --autograd-links: backward launches linked to their forward op's source
    bool off_cpu = true;         // --no-off-cpu: main threads' time asleep is not recorded
    // Scripted captures: what goes into the trace, and when the capture stops on its own.
    double delay_s = 0;                                 // --delay: record from this long after attach
    std::optional<uint64_t> start_at_unix_ns;           // --start-at: record from this CLOCK_REALTIME (delay_s: how far ahead)
    std::optional<std::pair<uint32_t, uint32_t>> steps; // --steps A:B: from the A-th to the B-th step after attach
    std::string step_marker = kDefaultStepMarker;      // --step-marker: the torch range that ends a step
    uint64_t max_events = 0;                            // --max-events: stop after this many (0: no limit)
    int trigger_signal = 0;                             // --trigger: start, then stop, on this signal
    std::string summary_json;                           // --summary-json: facts and findings at the end
    uint64_t analysis_max_bytes = 256ull << 20;         // the live analysis's spans at most (analyze/live_trace.h)
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
    // The spans the live analysis built of the trace's events (null: nobody reads a report —
    // quiet, and no --summary-json).
    std::shared_ptr<TraceData> analysis;
    // A write failed mid-capture (disk full, quota, I/O error): the one line that says so. The
    // capture stopped and the trace was cut short; nothing else is written or printed.
    std::string write_failure;
    bool write_failure_reported = false; // already printed (record prints it before the command ends)
};

// What the live analysis must know of the format being written to give what `gtrace report` reads
// back from it (analyze/live_trace.h).
inline LiveTraceOptions live_analysis_options(const CaptureOptions& o) {
    return {o.analysis_max_bytes, {o.format != TraceFormat::Pftrace, o.format != TraceFormat::Kineto}, o.step_marker, o.gpu};
}

// Set by the CLI's SIGINT/SIGTERM handler; the capture loop stops at the next wakeup.
extern std::atomic<int> g_stop_signal;
// Counted by the CLI's --trigger (or the flight recorder's SIGUSR1) handler: the first opens the
// capture, the second ends it; each asks the flight recorder for a dump.
extern std::atomic<int> g_trigger_count;
// When the first two arrived (CLOCK_MONOTONIC ns, taken in the handler; 0: not yet): the window's
// ends are the signals', not the moment the loop next looked.
extern std::atomic<uint64_t> g_trigger_ns[2];

// What the capture writes, for the line that starts it: "writing OUT", or what the flight
// recorder keeps and when it dumps it.
std::string output_description(const CaptureOptions& options);

} // namespace gtrace
