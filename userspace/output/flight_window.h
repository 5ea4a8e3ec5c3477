// The flight recorder's store: the events of the last minutes, kept compactly (texts interned and
// shared, no per-event string copies; Python stacks shared with the capture), in the order they
// came, one queue per kind, so that a window of them can be replayed into any EventConsumer as
// the capture handed them over. An event's key is the time it last overlaps the window: a call,
// GPU op or range its end, a flow the earlier end of its two slices, a sample its time.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "output/trace_writer.h"

namespace gtrace {

using SharedText = std::shared_ptr<const std::string>;

// Interned texts (kernel, range, thread, frame names): one copy each, shared by every event
// that names it; texts no stored event holds any more are dropped as the pool grows.
class TextPool {
public:
    SharedText get(std::string_view text);
    size_t bytes() const { return bytes_; }

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
        size_t operator()(const SharedText& s) const { return (*this)(std::string_view(*s)); }
    };
    struct Equal {
        using is_transparent = void;
        static std::string_view view(std::string_view s) { return s; }
        static std::string_view view(const SharedText& s) { return *s; }
        bool operator()(const auto& a, const auto& b) const { return view(a) == view(b); }
    };
    void prune();
    std::unordered_set<SharedText, Hash, Equal> texts_;
    size_t bytes_ = 0, size_after_prune_ = 0;
};

struct StoredCall {
    uint64_t seq = 0;
    uint64_t start_ns = 0, end_ns = 0;
    int64_t ret = 0;
    uint32_t pid = 0, tid = 0, correlation = 0;
    gt_cuda_api api{};
    bool by_agent = false;
    int8_t copy_kind = -1;   // -1: none
    uint8_t present = 0;     // bit i: values[i] is set (stream, bytes, ptr, event, graph, handle)
    uint64_t values[6] = {};
    std::optional<LaunchArgs> launch;
    SharedText kernel, thread;
    PyStackRef stack;
    uint64_t key() const { return end_ns; }
};

struct StoredOp {
    uint64_t seq = 0;
    GpuOpKind kind = GpuOpKind::Kernel;
    uint32_t pid = 0, correlation = 0;
    uint64_t start_ns = 0, end_ns = 0;
    uint32_t device = 0, context = 0, stream = 0;
    int32_t grid[3] = {}, block[3] = {};
    uint32_t registers = 0, static_shared = 0, dynamic_shared = 0;
    bool graph = false;
    uint64_t bytes = 0;
    uint32_t sync_type = 0;
    SharedText name, copy_kind;
    uint64_t key() const { return end_ns; }
};

// A torch range, or a c10d collective's call or wait (a slice on its thread, as a range is).
struct StoredRange {
    uint64_t seq = 0;
    uint32_t pid = 0, tid = 0;
    uint64_t start_ns = 0, end_ns = 0;
    SharedText name;
    PyStackRef stack;
    std::shared_ptr<const NvtxRangeInfo> nvtx;
    std::shared_ptr<const NcclArgs> nccl; // an NCCL API call's arguments
    bool collective = false, wait = false, off_cpu = false;
    const char* op = nullptr;      // a collective's: static names (decode/collective.h)
    const char* backend = nullptr;
    uint64_t issued_ns = 0;
    uint64_t group = 0; // an NCCL call's communicator
    uint64_t key() const { return end_ns; }
};

struct StoredFlow {
    uint64_t seq = 0;
    CallRef call;
    StoredOp op;
    uint64_t key() const { return std::min(call.end_ns, op.end_ns); }
};

struct StoredMemory {
    uint64_t seq = 0;
    MemorySample sample;
    uint64_t key() const { return sample.ts_ns; }
};

// A sample frame opening (`frame` set) or closing (`frame` null: the frame at `depth` closes).
struct StoredFrame {
    uint64_t seq = 0;
    uint32_t pid = 0, tid = 0;
    uint32_t depth = 0;
    uint64_t ts_ns = 0;
    SharedText qualname, filename, thread;
    int line = 0;
    bool begins = false;
    uint64_t key() const { return ts_ns; }
};

