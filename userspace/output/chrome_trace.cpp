#include "output/chrome_trace.h"

#include <fmt/format.h>

#include "format/api_table.h"
#include "output/event_args.h"
#include "foundation/output_file.h"

namespace gtrace {
namespace {

// {"name":"...","cat":"...","ph":"X","pid":P,"tid":T,"ts":...,"dur":... (no closing brace)
void begin_slice(std::string& out, std::string_view name, std::string_view cat, uint32_t pid, uint32_t tid, uint64_t start_ns,
                 uint64_t end_ns) {
    out += "{\"name\":";
    append_json_string(out, name);
    fmt::format_to(std::back_inserter(out), ",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", cat, pid, tid);
    append_us(out, start_ns);
    out += ",\"dur\":";
    append_us(out, end_ns > start_ns ? end_ns - start_ns : 0);
}

} // namespace

void append_py_stack_args(std::string& out, const PyStack* stack, bool source_first) {
    if (!stack) return;
    auto source = [&] {
        out += ",\"source\":";
        append_json_string(out, stack->source);
    };
    if (source_first) source();
    out += ",\"py_stack\":[";
    for (size_t i = 0; i < stack->texts.size(); ++i) {
        if (i) out += ',';
        append_json_string(out, stack->texts[i]);
    }
    out += ']';
    if (!source_first) source();
}

Result<std::unique_ptr<ChromeTraceWriter>> ChromeTraceWriter::create(const std::string& path, bool force) {
    auto file = JsonEventFile::create(path, force, kChromeTraceHeader);
    if (!file) return file.error();
    return std::unique_ptr<ChromeTraceWriter>(new ChromeTraceWriter(std::move(*file)));
}

void append_call_args(std::string& out, const ApiCall& c, JsonFlavor flavor) {
    const bool kineto = flavor == JsonFlavor::Kineto;
    for_each_call_arg(c, [&](const EventArg& a) {
        if (a.type == ArgType::Stack) return append_py_stack_args(out, a.stack, true);
        if (kineto && a.name == "correlation") append_json_arg(out, "External id", a);
        append_json_arg(out, kineto && a.name == "stream" ? "cuda_stream" : a.name, a);
    });
}

void ChromeTraceWriter::call(const ApiCall& c) {
    buf_.clear();
    begin_slice(buf_, api_name(c.api), "cuda_api", c.pid, c.tid, c.start_ns, c.end_ns);
    append_args_object(buf_, [&](std::string& out) { append_call_args(out, c, JsonFlavor::Chrome); });
    buf_ += '}';
    file_.emit(buf_);
}

void ChromeTraceWriter::torch_range(const TorchRange& r) {
    // Off-CPU time on a track of its own: its clock (BPF's) and the agent's calls' need not agree
    // to the nanosecond, and Perfetto moves a complete event that overlaps another partially.
    uint32_t tid = r.off_cpu ? r.tid + kOffCpuTrackTidOffset : r.tid;
    if (r.off_cpu && !track_names_.contains({r.pid, tid})) track_names_[{r.pid, tid}] = fmt::format("off CPU (thread {})", r.tid);
    buf_.clear();
    begin_slice(buf_, r.name, range_category(r), r.pid, tid, r.start_ns, r.end_ns);
    append_args_object(buf_, [&](std::string& out) {
        append_py_stack_args(out, r.stack, false);
        if (r.nvtx) append_nvtx_args(out, *r.nvtx, r.tid);
    });
    buf_ += '}';
    file_.emit(buf_);
}

void ChromeTraceWriter::collective(const Collective& c) {
    buf_.clear();
    begin_slice(buf_, c.name, "collective", c.pid, c.tid, c.start_ns, c.end_ns);
    append_collective_args(buf_, c);
    buf_ += '}';
    file_.emit(buf_);
}

void ChromeTraceWriter::gpu_op(const GpuOp& op) {
    if (op.kind == GpuOpKind::Sync) return; // the synchronizing call's slice shows the wait
    uint32_t tid = gpu_track_tid(op.device, op.stream);
    auto key = std::make_pair(op.pid, tid);
    if (!track_names_.contains(key)) track_names_[key] = fmt::format("GPU {} · stream {}", op.device, op.stream);
    buf_.clear();
    begin_slice(buf_, op.name, gpu_op_category(op.kind), op.pid, tid, op.start_ns, op.end_ns);
    append_args_object(buf_, [&](std::string& out) { for_each_gpu_op_arg(op, [&](const EventArg& a) { append_json_arg(out, a.name, a); }); });
    buf_ += '}';
    file_.emit(buf_);
}

void ChromeTraceWriter::flow(const CallRef& call, const GpuOp& op) {
    uint64_t id = next_flow_++;
    buf_.clear();
    auto out = std::back_inserter(buf_);
    // At the call's start, as Kineto has it: Perfetto binds flows in timestamp order, so the start
    // must come before the GPU op's (a synchronous copy runs inside its call), and a slice sorts
    // before a flow event of the same timestamp: the start binds to the call (flow_rules.md).
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"ac2g\",\"ph\":\"s\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                   api_name(call.api), id, call.pid, call.tid);
    append_us(buf_, call.start_ns);
    buf_ += "}";
    file_.emit(buf_);
    buf_.clear();
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"ac2g\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                   api_name(call.api), id, op.pid, gpu_track_tid(op.device, op.stream));
    append_us(buf_, op.start_ns);
    fmt::format_to(out, ",\"args\":{{\"correlation\":{},\"launch_tid\":{}}}}}", op.correlation, call.tid);
    file_.emit(buf_);
}

void ChromeTraceWriter::memory(const MemorySample& m) {
    buf_.clear();
    auto out = std::back_inserter(buf_);
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"C\",\"pid\":{},\"ts\":", memory_counter_name(m),
                   memory_counter_category(m), m.pid);
    append_us(buf_, m.ts_ns);
    buf_ += ",\"args\":";
    append_memory_args(buf_, m);
    buf_ += "}";
    file_.emit(buf_);
}

