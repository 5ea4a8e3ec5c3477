// Scripted captures: --delay, --start-at, --steps A:B, --max-events and --trigger decide which events go into
// the trace (a time window on the writer, and a limit) and when the capture ends by itself. The
// lead process's steps (--step-marker) also drive --on-slow-step.
#pragma once
#include <cstdint>
#include <functional>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include <chrono>

#include "capture/capture_options.h"
#include "model/trace_model.h"
#include "output/admission_filter.h"

namespace gtrace {

class CaptureScript {
public:
    // `admission`: where the script's window and limit are applied, in front of the writer.
    CaptureScript(const CaptureOptions& options, const TraceModel& model, AdmissionFilter& admission)
        : options_(options), model_(model), admission_(admission) {}

    void start(std::chrono::steady_clock::time_point capture_started); // when the capture loop begins
    void poll();    // trigger signals and the event limit
    void on_range(uint32_t pid, const std::string& name, uint64_t end_ns); // every torch range
    // Called with the end of each of the lead process's steps when --on-slow-step is on.
    void set_step_listener(std::function<void(uint64_t end_ns)> f) { on_lead_step_ = std::move(f); }

    const std::string& stop_request() const { return stop_request_; } // empty: go on
    std::string incomplete() const; // why --steps did not reach its last step; empty when it did
    nlohmann::json facts() const;

private:
    const CaptureOptions& options_;
    const TraceModel& model_;
    AdmissionFilter& admission_;
    std::regex step_regex_;
    std::function<void(uint64_t)> on_lead_step_;
    uint64_t torch_ranges_ = 0;
    uint64_t started_ns_ = 0; // CLOCK_MONOTONIC when the capture began
    uint64_t record_from_ns_ = 0; // --delay / --start-at: CLOCK_MONOTONIC from which events and steps count
    double late_s_ = 0;           // --start-at passed this long before the capture began
    uint64_t window_open_ns_ = 0, window_close_ns_ = UINT64_MAX;
    uint32_t lead_pid_ = 0;    // the process whose steps --steps counts (rank 0, or the first with steps)
    int64_t markers_seen_ = 0; // --steps: step markers of the lead process after attach
    int triggers_seen_ = 0;
    std::string stop_request_; // set when the script's end is reached
};

} // namespace gtrace