// Per sample track (pid, tid), the frames open at some moment, outermost first.
using OpenFrames = std::map<std::pair<uint32_t, uint32_t>, std::vector<StoredFrame>>;
// Per (pid, device, counter), the last memory sample before some moment.
using LastMemory = std::map<std::tuple<uint32_t, int, MemoryCounter>, MemorySample>;
inline std::tuple<uint32_t, int, MemoryCounter> memory_key(const MemorySample& m) { return {m.pid, m.device, m.counter}; }

// The stored events of one kind, oldest first, in chunks that copies of the queue share: a
// dump's copy costs a pointer per chunk, and the capture goes on appending and evicting while
// the dump reads its own view (appends go past the view's end; evicting only lets go of whole
// chunks, freed when no view holds them any more).
template <typename T>
class StoredQueue {
public:
    static constexpr size_t kChunk = 1024;

    size_t size() const { return chunks_.empty() ? 0 : chunks_.size() * kChunk - head_ - (kChunk - tail_); }
    bool empty() const { return size() == 0; }
    const T& operator[](size_t i) const {
        size_t at = head_ + i;
        return chunks_[at / kChunk]->items[at % kChunk];
    }
    const T& front() const { return (*this)[0]; }
    void push_back(T&& item) {
        if (chunks_.empty() || tail_ == kChunk) {
            chunks_.push_back(std::make_shared<Chunk>());
            tail_ = 0;
        }
        chunks_.back()->items[tail_++] = std::move(item);
    }
    void pop_front() {
        if (++head_ == kChunk || (chunks_.size() == 1 && head_ == tail_)) {
            chunks_.pop_front();
            head_ = 0;
            if (chunks_.empty()) tail_ = 0;
        }
    }
    // What its chunks take, the evicted events of the first one included.
    size_t bytes() const { return chunks_.size() * kChunk * sizeof(T); }

private:
    struct Chunk {
        std::vector<T> items = std::vector<T>(kChunk);
    };
    std::deque<std::shared_ptr<Chunk>> chunks_;
    size_t head_ = 0; // the first event's index in the first chunk
    size_t tail_ = 0; // events in the last chunk
};

struct FlightEvents {
    StoredQueue<StoredCall> calls;
    StoredQueue<StoredOp> ops;
    StoredQueue<StoredRange> ranges;
    StoredQueue<StoredFlow> flows;
    StoredQueue<StoredMemory> memory;
    StoredQueue<StoredFrame> frames;
    // What the events dropped from the front leave open: the frames of each sample track, the
    // GPU memory of each process.
    OpenFrames open_frames;
    LastMemory last_memory;
    size_t size() const { return calls.size() + ops.size() + ranges.size() + flows.size() + memory.size() + frames.size(); }
    size_t bytes() const {
        return calls.bytes() + ops.bytes() + ranges.bytes() + flows.bytes() + memory.bytes() + frames.bytes();
    }
};

// A view of the store for one dump: its events as they were, to be replayed from from_ns, plus
// what was open at the store's front. Shares chunks, texts and stacks with the store (their
// counts are atomic: a dump is written on another thread).
struct FlightWindow {
    FlightEvents events;
    uint64_t from_ns = 0;
};

StoredCall store_call(const ApiCall& c, TextPool& texts, uint64_t seq);
StoredOp store_op(const GpuOp& op, TextPool& texts, uint64_t seq);
ApiCall load_call(const StoredCall& s);
GpuOp load_op(const StoredOp& s);

// The window's events from `from_ns` on, in the order they came; frames open at from_ns begin
// there, memory counters start there at their value then, and every frame still open at the
// end closes at `end_ns`. Returns the number of events written.
uint64_t replay_window(const FlightWindow& window, uint64_t end_ns, EventConsumer& out);

} // namespace gtrace
