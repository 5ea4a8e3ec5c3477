// --flight-recorder: the capture records into a FlightRecorder (output/flight_recorder.h), and
// this writes its window out as a dump on SIGUSR1 or when a step of the lead process takes longer
// than --on-slow-step times the running median of the steps before it.
#pragma once
#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analyze/live_trace.h"
#include "attach/bpf_session.h"
#include "capture/capture_options.h"
#include "model/trace_model.h"
#include "output/flight_recorder.h"

namespace gtrace {

class FlightDumps {
public:
    // `facts_now(stop_reason)`: the trace's facts as they stand, for a dump's otherData.
    using FactsNow = std::function<nlohmann::json(const std::string& stop_reason)>;
    // `model`: its counters are brought up to date from `bpf` for each dump, which copies it.
    FlightDumps(const CaptureOptions& options, TraceModel& model, BpfSession& bpf, FlightRecorder& recorder, FactsNow facts_now)
        : options_(options), model_(model), bpf_(bpf), recorder_(recorder), facts_now_(std::move(facts_now)) {
        recorder_.set_final_analysis(&final_analysis_);
    }

    void poll();                  // signals, a finished dump, a dump whose grace is over
    void on_step(uint64_t end_ns); // the lead process's step ended (--on-slow-step)
    // The end: the dump being written is waited for; the last window is the last dump.
    void finish(const std::string& reason, nlohmann::json& facts);
    // The last dump's verdict from its analysis (result.analysis, taken from final_analysis()),
    // and its report beside it.
    void report_final(const CaptureResult& result) const;
    LiveTrace& final_analysis() { return final_analysis_; }

    struct Outcome {
        int n = 0;
        std::string reason, path, verdict, error;
        double seconds = 0;
    };

private:
    struct Pending {
        std::string reason;
        uint64_t trigger_ns = 0, due_ns = 0;
    };
    void schedule(const std::string& reason, uint64_t trigger_ns);
    void start_next();
    void collect(bool wait);
    nlohmann::json facts(int dump, const std::string& reason, uint64_t trigger_ns) const;

    const CaptureOptions& options_;
    TraceModel& model_;
    BpfSession& bpf_;
    FlightRecorder& recorder_;
    FactsNow facts_now_;
    // The last window's events, as the last dump is written.
    LiveTrace final_analysis_{live_analysis_options(options_)};
    std::deque<Pending> pending_;
    std::future<Outcome> running_;
    int signals_seen_ = 0;
    std::deque<uint64_t> steps_ns_; // the lead's last step times
    uint64_t last_marker_ns_ = 0;
    std::optional<uint64_t> last_slow_trigger_ns_;
    uint64_t steps_seen_ = 0, slow_steps_ = 0, slow_steps_skipped_ = 0;
    int dumps_written_ = 0, dumps_failed_ = 0;
};

} // namespace gtrace
