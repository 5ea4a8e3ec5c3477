#include "analyze/live_trace.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "analyze/trace_reader.h"
#include "format/api_table.h"
#include "format/json_traces.h"

namespace gtrace {
namespace {

constexpr uint64_t kCheckEvery = 4096; // spans between two looks at the budget

template <typename T>
uint64_t capacity_bytes(const std::vector<T>& v) {
    return v.capacity() * sizeof(T);
}

// A span of an event on its thread, as a reader makes it: its end never before its start.
template <typename Span, typename Event>
Span span_of(const Event& e, std::string_view name) {
    Span s;
    s.start_ns = e.start_ns, s.end_ns = std::max(e.start_ns, e.end_ns), s.tid = e.tid;
    s.name = name;
    return s;
}

// A process's label or command line as the JSON formats' metadata gives it back: written by
// nlohmann's dump, invalid UTF-8 replaced (U+FFFD).
std::string as_json_metadata(const std::string& s) {
    return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)).get<std::string>();
}

// The time the processes' spans cover: the earliest start, the latest end ({UINT64_MAX, 0}: none).
std::pair<uint64_t, uint64_t> covered(const TraceData& t) {
    uint64_t first = UINT64_MAX, last = 0;
    auto cover = [&](const auto& spans) {
        for (const auto& s : spans) first = std::min(first, s.start_ns), last = std::max(last, s.end_ns);
    };
    for (const auto& [pid, p] : t.processes)
        cover(p.calls), cover(p.gpu), cover(p.main_samples), cover(p.ranges), cover(p.off_cpu), cover(p.collectives);
    return {first, last};
}

// The kind of GPU record the agent makes of a call's work under its correlation id; none for
// calls that have an id and no such record (cudaDeviceSynchronize, cudaMalloc).
std::optional<GpuOpKind> gpu_record_of(std::string_view api) {
    if (api.starts_with("cudaLaunch") || api.starts_with("cuLaunch")) return GpuOpKind::Kernel;
    if (api.find("Memcpy") != std::string_view::npos) return GpuOpKind::Memcpy;
    if (api.find("Memset") != std::string_view::npos) return GpuOpKind::Memset;
    return std::nullopt;
}

} // namespace

// Each span as trace_reader.h makes it of the event a writer makes of it (chrome_trace.cpp):
// the same names, the same strings, an end never before its start.

std::string_view LiveTrace::text(std::string_view s) {
    if (form_.ascii_texts && std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
        scratch_.assign(s);
        for (char& c : scratch_) c = json_trace_char(static_cast<unsigned char>(c));
        return data_.strings.intern(scratch_);
    }
    return data_.strings.intern(s);
}

ProcessData* LiveTrace::process(uint32_t pid, uint64_t end_ns) {
    if (end_ns < window_from_ns_) return nullptr; // over before the window kept (past the memory bound)
    ProcessData& p = data_.processes[pid];
    p.pid = pid;
    return &p;
}

void LiveTrace::counted() {
    if (++spans_ % kCheckEvery == 0) check_budget();
}

LiveTrace::LiveTrace(LiveTraceOptions o)
    : max_bytes_(o.max_bytes), form_(o.form), rules_(std::make_unique<StepRules>(o.step_marker)), gpu_records_(o.gpu_records) {}

template <typename Span>
void LiveTrace::seen(const ProcessData& p, const Span& s, bool cpu, bool may_be_late) {
    first_span_ns_ = std::min(first_span_ns_, s.start_ns);
    if (cpu) cpu_seen_ns_ = std::max(cpu_seen_ns_, s.end_ns);
    else gpu_seen_ns_[p.pid] = std::max(gpu_seen_ns_[p.pid], s.end_ns);
    late_spans_ += may_be_late && p.closed && s.start_ns < p.closed->end_ns;
}

void LiveTrace::check_budget() {
    if (held_bytes() <= max_bytes_) return;
    close_steps_behind();
    if (held_bytes() > max_bytes_) keep_recent_window();
}

