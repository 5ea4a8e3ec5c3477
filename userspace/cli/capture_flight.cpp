// --flight-recorder: the capture records into a FlightRecorder (output/flight_recorder.h), and
// writes its window out as a dump on SIGUSR1 or when a step of the lead process takes longer
// than --on-slow-step times the running median of the steps before it. A dump waits the grace
// (the agents' GPU records of the window's calls come later), is written on its own thread while
// the capture keeps draining the ring buffer, and is judged like `gtrace report` does: its
// verdict on stderr, the whole report in OUT-N.report.txt.
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <future>

#include <fmt/format.h>

#include "analyze/job_report.h"
#include "cli/capture.h"
#include "foundation/output_file.h"
#include "output/clocks.h"
#include "output/report_text.h"

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
};

struct DumpOutcome {
    int n = 0;
    std::string reason, path, verdict, error;
    double seconds = 0;
};

// OUT-N.report.txt beside the dump OUT-N.ext (or the directory OUT-N.kineto/).
std::string report_path(std::string dump) {
    if (!dump.empty() && dump.back() == '/') dump.pop_back();
    size_t slash = dump.rfind('/'), dot = dump.rfind('.');
    if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1)) dump.resize(dot);
    return dump + ".report.txt";
}

// The verdict of the dump's steps, as `gtrace report` gives it, and the report beside it.
std::string judge_dump(const std::string& path, const AnalysisOptions& analysis, bool force) {
    auto report = analyze_job({path}, analysis);
    if (!report) return fmt::format("none ({})", report.error().message);
    if (report->processes.empty()) return "none (no process with CUDA work in the window)";
    if (auto written = write_output(report_path(path), format_report(*report), force); !written)
        return fmt::format("{} (report not written: {})", report->verdict.verdict, written.error().message);
    return report->verdict.verdict.empty() ? "none (no step in the window)" : report->verdict.verdict;
}

