#include "output/kineto_writer.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>

#include "format/api_table.h"
#include "foundation/output_file.h"
#include "output/chrome_trace.h"

namespace gtrace {
using kineto::begin_x;
using kineto::meta;

namespace {

// Kineto's categories of CUDA calls: the runtime API (cuda*) and the driver API (cu*).
const char* call_category(std::string_view api) { return api.starts_with("cuda") ? "cuda_runtime" : "cuda_driver"; }

std::string header(std::optional<int> rank, std::optional<int> world_size) {
    std::string h(kKinetoHeaderStart);
    // HTA finds a file's rank with the regex "rank":\s+(\d+) on its first matching line.
    if (rank) {
        h += fmt::format("\"distributedInfo\": {{\"rank\": {}", *rank);
        if (world_size) h += fmt::format(", \"world_size\": {}", *world_size);
        h += "},\n";
    }
    h += "\"traceName\": \"gtrace\",\n\"displayTimeUnit\": \"ms\",\n";
    h += kKinetoEventsStart;
    return h;
}

} // namespace

namespace kineto {

void begin_x(std::string& out, std::string_view cat, std::string_view name, uint32_t pid, uint32_t tid, uint64_t start,
             uint64_t end) {
    fmt::format_to(std::back_inserter(out), "{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":", cat);
    append_json_string(out, name);
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", pid, tid);
    append_us(out, start);
    out += ",\"dur\":";
    append_us(out, end > start ? end - start : 0);
}

std::string meta(const char* name, uint32_t pid, uint32_t tid, const nlohmann::json& args) {
    nlohmann::json ev = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
    return ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace kineto

KinetoWriter::KinetoWriter(std::string dir, int dir_fd, const TraceModel& model, const std::string& step_marker)
    : dir_(std::move(dir)), dir_fd_(dir_fd), model_(model), step_regex_(step_marker, std::regex::ECMAScript | std::regex::optimize),
      clocks_(read_clocks()), gpu_ranges_([this](const GpuRangeSpan& s) { gpu_range(s); }) {}

KinetoWriter::~KinetoWriter() {
    if (dir_fd_ >= 0) close(dir_fd_);
}

Result<std::unique_ptr<KinetoWriter>> KinetoWriter::create(const std::string& dir, bool force, const TraceModel& model,
                                                            const std::string& step_marker) {
    auto fd = create_output_directory(dir, force);
    if (!fd) return fd.error();
    // Held until the capture ends (or gtrace dies): tells `gtrace recover` and a later capture
    // that the directory's partial files are still being written.
    flock(*fd, LOCK_EX | LOCK_NB);
    return std::unique_ptr<KinetoWriter>(new KinetoWriter(dir, *fd, model, step_marker));
}

KinetoWriter::File* KinetoWriter::file_of(uint32_t pid) {
    if (!error_.empty()) return nullptr;
    if (auto it = by_pid_.find(pid); it != by_pid_.end()) return it->second;
    const ProcessInfo* p = model_.find(pid);
    std::optional<int> rank = p && p->ranks.rank ? std::optional<int>(*p->ranks.rank) : std::nullopt;
    std::string name = rank ? fmt::format("rank{}.pt.trace.json", *rank) : fmt::format("other/pid{}.pt.trace.json", pid);
    File& f = files_[name];
    if (!f.out) {
        if (!rank) {
            if (auto sub = create_output_directory(dir_ + "/other", true); !sub) {
                error_ = sub.error().message;
                return nullptr;
            } else {
                close(*sub);
            }
        }
        auto out = JsonEventFile::create(dir_ + "/" + name, true, header(rank, p ? p->ranks.world_size : std::nullopt));
        if (!out) {
            error_ = out.error().message;
            return nullptr;
        }
        f.out.emplace(std::move(*out));
        f.rank = rank;
    }
    return by_pid_[pid] = &f;
}

void KinetoWriter::emit(File& f, std::string_view event) {
    f.out->emit(event);
    if (f.out->failed() && error_.empty()) error_ = f.out->error();
}

void KinetoWriter::call(const ApiCall& c) {
    File* f = file_of(c.pid);
    if (!f) return;
    std::string_view api = api_name(c.api);
    buf_.clear();
    begin_x(buf_, call_category(api), api, c.pid, c.tid, c.start_ns, c.end_ns);
    // The same arguments as the Chrome JSON's, Kineto's join key among them (HTA reads "External
    // id" and "correlation"), the launch's own configuration too (Kineto's runtime events have
    // none; the kernel row has it).
    append_args_object(buf_, [&](std::string& out) { append_call_args(out, c, JsonFlavor::Kineto); });
    buf_ += '}';
    emit(*f, buf_);
}

// A user_annotation row, as torch.profiler writes a record_function, and a cpu_op row of the same
// span: HTA's critical path takes only cpu_op rows (and CUDA calls) as CPU work.
void KinetoWriter::torch_range(const TorchRange& r) {
    File* f = file_of(r.pid);
    if (!f || r.off_cpu) return; // Kineto has no row for a thread asleep: HTA would count it an op

    for (const char* cat : {"user_annotation", "cpu_op"}) {
        buf_.clear();
        begin_x(buf_, cat, r.name, r.pid, r.tid, r.start_ns, r.end_ns);
        if (r.stack || r.nvtx) {
            append_args_object(buf_, [&](std::string& out) {
                append_py_stack_args(out, r.stack, true);
                if (r.nvtx) append_nvtx_args(out, *r.nvtx, r.tid);
            });
        }
        buf_ += '}';
        emit(*f, buf_);
    }
    gpu_ranges_.range(r);
    if (!std::regex_search(r.name, step_regex_)) return;
    // A step runs from one step marker's end to the next's, as ProfilerStep#N does in Kineto.
    Steps& s = steps_[r.pid];
    if (s.last_end && r.end_ns > s.last_end) {
        s.pending.push_back({s.next++, r.tid, s.last_end, r.end_ns});
        if (s.pending.size() > kMaxPendingSteps) s.pending.pop_front(), ++steps_not_covered_;
        write_covered_steps(r.pid, s, false);
    }
    s.last_end = r.end_ns;
}

// Only steps the GPU records cover are written (from the process's first GPU op to its last seen):
// HTA analyses ProfilerSteps as GPU work, and a step before the agent's first record looks idle.
void KinetoWriter::write_covered_steps(uint32_t pid, Steps& s, bool at_end) {
    auto span = gpu_span_.find(pid);
    File* f = file_of(pid);
    while (!s.pending.empty() && f) {
        const PendingStep& step = s.pending.front();
        bool has_gpu = span != gpu_span_.end();
        if (has_gpu && step.start_ns >= span->second.first && step.end_ns <= span->second.second) {
            buf_.clear();
            begin_x(buf_, "user_annotation", fmt::format("ProfilerStep#{}", step.number), pid, step.tid, step.start_ns, step.end_ns);
            buf_ += '}';
            emit(*f, buf_);
        } else if (!at_end && (!has_gpu || step.start_ns >= span->second.first)) {
            break; // its GPU work may still come
        } else {
            ++steps_not_covered_;
        }
        s.pending.pop_front();
    }
}

void KinetoWriter::gpu_op(const GpuOp& op) {
    if (op.kind == GpuOpKind::Sync) return gpu_sync(op);
    File* f = file_of(op.pid);
    if (!f) return;
    f->devices.insert(op.device);
    auto [span, fresh] = gpu_span_.try_emplace(op.pid, op.start_ns, op.end_ns);
    if (!fresh) span->second = {std::min(span->second.first, op.start_ns), std::max(span->second.second, op.end_ns)};
    if (devices_of_pid_.try_emplace(op.pid, op.device).second) write_lanes(op.pid);
    device_of_context_[{op.pid, op.context}] = op.device;
    if (auto s = steps_.find(op.pid); s != steps_.end() && !s->second.pending.empty()) write_covered_steps(op.pid, s->second, false);
    buf_.clear();
    begin_x(buf_, gpu_op_category(op.kind), op.name, op.device, op.stream, op.start_ns, op.end_ns);
    // The vocabulary's arguments under the names torch.profiler's kernel and memcpy rows give
    // them (HTA reads these): its join key beside the correlation, one "shared memory".
    uint64_t static_shared = 0;
    append_args_object(buf_, [&](std::string& out) {
        for_each_gpu_op_arg(op, [&](const EventArg& a) {
            if (a.name == "correlation") {
                append_json_arg(out, "External id", a);
                out += ",\"queued\":0";
            } else if (a.name == "registers_per_thread") {
                return append_json_arg(out, "registers per thread", a);
            } else if (a.name == "shared_memory_static") {
                static_shared = a.unsigned_value();
                return;
            } else if (a.name == "shared_memory_dynamic") {
                return append_json_arg(out, "shared memory", EventArg::uint(a.name, static_shared + a.unsigned_value()));
            } else if (a.name == "bandwidth_GBps") {
                return append_json_arg(out, "memory bandwidth (GB/s)", a);
            }
            append_json_arg(out, a.name, a);
        });
    });
    buf_ += '}';
    emit(*f, buf_);
}

void KinetoWriter::flow(const CallRef& call, const GpuOp& op) {
    File* f = file_of(op.pid);
    if (!f) return;
    buf_.clear();
    auto out = std::back_inserter(buf_);
    // At the call's start, as Kineto writes it: Perfetto binds flows in timestamp order, and a
    // slice sorts before a flow event of its timestamp (docs/trace_readers.md).
    fmt::format_to(out, "{{\"ph\":\"s\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":", op.correlation, call.pid, call.tid);
    append_us(buf_, call.start_ns);
    buf_ += ",\"cat\":\"ac2g\",\"name\":\"ac2g\"}";
    emit(*f, buf_);
    buf_.clear();
    fmt::format_to(out, "{{\"ph\":\"f\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":", op.correlation, op.device, op.stream);
    append_us(buf_, op.start_ns);
    buf_ += ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}";
    emit(*f, buf_);
    gpu_ranges_.op(call, op);
}

void KinetoWriter::memory(const MemorySample& m) {
    File* f = file_of(m.pid);
    if (!f) return;
    buf_.clear();
    auto out = std::back_inserter(buf_);
    fmt::format_to(out, "{{\"ph\":\"C\",\"cat\":\"{}\",\"name\":\"{}\",\"pid\":{},\"ts\":", memory_counter_category(m),
                   memory_counter_name(m), m.pid);
    append_us(buf_, m.ts_ns);
    buf_ += ",\"args\":";
    append_memory_args(buf_, m);
    buf_ += "}";
    emit(*f, buf_);
}

void KinetoWriter::sample_frame_begin(const SampleFrame& fr, uint64_t ts_ns) {
    auto& open = open_frames_[{fr.pid, fr.tid}];
    open.resize(fr.depth);
    open.emplace_back(fr.frame.text(), ts_ns);
}

void KinetoWriter::sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) {
    auto& open = open_frames_[{pid, tid}];
    if (depth >= open.size()) return;
    File* f = file_of(pid);
    if (f) {
        buf_.clear();
        begin_x(buf_, "python_function", open[depth].first, pid, tid + kSampleTrackTidOffset, open[depth].second, ts_ns);
        buf_ += '}';
        emit(*f, buf_);
    }
    open.resize(depth);
}

std::vector<std::string> KinetoWriter::pending_metadata(File& f, bool all) {
    if (all) f.process_meta.clear(), f.thread_meta.clear();
    std::vector<std::string> out;
    for (const auto& [pid, file] : by_pid_) {
        if (file != &f) continue;
        const ProcessInfo* p = model_.find(pid);
        if (!p) continue;
        std::string events[] = {meta("process_name", pid, 0, {{"name", p->label()}}),
                                meta("process_labels", pid, 0, {{"labels", process_labels_json(*p)}}),
                                meta("process_sort_index", pid, 0, {{"sort_index", p->sort_index()}})};
        std::string joined = events[0] + events[1] + events[2];
        if (std::string& last = f.process_meta[pid]; last != joined) {
            last = std::move(joined);
            for (auto& ev : events) out.push_back(std::move(ev));
        }
        for (const auto& [tid, t] : p->threads) {
            std::string ev = meta("thread_name", pid, tid, {{"name", t.name.empty() ? fmt::format("thread {}", tid) : t.name}});
            if (std::string& last = f.thread_meta[{pid, tid}]; last != ev) out.push_back(last = std::move(ev));
        }
    }
    for (uint32_t d : f.devices) {
        // Kineto's GPU rows: pid = device.
        std::string ev = meta("process_name", d, 0, {{"name", fmt::format("GPU {}", d)}}) + meta("process_sort_index", d, 0, {{"sort_index", 1000000 + d}});
        if (std::string& last = f.process_meta[1u << 31 | d]; last != ev) {
            last = ev;
            out.push_back(meta("process_name", d, 0, {{"name", fmt::format("GPU {}", d)}}));
            out.push_back(meta("process_sort_index", d, 0, {{"sort_index", 1000000 + d}}));
        }
    }
    return out;
}

void KinetoWriter::metadata(const TraceModel&) {
    for (auto& [name, f] : files_)
        if (f.out && error_.empty())
            for (const auto& ev : pending_metadata(f, false)) emit(f, ev);
}

void KinetoWriter::flush() {
    for (auto& [name, f] : files_)
        if (f.out) f.out->flush();
}

void KinetoWriter::forget_process(uint32_t pid) {
    gpu_ranges_.forget_process(pid);
    if (auto s = steps_.find(pid); s != steps_.end()) write_covered_steps(pid, s->second, true), steps_.erase(s);
    gpu_span_.erase(pid), devices_of_pid_.erase(pid), backend_of_pid_.erase(pid), pending_lanes_.erase(pid);
    std::erase_if(device_of_context_, [&](const auto& kv) { return kv.first.first == pid; });
}

Result<std::optional<TraceCut>> KinetoWriter::finish(const TraceModel&, const nlohmann::json& facts_in) {
    gpu_ranges_.flush_all();
    for (auto& [pid, s] : steps_) write_covered_steps(pid, s, true);
    nlohmann::json facts = facts_in;
    facts["kineto"] = {{"steps_not_covered_by_gpu_records", steps_not_covered_}};
    std::optional<TraceCut> total;
    std::optional<Error> failure;
    for (auto& entry : files_) {
        auto& f = entry.second; // not a structured binding: clang before 16 cannot capture one
        if (!f.out) continue;
        auto cut = f.out->finish([&](const TraceCut* c) {
            JsonEventFile::Closing closing{pending_metadata(f, c != nullptr), "\n],\n\"deviceProperties\": ["};
            bool first = true;
            for (uint32_t d : f.devices) closing.rest += fmt::format("{}{{\"id\": {}}}", std::exchange(first, false) ? "" : ", ", d);
            nlohmann::json other = facts;
            if (c) other["cut"] = {{"error", c->error}, {"events_kept", c->events_kept}, {"events_dropped", c->events_dropped}};
            closing.rest += fmt::format("],\n\"baseTimeNanoseconds\": {},\n\"otherData\": {}}}\n",
                                        static_cast<int64_t>(clocks_.realtime_ns - clocks_.monotonic_ns),
                                        other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            return closing;
        });
        if (!cut) {
            if (!failure) failure = cut.error();
            continue;
        }
        if (*cut) {
            if (!total) total = TraceCut{(*cut)->error, 0, 0};
            total->events_kept += (*cut)->events_kept, total->events_dropped += (*cut)->events_dropped;
        }
    }
    if (dir_fd_ >= 0) close(dir_fd_), dir_fd_ = -1; // unlocks the directory
    if (failure) return *failure;
    if (!total && !error_.empty()) total = TraceCut{error_, 0, 0}; // a file that could not even be created
    return total;
}

} // namespace gtrace