void LiveTrace::close_steps_behind() {
    if (cpu_seen_ns_ < kCloseBehindNs) return;
    for (auto& [pid, p] : data_.processes) {
        uint64_t until = cpu_seen_ns_ - kCloseBehindNs;
        if (p.forked) { // known from the model's metadata, sent now and then
            let_go_unanalysed(p, until);
            continue;
        }
        if (gpu_records_) { // its GPU records come in batches, after the calls: a step closes behind them
            auto gpu = gpu_seen_ns_.find(pid);
            if (gpu == gpu_seen_ns_.end() || gpu->second < kCloseBehindNs) {
                if (!p.closed) let_go_before_steps(p, *rules_, until);
                continue;
            }
            until = std::min(until, gpu->second - kCloseBehindNs);
            // Nor past GPU work launched and not yet recorded (a kernel running a second and more:
            // its record comes at its end); given up on 10 s after its launch.
            if (auto work = gpu_work_.find(pid); work != gpu_work_.end()) {
                auto& awaiting = work->second.awaiting;
                std::erase_if(awaiting, [&](const auto& e) { return e.second.start_ns + kGiveUpOnGpuNs < cpu_seen_ns_; });
                for (const auto& [correlation, launch] : awaiting) until = std::min(until, launch.start_ns);
            }
        }
        auto open = [this, pid = pid] {
            std::vector<CallSpan> spans;
            if (auto frames = open_frames_.find(pid); frames != open_frames_.end())
                for (const auto& [name, start] : frames->second) {
                    CallSpan s;
                    s.start_ns = start, s.end_ns = UINT64_MAX, s.name = name, s.tid = pid;
                    spans.push_back(s);
                }
            return spans;
        };
        steps_closed_ += close_steps(p, *rules_, until, open);
    }
}

void LiveTrace::keep_recent_window() {
    // Over the bound: the older half of the time the spans cover goes, until they take half of
    // what the strings leave of the bound (so that this is rare); the report then covers the
    // recent window, and says so. Steps closed before it are not in it.
    const uint64_t fixed = held_bytes() - span_bytes();
    const uint64_t target = max_bytes_ > fixed ? (max_bytes_ - fixed) / 2 : 0;
    if (span_bytes() <= target) return; // the rest (strings, closed steps' sums) is not spans
    for (auto& [pid, p] : data_.processes) p.closed.reset();
    for (int halvings = 0; halvings < 64 && span_bytes() > target; ++halvings) {
        auto [first, last] = covered(data_);
        if (first >= last) break;
        window_from_ns_ = std::max(window_from_ns_, first + (last - first) / 2 + 1);
        // Spans over by then go; those across it keep their part in the window (a frame or range
        // open all along stays), as spans that come later do (process()).
        auto trim = [&](auto& spans) {
            std::erase_if(spans, [&](const auto& s) { return s.end_ns < window_from_ns_; });
            for (auto& s : spans) s.start_ns = std::max(s.start_ns, window_from_ns_);
            spans.shrink_to_fit();
        };
        for (auto& [pid, p] : data_.processes) {
            trim(p.calls), trim(p.gpu), trim(p.main_samples), trim(p.ranges), trim(p.off_cpu), trim(p.collectives);
            // The memory curve keeps its level at the window's start: each device's last point before it.
            auto first_kept = std::find_if(p.memory.begin(), p.memory.end(), [&](const MemoryPoint& m) { return m.ts_ns >= window_from_ns_; });
            std::map<uint32_t, MemoryPoint> levels;
            for (auto m = p.memory.begin(); m != first_kept; ++m) levels[m->device] = *m;
            std::vector<MemoryPoint> kept;
            kept.reserve(levels.size() + static_cast<size_t>(p.memory.end() - first_kept));
            for (auto& [device, level] : levels) kept.push_back(level), kept.back().ts_ns = window_from_ns_;
            kept.insert(kept.end(), first_kept, p.memory.end());
            p.memory = std::move(kept);
        }
    }
    first_span_ns_ = std::max(first_span_ns_, window_from_ns_);
}

void LiveTrace::call(const ApiCall& c) {
    if (gpu_records_ && c.correlation) await_gpu_record(c);
    ProcessData* p = process(c.pid, c.end_ns);
    if (!p) return;
    auto s = span_of<CallSpan>(c, text(api_name(c.api)));
    clip(s);
    if (c.stack) s.source = text(c.stack->source);
    if (c.copy_kind) s.kind = text(copy_kind_name(*c.copy_kind));
    s.bytes = c.bytes.value_or(0), s.correlation = c.correlation;
    seen(*p, s, true);
    p->calls.push_back(s);
    counted();
}

void LiveTrace::torch_range(const TorchRange& r) {
    if (r.off_cpu && !form_.off_cpu) return;
    ProcessData* p = process(r.pid, r.end_ns);
    if (!p) return;
    auto s = span_of<RangeSpan>(r, text(r.name));
    clip(s);
    if (r.off_cpu) {
        if (r.stack) s.source = text(r.stack->source);
        seen(*p, s, true);
        p->off_cpu.push_back(s);
    } else {
        seen(*p, s, true);
        p->ranges.push_back(s);
    }
    counted();
}

