#include "output/flight_recorder.h"

#include <algorithm>

#include "foundation/output_file.h"

namespace gtrace {

std::string flight_dump_path(const std::string& output, int n) {
    std::string path = output;
    bool directory = !path.empty() && path.back() == '/';
    if (directory) path.pop_back();
    size_t slash = path.rfind('/');
    size_t dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == (slash == std::string::npos ? 0 : slash + 1))
        dot = path.size(); // no extension (a leading dot names a hidden file, not an extension)
    return path.substr(0, dot) + "-" + std::to_string(n) + path.substr(dot) + (directory ? "/" : "");
}

std::string flight_report_path(std::string dump) {
    if (!dump.empty() && dump.back() == '/') dump.pop_back();
    size_t slash = dump.rfind('/'), dot = dump.rfind('.');
    if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1)) dump.resize(dot);
    return dump + ".report.txt";
}

bool is_flight_dump_file(const std::string& output, const std::string& path) {
    auto absolute = [](std::string p) {
        while (p.size() > 1 && p.back() == '/') p.pop_back();
        return absolute_output_path(p);
    };
    // The dumps' names differ only in N: what dumps 1 and 2 share around it is the pattern.
    std::string one = absolute(flight_dump_path(output, 1)), two = absolute(flight_dump_path(output, 2));
    size_t head = 0;
    while (head < one.size() && head < two.size() && one[head] == two[head]) ++head;
    std::string prefix = one.substr(0, head), suffix = one.substr(head + 1);
    std::string report_suffix = flight_report_path(one).substr(head + 1);
    std::string p = absolute(path);
    for (const std::string& tail : {suffix, suffix + ".partial", report_suffix}) {
        if (p.size() <= prefix.size() + tail.size() || !p.starts_with(prefix) || !p.ends_with(tail)) continue;
        std::string_view n(p.data() + prefix.size(), p.size() - prefix.size() - tail.size());
        if (n.find_first_not_of("0123456789") == std::string_view::npos && n[0] != '0') return true;
    }
    return false;
}

Result<FlightDump> write_flight_window(const FlightWindow& window, uint64_t end_ns, const TraceOutput& out, bool force,
                                       const TraceModel& model, nlohmann::json facts, EventConsumer* analysis) {
    auto writer = create_trace_writer(out, force, model);
    if (!writer) return writer.error();
    FlightDump dump;
    if (analysis) {
        EventTee both(**writer, *analysis);
        dump.events = replay_window(window, end_ns, both);
        analysis->metadata(model);
    } else {
        dump.events = replay_window(window, end_ns, **writer);
    }
    (*writer)->metadata(model);
    // The window this trace holds, and the capture's own length beside it.
    double seconds = end_ns > window.from_ns ? static_cast<double>(end_ns - window.from_ns) / 1e9 : 0;
    if (facts.contains("duration_s")) facts["capture_duration_s"] = facts["duration_s"];
    facts["duration_s"] = seconds;
    nlohmann::json& fr = facts["flight_recorder"];
    fr["window_from_ns"] = window.from_ns;
    fr["window_end_ns"] = end_ns;
    fr["window_s"] = seconds;
    fr["events"] = dump.events;
    dump.seconds = seconds;
    auto cut = (*writer)->finish(model, facts);
    if (!cut) return cut.error();
    dump.path = (*writer)->output();
    dump.cut = *cut;
    return dump;
}

void FlightRecorder::collective(const Collective& c) {
    StoredRange r{.seq = seq_++, .pid = c.pid, .tid = c.tid, .start_ns = c.start_ns, .end_ns = c.end_ns, .name = texts_.get(c.name),
                  .stack = {}, .nvtx = {}, .collective = true, .wait = c.wait, .op = c.op, .backend = c.backend, .issued_ns = c.issued_ns};
    if (c.nccl) r.nccl = std::make_shared<const NcclArgs>(*c.nccl), r.group = c.group;
    push(events_.ranges, std::move(r));
}

void FlightRecorder::torch_range(const TorchRange& r) {
    push(events_.ranges, StoredRange{.seq = seq_++, .pid = r.pid, .tid = r.tid, .start_ns = r.start_ns, .end_ns = r.end_ns,
                                     .name = texts_.get(r.name), .stack = r.stack, .nvtx = r.nvtx, .off_cpu = r.off_cpu});
}

