// What the analysis needs from a gtrace trace, per process: its rank, its CUDA calls, its GPU
// work, its main thread's samples, its torch ranges and GPU memory — read from the Chrome trace
// JSON gtrace wrote. Traces run to millions of events, so spans are small: their strings are
// views into one pool of distinct strings that the TraceData owns.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

struct ClosedSteps; // analyze/closed_steps.h

// Each distinct string once. Views stay valid for the pool's life, moves included: the
// characters live in blocks that a move hands over without copying.
class StringPool {
public:
    std::string_view intern(std::string_view s);
    size_t size() const { return index_.size(); }
    // The characters' blocks and the index, about.
    size_t bytes() const { return blocks_bytes_ + index_.size() * (sizeof(std::string_view) + 2 * sizeof(void*)); }

private:
    std::vector<std::unique_ptr<char[]>> blocks_;
    char* free_ = nullptr;
    size_t free_left_ = 0;
    size_t blocks_bytes_ = 0;
    std::unordered_set<std::string_view> index_;
};

struct Span {
    uint64_t start_ns = 0, end_ns = 0;
    uint64_t dur() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

struct CallSpan : Span {
    std::string_view name;
    std::string_view source; // Python line that made the call, when known
    std::string_view kind;   // copy direction
    uint64_t bytes = 0;
    uint32_t tid = 0;
    uint32_t correlation = 0;
};

enum class GpuKind : uint8_t { Kernel, Memcpy, Memset };

struct GpuSpan : Span {
    std::string_view name;
    std::string_view copy_kind;
    uint64_t bytes = 0;
    uint32_t correlation = 0;
    GpuKind kind = GpuKind::Kernel;
};

// A PyTorch record_function range ("Optimizer.step#Adam.step", "ProfilerStep#3").
struct RangeSpan : Span {
    std::string_view name;
    uint32_t tid = 0;
    std::string_view source; // off-CPU slices: the user's line it went to sleep under, when known
};

// A c10d collective's call (issue) or a wait on its Work, or an NCCL API call ("ncclAllReduce"),
// on the thread that made it.
struct CollectiveSpan : Span {
    std::string_view name; // "all_reduce"
    uint64_t issued_ns = 0; // a wait: its collective's issue start; 0: an issue, or not seen
    uint32_t tid = 0;
    bool wait = false;
    bool nccl = false;      // an NCCL API call: the fields below are its
    uint8_t group_depth = 0; // ncclGroupStart calls open at the call (GroupEnd: after it)
    uint32_t nranks = 0;    // a communicator's creation: its size
    uint64_t bytes = 0;     // count x the datatype's size
    uint64_t comm = 0;      // the ncclComm_t
    uint32_t result = 0;    // what the call returned (ncclResult_t; 0: ncclSuccess)
};

// The CUDA caching allocator's total on one device, after a change.
struct MemoryPoint {
    uint64_t ts_ns = 0;
    uint32_t device = 0;
    uint64_t allocated_bytes = 0;
    bool at_attach = false; // the state the agent found when it started: the curve's start
};

struct ProcessData {
    uint32_t pid = 0;
    std::string label;
    std::string cmdline; // as the trace has it (process_labels): redacted unless captured with --no-redact
    std::optional<int> rank;
    std::optional<int> world_size; // its WORLD_SIZE
    bool forked = false; // a forked copy of another process (DataLoader worker)
    std::vector<CallSpan> calls;
    std::vector<GpuSpan> gpu;
    std::vector<CallSpan> main_samples; // sample slices of the main thread (name = frame)
    std::vector<RangeSpan> ranges;
    std::vector<RangeSpan> off_cpu; // a thread's time asleep, named "blocked: KIND" (decode/off_cpu.h)
    std::vector<CollectiveSpan> collectives;
    std::vector<MemoryPoint> memory; // in file order
    // Steps a capture's live analysis closed and let the spans of go (analyze/closed_steps.h): the
    // spans above come after them. Null: none (a trace read from a file).
    std::shared_ptr<ClosedSteps> closed;
};

// Move-only: the spans' views point into `strings`.
struct TraceData {
    std::string path;
    std::map<uint32_t, ProcessData> processes;
    bool has_gpu = false; // the capture had the GPU agent on
    std::optional<uint64_t> partial_events; // a partial trace (its capture was killed): the whole events read
    // A capture's live analysis past its memory bound (analyze/live_trace.h): only the spans begun
    // from this time on, of at most that many bytes.
    std::optional<uint64_t> spans_from_ns;
    uint64_t spans_to_ns = 0; // and the latest of them ends here
    uint64_t spans_max_bytes = 0;
    // With closed steps: the earliest start of any span, those let go included (the capture's start).
    std::optional<uint64_t> first_span_ns;
    uint64_t steps_closed = 0; // by the live analysis on the way
    uint64_t late_spans = 0;   // came in after a step they start in had closed: not in the report
    // Where and when: the host that wrote it ("" when the trace does not say), and its
    // CLOCK_REALTIME minus CLOCK_MONOTONIC (the trace's clock), read together during the capture:
    // what puts traces of several hosts on one time line (analyze/clock_alignment.h).
    std::string host;
    std::optional<int64_t> realtime_offset_ns;
    // The share of the capture in which some runnable task waited for a CPU on that host
    // (otherData.cpu_pressure.some, discover/cpu_pressure.h); nullopt when the trace does not say.
    std::optional<double> cpu_pressure;
    StringPool strings;
};

// Loads a trace gtrace wrote, streaming: memory grows with the spans kept, not the file's size.
// A file that is not one (another tool's, truncated, corrupt) gives an error that says so.
// `readers`: threads that read traceEvents; 0: one per core for files over 64 MiB. A file named
// `*.partial` is read as a partial trace (analyze/partial_trace.h): up to its last whole event.
Result<TraceData> load_trace(const std::string& path, unsigned readers = 0);

} // namespace gtrace
