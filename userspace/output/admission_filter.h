// Scripted captures decide which events go into the trace, whatever its format: only events
// that start inside [open, close) are written, and no more than max_events of them; the rest
// are counted (otherData.capture_script). It sits in front of the format's writer. A flow
// counts as two events (its two ends, as the Chrome JSON writes them), a sampled frame as one.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "output/trace_writer.h"

namespace gtrace {

class AdmissionFilter final : public TraceWriter {
public:
    AdmissionFilter() = default;
    explicit AdmissionFilter(std::unique_ptr<TraceWriter> writer) : writer_(std::move(writer)) {}
    void set_writer(std::unique_ptr<TraceWriter> writer) { writer_ = std::move(writer); }

    void set_window(uint64_t open_ns, uint64_t close_ns) {
        window_open_ns_ = open_ns;
        window_close_ns_ = close_ns;
    }
    void set_max_events(uint64_t n) { max_events_ = n; }
    bool in_window(uint64_t ts_ns) const { return ts_ns >= window_open_ns_ && ts_ns < window_close_ns_; }
    bool full() const { return events_ >= max_events_; }
    uint64_t events_written() const { return events_; }
    uint64_t events_outside_window() const { return outside_window_; }
    uint64_t events_over_limit() const { return over_limit_; }

    void call(const ApiCall& call) override {
        if (admit(call.start_ns)) writer_->call(call);
    }
    void collective(const Collective& c) override {
        if (admit(c.start_ns)) writer_->collective(c);
    }
    void torch_range(const TorchRange& range) override {
        if (admit(range.start_ns)) writer_->torch_range(range);
    }
    void gpu_op(const GpuOp& op) override {
        if (op.kind == GpuOpKind::Sync) { // not an event of every format: not counted
            if (in_window(op.start_ns) && !full()) writer_->gpu_op(op);
        } else if (admit(op.start_ns)) {
            writer_->gpu_op(op);
        }
    }
    void flow(const CallRef& call, const GpuOp& op) override;
    void memory(const MemorySample& sample) override {
        if (admit(sample.ts_ns)) writer_->memory(sample);
    }
    void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) override;
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) override;

    void metadata(const TraceModel& model) override { writer_->metadata(model); }
    void forget_process(uint32_t pid) override {
        open_frames_.erase(open_frames_.lower_bound({pid, 0}), open_frames_.lower_bound({pid + 1, 0}));
        writer_->forget_process(pid);
    }
    void flush() override { writer_->flush(); }
    bool write_failed() const override { return writer_->write_failed(); }
    std::string write_error() const override { return writer_->write_error(); }
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override {
        return writer_->finish(model, facts);
    }
    std::string output() const override { return writer_->output(); }
    std::vector<std::string> partials() const override { return writer_->partials(); }

private:
    // In the window and under the limit (counted then); counted as left out otherwise.
    bool admit(uint64_t ts_ns, uint64_t events = 1);

    std::unique_ptr<TraceWriter> writer_;
    uint64_t window_open_ns_ = 0, window_close_ns_ = UINT64_MAX, max_events_ = UINT64_MAX;
    uint64_t events_ = 0, outside_window_ = 0, over_limit_ = 0;
    // Per sample track, whether each open frame (by depth) was admitted: its end goes with it.
    std::map<std::pair<uint32_t, uint32_t>, std::vector<bool>> open_frames_;
};

} // namespace gtrace
