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

namespace gtrace {

std::atomic<int> g_stop_signal{0};

namespace {

constexpr int kPollMs = 50;
constexpr std::chrono::milliseconds kStopDrainLimit{2000}; // per drain: the ring's events before the stop
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

Capture::Capture(const CaptureOptions& o) : s_(o) {
    // Each component that keeps state per process, in the order they let it go.
    for (ProcessObserver* c : std::initializer_list<ProcessObserver*>{&s_.target_files, &s_.kernel_names, &s_.addresses, &s_.python_frames,
                                                                     &s_.stacks, &calls_, &s_.memory, &s_.backward, &s_.autograd,
                                                                     &gpu_, &samples_, &s_.writer})
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
    std::unique_ptr<Capture> c(new Capture(options));
    CaptureState& s = c->s_;
    if (auto r = c->open_writer(); !r) return r.error();
    s.started = std::chrono::steady_clock::now();
    c->cpu_pressure_at_start_us_ = cpu_pressure_some_us();
    s.start_wall_unix_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::string note;
    if (!s.writer.partials().empty()) // a flight recorder's dumps are written whole, each at once
        c->registration_ = RegisteredCapture::add(s.writer.partials().front(), options.output, options.pid, s.start_wall_unix_ms, note);
    if (!note.empty() && !options.quiet) print_safe(stderr, "gtrace: note: {}\n", note);
    auto bpf = BpfSession::create(
        {options.ring_buffer_bytes, options.py_stack_every, options.sample_hz, options.bpf_stats, options.off_cpu});
    if (!bpf) return bpf.error();
    s.bpf = std::move(*bpf);
    s.cuda_probes = std::make_unique<CudaProbes>(*s.bpf, s.target_files);
    s.torch_probes = std::make_unique<TorchProbes>(*s.bpf, s.target_files, s.options.autograd_links);
    s.comm_probes = std::make_unique<CommProbes>(*s.bpf, s.target_files);
    auto reader = RingReader::open(s.bpf->ring_buffer_fd(), *c);
    if (!reader) return reader.error();
    c->reader_.emplace(std::move(*reader));
    if (auto r = c->gpu_.start(); !r) return r.error();
    if (s.agents) s.agents->set_on_adopted([calls = &c->calls_](uint32_t pid) { calls->agent_adopted(pid); });

    if (auto r = c->processes_.track_tree(*start_ticks); !r) return r.error();
    return c;
}

Result<void> Capture::open_writer() {
    const CaptureOptions& o = s_.options;
    TraceOutput out{o.format, o.output, o.step_marker};
    if (!o.flight_window_s) {
        auto writer = create_trace_writer(out, o.force, s_.model);
        if (!writer) return writer.error();
        if (o.quiet && o.summary_json.empty()) { // nobody reads a report
            s_.writer.set_writer(std::move(*writer));
            return {};
        }
        analysis_ = std::make_unique<LiveTrace>(o.analysis_max_bytes);
        s_.writer.set_writer(std::make_unique<ObservedWriter>(std::move(*writer), *analysis_));
        return {};
    }
    FlightLimits limits;
    limits.window_ns = static_cast<uint64_t>(*o.flight_window_s * 1e9);
    limits.max_bytes = o.flight_max_bytes;
    auto recorder = std::make_unique<FlightRecorder>(out, o.force, limits);
    flight_ = std::make_unique<FlightDumps>(s_, *recorder, [this](const std::string& reason) {
        return other_data(reason, s_.seconds_running());
    });
    s_.writer.set_writer(std::move(recorder));
    if (o.slow_step_factor > 0) script_.set_step_listener([this](uint64_t end_ns) { flight_->on_step(end_ns); });
    return {};
}

void Capture::print_status(double elapsed_s) {
    uint64_t calls = s_.model.total_calls();
    double rate = static_cast<double>(calls - calls_at_last_status_);
    calls_at_last_status_ = calls;
    s_.model.counters = s_.bpf->read_counters();
    gpu_.update_lost();
    uint64_t lost = s_.model.lost_events();
    fmt::print(stderr, "\r\033[K[gtrace] {:6.1f}s  {} processes  {} calls  {:.0f} calls/s  lost {}{}", elapsed_s,
               s_.model.live_processes(), calls, rate, lost, processes_.waiting_for_cuda() ? "  (waiting for CUDA)" : "");
}

std::string Capture::stop_reason() const {
    const CaptureOptions& o = s_.options;
    if (s_.writer.write_failed()) return fmt::format("writing the trace failed: {}", s_.writer.write_error());
    if (int sig = g_stop_signal.load()) return fmt::format("stopped by {}", sig == SIGINT ? "SIGINT" : "SIGTERM");
    if (!script_.stop_request().empty()) return script_.stop_request();
    if (o.duration_s && s_.seconds_running() >= o.delay_s + *o.duration_s)
        return fmt::format("duration reached ({:g} s)", *o.duration_s);
    if (s_.model.live_processes() == 0) return "every traced process exited";
    return {};
}

Result<CaptureResult> Capture::run() {
    const bool live_status = !s_.options.quiet && isatty(STDERR_FILENO);
    std::string reason;
    auto last_status = s_.started;
    auto last_full_rescan = s_.started, last_trim = s_.started;
    script_.start();
    uint64_t gpu_records = 0;
    int poll_ms = kPollMs;
    while (reason.empty()) {
        reader_->poll(poll_ms);
        gpu_.poll();
        uint64_t now_read = s_.agents ? s_.agents->records_read() : 0;
        poll_ms = now_read != gpu_records ? kBusyPollMs : kPollMs;
        gpu_records = now_read;
        calls_.update_sources(gpu_.warnings());
        script_.poll();
        if (flight_) flight_->poll();
        if (s_.deferred_error) return *s_.deferred_error;
        processes_.rescan_pending();
        if (seconds_since(last_full_rescan) >= kRescanAllEvery_s) {
            last_full_rescan = std::chrono::steady_clock::now();
            processes_.rescan_all();
            for (uint32_t pid : processes_.take_gone(kForgetExitedAfter)) lifecycle_.gone(pid);
            // What a kill -9 would leave: the names known so far, and the events on disk.
            s_.writer.metadata(s_.model);
            s_.writer.flush();
            // Tables that fill and empty (a minute of calls, processes coming and going) leave
            // free pages inside the heap that glibc keeps: hand them back, so that gtrace's
            // resident memory on the job's host follows what it holds (a few ms a time).
            if (seconds_since(last_trim) >= kTrimEvery_s) {
                last_trim = std::chrono::steady_clock::now();
                malloc_trim(0);
                log_heap_for_bench(s_.seconds_running());
            }
        }
        if (live_status && seconds_since(last_status) >= 1.0) {
            last_status = std::chrono::steady_clock::now();
            print_status(s_.seconds_running());
        }
        reason = stop_reason();
    }
    if (live_status) fmt::print(stderr, "\r\033[K");
    bool emptied = reader_->drain(kStopDrainLimit);
    gpu_.finish();
    emptied = reader_->drain(kStopDrainLimit) && emptied;
    if (!emptied && !s_.options.quiet)
        print_safe(stderr, "gtrace: warning: the job filled the BPF ring faster than gtrace read it; reading stopped {} ms after the "
                           "stop, and the events still in the ring then are not in the trace\n", kStopDrainLimit.count());
    s_.model.counters = s_.bpf->read_counters();
    samples_.finish();
    return finish(reason, s_.seconds_running());
}

// The trace first, so that a side output that fails cannot cost it; after a write error, only
// the trace, cut short.
Result<CaptureResult> Capture::finish(const std::string& reason, double elapsed_s) {
    nlohmann::json facts = other_data(reason, elapsed_s);
    if (flight_) flight_->finish(reason, facts);
    auto cut = s_.writer.finish(s_.model, facts);
    if (!cut) return cut.error(); // the partial stays, and is listed as such by the next gtrace
    registration_.done();
    CaptureResult result;
    result.stop_reason = reason;
    result.output = s_.writer.output();
    result.lost = s_.model.lost_events();
    result.script_incomplete = script_.incomplete();
    result.tree_exited = s_.model.live_processes() == 0;
    if (LiveTrace* live = flight_ ? &flight_->final_analysis() : analysis_.get()) {
        if (auto spans = live->take(facts)) result.analysis = std::make_shared<TraceData>(std::move(*spans));
        else result.analysis_left_out = spans.error().message;
    }
    result.facts = std::move(facts);
    if (*cut) {
        result.write_failure = fmt::format("writing {} failed mid-capture: {}; the capture stopped and the trace keeps its first {} "
                                           "events ({} dropped): free space or write elsewhere with -o",
                                           s_.writer.output(), (*cut)->error, (*cut)->events_kept, (*cut)->events_dropped);
        return result;
    }
    if (!s_.options.folded.empty())
        if (auto r = samples_.write_folded(); !r) return r.error();
    if (flight_) flight_->report_final(result);
    if (!s_.options.quiet) print_summary(result, elapsed_s);
    return result;
}

} // namespace gtrace