void FlightRecorder::flow(const CallRef& call, const GpuOp& op) {
    push(events_.flows, StoredFlow{seq_++, call, store_op(op, texts_, 0)});
}

void FlightRecorder::sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) {
    StoredFrame f;
    f.seq = seq_++;
    f.pid = frame.pid, f.tid = frame.tid, f.depth = static_cast<uint32_t>(frame.depth), f.ts_ns = ts_ns;
    f.qualname = texts_.get(frame.frame.qualname);
    if (!frame.frame.filename.empty()) f.filename = texts_.get(frame.frame.filename);
    f.thread = texts_.get(frame.thread);
    f.line = frame.frame.line;
    f.begins = true;
    push(events_.frames, std::move(f));
}

void FlightRecorder::sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) {
    StoredFrame f;
    f.seq = seq_++;
    f.pid = pid, f.tid = tid, f.depth = static_cast<uint32_t>(depth), f.ts_ns = ts_ns;
    push(events_.frames, std::move(f));
}

template <typename T>
void FlightRecorder::evict_front(StoredQueue<T>& q) {
    const T& front = q.front();
    evicted_through_ns_ = std::max(evicted_through_ns_, front.key());
    if constexpr (std::is_same_v<T, StoredFrame>) {
        std::vector<StoredFrame>& track = events_.open_frames[{front.pid, front.tid}];
        track.resize(std::min<size_t>(track.size(), front.depth));
        if (front.begins) track.push_back(front);
        if (track.empty()) events_.open_frames.erase({front.pid, front.tid});
    } else if constexpr (std::is_same_v<T, StoredMemory>) {
        events_.last_memory[memory_key(front.sample)] = front.sample;
    }
    q.pop_front();
}

bool FlightRecorder::evict_oldest() {
    auto seq = [](const auto& q) { return q.empty() ? UINT64_MAX : q.front().seq; };
    uint64_t seqs[6] = {seq(events_.calls), seq(events_.ops), seq(events_.ranges), seq(events_.flows), seq(events_.memory),
                        seq(events_.frames)};
    size_t k = static_cast<size_t>(std::min_element(seqs, seqs + 6) - seqs);
    if (seqs[k] == UINT64_MAX) return false;
    switch (k) {
    case 0: evict_front(events_.calls); break;
    case 1: evict_front(events_.ops); break;
    case 2: evict_front(events_.ranges); break;
    case 3: evict_front(events_.flows); break;
    case 4: evict_front(events_.memory); break;
    default: evict_front(events_.frames); break;
    }
    return true;
}

void FlightRecorder::advance(uint64_t now_ns) {
    now_ns_ = std::max(now_ns_, now_ns);
    const uint64_t keep = limits_.window_ns + limits_.grace_ns;
    if (now_ns_ <= keep) return;
    const uint64_t cutoff = now_ns_ - keep;
    auto trim = [&](auto& q) {
        while (!q.empty() && q.front().key() < cutoff) {
            evict_front(q);
            ++evicted_by_age_;
        }
    };
    trim(events_.calls), trim(events_.ops), trim(events_.ranges), trim(events_.flows), trim(events_.memory), trim(events_.frames);
}

FlightWindow FlightRecorder::window_from(uint64_t from_ns) const {
    FlightWindow w;
    w.from_ns = std::max(from_ns, evicted_through_ns_ ? evicted_through_ns_ + 1 : 0);
    w.events = events_; // shares the chunks: a pointer per 1024 events
    return w;
}

std::pair<int, std::string> FlightRecorder::next_dump() {
    ++dumps_;
    return {dumps_, flight_dump_path(output_.path, dumps_)};
}

FlightStats FlightRecorder::stats() const {
    return {events_.size(), events_.bytes() + texts_.bytes(), evicted_by_age_, evicted_by_memory_, evicted_through_ns_};
}

Result<std::optional<TraceCut>> FlightRecorder::finish(const TraceModel& model, const nlohmann::json& facts) {
    TraceOutput out = output_;
    out.path = next_dump().second;
    uint64_t from = now_ns_ > limits_.window_ns ? now_ns_ - limits_.window_ns : 0;
    auto dump = write_flight_window(window_from(from), now_ns_, out, force_, model, facts, final_analysis_);
    if (!dump) return dump.error();
    last_output_ = dump->path;
    last_seconds_ = dump->seconds;
    return dump->cut;
}

} // namespace gtrace
