// The analysis as a consumer of the capture's event stream (model/event_stream.h), beside the
// trace writers: the spans a report needs (analyze/trace_data.h), built from the events as they
// come — the same spans, to the nanosecond, that reading back the trace a writer makes of those
// events gives (tests/runtime/report_scenarios.py compares the two reports) — so that the end of
// a capture, and each flight-recorder dump, reports without reading its file back.
//
// It keeps spans, not events (no arguments, stacks or flows; strings once), about `max_bytes` of
// them (looked at every 4096 spans: vectors that doubled meanwhile may hold up to twice it). Past
// that it closes the steps that are over (analyze/closed_steps.h): their figures are added up and
// their spans let go, so the report at the end covers the whole capture in bounded memory, and is
// the report `gtrace report FILE` gives on the whole trace. Steps close a second behind the newest
// events (and, with the GPU agent on, behind the process's newest GPU record — they come in
// batches — and before GPU work launched whose record has not come: a long kernel's comes at its end). Should the spans still take more than the bound (a process without steps yet, or a
// second of events above it), it lets go of the older half of the time they cover (again as
// needed), and the report covers the capture's recent window and says from when
// (TraceData::spans_from_ns).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/closed_steps.h"
#include "analyze/trace_data.h"
#include "decode/torch_range.h"
#include "foundation/result.h"
#include "model/event_stream.h"

namespace gtrace {

// How the trace being written keeps what the analysis reads, so that the spans are what a reader
// of that trace gets back.
struct TraceForm {
    bool ascii_texts = false; // JSON formats: event texts in ASCII, '?' for a byte past 0x7f (format/json_traces.h)
    bool off_cpu = true;      // Kineto writes no off-CPU slice
};

struct LiveTraceOptions {
    uint64_t max_bytes = 256ull << 20;
    TraceForm form;
    std::string step_marker = kDefaultStepMarker; // how steps are found (AnalysisOptions::step_marker)
    bool gpu_records = false; // the GPU agent is on: a process's steps close behind its GPU records only
};

class LiveTrace final : public EventConsumer {
public:
    static constexpr uint64_t kCloseBehindNs = 1'000'000'000; // a step closes this long after the newest events
    static constexpr uint64_t kGiveUpOnGpuNs = 10'000'000'000; // GPU work not recorded this long after its launch: never will
    static constexpr size_t kRecordedFirstMax = 1 << 16;
    explicit LiveTrace(LiveTraceOptions o = {});

    void call(const ApiCall& c) override;
    void torch_range(const TorchRange& r) override;
    void collective(const Collective& c) override;
    void gpu_op(const GpuOp& op) override;
    void flow(const CallRef&, const GpuOp&) override {} // a report joins by correlation id
    void memory(const MemorySample& m) override;
    void sample_frame_begin(const SampleFrame& f, uint64_t ts_ns) override;
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) override;
    void metadata(const TraceModel& model) override;
    void gpu_records_lost(uint32_t pid) override;

    // What the spans take now (vectors' capacity and the string pool), about.
    uint64_t held_bytes() const;
    uint64_t span_bytes() const; // of that, the spans' vectors
    uint64_t steps_closed() const { return steps_closed_; }
    // Spans that came in after a step they start in had closed: each a part of a closed step's
    // figures that the trace has and the live report misses (0 unless events lagged a second).
    uint64_t late_spans() const { return late_spans_; }
    // The spans, with the capture's facts (its otherData: host, clocks, CPU pressure, whether
    // the GPU agent was on) read as a trace's reader reads them. The LiveTrace is empty after.
    TraceData take(const nlohmann::json& facts);

private:
    ProcessData* process(uint32_t pid, uint64_t end_ns = UINT64_MAX); // null: a span over before the window kept
    template <typename Span>
    void clip(Span& s) const { s.start_ns = std::max(s.start_ns, window_from_ns_); } // its part in the window
    void counted(); // one more span kept: checks the budget now and then
    void check_budget(); // past it: steps closed, else the older spans let go
    void await_gpu_record(const ApiCall& c);
    void gpu_record_came(const GpuOp& op);
    void close_steps_behind(); // the steps over a second ago
    void keep_recent_window(); // the older half of the time covered let go
    template <typename Span>
    void seen(const ProcessData& p, const Span& s, bool cpu, bool may_be_late = true); // the newest events; a span late for its closed step
    std::string_view text(std::string_view s); // interned as the trace gives it back

    TraceData data_;
    // Main threads' open sample frames (other threads' are not analysed): name and start, by depth.
    std::map<uint32_t, std::vector<std::pair<std::string_view, uint64_t>>> open_frames_;
    uint64_t max_bytes_;
    TraceForm form_;
    std::unique_ptr<StepRules> rules_;
    bool gpu_records_ = false;
    uint64_t cpu_seen_ns_ = 0;                 // the latest end of a CPU event
    std::map<uint32_t, uint64_t> gpu_seen_ns_; // by process, the latest end of a GPU record
    // By process: GPU work launched whose record has not come (by correlation id), and each kind's
    // first record's correlation id.
    struct GpuWork {
        struct Launch {
            uint64_t start_ns;
            GpuOpKind kind;
        };
        std::unordered_map<uint32_t, Launch> awaiting;
        std::unordered_set<uint32_t> recorded_first; // records that came before their call
        std::map<GpuOpKind, uint32_t> first_record;
    };
    std::map<uint32_t, GpuWork> gpu_work_;
    uint64_t first_span_ns_ = UINT64_MAX;      // the earliest start of a span kept
    uint64_t steps_closed_ = 0, late_spans_ = 0;
    std::string scratch_;
    uint64_t spans_ = 0;
    uint64_t window_from_ns_ = 0; // spans begun before it were let go (0: none)
};

// A capture's otherData as a trace's reader applies it to its TraceData: host, clocks, CPU
// pressure, GPU agent on (analyze/trace_data.cpp reads the same keys from a file).
void apply_capture_facts(TraceData& t, const nlohmann::json& facts);

} // namespace gtrace
