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

#include "foundation/result.h"
#include "model/event_stream.h"
#include "foundation/process_observer.h"

namespace gtrace {

// The category of a range's slice in gtrace's own formats.
inline const char* range_category(const TorchRange& r) { return r.off_cpu ? "off_cpu" : r.nvtx ? "nvtx" : "torch_range"; }

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

// A trace format's writer: a consumer of the event stream (model/event_stream.h) that puts it on
// disk. CUPTI's synchronization records (GpuOp kind Sync) only Kineto writes; a collective is
// category "collective" (arguments phase, op, backend, and a wait's issued_us in the JSON formats).
class TraceWriter : public EventConsumer, public ProcessObserver {
public:
    // The process exited a while ago (no event of it is expected any more): what the writer
    // holds per process and thread can go. An event of it after all starts that state over.
    virtual void forget_process(uint32_t /*pid*/) {}
    void process_gone(uint32_t pid) override { forget_process(pid); }
    // (metadata(model) writes what is new or changed, so that a capture killed with -9 leaves
    // the names in its partial trace.)
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
