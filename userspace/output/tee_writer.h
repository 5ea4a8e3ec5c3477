// TeeWriter hands every event to two writers: a test hook (GTRACE_TEST_TEE=PATH writes the capture in the
// format of PATH as well), so that tests compare two formats of the very same event stream.
#pragma once
#include <memory>

#include "output/trace_writer.h"

namespace gtrace {

class TeeWriter final : public TraceWriter {
public:
    TeeWriter(std::unique_ptr<TraceWriter> a, std::unique_ptr<TraceWriter> b) : a_(std::move(a)), b_(std::move(b)) {}

    void call(const ApiCall& c) override { a_->call(c), b_->call(c); }
    void torch_range(const TorchRange& r) override { a_->torch_range(r), b_->torch_range(r); }
    void collective(const Collective& c) override { a_->collective(c), b_->collective(c); }
    void gpu_op(const GpuOp& op) override { a_->gpu_op(op), b_->gpu_op(op); }
    void flow(const CallRef& call, const GpuOp& op) override { a_->flow(call, op), b_->flow(call, op); }
    void memory(const MemorySample& m) override { a_->memory(m), b_->memory(m); }
    void sample_frame_begin(const SampleFrame& f, uint64_t ts) override { a_->sample_frame_begin(f, ts), b_->sample_frame_begin(f, ts); }
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts) override {
        a_->sample_frame_end(pid, tid, depth, ts), b_->sample_frame_end(pid, tid, depth, ts);
    }
    void metadata(const TraceModel& model) override { a_->metadata(model), b_->metadata(model); }
    void gpu_records_lost(uint32_t pid) override { a_->gpu_records_lost(pid), b_->gpu_records_lost(pid); }
    void forget_process(uint32_t pid) override { a_->forget_process(pid), b_->forget_process(pid); }
    void flush() override { a_->flush(), b_->flush(); }
    bool write_failed() const override { return a_->write_failed() || b_->write_failed(); }
    std::string write_error() const override { return a_->write_failed() ? a_->write_error() : b_->write_error(); }
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override {
        auto other = b_->finish(model, facts);
        auto first = a_->finish(model, facts);
        if (!other) return other.error();
        return first;
    }
    std::string output() const override { return a_->output(); }
    std::vector<std::string> partials() const override {
        auto all = a_->partials();
        for (auto& p : b_->partials()) all.push_back(p);
        return all;
    }

private:
    std::unique_ptr<TraceWriter> a_, b_;
};

// A writer whose events also go to another consumer of the stream (the capture's live analysis,
// analyze/live_trace.h): after the writer, so that what the trace holds and what is analysed are
// the same events.
class ObservedWriter final : public TraceWriter {
public:
    ObservedWriter(std::unique_ptr<TraceWriter> writer, EventConsumer& also) : w_(std::move(writer)), also_(also) {}

    void call(const ApiCall& c) override { w_->call(c), also_.call(c); }
    void torch_range(const TorchRange& r) override { w_->torch_range(r), also_.torch_range(r); }
    void collective(const Collective& c) override { w_->collective(c), also_.collective(c); }
    void gpu_op(const GpuOp& op) override { w_->gpu_op(op), also_.gpu_op(op); }
    void flow(const CallRef& call, const GpuOp& op) override { w_->flow(call, op), also_.flow(call, op); }
    void memory(const MemorySample& m) override { w_->memory(m), also_.memory(m); }
    void sample_frame_begin(const SampleFrame& f, uint64_t ts) override { w_->sample_frame_begin(f, ts), also_.sample_frame_begin(f, ts); }
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts) override {
        w_->sample_frame_end(pid, tid, depth, ts), also_.sample_frame_end(pid, tid, depth, ts);
    }
    void metadata(const TraceModel& model) override { w_->metadata(model), also_.metadata(model); }
    void gpu_records_lost(uint32_t pid) override { w_->gpu_records_lost(pid), also_.gpu_records_lost(pid); }
    void forget_process(uint32_t pid) override { w_->forget_process(pid); }
    void flush() override { w_->flush(); }
    bool write_failed() const override { return w_->write_failed(); }
    std::string write_error() const override { return w_->write_error(); }
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override {
        also_.metadata(model); // the names as they end, as finish() writes them
        return w_->finish(model, facts);
    }
    std::string output() const override { return w_->output(); }
    std::vector<std::string> partials() const override { return w_->partials(); }

private:
    std::unique_ptr<TraceWriter> w_;
    EventConsumer& also_;
};

} // namespace gtrace
