// PyTorch profiler (Kineto) JSON, for Holistic Trace Analysis and other tools that read what
// torch.profiler writes: a directory holding one file per rank, `rank<N>.pt.trace.json`, and one
// per process without a rank in `other/pid<P>.pt.trace.json` (HTA reads a directory's files, not
// its subdirectories, and takes a file without a rank for rank 0). A rank's forked workers
// (DataLoader) go into the rank's file.
//
// Each file: `distributedInfo` (rank, world size) before the events, `"rank": N` spelt as HTA's
// file scan expects; events as Kineto writes them — CUDA calls as `cuda_runtime`/`cuda_driver`
// with `correlation` and `External id`, GPU work as `kernel`/`gpu_memcpy`/`gpu_memset` on pid =
// device and tid = stream with `device`, `stream`, `correlation`, grid/block, `bytes` and
// `memory bandwidth (GB/s)`, `ac2g` flows from the call's start, torch ranges as `user_annotation`,
// a `ProfilerStep#N` range per step the GPU records cover (from one --step-marker range's end to
// the next's), sampled frames as `python_function`; for HTA's analyses also (kineto_writer_hta.cpp,
// docs/trace_readers.md) a `cpu_op` twin of each range, collectives as `cpu_op` and, run on the
// CPU, on a lane counted as communication, `cuda_sync` and `gpu_user_annotation` rows; then
// `deviceProperties` (the device ids seen), `baseTimeNanoseconds` (CLOCK_REALTIME −
// CLOCK_MONOTONIC: ts + base is Unix time) and gtrace's `otherData`. Each file streams through a TraceSink of its own; the directory is
// locked while the capture runs (`gtrace recover DIR` completes every partial in it).
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "format/json_traces.h"
#include "output/clocks.h"
#include "output/json_event_file.h"
#include "output/kineto_gpu_ranges.h"
#include "output/trace_writer.h"

namespace gtrace {

namespace kineto { // the event text both of KinetoWriter's files write
// {"ph":"X","cat":...,"name":...,"pid":P,"tid":T,"ts":...,"dur":... (no closing brace)
void begin_x(std::string& out, std::string_view cat, std::string_view name, uint32_t pid, uint32_t tid, uint64_t start,
             uint64_t end);
std::string meta(const char* name, uint32_t pid, uint32_t tid, const nlohmann::json& args);
} // namespace kineto


class KinetoWriter final : public TraceWriter {
public:
    // `dir` was checked (check_output_directory); it is created now.
    static Result<std::unique_ptr<KinetoWriter>> create(const std::string& dir, bool force, const TraceModel& model,
                                                        const std::string& step_marker);
    ~KinetoWriter() override;

    void call(const ApiCall& call) override;
    void torch_range(const TorchRange& range) override;
    void collective(const Collective& c) override;
    void gpu_op(const GpuOp& op) override;
    void flow(const CallRef& call, const GpuOp& op) override;
    void memory(const MemorySample& sample) override;
    void forget_process(uint32_t pid) override;
    void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) override;
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) override;
    void metadata(const TraceModel& model) override;
    void flush() override;
    bool write_failed() const override { return !error_.empty(); }
    std::string write_error() const override { return error_; }
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override;
    std::string output() const override { return dir_; }
    std::vector<std::string> partials() const override { return {dir_}; }

private:
    KinetoWriter(std::string dir, int dir_fd, const TraceModel& model, const std::string& step_marker);

    struct File {
        std::optional<JsonEventFile> out;
        std::optional<int> rank;
        std::set<uint32_t> devices;
        std::map<uint32_t, std::string> process_meta; // as last written
        std::map<std::pair<uint32_t, uint32_t>, std::string> thread_meta;
        std::set<std::pair<uint32_t, uint32_t>> lanes; // (device, stream) of CPU collectives, named
    };
    struct PendingStep {
        uint64_t number;
        uint32_t tid;
        uint64_t start_ns, end_ns;
    };
    struct Steps {
        uint64_t last_end = 0;
        uint64_t next = 0; // the next ProfilerStep's number
        std::deque<PendingStep> pending; // ended, not yet known to be covered by GPU records
    };
    static constexpr size_t kMaxPendingSteps = 1024;
    // The file of pid's events (created at its first event); null after a write error.
    File* file_of(uint32_t pid);
    void emit(File& f, std::string_view event);
    void gpu_sync(const GpuOp& op);
    void gpu_range(const GpuRangeSpan& span);
    void write_covered_steps(uint32_t pid, Steps& s, bool at_end);
    void write_lanes(uint32_t pid);
    std::vector<std::string> pending_metadata(File& f, bool all);

    std::string dir_;
    int dir_fd_ = -1; // locked while the capture runs
    const TraceModel& model_;
    std::regex step_regex_;
    ClockReading clocks_;
    std::map<std::string, File> files_; // by name within dir_
    std::map<uint32_t, File*> by_pid_;
    std::map<uint32_t, Steps> steps_;
    uint64_t steps_not_covered_ = 0;
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> gpu_span_; // per pid: first GPU op start, last end
    std::map<uint32_t, uint32_t> devices_of_pid_;                 // the device of its first GPU op
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> device_of_context_;
    uint64_t next_lane_correlation_ = 0;
    std::map<uint32_t, const char*> backend_of_pid_; // the last backend its collectives named
    static constexpr size_t kMaxPendingLanes = 4096;
    std::map<uint32_t, std::deque<std::pair<Collective, uint32_t>>> pending_lanes_; // until its device is known
    GpuRangeSpans gpu_ranges_;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<std::string, uint64_t>>> open_frames_;
    std::string error_, buf_;
};

} // namespace gtrace
