#include "cli/capture.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "cli/preflight.h"
#include "decode/api_table.h"
#include "decode/collective.h"
#include "decode/torch_range.h"
#include "discover/proc_tree.h"

namespace gtrace {

std::atomic<int> g_stop_signal{0};

namespace {

constexpr int kPollMs = 50;
constexpr double kRescanAllEvery_s = 1.0;

bool process_alive(int pid) {
    auto st = read_proc_stat(pid);
    return st && st->state != 'Z' && st->state != 'X';
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

Result<std::unique_ptr<Capture>> Capture::attach(const CaptureOptions& options) {
    auto start_ticks = check_target(options.pid);
    if (!start_ticks) return start_ticks.error();
    if (!options.launched)
        if (auto r = check_scope(options.pid, options.system_wide); !r) return r.error();
    if (auto r = check_privileges(); !r) return r.error();
    if (auto r = check_btf(); !r) return r.error();
    std::unique_ptr<Capture> c(new Capture(options));
    if (auto r = c->open_writer(); !r) return r.error();
    c->started_ = std::chrono::steady_clock::now();
    c->start_wall_unix_ms_ = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::string note;
    if (!c->writer_.partials().empty()) // a flight recorder's dumps are written whole, each at once
        c->registration_ = RegisteredCapture::add(c->writer_.partials().front(), options.output, options.pid, c->start_wall_unix_ms_, note);
    if (!note.empty() && !options.quiet) fmt::print(stderr, "gtrace: note: {}\n", note);
    auto bpf = BpfSession::create({options.ring_buffer_bytes, options.py_stack_every, options.sample_hz, options.bpf_stats});
    if (!bpf) return bpf.error();
    c->bpf_ = std::move(*bpf);
    c->probes_ = std::make_unique<CudaProbes>(*c->bpf_);
    c->torch_probes_ = std::make_unique<TorchProbes>(*c->bpf_);
    c->comm_probes_ = std::make_unique<CommProbes>(*c->bpf_);
    auto reader = RingReader::open(c->bpf_->ring_buffer_fd(), *c);
    if (!reader) return reader.error();
    c->reader_.emplace(std::move(*reader));
    if (auto r = c->start_gpu(); !r) return r.error();

    if (auto r = c->track_tree(*start_ticks); !r) return r.error();
    return c;
}

Result<void> Capture::track_tree(uint64_t root_start_ticks) {
    // Fork events are live before the tree is entered into the map: a child forked while we
    // walk /proc is either found by the next walk or reported by BPF. Walk until stable.
    if (const char* delay = getenv("GTRACE_TEST_ATTACH_DELAY_MS")) usleep(static_cast<useconds_t>(atoi(delay)) * 1000);
    for (size_t known = 0;;) {
        std::vector<int> tree = list_tree(options_.pid, getpid()); // never gtrace itself, nor its children
        for (int pid : tree) {
            if (model_.find(static_cast<uint32_t>(pid))) continue;
            auto st = read_proc_stat(pid);
            if (!st) continue;
            if (auto r = bpf_->track(static_cast<uint32_t>(pid)); !r) return r;
            model_.add_process(static_cast<uint32_t>(pid), static_cast<uint32_t>(st->ppid), true, std::nullopt);
        }
        if (model_.processes().size() == known) break;
        known = model_.processes().size();
    }
    // Interpreters before probes: a probe serves every process mapping its file at once. (Even
    // with --py-stacks off: samples and torch ranges use the interpreter too.)
    for (const auto& [pid, p] : model_.processes()) detect_python(static_cast<int>(pid), read_maps(static_cast<int>(pid)));
    for (const auto& [pid, p] : model_.processes()) {
        if (auto r = scan(static_cast<int>(pid)); !r) return r;
        if (auto r = probes_->probe_candidates(static_cast<int>(pid)); !r) return r.error();
    }
    // Attaching takes a while; the target may have exited, or its PID been reused, meanwhile.
    auto root = read_proc_stat(options_.pid);
    if (!root || root->start_time_ticks != root_start_ticks || root->state == 'Z')
        return make_error(ExitCode::ProcessExited,
                          fmt::format("process {} exited while gtrace was attaching; start gtrace while the job runs",
                                      options_.pid));
    if (!probes_->any_mapped()) {
        waiting_for_cuda_ = true;
        if (!options_.quiet)
            fmt::print(stderr,
                       "gtrace: waiting for CUDA: no process in the tree of PID {} has loaded libcudart or libcuda yet; "
                       "probes attach as soon as one does\n",
                       options_.pid);
    }
    return {};
}

Result<void> Capture::scan(int pid) {
    std::vector<Mapping> maps = read_maps(pid);
    // The interpreter first: the probes' first calls then already carry Python stacks.
    if (!python_frames_.has_runtime(static_cast<uint32_t>(pid)) &&
        !python_unsupported_.contains(static_cast<uint32_t>(pid)))
        detect_python(pid, maps);
    auto added = probes_->scan_maps(pid, maps);
    if (!added) return added.error();
    if (auto torch = torch_probes_->scan_maps(pid, maps); !torch) return torch.error();
    if (auto comm = comm_probes_->scan_maps(pid, maps); !comm) return comm.error();
    inject_if_cuda(pid, maps);
    addresses_.set_maps(static_cast<uint32_t>(pid), std::move(maps));
    if (waiting_for_cuda_ && probes_->any_mapped()) {
        waiting_for_cuda_ = false;
        if (!options_.quiet) fmt::print(stderr, "\ngtrace: CUDA loaded in pid {}; tracing its calls\n", pid);
    }
    return {};
}

void Capture::detect_python(int pid, const std::vector<Mapping>& maps) {
    PythonDetection d = gtrace::detect_python(pid, maps);
    if (d.runtime) {
        auto r = bpf_->set_python_layout(static_cast<uint32_t>(pid), d.runtime->layout);
        if (!r) {
            if (!deferred_error_) deferred_error_ = r.error();
            return;
        }
        set_agent_layout(static_cast<uint32_t>(pid), *r);
        python_frames_.set_runtime(static_cast<uint32_t>(pid), *d.runtime);
    } else if (!d.unsupported.empty() && python_unsupported_.insert(static_cast<uint32_t>(pid)).second && !options_.quiet) {
        fmt::print(stderr, "gtrace: warning: pid {}: {}; its CUDA calls are traced without Python frames\n", pid,
                   d.unsupported);
    }
}

void Capture::forget_python(uint32_t pid) {
    python_frames_.forget_process(pid);
    stacks_.forget_process(pid);
    python_unsupported_.erase(pid);
    bpf_->clear_python_layout(pid);
    forget_agent_calls(pid);
}

void Capture::on_pystack(const gt_py_stack_event& e) { stacks_.define(e); }

namespace {

// A native stack's outermost frame is a thread's root unless frame-pointer unwinding stopped
// early at a function built without frame pointers.
bool is_thread_root(const std::string& name) {
    return name == "_start" || name == "start_thread" || name == "clone" || name == "clone3" ||
           name == "__libc_start_call_main" || name == "__libc_start_main" || name.starts_with("__clone");
}

} // namespace

void Capture::on_sample(const gt_sample_event& e) {
    std::vector<PyFrame> stack; // outermost first
    if (PyStackRef py = stacks_.find(e.pid, e.py_stack)) {
        stack.assign(py->frames.rbegin(), py->frames.rend());
    } else if (e.native_bytes > 0) {
        size_t n = std::min<size_t>(static_cast<size_t>(e.native_bytes) / 8, GT_NATIVE_MAX_FRAMES);
        for (size_t i = n; i-- > 0;) {
            // Return addresses point after the call: look up the call itself.
            std::string name = addresses_.name_at(e.pid, i == 0 ? e.native[i] : e.native[i] - 1);
            if (!name.empty()) stack.push_back({std::move(name), {}, 0});
        }
        if (!stack.empty() && !is_thread_root(stack.front().qualname)) stack.insert(stack.begin(), {"[stack cut: no frame pointer]", {}, 0});
    }
    std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
    if (stack.empty()) stack.push_back({fmt::format("[{}]", comm), {}, 0});
    samples_.add(e.pid, e.tid, e.ts_ns, comm, stack);
}

void Capture::on_api(const gt_api_event& e) {
    ApiCall call = decode_api_call(e);
    if ((e.flags & GT_API_EV_AGENT_RECORDS) || recorded_by_agent(call)) { // the probes were still on while its agent took over
        ++uprobe_calls_dropped_;
        return;
    }
    ++uprobe_calls_;
    call.stack = stacks_.find(e.pid, e.py_stack);
    if (call.launch) call.kernel = kernel_names_.name_of(call);
    take_call(call);
}

void Capture::take_call(ApiCall& call) {
    model_.record_call(call);
    writer_.call(call);
    if (call.api == GT_API_CUDA_MALLOC || call.api == GT_API_CUDA_FREE) memory_.on_call(call);
    if (agents_) join_.add_call(call);
}

void Capture::on_torch_range(const gt_torch_range_event& e) {
    TorchRange range{e.pid, e.tid, e.start_ns, e.end_ns, {}, stacks_.find(e.pid, e.py_stack)};
    static const std::vector<PyFrame> kNoFrames;
    range.name = torch_range_name(e, range.stack ? range.stack->frames : kNoFrames);
    writer_.torch_range(range);
    ++torch_ranges_;
    on_step_marker(e.pid, range.name, e.end_ns);
}

void Capture::on_collective(const gt_collective_event& e) {
    writer_.collective(decode_collective(e));
    ++collectives_;
}

void Capture::on_func_name(const gt_func_name_event& e) { kernel_names_.on_func_name(e); }

void Capture::on_proc(const gt_proc_event& e) {
    switch (e.kind) {
    case GT_PROC_FORK:
        model_.add_process(e.pid, e.ppid, false, e.ppid);
        kernel_names_.inherit(e.pid, e.ppid);
        addresses_.inherit(e.pid, e.ppid);
        pending_scan_.insert(static_cast<int>(e.pid)); // a forked interpreter: same layout, own memory
        break;
    case GT_PROC_EXEC:
        if (!model_.find(e.pid)) model_.add_process(e.pid, 0, false, std::nullopt);
        model_.refresh_identity(e.pid);
        kernel_names_.forget_process(e.pid);
        addresses_.forget_process(e.pid);
        forget_python(e.pid); // BPF dropped its layout and agent slots at the exec itself
        // Scan at once: the new image may call CUDA and exit before the next poll.
        if (auto r = probes_->probe_candidates(static_cast<int>(e.pid)); !r && !deferred_error_) deferred_error_ = r.error();
        if (auto r = scan(static_cast<int>(e.pid)); !r && !deferred_error_) deferred_error_ = r.error();
        break;
    case GT_PROC_EXIT:
        model_.mark_exited(e.pid, e.exit_code);
        kernel_names_.forget_process(e.pid);
        addresses_.forget_process(e.pid);
        forget_python(e.pid);
        memory_.forget_process(e.pid);
        pending_scan_.erase(static_cast<int>(e.pid));
        break;
    default:
        break;
    }
}

void Capture::on_mmap(const gt_mmap_event& e) {
    // The mapping is reported at syscall entry: scan now (usually done by then) and again
    // after this batch of events.
    if (auto r = scan(static_cast<int>(e.pid)); !r && !deferred_error_) deferred_error_ = r.error();
    pending_scan_.insert(static_cast<int>(e.pid));
}

void Capture::rescan_pending() {
    auto pending = std::move(pending_scan_);
    pending_scan_.clear();
    for (int pid : pending)
        if (auto r = scan(pid); !r && !deferred_error_) deferred_error_ = r.error();
}

void Capture::check_liveness() {
    // Normally the exit tracepoint reports exits; this catches one whose event was lost.
    for (const auto& [pid, p] : model_.processes())
        if (!p.exited && !process_alive(static_cast<int>(pid))) {
            model_.mark_exited(pid, 0);
            bpf_->untrack(pid);
        }
}

void Capture::print_status(double elapsed_s) {
    uint64_t calls = model_.total_calls();
    double rate = static_cast<double>(calls - calls_at_last_status_);
    calls_at_last_status_ = calls;
    model_.counters = bpf_->read_counters();
    uint64_t lost = model_.lost_events();
    fmt::print(stderr, "\r\033[K[gtrace] {:6.1f}s  {} processes  {} calls  {:.0f} calls/s  lost {}{}", elapsed_s,
               model_.live_processes(), calls, rate, lost, waiting_for_cuda_ ? "  (waiting for CUDA)" : "");
}

Result<CaptureResult> Capture::run() {
    const bool live_status = !options_.quiet && isatty(STDERR_FILENO);
    std::string reason;
    auto last_status = started_;
    auto last_full_rescan = started_;
    start_script();
    while (reason.empty()) {
        reader_->poll(kPollMs);
        poll_gpu();
        update_call_capture();
        poll_script();
        if (flight_) poll_flight();
        if (deferred_error_) return *deferred_error_;
        rescan_pending();
        double elapsed = seconds_since(started_);
        if (seconds_since(last_full_rescan) >= kRescanAllEvery_s) {
            last_full_rescan = std::chrono::steady_clock::now();
            check_liveness();
            for (const auto& [pid, p] : model_.processes())
                if (!p.exited) pending_scan_.insert(static_cast<int>(pid));
            // What a kill -9 would leave: the names known so far, and the events on disk.
            writer_.metadata(model_);
            writer_.flush();
        }
        if (live_status && seconds_since(last_status) >= 1.0) {
            last_status = std::chrono::steady_clock::now();
            print_status(elapsed);
        }
        if (writer_.write_failed()) reason = fmt::format("writing the trace failed: {}", writer_.write_error());
        else if (int sig = g_stop_signal.load()) reason = fmt::format("stopped by {}", sig == SIGINT ? "SIGINT" : "SIGTERM");
        else if (!stop_request_.empty()) reason = stop_request_;
        else if (options_.duration_s && elapsed >= options_.delay_s + *options_.duration_s)
            reason = fmt::format("duration reached ({:g} s)", *options_.duration_s);
        else if (model_.live_processes() == 0) reason = "every traced process exited";
    }
    if (live_status) fmt::print(stderr, "\r\033[K");
    reader_->drain();
    finish_gpu();
    reader_->drain();
    model_.counters = bpf_->read_counters();
    samples_.finish();
    return finish(reason, seconds_since(started_));
}

// The trace first, so that a side output that fails cannot cost it; after a write error, only
// the trace, cut short.
Result<CaptureResult> Capture::finish(const std::string& reason, double elapsed_s) {
    nlohmann::json facts = other_data(reason, elapsed_s);
    if (flight_) finish_flight(reason, facts);
    auto cut = writer_.finish(model_, facts);
    if (!cut) return cut.error(); // the partial stays, and is listed as such by the next gtrace
    registration_.done();
    CaptureResult result;
    result.stop_reason = reason;
    result.output = writer_.output();
    result.lost = model_.lost_events();
    result.script_incomplete = script_incomplete();
    result.tree_exited = model_.live_processes() == 0;
    result.facts = std::move(facts);
    if (*cut) {
        result.write_failure = fmt::format("writing {} failed mid-capture: {}; the capture stopped and the trace keeps its first {} "
                                           "events ({} dropped): free space or write elsewhere with -o",
                                           writer_.output(), (*cut)->error, (*cut)->events_kept, (*cut)->events_dropped);
        return result;
    }
    if (!options_.folded.empty())
        if (auto r = samples_.write_folded(options_.folded, model_, options_.force); !r) return r.error();
    if (flight_) report_final_dump(result);
    if (!options_.quiet) print_summary(result, elapsed_s);
    return result;
}

nlohmann::json Capture::other_data(const std::string& stop_reason, double elapsed_s) const {
    nlohmann::json counters = nlohmann::json::object();
    for (unsigned i = 1; i < GT_CNT_COUNT; ++i)
        if (const char* name = counter_name(i)) counters[name] = model_.counters[i];
    nlohmann::json calls = nlohmann::json::object();
    auto per_api = model_.calls_per_api();
    for (const auto& api : kApis)
        if (per_api[api.id]) calls[std::string(api.name)] = per_api[api.id];
    nlohmann::json objects = nlohmann::json::array();
    for (const auto& [key, obj] : probes_->objects())
        objects.push_back({{"path", obj.path}, {"mapped", obj.mapped}, {"apis", obj.apis}});
    return {{"tool", "gtrace"},
            {"version", "0.1.0"},
            {"root_pid", options_.pid},
            {"clock", "CLOCK_MONOTONIC"},
            {"start_unix_ms", start_wall_unix_ms_},
            {"duration_s", elapsed_s},
            {"stop_reason", stop_reason},
            {"lost_events", model_.lost_events()},
            {"samples", samples_.samples()},
            {"sample_hz", options_.sample_hz},
            {"python_stacks_dropped_torn", python_frames_.torn_stacks()},
            {"counters", counters},
            {"calls", calls},
            {"probed_objects", objects},
            {"torch_libraries", torch_probes_->facts()},
            {"c10d_libraries", comm_probes_->facts()},
            {"collectives", collectives_},
            {"capture_script", script_facts()},
            {"bpf_stats", bpf_stats_facts()},
            {"api_capture", api_capture_facts()},
            {"gpu", gpu_facts()}};
}

nlohmann::json Capture::bpf_stats_facts() const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& p : bpf_->program_stats())
        out[p.name] = {{"runs", p.runs}, {"run_ns", p.run_ns}, {"ns_per_run", p.runs ? p.run_ns / p.runs : 0}};
    return out;
}

void Capture::print_summary(const CaptureResult& r, double elapsed_s) const {
    size_t ranks = 0, threads = 0;
    for (const auto& [pid, p] : model_.processes()) {
        ranks += p.ranks.rank && !p.forked_from;
        threads += p.threads.size();
    }
    fmt::print(stderr, "gtrace: capture ended after {:.1f} s: {}\n", elapsed_s, r.stop_reason);
    fmt::print(stderr, "  processes: {} ({} ranks), threads with CUDA calls: {}\n", model_.processes().size(), ranks, threads);
    auto per_api = model_.calls_per_api();
    fmt::print(stderr, "  CUDA API calls: {}\n", model_.total_calls());
    for (const auto& api : kApis)
        if (per_api[api.id]) fmt::print(stderr, "    {:<28} {}\n", api.name, per_api[api.id]);
    for (const auto& [key, obj] : probes_->objects())
        if (obj.mapped) fmt::print(stderr, "  probed: {} ({} functions)\n", obj.path, obj.apis.size());
    if (agent_calls_ || !calls_since_.empty())
        fmt::print(stderr, "  calls recorded by the agent (CUPTI {}) in {} processes: {}; by uprobes: {}; uprobes {} at the end\n",
                   agents_ && agents_->totals().calls_from_records ? "API records" : "callbacks", calls_since_.size(),
                   agent_calls_, uprobe_calls_, probes_->attached() ? "on" : "off");
    if (r.lost)
        fmt::print(stderr, "  WARNING: {} events were LOST (ring buffer full); the trace is incomplete; raise --buffer-size\n",
                   r.lost);
    else
        fmt::print(stderr, "  lost events: 0\n");
    if (options_.sample_hz) fmt::print(stderr, "  samples: {} at {} Hz{}\n", samples_.samples(), options_.sample_hz,
                                       options_.folded.empty() ? "" : fmt::format(", folded stacks in {}", options_.folded));
    print_gpu_summary();
    if (uint64_t untraced = model_.counters[GT_CNT_ENTRY_STATE_FULL])
        fmt::print(stderr, "  WARNING: {} calls were not traced: the kernel gave no per-thread state, or they nested deeper than "
                           "4 probed calls (not a full ring: --buffer-size does not help)\n", untraced);
    if (uint64_t inflight = model_.counters[GT_CNT_RETURN_WITHOUT_ENTRY])
        fmt::print(stderr, "  calls already in flight at attach (not traced): {}\n", inflight);
    fmt::print(stderr, "  trace: {} — open it in Perfetto UI (ui.perfetto.dev) or chrome://tracing\n", r.output);
}

} // namespace gtrace
