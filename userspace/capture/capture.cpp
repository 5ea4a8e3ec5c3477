#include "foundation/printable.h"
#include "capture/capture.h"
#include "output/tee_writer.h"

#include "discover/cpu_pressure.h"
#include "foundation/test_hooks.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "capture/preflight.h"
#include "output/clocks.h"

namespace gtrace {

std::atomic<int> g_stop_signal{0};

namespace {

constexpr int kPollMs = 50;
// Per drain: the ring's events up to the stop, however far behind a loaded host left the reader
// (a --trigger or --steps window is what the user asked for); only a reader slower than the job
// for this long is cut short, and says so.
constexpr std::chrono::milliseconds kStopDrainLimit{15000};
// While GPU records flow, the agents' rings are read this often: at a million records a second
// an agent's ring (GT_AGENT_DEFAULT_RING) holds about 150 ms of them.
constexpr int kBusyPollMs = 5;
constexpr double kRescanAllEvery_s = 1.0;
constexpr double kTrimEvery_s = 30.0;

// bench/soak.py: what the heap holds against what glibc keeps free in it, after each trim (the
// soak tells a table that grows from free memory the allocator does not hand back).
void log_heap_for_bench(double seconds) {
    static const bool wanted = GTRACE_TEST_HOOK("BENCH_HEAP") != nullptr;
    if (!wanted) return;
    struct mallinfo2 m = mallinfo2();
    print_safe(stderr, "gtrace-heap: t={:.1f} in_use={} free={} mmapped={} top={}\n", seconds, m.uordblks, m.fordblks,
               m.hblkhd, m.keepcost);
}

// A process's trace tracks are let go this long after its exit: its agent's last records and
// the join of its last GPU ops come within seconds (GpuJoin keeps calls a minute; an op after
// that still gets its track back).
constexpr auto kForgetExitedAfter = std::chrono::seconds(30);

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

Capture::Capture(const CaptureOptions& o, std::unique_ptr<BpfSession> bpf, std::chrono::steady_clock::time_point started,
                 uint64_t start_wall_unix_ms)
    : options_(o), started_(started), start_wall_unix_ms_(start_wall_unix_ms), bpf_(std::move(bpf)) {
    // Each component that keeps state per process, in the order they let it go.
    for (ProcessObserver* c : std::initializer_list<ProcessObserver*>{&target_files_, &kernel_names_, &addresses_, &python_frames_,
                                                                     &stacks_, &calls_, &memory_, &backward_, &autograd_,
                                                                     &gpu_, &samples_, &collective_counts_, &writer_})
        lifecycle_.add(*c);
}
Capture::~Capture() = default;

Result<std::unique_ptr<Capture>> Capture::attach(const CaptureOptions& options) {
    auto start_ticks = check_target(options.pid);
    if (!start_ticks) return start_ticks.error();
    if (!options.launched)
        if (auto r = check_scope(options.pid, options.system_wide); !r) return r.error();
    if (auto r = check_privileges(); !r) return r.error();
    if (auto r = check_btf(); !r) return r.error();
    auto started = std::chrono::steady_clock::now(); // --delay and --duration count from here
    auto start_wall_unix_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::optional<uint64_t> cpu_pressure_at_start = cpu_pressure_some_us();
    auto bpf = BpfSession::create(
        {options.ring_buffer_bytes, options.py_stack_every, options.sample_hz, options.bpf_stats, options.off_cpu});
    if (!bpf) return bpf.error();
    std::unique_ptr<Capture> c(new Capture(options, std::move(*bpf), started, start_wall_unix_ms));
    c->cpu_pressure_at_start_us_ = cpu_pressure_at_start;
    if (auto r = c->open_writer(); !r) return r.error();
    std::string note;
    if (!c->writer_.partials().empty()) // a flight recorder's dumps are written whole, each at once
        c->registration_ = RegisteredCapture::add(c->writer_.partials().front(), options.output, options.pid, c->start_wall_unix_ms_, note);
    if (!note.empty() && !options.quiet) print_safe(stderr, "gtrace: note: {}\n", note);
    auto reader = RingReader::open(c->bpf_->ring_buffer_fd(), *c);
    if (!reader) return reader.error();
    c->reader_.emplace(std::move(*reader));
    auto definitions = StackDefinitions::start(c->bpf_->py_stack_ring_fd(), c->stacks_);
    if (!definitions) return definitions.error();
    c->stack_definitions_ = std::move(*definitions);
    if (auto r = c->gpu_.start(); !r) return r.error();
    if (c->agents_) c->agents_->set_on_adopted([calls = &c->calls_](uint32_t pid) { calls->agent_adopted(pid); });

    if (auto r = c->processes_.track_tree(*start_ticks); !r) return r.error();
    return c;
}

Result<void> Capture::open_writer() {
    const CaptureOptions& o = options_;
    TraceOutput out{o.format, o.output, o.step_marker};
    if (!o.flight_window_s) {
        auto writer = create_trace_writer(out, o.force, model_);
        if (!writer) return writer.error();
        if (o.quiet && o.summary_json.empty()) { // nobody reads a report
            writer_.set_writer(std::move(*writer));
            return {};
        }
        analysis_ = std::make_unique<LiveTrace>(live_analysis_options(o));
        writer_.set_writer(std::make_unique<ObservedWriter>(std::move(*writer), *analysis_));
        return {};
    }
    FlightLimits limits;
    limits.window_ns = static_cast<uint64_t>(*o.flight_window_s * 1e9);
    limits.max_bytes = o.flight_max_bytes;
    auto recorder = std::make_unique<FlightRecorder>(out, o.force, limits);
    flight_ = std::make_unique<FlightDumps>(options_, model_, *bpf_, *recorder, [this](const std::string& reason) {
        return other_data(reason, seconds_running());
    });
    writer_.set_writer(std::move(recorder));
    if (o.slow_step_factor > 0) script_.set_step_listener([this](uint64_t end_ns) { flight_->on_step(end_ns); });
    return {};
}

void Capture::publish_collective_counts(uint64_t read_until_ns) {
    if (publish_failed_) return;
    if (!publisher_) {
        auto registry = CaptureRegistry::open();
        if (!registry) {
            publish_failed_ = true;
            if (!options_.quiet) print_safe(stderr, "gtrace: note: gtrace dump will not see the collective counts: {}\n", registry.error().message);
            return;
        }
        publisher_.emplace(std::move(*registry));
    }
    // What the counts cannot be trusted without: collective events the ring had no room for (a
    // call not recorded for want of its thread's state or its Work's entry is a dated hole in the
    // counts themselves) — and until when the capture had read its ring (the dump compares counts
    // the capture saw stand still, not ones it has yet to read).
    model_.counters = bpf_->read_counters();
    uint64_t unrecorded = model_.counters[GT_EV_COLLECTIVE];
    nlohmann::json j = {{"capture_pid", getpid()}, {"root_pid", options_.pid}, {"start_unix_ms", start_wall_unix_ms_},
                        {"last_change_ns", collective_counts_.last_change_ns()}, {"read_until_ns", read_until_ns},
                        {"unrecorded", unrecorded}, {"processes", collective_counts_.facts()}};
    if (auto r = publisher_->publish("collectives", j.dump()); !r) {
        publish_failed_ = true;
        if (!options_.quiet) print_safe(stderr, "gtrace: note: gtrace dump will not see the collective counts: {}\n", r.error().message);
    }
}

void Capture::print_status(double elapsed_s) {
    uint64_t calls = model_.total_calls();
    double rate = static_cast<double>(calls - calls_at_last_status_);
    calls_at_last_status_ = calls;
    model_.counters = bpf_->read_counters();
    gpu_.update_lost();
    uint64_t lost = model_.lost_events();
    fmt::print(stderr, "\r\033[K[gtrace] {:6.1f}s  {} processes  {} calls  {:.0f} calls/s  lost {}{}", elapsed_s,
               model_.live_processes(), calls, rate, lost, processes_.waiting_for_cuda() ? "  (waiting for CUDA)" : "");
}

std::string Capture::stop_reason() const {
    const CaptureOptions& o = options_;
    if (writer_.write_failed()) return fmt::format("writing the trace failed: {}", writer_.write_error());
    if (int sig = g_stop_signal.load()) return fmt::format("stopped by {}", sig == SIGINT ? "SIGINT" : "SIGTERM");
    if (!script_.stop_request().empty()) return script_.stop_request();
    if (o.duration_s && seconds_running() >= o.delay_s + *o.duration_s)
        return fmt::format("duration reached ({:g} s)", *o.duration_s);
    if (model_.live_processes() == 0) return "every traced process exited";
    return {};
}

Result<CaptureResult> Capture::run() {
    const bool live_status = !options_.quiet && isatty(STDERR_FILENO);
    std::string reason;
    auto last_status = started_;
    auto last_full_rescan = started_, last_trim = started_;
    script_.start(started_);
    uint64_t gpu_records = 0;
    int poll_ms = kPollMs;
    while (reason.empty()) {
        const uint64_t poll_start_ns = monotonic_now_ns();
        reader_->poll(poll_ms);
        if (!reader_->behind()) read_until_ns_ = poll_start_ns; // the ring emptied: every record emitted before it is read
        gpu_.poll();
        uint64_t now_read = agents_ ? agents_->records_read() : 0;
        poll_ms = now_read != gpu_records ? kBusyPollMs : kPollMs;
        gpu_records = now_read;
        calls_.update_sources(gpu_.warnings());
        script_.poll();
        if (flight_) flight_->poll();
        if (errors_.first()) return *errors_.first();
        processes_.rescan_pending();
        if (seconds_since(last_full_rescan) >= kRescanAllEvery_s) {
            last_full_rescan = std::chrono::steady_clock::now();
            processes_.rescan_all();
            for (uint32_t pid : processes_.take_gone(kForgetExitedAfter)) lifecycle_.gone(pid);
            // What a kill -9 would leave: the names known so far, and the events on disk.
            writer_.metadata(model_);
            writer_.flush();
            if (collective_counts_.due_for_publication(read_until_ns_)) publish_collective_counts(read_until_ns_);
            // Tables that fill and empty (a minute of calls, processes coming and going) leave
            // free pages inside the heap that glibc keeps: hand them back, so that gtrace's
            // resident memory on the job's host follows what it holds (a few ms a time).
            if (seconds_since(last_trim) >= kTrimEvery_s) {
                last_trim = std::chrono::steady_clock::now();
                malloc_trim(0);
                log_heap_for_bench(seconds_running());
            }
        }
        if (live_status && seconds_since(last_status) >= 1.0) {
            last_status = std::chrono::steady_clock::now();
            print_status(seconds_running());
        }
        reason = stop_reason();
    }
    if (live_status) fmt::print(stderr, "\r\033[K");
    const uint64_t stop_ns = monotonic_now_ns();
    bool emptied = reader_->drain(kStopDrainLimit, stop_ns);
    gpu_.finish();
    emptied = reader_->drain(kStopDrainLimit, stop_ns) && emptied;
    if (!emptied && !options_.quiet)
        print_safe(stderr, "gtrace: warning: gtrace was behind the job at the stop and read its BPF ring for {} s without reaching "
                           "the stop; the events still in the ring then are not in the trace\n", kStopDrainLimit.count() / 1000);
    model_.counters = bpf_->read_counters();
    samples_.finish();
    return finish(reason, seconds_running());
}

// The trace first, so that a side output that fails cannot cost it; after a write error, only
// the trace, cut short.
Result<CaptureResult> Capture::finish(const std::string& reason, double elapsed_s) {
    nlohmann::json facts = other_data(reason, elapsed_s);
    if (flight_) flight_->finish(reason, facts);
    if (publisher_) publisher_->unpublish("collectives");
    auto cut = writer_.finish(model_, facts);
    if (!cut) return cut.error(); // the partial stays, and is listed as such by the next gtrace
    registration_.done();
    CaptureResult result;
    result.stop_reason = reason;
    result.output = writer_.output();
    result.lost = model_.lost_events();
    result.script_incomplete = script_.incomplete();
    result.tree_exited = model_.live_processes() == 0;
    if (LiveTrace* live = flight_ ? &flight_->final_analysis() : analysis_.get()) {
        result.analysis = std::make_shared<TraceData>(live->take(facts));
    }
    result.facts = std::move(facts);
    if (*cut) {
        result.write_failure = fmt::format("writing {} failed mid-capture: {}; the capture stopped and the trace keeps its first {} "
                                           "events ({} dropped): free space or write elsewhere with -o",
                                           writer_.output(), (*cut)->error, (*cut)->events_kept, (*cut)->events_dropped);
        return result;
    }
    if (!options_.folded.empty())
        if (auto r = samples_.write_folded(); !r) return r.error();
    if (flight_) flight_->report_final(result);
    if (!options_.quiet) print_summary(result, elapsed_s);
    return result;
}

} // namespace gtrace
