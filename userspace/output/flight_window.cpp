#include "output/flight_window.h"

#include <algorithm>

namespace gtrace {

SharedText TextPool::get(std::string_view text) {
    if (auto it = texts_.find(text); it != texts_.end()) return *it;
    auto shared = std::make_shared<const std::string>(text);
    texts_.insert(shared);
    bytes_ += text.size() + sizeof(std::string) + 64; // the string, its control block, the set's node
    if (texts_.size() > std::max<size_t>(4096, 2 * size_after_prune_)) prune();
    return shared;
}

void TextPool::prune() {
    // A text only the pool holds is named by no stored event any more.
    for (auto it = texts_.begin(); it != texts_.end();) {
        if (it->use_count() == 1) {
            bytes_ -= (*it)->size() + sizeof(std::string) + 64;
            it = texts_.erase(it);
        } else {
            ++it;
        }
    }
    size_after_prune_ = texts_.size();
}

StoredCall store_call(const ApiCall& c, TextPool& texts, uint64_t seq) {
    StoredCall s;
    s.seq = seq;
    s.start_ns = c.start_ns, s.end_ns = c.end_ns, s.ret = c.ret;
    s.pid = c.pid, s.tid = c.tid, s.correlation = c.correlation;
    s.api = c.api, s.by_agent = c.by_agent;
    s.copy_kind = c.copy_kind ? static_cast<int8_t>(*c.copy_kind) : int8_t{-1};
    const std::optional<uint64_t>* values[6] = {&c.stream, &c.bytes, &c.ptr, &c.event, &c.graph, &c.handle};
    for (unsigned i = 0; i < 6; ++i)
        if (*values[i]) s.present |= static_cast<uint8_t>(1u << i), s.values[i] = **values[i];
    s.launch = c.launch;
    if (!c.kernel.empty()) s.kernel = texts.get(c.kernel);
    if (!c.thread_name.empty()) s.thread = texts.get(c.thread_name);
    s.stack = c.stack;
    return s;
}

ApiCall load_call(const StoredCall& s) {
    ApiCall c;
    c.api = s.api;
    c.pid = s.pid, c.tid = s.tid;
    c.start_ns = s.start_ns, c.end_ns = s.end_ns, c.ret = s.ret;
    c.correlation = s.correlation, c.by_agent = s.by_agent;
    c.launch = s.launch;
    if (s.kernel) c.kernel = *s.kernel;
    if (s.thread) c.thread_name = *s.thread;
    c.stack = s.stack;
    std::optional<uint64_t>* values[6] = {&c.stream, &c.bytes, &c.ptr, &c.event, &c.graph, &c.handle};
    for (unsigned i = 0; i < 6; ++i)
        if (s.present & (1u << i)) *values[i] = s.values[i];
    if (s.copy_kind >= 0) c.copy_kind = s.copy_kind;
    return c;
}

namespace {

// The fields a GpuOp and its stored form share, copied either way.
template <class To, class From>
void copy_fixed_fields(To& to, const From& from) {
    to.kind = from.kind, to.pid = from.pid, to.correlation = from.correlation;
    to.start_ns = from.start_ns, to.end_ns = from.end_ns;
    to.device = from.device, to.context = from.context, to.stream = from.stream;
    std::copy(from.grid, from.grid + 3, to.grid);
    std::copy(from.block, from.block + 3, to.block);
    to.registers = from.registers, to.static_shared = from.static_shared;
    to.dynamic_shared = from.dynamic_shared;
    to.graph = from.graph, to.bytes = from.bytes, to.sync_type = from.sync_type;
}

} // namespace

StoredOp store_op(const GpuOp& op, TextPool& texts, uint64_t seq) {
    StoredOp s;
    s.seq = seq;
    copy_fixed_fields(s, op);
    s.name = texts.get(op.name);
    if (!op.copy_kind.empty()) s.copy_kind = texts.get(op.copy_kind);
    return s;
}

GpuOp load_op(const StoredOp& s) {
    GpuOp op;
    copy_fixed_fields(op, s);
    if (s.name) op.name = *s.name;
    if (s.copy_kind) op.copy_kind = *s.copy_kind;
    return op;
}

namespace {

SampleFrame load_frame(const StoredFrame& f) {
    SampleFrame frame;
    frame.pid = f.pid, frame.tid = f.tid, frame.depth = f.depth;
    if (f.thread) frame.thread = *f.thread;
    if (f.qualname) frame.frame.qualname = *f.qualname;
    if (f.filename) frame.frame.filename = *f.filename;
    frame.frame.line = f.line;
    return frame;
}

// Applies a frame's opening or closing to the frames open on its track.
void apply(OpenFrames& open, const StoredFrame& f) {
    std::vector<StoredFrame>& track = open[{f.pid, f.tid}];
    track.resize(std::min<size_t>(track.size(), f.depth));
    if (f.begins) track.push_back(f);
}

// Sample frames as the writer is handed them: per track, which depths it holds open, so that a
// frame's end is written only after its begin, and every frame is closed once.
class FrameReplay {
public:
    explicit FrameReplay(EventConsumer& out) : out_(out) {}

