// Perfetto's protobuf trace (.pftrace, the default format; Perfetto UI and trace_processor read
// it natively). A stream of TracePackets (format/pftrace.proto), one TraceSink unit each, so a
// capture stopped by anything — a full disk and kill -9 included — leaves a readable file:
//
//  - sequence 1 holds the metadata: the header (TraceAttributes: tool, version, host, clock),
//    a TrackDescriptor per process (name, pid, sort index, labels rank=/world_size=/...), thread,
//    sample track, GPU stream and memory counter, each before its first event and again when its
//    name changes; ClockSnapshots of MONOTONIC, BOOTTIME and REALTIME at the start, every 10 s
//    and at the end; last, the capture's facts (TraceAttributes "other_data", the JSON otherData).
//  - every track's events are a sequence of their own: its first packet clears the incremental
//    state and sets the track and an incremental clock (deltas on CLOCK_MONOTONIC) as defaults, so
//    an event packet holds little more than its type, delta timestamp and interned ids. An event
//    earlier than the sequence's last (a torch range or collective, written when it ends; the
//    agent's calls, which come in batches behind the ranges) is a delta on another of the
//    sequence's incremental clocks, the one just below it; one earlier than all is absolute.
//  - slices are SLICE_BEGIN/SLICE_END pairs: CUDA calls (category cuda_api; "cuda_api,agent" when
//    the agent recorded it) with their interned Python callstack, source location and arguments;
//    torch ranges (torch_range); GPU work (kernel, gpu_memcpy, gpu_memset) on its stream's track;
//    sampled frames (sample) on a child track of their thread. Flows go from a call to its GPU
//    work, each id started and ended once (output/pftrace_flows.h): only a call that issues GPU
//    work and succeeded starts one on its slice; one whose GPU work never came (lost, or cut at
//    the stop) ends at an instant "GPU work not recorded" in the call, when given up on.
//    GPU memory is a counter track per process and device.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "format/pftrace_scan.h"
#include "output/pftrace_cut_ends.h"
#include "output/clocks.h"
#include "output/event_args.h"
#include "output/launch_texts.h"
#include "format/pftrace_fields.h"
#include "output/pftrace_flows.h"
#include "output/pftrace_interning.h"
#include "output/pftrace_packets.h"
#include "format/proto_encoder.h"
#include "output/trace_sink.h"
#include "output/trace_writer.h"

namespace gtrace {

class PftraceWriter final : public TraceWriter {
public:
    static Result<std::unique_ptr<PftraceWriter>> create(const std::string& path, bool force, const TraceModel& model);

    void call(const ApiCall& call) override;
    void torch_range(const TorchRange& range) override;
    void collective(const Collective& c) override;
    void gpu_op(const GpuOp& op) override;
    void flow(const CallRef& call, const GpuOp& op) override;
    void memory(const MemorySample& sample) override;
    void sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) override;
    void sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) override;
    void metadata(const TraceModel& model) override;
    void forget_process(uint32_t pid) override;
    void flush() override { sink_.flush(); }
    bool write_failed() const override { return sink_.failed(); }
    std::string write_error() const override;
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& facts) override;
    std::string output() const override { return sink_.path(); }
    std::vector<std::string> partials() const override { return {sink_.partial_path()}; }

private:
    PftraceWriter(TraceSink sink, const TraceModel& model, uint64_t clocks_at)
        : sink_(std::move(sink)), model_(model), last_clocks_ns_(clocks_at) {}

    enum class Kind : uint8_t { Thread, Samples, OffCpu, Gpu, Memory };
    using TrackKey = std::tuple<Kind, uint32_t, uint32_t, uint32_t>; // kind, pid, tid/device, stream
    struct Track {
        uint64_t uuid = 0;
        uint32_t sequence = 0;
        uint64_t parent = 0;   // a process's or thread's track
        std::string name;      // as last described ("" for thread tracks: the model names them)
        std::array<uint64_t, pftrace_out::kIncrementalClocks> clock_ts{}; // the incremental clocks' values
        bool started = false;  // the sequence's first packet is written
        bool bytes_counter = false; // a GPU memory counter: its unit is bytes
        PftraceInterning interning;
    };

    Track& track(Kind kind, uint32_t pid, uint32_t id, uint32_t stream = 0);
    uint64_t process_track(uint32_t pid);
    // Descriptors not written yet, or whose names changed (`all`: every one), as packets.
    std::string pending_descriptors(bool all);
    void describe(std::string& out, const Track& t, uint32_t pid, uint32_t tid, bool thread);
    // An event packet on t's sequence: begin_event, the TrackEvent's fields, end_event.
    proto::Encoder& begin_event(Track& t, uint64_t ts_ns, uint32_t type);
    void end_event(Track& t);
    void annotation_string(Track& t, std::string_view name, std::string_view value);
    void annotation_uint(Track& t, std::string_view name, uint64_t value);
    void annotation_double(Track& t, std::string_view name, double value);
    void annotation(Track& t, const EventArg& a); // output/event_args.h
    void stack_fields(proto::Encoder& e, Track& t, const PyStackRef& stack);
    void commit_with_metadata(); // new descriptors first, then the packets buffered
    // Flows started on calls whose GPU work did not come: each ends at an instant in its call.
    void end_flows(const std::vector<PftraceFlows::Dangling>& flows);

    TraceSink sink_;
    const TraceModel& model_;
    std::string buf_;     // packets of the unit being written
    proto::Encoder enc_{buf_};
    std::map<TrackKey, Track> tracks_;
    std::map<uint32_t, uint64_t> process_uuids_;
    std::map<uint64_t, std::string> described_; // uuid -> the descriptor last written
    uint64_t next_uuid_ = 1;
    uint32_t next_sequence_ = 2; // 1: metadata
    uint64_t last_clocks_ns_;
    PftraceFlows flows_;
    // A flow waiting for its GPU op's slice (flow() comes just before gpu_op(), with the same op).
    std::optional<std::pair<PftraceFlows::OpKey, uint64_t>> pending_flow_;
    LaunchTexts launch_texts_;
    PftraceCutEnds cut_ends_; // what a cut must end
};

} // namespace gtrace
