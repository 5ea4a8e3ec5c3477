// What every trace format implements (Chrome JSON, Perfetto protobuf, Kineto JSON): the capture
// hands it decoded objects — processes and threads from the model, CUDA calls with their Python
// stacks, torch ranges, GPU work, call→GPU links, memory counters, sampled stack frames — and
// the writer decides how they look on disk, interning included. Which events go in at all
// (--delay, --steps, --max-events, --trigger) is decided in front of it (AdmissionFilter), and
// partial files, write-error cut-back and renaming are the TraceSink's, under each writer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decode/api_call.h"
#include "decode/collective.h"
#include "decode/gpu_activity.h"
#include "decode/nvtx_range.h"
#include "decode/python_stacks.h"
#include "foundation/result.h"
#include "model/gpu_join.h"
#include "model/gpu_memory.h"
#include "model/trace_model.h"
#include "foundation/process_observer.h"

namespace gtrace {

// A PyTorch record_function range, or an NVTX range (`nvtx` set: category "nvtx"), on the
// thread that opened it; or a main thread's time asleep (`off_cpu`: category "off_cpu", named
// "blocked: KIND" by decode/off_cpu.h, its stack the one it went to sleep with).
struct TorchRange {
    uint32_t pid = 0, tid = 0;
    uint64_t start_ns = 0, end_ns = 0;
    std::string name;
    PyStackRef stack; // where the range was opened (null: not known)
    std::shared_ptr<const NvtxRangeInfo> nvtx;
    bool off_cpu = false;
};

// The category of a range's slice in gtrace's own formats.
inline const char* range_category(const TorchRange& r) { return r.off_cpu ? "off_cpu" : r.nvtx ? "nvtx" : "torch_range"; }

// A timer-sample track's frame: samples that share a stack prefix extend the same frames, so
// each frame is one slice from the sample that first had it to the one that no longer does
// (SampleTracks). `depth` 0 is the outermost frame.
struct SampleFrame {
    uint32_t pid = 0, tid = 0;
    std::string thread; // the thread's name when sampled
    size_t depth = 0;
    PyFrame frame;
};

// What a write error cost the trace (finish() after a failed write).
struct TraceCut {
    std::string error;
    uint64_t events_kept = 0, events_dropped = 0;
};

// A process's labels as one JSON object's text: cmdline, ppid, and as known rank, local_rank,
// world_size, forked_from.
std::string process_labels_json(const ProcessInfo& p);

// The category a GPU op's slice has in every format: kernel, gpu_memcpy, gpu_memset, gpu_sync.
const char* gpu_op_category(GpuOpKind k);

class TraceWriter : public ProcessObserver {
public:
    virtual ~TraceWriter() = default;

    virtual void call(const ApiCall& call) = 0;
    virtual void torch_range(const TorchRange& range) = 0;
    // A c10d collective's call or its Work::wait, on the thread that made it (category
    // "collective"; arguments phase, op, backend, and a wait's issued_us in the JSON formats).
    virtual void collective(const Collective& c) = 0;
    // GPU work; also CUPTI's synchronization records (kind Sync), which only Kineto writes.
    virtual void gpu_op(const GpuOp& op) = 0;
    // `call` issued `op`. Comes before gpu_op(op) when the call was known first (the usual
    // order: the capture joins an op before writing it), after it otherwise.
    virtual void flow(const CallRef& call, const GpuOp& op) = 0;
    virtual void memory(const MemorySample& sample) = 0;
    // A sample frame opens at `ts_ns` (frames open outermost first) ...
    virtual void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) = 0;
    // ... and closes (innermost first; every open frame is closed before finish()).
    virtual void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) = 0;

    // The process exited a while ago (no event of it is expected any more): what the writer
    // holds per process and thread can go. An event of it after all starts that state over.
    virtual void forget_process(uint32_t /*pid*/) {}
    void process_gone(uint32_t pid) override { forget_process(pid); }
    // Process and thread names and labels as known now: what is new or changed is written, so
    // that a capture killed with -9 leaves them in its partial trace.
    virtual void metadata(const TraceModel& model) = 0;
    // The events so far to the partial file(s).
    virtual void flush() = 0;
    // A write failed (disk full, quota, I/O error): nothing more is written.
    virtual bool write_failed() const = 0;
    virtual std::string write_error() const = 0;
    // Ends the trace: what metadata is not written yet, then `facts` (otherData; plus `cut`
    // after a write error), and renames it into place. Returns the cut, if a write error made one.
    virtual Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) = 0;

    // What the user is told: the trace file (or Kineto's directory).
    virtual std::string output() const = 0;
    // The partial files being written now (the registry of running captures lists them).
    virtual std::vector<std::string> partials() const = 0;
};

} // namespace gtrace