DumpOutcome write_dump(const DumpJob& job) {
    DumpOutcome o{job.n, job.reason, {}, {}, {}, 0};
    auto dump = write_flight_window(job.window, job.end_ns, job.out, job.force, job.model, job.facts);
    if (!dump) {
        o.error = dump.error().message;
        return o;
    }
    o.path = dump->path;
    o.seconds = dump->seconds;
    if (dump->cut) o.error = fmt::format("writing it failed: {}; it holds its first {} events", dump->cut->error,
                                         dump->cut->events_kept);
    o.verdict = judge_dump(o.path, job.analysis, job.force);
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

struct FlightControl {
    struct Pending {
        std::string reason;
        uint64_t trigger_ns = 0, due_ns = 0;
    };
    std::deque<Pending> pending;
    std::future<DumpOutcome> running;
    int signals_seen = 0;
    std::deque<uint64_t> steps_ns; // the lead's last step times
    uint64_t last_marker_ns = 0;
    std::optional<uint64_t> last_slow_trigger_ns;
    uint64_t slow_steps = 0, slow_steps_skipped = 0;
    int dumps_written = 0, dumps_failed = 0;
};

Capture::Capture(const CaptureOptions& o) : options_(o) {}
Capture::~Capture() = default;

Result<void> Capture::open_writer() {
    TraceOutput out{options_.format, options_.output, options_.step_marker};
    if (!options_.flight_window_s) {
        auto writer = create_trace_writer(out, options_.force, model_);
        if (!writer) return writer.error();
        writer_.set_writer(std::move(*writer));
        return {};
    }
    FlightLimits limits;
    limits.window_ns = static_cast<uint64_t>(*options_.flight_window_s * 1e9);
    limits.max_bytes = options_.flight_max_bytes;
    auto recorder = std::make_unique<FlightRecorder>(out, options_.force, limits);
    flight_ = recorder.get();
    writer_.set_writer(std::move(recorder));
    flight_control_ = std::make_unique<FlightControl>();
    return {};
}

void Capture::poll_flight() {
    FlightControl& f = *flight_control_;
    uint64_t now = monotonic_now_ns();
    flight_->advance(now);
    for (int n = g_trigger_count.load(); f.signals_seen < n; ++f.signals_seen) {
        bool already = std::any_of(f.pending.begin(), f.pending.end(), [](const auto& p) { return p.reason == "SIGUSR1"; });
        if (!already) schedule_dump("SIGUSR1", now);
    }
    collect_dump(false);
    if (!f.running.valid() && !f.pending.empty() && now >= f.pending.front().due_ns) start_dump();
}

void Capture::on_flight_step(uint64_t end_ns) {
    FlightControl& f = *flight_control_;
    if (f.last_marker_ns && end_ns > f.last_marker_ns) {
        uint64_t step = end_ns - f.last_marker_ns;
        if (f.steps_ns.size() >= kMinStepsForMedian) {
            uint64_t median = median_of(f.steps_ns);
            if (static_cast<double>(step) > options_.slow_step_factor * static_cast<double>(median)) {
                ++f.slow_steps;
                // At most one slow-step dump per window: a job that is simply slow is not dumped every step.
                if (f.last_slow_trigger_ns && end_ns - *f.last_slow_trigger_ns < flight_->limits().window_ns) {
                    ++f.slow_steps_skipped;
                } else {
                    f.last_slow_trigger_ns = end_ns;
                    schedule_dump(fmt::format("slow step: {:.3f} s, {:.1f}x the median {:.3f} s", static_cast<double>(step) / 1e9,
                                              static_cast<double>(step) / static_cast<double>(median),
                                              static_cast<double>(median) / 1e9),
                                  end_ns);
                }
            }
        }
        f.steps_ns.push_back(step);
        if (f.steps_ns.size() > kMedianSteps) f.steps_ns.pop_front();
    }
    f.last_marker_ns = end_ns;
}

void Capture::schedule_dump(const std::string& reason, uint64_t trigger_ns) {
    flight_control_->pending.push_back({reason, trigger_ns, trigger_ns + flight_->limits().grace_ns});
    if (!options_.quiet)
        fmt::print(stderr, "\ngtrace: flight recorder: {}: dumping the last {:g} s in {:g} s\n", reason, *options_.flight_window_s,
                   static_cast<double>(flight_->limits().grace_ns) / 1e9);
}

void Capture::start_dump() {
    FlightControl& f = *flight_control_;
    FlightControl::Pending p = f.pending.front();
    f.pending.pop_front();
    model_.counters = bpf_->read_counters();
    DumpJob job;
    std::tie(job.n, job.out.path) = flight_->next_dump();
    job.reason = p.reason;
    uint64_t window = flight_->limits().window_ns;
    job.window = flight_->window_from(p.trigger_ns > window ? p.trigger_ns - window : 0);
    job.end_ns = flight_->now_ns();
    job.out.format = options_.format;
    job.out.step_marker = options_.step_marker;
    job.force = options_.force;
    job.model = model_;
    job.facts = other_data(fmt::format("flight recorder dump {} ({}); the capture went on", job.n, p.reason),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    job.facts["flight_recorder"] = flight_facts(job.n, p.reason, p.trigger_ns);
    job.analysis = {options_.step_marker, options_.redact};
    f.running = std::async(std::launch::async, [job = std::move(job)] { return write_dump(job); });
}

void Capture::collect_dump(bool wait) {
    FlightControl& f = *flight_control_;
    if (!f.running.valid()) return;
    if (!wait && f.running.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    DumpOutcome o = f.running.get();
    if (!o.error.empty() && o.path.empty()) {
        ++f.dumps_failed;
        fmt::print(stderr, "\ngtrace: error: flight recorder dump {} ({}) failed: {}; recording goes on\n", o.n, o.reason, o.error);
        return;
    }
    ++f.dumps_written;
    if (!o.error.empty()) fmt::print(stderr, "\ngtrace: error: flight recorder dump {}: {}\n", o.n, o.error);
    if (!options_.quiet)
        fmt::print(stderr, "\ngtrace: flight recorder dump {} ({}): {}, {:.1f} s, verdict: {}\n", o.n, o.reason, o.path, o.seconds,
                   o.verdict);
}

nlohmann::json Capture::flight_facts(int dump, const std::string& reason, uint64_t trigger_ns) const {
    const FlightLimits& limits = flight_->limits();
    FlightStats s = flight_->stats();
    const FlightControl& f = *flight_control_;
    nlohmann::json j = {{"dump", dump},
                        {"reason", reason},
                        {"trigger_ns", trigger_ns},
                        {"window_limit_s", static_cast<double>(limits.window_ns) / 1e9},
                        {"grace_s", static_cast<double>(limits.grace_ns) / 1e9},
                        {"max_bytes", limits.max_bytes},
                        {"stored_events", s.stored},
                        {"stored_bytes", s.bytes},
                        {"evicted_by_age", s.evicted_by_age},
                        {"evicted_by_memory", s.evicted_by_memory},
                        {"dumps_before", f.dumps_written},
                        {"dumps_failed", f.dumps_failed}};
    if (options_.slow_step_factor > 0) {
        j["slow_step_factor"] = options_.slow_step_factor;
        j["slow_steps"] = f.slow_steps;
        j["slow_steps_skipped"] = f.slow_steps_skipped;
        j["steps_seen"] = markers_seen_;
    }
    return j;
}

// The end: the dump being written is waited for; those still waiting for their grace are left
// to the last window, which finish() writes as the last dump.
void Capture::finish_flight(const std::string& reason, nlohmann::json& facts) {
    collect_dump(true);
    flight_->advance(monotonic_now_ns());
    std::string why = fmt::format("end: {}", reason);
    for (const auto& p : flight_control_->pending) why += fmt::format("; also {}", p.reason);
    facts["flight_recorder"] = flight_facts(flight_->dumps() + 1, why, flight_->now_ns());
    flight_control_->pending.clear();
}

void Capture::report_final_dump(const CaptureResult& result) {
    std::string verdict = judge_dump(result.output, {options_.step_marker, options_.redact}, options_.force);
    const nlohmann::json& fr = result.facts["flight_recorder"];
    if (!options_.quiet)
        fmt::print(stderr, "gtrace: flight recorder dump {} ({}): {}, {:.1f} s, verdict: {}\n", fr["dump"].get<int>(),
                   fr["reason"].get<std::string>(), result.output, flight_->last_window_s(), verdict);
}

} // namespace gtrace
