// gtrace's Chrome trace event JSON (--format json; Perfetto UI, chrome://tracing): events go to
// `<output>.partial` as they arrive, one a line, with the process and thread names as soon as
// they are known (metadata()), so a capture killed with -9 leaves a partial that `gtrace report`
// reads and `gtrace recover` completes. finish() appends what metadata changed and the capture's
// facts as otherData. After a write error nothing more is written, and finish() cuts the trace
// back to an event boundary with room for its end: a complete, shorter trace whose
// otherData.cut says what was lost.
//
// Tracks: a thread's CUDA calls and torch ranges on the thread; its sampled frames on a track of
// their own (tid + kSampleTrackTidOffset, "<thread> (samples)"); GPU work on a track per device
// and stream under the process (tid gpu_track_tid(), "GPU 0 · stream 13"), with a flow arrow
// (category "ac2g", as in PyTorch's profiler traces) from each call to the GPU work it caused.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/json_traces.h"
#include "output/json_event_file.h"
#include "output/trace_writer.h"

namespace gtrace {

class ChromeTraceWriter final : public TraceWriter {
public:
    // Creates the partial file (the path was checked with the command's other outputs). Errors
    // carry ExitCode::OutputUnwritable, OutputExists or WriteFailed.
    static Result<std::unique_ptr<ChromeTraceWriter>> create(const std::string& path, bool force);

    void call(const ApiCall& call) override;
    void torch_range(const TorchRange& range) override;
    void collective(const Collective& c) override;
    void gpu_op(const GpuOp& op) override;
    void flow(const CallRef& call, const GpuOp& op) override;
    void memory(const MemorySample& sample) override;
    void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) override;
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) override;
    void metadata(const TraceModel& model) override;
    void flush() override { file_.flush(); }
    bool write_failed() const override { return file_.failed(); }
    std::string write_error() const override { return file_.error(); }
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override;
    std::string output() const override { return file_.path(); }
    std::vector<std::string> partials() const override { return {file_.partial_path()}; }

private:
    explicit ChromeTraceWriter(JsonEventFile file) : file_(std::move(file)) {}
    // Metadata events not written yet (all of them: `all`), as JSON objects.
    std::vector<std::string> pending_metadata(const TraceModel& model, bool all);

    JsonEventFile file_;
    std::string buf_;
    std::map<uint32_t, std::string> process_meta_;                     // as last written
    std::map<std::pair<uint32_t, uint32_t>, std::string> thread_meta_; // as last written
    std::map<std::pair<uint32_t, uint32_t>, std::string> track_names_; // sample and GPU tracks
    struct OpenFrame {
        std::string name;
        uint64_t start_ns;
    };
    std::map<std::pair<uint32_t, uint32_t>, std::vector<OpenFrame>> open_frames_;
    uint64_t next_flow_ = 1;
};

// The Python stack as gtrace's JSON writes it: `"py_stack":["qualname (file:line)",...]`
// (innermost first, a marker when truncated) and `"source":"..."`, each after a comma.
void append_py_stack_args(std::string& out, const PyStack* stack, bool source_first);
inline void append_py_stack_args(std::string& out, const PyStackRef& stack, bool source_first) {
    append_py_stack_args(out, stack.get(), source_first);
}
// A CUDA call's arguments (output/event_args.h), each with its leading comma, as both JSON formats
// write them. Kineto's flavour puts its join key `External id` beside `correlation`, and names
// the stream handle `cuda_stream`: HTA takes a row with a `stream` argument for a GPU row, and
// checks that it is a number (validate_trace).
enum class JsonFlavor { Chrome, Kineto };
void append_call_args(std::string& out, const ApiCall& c, JsonFlavor flavor);

} // namespace gtrace
