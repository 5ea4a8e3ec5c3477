#include "foundation/printable.h"
#include "capture/flight_dumps.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <future>

#include <fmt/format.h>

#include "analyze/job_report.h"
#include "foundation/output_file.h"
#include "output/clocks.h"
#include "analyze/report_text.h"

namespace gtrace {

namespace {

constexpr size_t kMinStepsForMedian = 5; // a slow step needs this many steps to compare with
constexpr size_t kMedianSteps = 64;      // the running median is over the last this many steps

// A dump to write, everything it needs copied: it is written on another thread.
struct DumpJob {
    int n = 0;
    std::string reason;
    FlightWindow window;
    uint64_t end_ns = 0;
    TraceOutput out;
    bool force = false;
    TraceModel model;
    nlohmann::json facts;
    AnalysisOptions analysis;
    LiveTraceOptions live; // the dump's analysis
};

// The verdict of the dump's steps, as `gtrace report` gives it on the dump, and the report
// beside it: from the spans the dump's events made as they were written (analyze/live_trace.h).
std::string judge_dump(const std::string& path, const TraceData& spans, const AnalysisOptions& analysis, bool force) {
    JobReport report = analyze_capture(spans, path, analysis);
    if (report.processes.empty()) return "none (no process with CUDA work in the window)";
    if (auto written = write_output(flight_report_path(path), format_report(report), force); !written)
        return fmt::format("{} (report not written: {})", report.verdict.verdict, written.error().message);
    return report.verdict.verdict.empty() ? "none (no step in the window)" : report.verdict.verdict;
}

FlightDumps::Outcome write_dump(const DumpJob& job) {
    FlightDumps::Outcome o{job.n, job.reason, {}, {}, {}, 0};
    LiveTrace analysis(job.live);
    auto dump = write_flight_window(job.window, job.end_ns, job.out, job.force, job.model, job.facts, &analysis);
    if (!dump) {
        o.error = dump.error().message;
        return o;
    }
    o.path = dump->path;
    o.seconds = dump->seconds;
    if (dump->cut) o.error = fmt::format("writing it failed: {}; it holds its first {} events", dump->cut->error,
                                         dump->cut->events_kept);
    TraceData spans = analysis.take(job.facts);
    o.verdict = judge_dump(o.path, spans, job.analysis, job.force);
    return o;
}

uint64_t median_of(const std::deque<uint64_t>& values) {
    std::vector<uint64_t> v(values.begin(), values.end());
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

} // namespace

std::string output_description(const CaptureOptions& options) {
    if (!options.flight_window_s) return "writing " + options.output;
    return fmt::format("flight recorder: keeping the last {:g} s, written to {}, {}, ... on SIGUSR1 (kill -USR1 {}){} and at the end",
                       *options.flight_window_s, flight_dump_path(options.output, 1), flight_dump_path(options.output, 2), getpid(),
                       options.slow_step_factor > 0 ? fmt::format(", on a step over {:g}x the median", options.slow_step_factor) : "");
}

void FlightDumps::poll() {
    uint64_t now = monotonic_now_ns();
    recorder_.advance(now);
    for (int n = g_trigger_count.load(); signals_seen_ < n; ++signals_seen_) {
        bool already = std::any_of(pending_.begin(), pending_.end(), [](const auto& p) { return p.reason == "SIGUSR1"; });
        if (!already) schedule("SIGUSR1", now);
    }
    collect(false);
    if (!running_.valid() && !pending_.empty() && now >= pending_.front().due_ns) start_next();
}

void FlightDumps::on_step(uint64_t end_ns) {
    ++steps_seen_;
    if (last_marker_ns_ && end_ns > last_marker_ns_) {
        uint64_t step = end_ns - last_marker_ns_;
        if (steps_ns_.size() >= kMinStepsForMedian) {
            uint64_t median = median_of(steps_ns_);
            if (static_cast<double>(step) > options_.slow_step_factor * static_cast<double>(median)) {
                ++slow_steps_;
                // At most one slow-step dump per window: a job that is simply slow is not dumped every step.
                if (last_slow_trigger_ns_ && end_ns - *last_slow_trigger_ns_ < recorder_.limits().window_ns) {
                    ++slow_steps_skipped_;
                } else {
                    last_slow_trigger_ns_ = end_ns;
                    schedule(fmt::format("slow step: {:.3f} s, {:.1f}x the median {:.3f} s", static_cast<double>(step) / 1e9,
                                              static_cast<double>(step) / static_cast<double>(median),
                                              static_cast<double>(median) / 1e9),
                                  end_ns);
                }
            }
        }
        steps_ns_.push_back(step);
        if (steps_ns_.size() > kMedianSteps) steps_ns_.pop_front();
    }
    last_marker_ns_ = end_ns;
}

void FlightDumps::schedule(const std::string& reason, uint64_t trigger_ns) {
    pending_.push_back({reason, trigger_ns, trigger_ns + recorder_.limits().grace_ns});
    if (!options_.quiet)
        print_safe(stderr, "\ngtrace: flight recorder: {}: dumping the last {:g} s in {:g} s\n", reason, *options_.flight_window_s,
                   static_cast<double>(recorder_.limits().grace_ns) / 1e9);
}

void FlightDumps::start_next() {
    Pending p = pending_.front();
    pending_.pop_front();
    model_.counters = bpf_.read_counters();
    DumpJob job;
    std::tie(job.n, job.out.path) = recorder_.next_dump();
    job.reason = p.reason;
    uint64_t window = recorder_.limits().window_ns;
    job.window = recorder_.window_from(p.trigger_ns > window ? p.trigger_ns - window : 0);
    job.end_ns = recorder_.now_ns();
    job.out.format = options_.format;
    job.out.step_marker = options_.step_marker;
    job.force = options_.force;
    job.model = model_;
    job.facts = facts_now_(fmt::format("flight recorder dump {} ({}); the capture went on", job.n, p.reason));
    job.facts["flight_recorder"] = facts(job.n, p.reason, p.trigger_ns);
    job.analysis = {options_.step_marker, options_.redact};
    job.live = live_analysis_options(options_);
    running_ = std::async(std::launch::async, [job = std::make_unique<DumpJob>(std::move(job))]() mutable {
        Outcome o = write_dump(*job);
        job.reset();
        // The dump's model, writer and report analysis are freed now: give their pages back, or the
        // capture's RSS stays at the dump's peak for the rest of a long run.
        malloc_trim(0);
        return o;
    });
}

void FlightDumps::collect(bool wait) {
    if (!running_.valid()) return;
    if (!wait && running_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    FlightDumps::Outcome o = running_.get();
    if (!o.error.empty() && o.path.empty()) {
        ++dumps_failed_;
        print_safe(stderr, "\ngtrace: error: flight recorder dump {} ({}) failed: {}; recording goes on\n", o.n, o.reason, o.error);
        return;
    }
    ++dumps_written_;
    if (!o.error.empty()) print_safe(stderr, "\ngtrace: error: flight recorder dump {}: {}\n", o.n, o.error);
    if (!options_.quiet)
        print_safe(stderr, "\ngtrace: flight recorder dump {} ({}): {}, {:.1f} s, verdict: {}\n", o.n, o.reason, o.path, o.seconds,
                   o.verdict);
}

nlohmann::json FlightDumps::facts(int dump, const std::string& reason, uint64_t trigger_ns) const {
    const FlightLimits& limits = recorder_.limits();
    FlightStats stats = recorder_.stats();
    nlohmann::json j = {{"dump", dump},
                        {"reason", reason},
                        {"trigger_ns", trigger_ns},
                        {"window_limit_s", static_cast<double>(limits.window_ns) / 1e9},
                        {"grace_s", static_cast<double>(limits.grace_ns) / 1e9},
                        {"max_bytes", limits.max_bytes},
                        {"stored_events", stats.stored},
                        {"stored_bytes", stats.bytes},
                        {"evicted_by_age", stats.evicted_by_age},
                        {"evicted_by_memory", stats.evicted_by_memory},
                        {"dumps_before", dumps_written_},
                        {"dumps_failed", dumps_failed_}};
    if (options_.slow_step_factor > 0) {
        j["slow_step_factor"] = options_.slow_step_factor;
        j["slow_steps"] = slow_steps_;
        j["slow_steps_skipped"] = slow_steps_skipped_;
        j["steps_seen"] = steps_seen_;
    }
    return j;
}

// The end: the dump being written is waited for; those still waiting for their grace are left
// to the last window, which finish() writes as the last dump.
void FlightDumps::finish(const std::string& reason, nlohmann::json& trace_facts) {
    collect(true);
    recorder_.advance(monotonic_now_ns());
    std::string why = fmt::format("end: {}", reason);
    for (const auto& p : pending_) why += fmt::format("; also {}", p.reason);
    trace_facts["flight_recorder"] = facts(recorder_.dumps() + 1, why, recorder_.now_ns());
    pending_.clear();
}

void FlightDumps::report_final(const CaptureResult& result) const {
    // A flight recorder always analyses its window (capture/capture.cpp).
    std::string verdict = result.analysis ? judge_dump(result.output, *result.analysis, {options_.step_marker, options_.redact}, options_.force)
                                          : "none (no analysis)";
    const nlohmann::json& fr = result.facts["flight_recorder"];
    if (!options_.quiet)
        print_safe(stderr, "gtrace: flight recorder dump {} ({}): {}, {:.1f} s, verdict: {}\n", fr["dump"].get<int>(),
                   fr["reason"].get<std::string>(), result.output, recorder_.last_window_s(), verdict);
}

} // namespace gtrace