void ChromeTraceWriter::sample_frame_begin(const SampleFrame& f, uint64_t ts_ns) {
    auto key = std::make_pair(f.pid, f.tid + kSampleTrackTidOffset);
    if (!track_names_.contains(key)) track_names_[key] = fmt::format("{} (samples)", f.thread);
    std::vector<OpenFrame>& open = open_frames_[{f.pid, f.tid}];
    open.resize(f.depth);
    open.push_back({f.frame.text(), ts_ns});
}

void ChromeTraceWriter::sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) {
    std::vector<OpenFrame>& open = open_frames_[{pid, tid}];
    if (depth >= open.size()) return;
    const OpenFrame& f = open[depth];
    buf_.clear();
    begin_slice(buf_, f.name, "sample", pid, tid + kSampleTrackTidOffset, f.start_ns, ts_ns);
    buf_ += '}';
    file_.emit(buf_);
    open.resize(depth);
}

std::vector<std::string> ChromeTraceWriter::pending_metadata(const TraceModel& model, bool all) {
    if (all) process_meta_.clear(), thread_meta_.clear();
    std::vector<std::string> out;
    auto meta = [](const char* name, uint32_t pid, uint32_t tid, const nlohmann::json& args) {
        nlohmann::json ev = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
        return ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    auto thread = [&](uint32_t pid, uint32_t tid, const std::string& name) {
        std::string ev = meta("thread_name", pid, tid, {{"name", name}});
        if (std::string& last = thread_meta_[{pid, tid}]; last != ev) out.push_back(last = std::move(ev));
    };
    for (const auto& [pid, p] : model.processes()) {
        std::string events[] = {meta("process_name", pid, 0, {{"name", p.label()}}),
                                meta("process_sort_index", pid, 0, {{"sort_index", p.sort_index()}}),
                                meta("process_labels", pid, 0, {{"labels", process_labels_json(p)}})};
        std::string joined = events[0] + events[1] + events[2];
        if (std::string& last = process_meta_[pid]; last != joined) {
            last = std::move(joined);
            for (auto& ev : events) out.push_back(std::move(ev));
        }
        for (const auto& [tid, t] : p.threads) thread(pid, tid, t.name.empty() ? fmt::format("thread {}", tid) : t.name);
    }
    for (const auto& [key, name] : track_names_) thread(key.first, key.second, name);
    return out;
}

void ChromeTraceWriter::metadata(const TraceModel& model) {
    if (write_failed()) return;
    for (const auto& ev : pending_metadata(model, false)) file_.emit(ev);
}

Result<std::optional<TraceCut>> ChromeTraceWriter::finish(const TraceModel& model, const nlohmann::json& facts) {
    return file_.finish([&](const TraceCut* cut) {
        // After a cut, metadata written into the stream may be gone with the events cut off.
        JsonEventFile::Closing c{pending_metadata(model, cut != nullptr), std::string(kChromeTraceClosing)};
        nlohmann::json other = facts;
        if (cut)
            other["cut"] = {{"error", cut->error}, {"events_kept", cut->events_kept}, {"events_dropped", cut->events_dropped}};
        c.rest += other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}\n";
        return c;
    });
}

} // namespace gtrace