void LiveTrace::collective(const Collective& c) {
    ProcessData* p = process(c.pid, c.end_ns);
    if (!p) return;
    auto s = span_of<CollectiveSpan>(c, text(c.name));
    clip(s);
    s.wait = c.wait, s.issued_ns = c.wait ? c.issued_ns : 0;
    if (c.nccl) {
        s.nccl = true, s.comm = c.group, s.nranks = c.nccl->nranks;
        s.bytes = nccl_api_moves_data(c.nccl->api) ? c.nccl->bytes : 0;
        s.group_depth = static_cast<uint8_t>(std::min(c.nccl->group_depth, 255u));
        s.result = static_cast<uint32_t>(c.nccl->result); // as the writers give it (an unsigned annotation)
    }
    seen(*p, s, true);
    p->collectives.push_back(s);
    counted();
}

// GPU work launched: closing waits for its record. Correlation ids grow: work launched before the
// agent recorded its kind (it enables kernels, then copies, then sets) has an id below the first
// record of that kind, and no record will come.
void LiveTrace::await_gpu_record(const ApiCall& c) {
    auto kind = gpu_record_of(api_name(c.api));
    if (!kind) return;
    auto& process = gpu_work_[c.pid];
    if (auto first = process.first_record.find(*kind); first != process.first_record.end() && c.correlation < first->second) return;
    if (process.recorded_first.erase(c.correlation)) return; // its record came before it (the capture held the call)
    process.awaiting[c.correlation] = {c.start_ns, *kind};
}

// A launch's record came: closing no longer waits for it (or, come first, its call will not).
void LiveTrace::gpu_record_came(const GpuOp& op) {
    auto& process = gpu_work_[op.pid];
    if (!process.awaiting.erase(op.correlation) && op.correlation) {
        if (process.recorded_first.size() >= kRecordedFirstMax) process.recorded_first.clear(); // records of no call: bounded
        process.recorded_first.insert(op.correlation);
    }
    if (process.first_record.emplace(op.kind, op.correlation).second) // the kind's first: what came before has none
        std::erase_if(process.awaiting, [&](const auto& e) { return e.second.kind == op.kind && e.first < op.correlation; });
}

// Records were lost: a launch a second older than the newest record that came has most likely
// lost its own (records come out of order across CUPTI's buffers, within the agent's flushes; a
// kernel still running would come late, and be counted so). Closing waits no longer for those,
// rather than 10 s for each — which, with records lost all along (a full ring on a host short of
// CPU), held every step open and let the spans pass the bound.
void LiveTrace::gpu_records_lost(uint32_t pid) {
    auto work = gpu_work_.find(pid);
    auto seen = gpu_seen_ns_.find(pid);
    if (work == gpu_work_.end() || seen == gpu_seen_ns_.end() || seen->second < kCloseBehindNs) return;
    std::erase_if(work->second.awaiting, [before = seen->second - kCloseBehindNs](const auto& e) { return e.second.start_ns < before; });
}

void LiveTrace::gpu_op(const GpuOp& op) {
    if (op.kind == GpuOpKind::Sync) return; // not a slice in gtrace's own formats, and no launch awaits it
    if (gpu_records_) gpu_record_came(op);
    ProcessData* p = process(op.pid, op.end_ns); // GPU records come late: those over before the window go, too
    if (!p) return;
    GpuSpan g;
    g.start_ns = op.start_ns, g.end_ns = std::max(op.start_ns, op.end_ns);
    g.name = text(op.name);
    g.kind = op.kind == GpuOpKind::Kernel ? GpuKind::Kernel : op.kind == GpuOpKind::Memcpy ? GpuKind::Memcpy : GpuKind::Memset;
    g.bytes = op.kind == GpuOpKind::Kernel ? 0 : op.bytes;
    std::string_view copy_kind = op.kind == GpuOpKind::Memcpy ? std::string_view(op.copy_kind) : std::string_view();
    g.copy_kind = copy_kind.empty() ? data_.strings.intern(trace_reader::copy_kind_of(g.name)) : text(copy_kind);
    g.correlation = op.correlation;
    clip(g);
    seen(*p, g, false);
    p->gpu.push_back(g);
    counted();
}

void LiveTrace::memory(const MemorySample& m) {
    if (m.counter != MemoryCounter::Allocated) return; // the counters at attach are not the curve
    ProcessData* p = process(m.pid, m.ts_ns);
    if (!p) return;
    p->memory.push_back({m.ts_ns, m.device >= 0 ? static_cast<uint32_t>(m.device) : 0u, m.allocated_bytes, m.at_attach});
    counted();
}