    void begin(const StoredFrame& f, uint64_t ts_ns) {
        std::vector<bool>& open = open_[{f.pid, f.tid}];
        close_to(f.pid, f.tid, open, f.depth, ts_ns);
        open.resize(f.depth, false); // depths whose begin this window does not hold
        open.push_back(true);
        out_.sample_frame_begin(load_frame(f), ts_ns);
    }
    void end(const StoredFrame& f) {
        auto it = open_.find({f.pid, f.tid});
        if (it != open_.end()) close_to(f.pid, f.tid, it->second, f.depth, f.ts_ns);
    }
    void close_all(uint64_t ts_ns) {
        for (auto& [track, open] : open_) close_to(track.first, track.second, open, 0, ts_ns);
    }

private:
    void close_to(uint32_t pid, uint32_t tid, std::vector<bool>& open, size_t keep, uint64_t ts_ns) {
        while (open.size() > keep) {
            if (open.back()) out_.sample_frame_end(pid, tid, open.size() - 1, ts_ns);
            open.pop_back();
        }
    }
    EventConsumer& out_;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<bool>> open_;
};

} // namespace

uint64_t replay_window(const FlightWindow& window, uint64_t end_ns, EventConsumer& out) {
    const FlightEvents& ev = window.events;
    const uint64_t from = window.from_ns;
    // What is open at `from`: the store's front state, then the events before `from`.
    OpenFrames open = ev.open_frames;
    LastMemory memory = ev.last_memory;
    for (size_t i = 0; i < ev.frames.size(); ++i)
        if (ev.frames[i].ts_ns < from) apply(open, ev.frames[i]);
    for (size_t i = 0; i < ev.memory.size(); ++i)
        if (const MemorySample& m = ev.memory[i].sample; m.ts_ns < from) memory[memory_key(m)] = m;

    uint64_t written = 0;
    FrameReplay frames(out);
    for (const auto& [track, stack] : open)
        for (const auto& f : stack) frames.begin(f, from), ++written;
    for (auto [key, sample] : memory) {
        sample.ts_ns = from;
        out.memory(sample), ++written;
    }

    // The events from `from` on, merged back into the order they came.
    size_t i[6] = {};
    auto seq_at = [](const auto& q, size_t at) { return at < q.size() ? q[at].seq : UINT64_MAX; };
    uint64_t last_ts = from;
    for (;;) {
        uint64_t seqs[6] = {seq_at(ev.calls, i[0]), seq_at(ev.ops, i[1]), seq_at(ev.ranges, i[2]),
                            seq_at(ev.flows, i[3]), seq_at(ev.memory, i[4]), seq_at(ev.frames, i[5])};
        size_t k = static_cast<size_t>(std::min_element(seqs, seqs + 6) - seqs);
        if (seqs[k] == UINT64_MAX) break;
        size_t at = i[k]++;
        bool emitted = true;
        switch (k) {
        case 0:
            if ((emitted = ev.calls[at].key() >= from)) out.call(load_call(ev.calls[at]));
            break;
        case 1:
            if ((emitted = ev.ops[at].key() >= from)) out.gpu_op(load_op(ev.ops[at]));
            break;
        case 2:
            if ((emitted = ev.ranges[at].key() >= from)) {
                const StoredRange& r = ev.ranges[at];
                std::string name = r.name ? *r.name : std::string();
                if (r.collective) {
                    Collective c{r.pid, r.tid, r.start_ns, r.end_ns, std::move(name), r.wait, r.op, r.backend, r.issued_ns};
                    if (r.nccl) c.nccl = *r.nccl, c.group = r.group;
                    out.collective(c);
                }
                else
                    out.torch_range({r.pid, r.tid, r.start_ns, r.end_ns, std::move(name), r.stack, r.nvtx, r.off_cpu});
            }
            break;
        case 3:
            if ((emitted = ev.flows[at].key() >= from)) out.flow(ev.flows[at].call, load_op(ev.flows[at].op));
            break;
        case 4:
            if ((emitted = ev.memory[at].key() >= from)) out.memory(ev.memory[at].sample);
            break;
        default: {
            const StoredFrame& f = ev.frames[at];
            if ((emitted = f.ts_ns >= from)) f.begins ? frames.begin(f, f.ts_ns) : frames.end(f);
            if (emitted) last_ts = std::max(last_ts, f.ts_ns);
        }
        }
        written += emitted;
    }
    frames.close_all(std::max(end_ns, last_ts));
    return written;
}

} // namespace gtrace
