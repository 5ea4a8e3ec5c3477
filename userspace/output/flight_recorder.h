// --flight-recorder: a TraceWriter that writes nothing as the capture goes, but keeps the events
// of the last `window` (plus a grace for the GPU records that come late) in bounded memory,
// dropping the oldest; a dump writes a window of them as a complete trace of the chosen format
// (OUT-1.ext, OUT-2.ext, ...), and recording goes on. At the capture's end (finish) the last
// window is written as the last dump. Events that fall out of the window are not lost events:
// they are counted as evicted, by age or by the memory bound.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "output/flight_window.h"
#include "output/trace_formats.h"

namespace gtrace {

struct FlightLimits {
    uint64_t window_ns = 30'000'000'000ull;
    uint64_t grace_ns = 2'000'000'000ull; // kept beyond the window: a dump waits this long for GPU records
    uint64_t max_bytes = 512ull << 20;    // the store's bound, whatever the window
};

struct FlightStats {
    uint64_t stored = 0;              // events in the store now
    uint64_t bytes = 0;               // the store's estimated size
    uint64_t evicted_by_age = 0;      // older than the window (and grace)
    uint64_t evicted_by_memory = 0;   // dropped early: the store reached max_bytes
    uint64_t evicted_through_ns = 0;  // the newest key evicted: a window cannot start before it
};

// OUT-N.ext for the N-th dump of `-o OUT.ext` (Kineto: OUT-N.kineto/); no extension: OUT-N.
std::string flight_dump_path(const std::string& output, int n);
// OUT-N.report.txt beside the dump OUT-N.ext (or the directory OUT-N.kineto/).
std::string flight_report_path(std::string dump);
// Whether `path` is a file some dump of `-o output` would write (OUT-N.ext, its partial, its
// report, for any N), however spelt: another output there would be overwritten by a dump.
bool is_flight_dump_file(const std::string& output, const std::string& path);

// What one written dump is.
struct FlightDump {
    std::string path;
    uint64_t events = 0;
    double seconds = 0; // the window's length
    std::optional<TraceCut> cut;
};

// Writes a window as a complete trace at `out.path`: its events, then the model's metadata,
// then `facts` (their duration_s becomes the window's, the capture's moves to
// capture_duration_s; flight_recorder gains the window's bounds and event count), as the
// capture's writer would have; `analysis`, when given, is fed the same events (the dump's
// verdict comes from them, not from reading the dump back). (Safe on another thread: everything
// it reads is its own or shared read-only.)
Result<FlightDump> write_flight_window(const FlightWindow& window, uint64_t end_ns, const TraceOutput& out, bool force,
                                       const TraceModel& model, nlohmann::json facts, EventConsumer* analysis = nullptr);

class FlightRecorder final : public TraceWriter {
public:
    FlightRecorder(TraceOutput output, bool force, FlightLimits limits)
        : output_(std::move(output)), force_(force), limits_(limits) {}

    void call(const ApiCall& c) override { push(events_.calls, store_call(c, texts_, seq_++)); }
    void torch_range(const TorchRange& r) override;
    void collective(const Collective& c) override;
    void gpu_op(const GpuOp& op) override { push(events_.ops, store_op(op, texts_, seq_++)); }
    void flow(const CallRef& call, const GpuOp& op) override;
    void memory(const MemorySample& m) override { push(events_.memory, StoredMemory{seq_++, m}); }
    void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) override;
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) override;

    void metadata(const TraceModel&) override {} // a dump takes the model as it is then
    void flush() override {}
    bool write_failed() const override { return false; } // a dump that fails is reported; recording goes on
    std::string write_error() const override { return {}; }
    // The last window, as the last dump (facts as given; the capture adds flight_recorder's),
    // its events also to `analysis` when set (set_final_analysis).
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override;
    void set_final_analysis(EventConsumer* analysis) { final_analysis_ = analysis; }
    std::string output() const override { return last_output_; }
    std::vector<std::string> partials() const override { return {}; }

    // The capture's clock (CLOCK_MONOTONIC) moved on: events older than window + grace go.
    void advance(uint64_t now_ns);
    // A view of the store for a dump of the events that overlap [from_ns, now] (from_ns is
    // raised to what the store still holds whole); it shares the store's chunks.
    FlightWindow window_from(uint64_t from_ns) const;
    // The next dump's number and path (1, 2, ...).
    std::pair<int, std::string> next_dump();
    int dumps() const { return dumps_; }
    double last_window_s() const { return last_seconds_; } // the last dump's (finish)
    const FlightLimits& limits() const { return limits_; }
    FlightStats stats() const;
    uint64_t now_ns() const { return now_ns_; }
    const TraceOutput& trace_output() const { return output_; }
    bool force() const { return force_; }

private:
    template <typename T>
    void push(StoredQueue<T>& q, T&& record) {
        q.push_back(std::move(record));
        while (events_.bytes() + texts_.bytes() > limits_.max_bytes && evict_oldest()) ++evicted_by_memory_;
    }
    bool evict_oldest(); // the event that came first, of any kind
    template <typename T>
    void evict_front(StoredQueue<T>& q);

    TraceOutput output_;
    bool force_;
    FlightLimits limits_;
    FlightEvents events_;
    TextPool texts_;
    uint64_t seq_ = 0, now_ns_ = 0;
    uint64_t evicted_by_age_ = 0, evicted_by_memory_ = 0, evicted_through_ns_ = 0;
    int dumps_ = 0;
    EventConsumer* final_analysis_ = nullptr;
    std::string last_output_;
    double last_seconds_ = 0;
};

} // namespace gtrace