void LiveTrace::sample_frame_begin(const SampleFrame& f, uint64_t ts_ns) {
    if (f.tid != f.pid) return; // the report reads the main thread's samples only
    auto& open = open_frames_[f.pid];
    open.resize(f.depth);
    open.emplace_back(text(f.frame.text()), ts_ns);
}

void LiveTrace::sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) {
    if (tid != pid) return;
    auto it = open_frames_.find(pid);
    if (it == open_frames_.end() || depth >= it->second.size()) return;
    ProcessData* p = process(pid);
    CallSpan s;
    s.start_ns = it->second[depth].second, s.end_ns = std::max(s.start_ns, ts_ns);
    if (s.end_ns < window_from_ns_) { // over before the window: not kept, as any span over then
        it->second.resize(depth);
        return;
    }
    clip(s);
    s.name = it->second[depth].first, s.tid = pid;
    // A frame open when steps closed was in them as running on (close_steps_behind): late only if
    // it turns out to have ended inside them (its thread went unsampled for a second).
    seen(*p, s, true, p->closed && s.end_ns < p->closed->end_ns);
    p->main_samples.push_back(s);
    it->second.resize(depth);
    counted();
}

void LiveTrace::metadata(const TraceModel& model) {
    for (const auto& [pid, info] : model.processes()) {
        ProcessData* p = process(pid);
        p->label = form_.ascii_texts ? as_json_metadata(info.label()) : info.label();
        p->rank = info.ranks.rank;
        p->world_size = info.ranks.world_size;
        p->forked = info.forked_from.has_value();
        p->cmdline = form_.ascii_texts ? as_json_metadata(info.cmdline) : info.cmdline;
    }
}

uint64_t LiveTrace::span_bytes() const {
    uint64_t bytes = 0;
    for (const auto& [pid, p] : data_.processes)
        bytes += capacity_bytes(p.calls) + capacity_bytes(p.gpu) + capacity_bytes(p.main_samples) + capacity_bytes(p.ranges) +
                 capacity_bytes(p.off_cpu) + capacity_bytes(p.collectives) + capacity_bytes(p.memory);
    return bytes;
}

uint64_t LiveTrace::held_bytes() const {
    uint64_t closed = 0;
    for (const auto& [pid, p] : data_.processes) closed += p.closed ? p.closed->bytes() : 0;
    return data_.strings.bytes() + data_.processes.size() * sizeof(ProcessData) + span_bytes() + closed;
}

TraceData LiveTrace::take(const nlohmann::json& facts) {
    check_budget();
    TraceData t = std::move(data_);
    data_ = TraceData();
    open_frames_.clear();
    if (window_from_ns_) t.spans_from_ns = window_from_ns_, t.spans_to_ns = std::max(window_from_ns_, covered(t).second), t.spans_max_bytes = max_bytes_;
    if (!window_from_ns_ && first_span_ns_ != UINT64_MAX) t.first_span_ns = first_span_ns_; // with those let go
    t.steps_closed = steps_closed_, t.late_spans = late_spans_;
    steps_closed_ = late_spans_ = 0;
    window_from_ns_ = 0, first_span_ns_ = UINT64_MAX, cpu_seen_ns_ = 0;
    gpu_seen_ns_.clear(), gpu_work_.clear();
    apply_capture_facts(t, facts);
    return t;
}

void apply_capture_facts(TraceData& t, const nlohmann::json& facts) {
    if (!facts.is_object()) return;
    if (auto h = facts.find("host"); h != facts.end() && h->is_string()) t.host = h->get<std::string>();
    if (auto c = facts.find("clocks"); c != facts.end() && c->is_object() && c->contains("monotonic_ns") && c->contains("realtime_ns")) {
        const auto &mono = (*c)["monotonic_ns"], &real = (*c)["realtime_ns"];
        if (mono.is_number_integer() && real.is_number_integer()) t.realtime_offset_ns = real.get<int64_t>() - mono.get<int64_t>();
    }
    if (auto p = facts.find("cpu_pressure"); p != facts.end() && p->is_object() && p->contains("some") && (*p)["some"].is_number()) {
        double some = (*p)["some"].get<double>();
        if (some >= 0 && some <= 1) t.cpu_pressure = some;
    }
    if (auto g = facts.find("gpu"); g != facts.end() && g->is_object() && g->contains("enabled") && (*g)["enabled"].is_boolean())
        t.has_gpu = (*g)["enabled"].get<bool>();
}

} // namespace gtrace
