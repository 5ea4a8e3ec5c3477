// The capture's event stream: what the model hands on, in the order it knows it — CUDA calls
// with their Python stacks, torch and NVTX ranges, c10d collectives, GPU work and its links to
// the calls, memory counters, sampled stack frames, and the processes' names and labels. Its
// consumers sit side by side above the model: each trace format's writer (output/trace_writer.h)
// and the live analysis (analyze/live_trace.h), fed the very same events.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "decode/api_call.h"
#include "decode/collective.h"
#include "decode/gpu_activity.h"
#include "decode/nvtx_range.h"
#include "decode/python_frames.h"
#include "decode/python_stacks.h"
#include "model/gpu_join.h"
#include "model/gpu_memory.h"
#include "model/trace_model.h"

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

// A timer-sample track's frame: samples that share a stack prefix extend the same frames, so
// each frame is one slice from the sample that first had it to the one that no longer does
// (SampleTracks). `depth` 0 is the outermost frame.
struct SampleFrame {
    uint32_t pid = 0, tid = 0;
    std::string thread; // the thread's name when sampled
    size_t depth = 0;
    PyFrame frame;
};

class EventConsumer {
public:
    virtual ~EventConsumer() = default;

    virtual void call(const ApiCall& call) = 0;
    virtual void torch_range(const TorchRange& range) = 0;
    // A c10d collective's call or its Work::wait, on the thread that made it.
    virtual void collective(const Collective& c) = 0;
    // GPU work; also CUPTI's synchronization records (kind Sync).
    virtual void gpu_op(const GpuOp& op) = 0;
    // `call` issued `op`. Comes before gpu_op(op) when the call was known first (the usual
    // order: the capture joins an op before writing it), after it otherwise.
    virtual void flow(const CallRef& call, const GpuOp& op) = 0;
    virtual void memory(const MemorySample& sample) = 0;
    // A sample frame opens at `ts_ns` (frames open outermost first) ...
    virtual void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) = 0;
    // ... and closes (innermost first; every open frame is closed before the stream ends).
    virtual void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) = 0;
    // Process and thread names and labels as known now.
    virtual void metadata(const TraceModel& model) = 0;
    // pid's GPU agent lost records (its ring was full, or CUPTI's buffers): GPU work launched
    // before the newest record that came may never get one. Most consumers need not care.
    virtual void gpu_records_lost(uint32_t /*pid*/) {}
};

// Every event to two consumers, in order.
class EventTee final : public EventConsumer {
public:
    EventTee(EventConsumer& a, EventConsumer& b) : a_(a), b_(b) {}
    void call(const ApiCall& c) override { a_.call(c), b_.call(c); }
    void torch_range(const TorchRange& r) override { a_.torch_range(r), b_.torch_range(r); }
    void collective(const Collective& c) override { a_.collective(c), b_.collective(c); }
    void gpu_op(const GpuOp& op) override { a_.gpu_op(op), b_.gpu_op(op); }
    void flow(const CallRef& call, const GpuOp& op) override { a_.flow(call, op), b_.flow(call, op); }
    void memory(const MemorySample& m) override { a_.memory(m), b_.memory(m); }
    void sample_frame_begin(const SampleFrame& f, uint64_t ts) override { a_.sample_frame_begin(f, ts), b_.sample_frame_begin(f, ts); }
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts) override {
        a_.sample_frame_end(pid, tid, depth, ts), b_.sample_frame_end(pid, tid, depth, ts);
    }
    void metadata(const TraceModel& model) override { a_.metadata(model), b_.metadata(model); }
    void gpu_records_lost(uint32_t pid) override { a_.gpu_records_lost(pid), b_.gpu_records_lost(pid); }

private:
    EventConsumer &a_, &b_;
};

} // namespace gtrace
