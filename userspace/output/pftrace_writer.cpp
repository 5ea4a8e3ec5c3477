#include "output/pftrace_writer.h"

#include "output/event_args.h"

#include <cstring>

#include <fmt/format.h>

#include "format/nccl_names.h"
#include "format/pftrace_scan.h"
#include "format/api_table.h"
#include "format/pftrace_fields.h"

namespace gtrace {
namespace {
using TD = pftrace::TrackDescriptor;
using PD = pftrace::ProcessDescriptor;
using DA = pftrace::DebugAnnotation;
} // namespace

using namespace pftrace_out;

Result<std::unique_ptr<PftraceWriter>> PftraceWriter::create(const std::string& path, bool force, const TraceModel& model) {
    ClockReading clocks = read_clocks();
    auto sink = TraceSink::create(path, force, pftrace_header(clocks));
    if (!sink) return sink.error();
    return std::unique_ptr<PftraceWriter>(new PftraceWriter(std::move(*sink), model, clocks.monotonic_ns));
}

std::string PftraceWriter::write_error() const { return strerror(sink_.error()); }

uint64_t PftraceWriter::process_track(uint32_t pid) {
    auto [it, added] = process_uuids_.try_emplace(pid, 0);
    if (added) it->second = next_uuid_++;
    return it->second;
}

PftraceWriter::Track& PftraceWriter::track(Kind kind, uint32_t pid, uint32_t id, uint32_t stream) {
    auto [it, added] = tracks_.try_emplace({kind, pid, id, stream});
    Track& t = it->second;
    if (added) {
        t.uuid = next_uuid_++;
        t.sequence = next_sequence_++;
        t.parent = kind == Kind::Samples || kind == Kind::OffCpu ? track(Kind::Thread, pid, id).uuid : process_track(pid);
        if (kind == Kind::Gpu) t.name = fmt::format("GPU {} · stream {}", id, stream);
        if (kind == Kind::OffCpu) t.name = "off CPU";
    }
    return t;
}

void PftraceWriter::describe(std::string& out, const Track& t, uint32_t pid, uint32_t tid, bool thread) {
    std::string packet;
    proto::Encoder e(packet);
    e.begin(kTracePacket);
    e.varint(kSequenceId, kMetadataSequence);
    e.begin(kTrackDescriptor);
    e.varint(TD::kUuid, t.uuid);
    if (thread) {
        const ProcessInfo* p = model_.find(pid);
        auto th = p ? p->threads.find(tid) : decltype(p->threads.end()){};
        std::string name = p && th != p->threads.end() && !th->second.name.empty() ? th->second.name : t.name;
        e.begin(TD::kThread);
        e.varint(pftrace::ThreadDescriptor::kPid, pid);
        e.varint(pftrace::ThreadDescriptor::kTid, tid);
        e.bytes(pftrace::ThreadDescriptor::kThreadName, name.empty() ? fmt::format("thread {}", tid) : name);
        e.end();
    } else {
        e.varint(TD::kParentUuid, t.parent);
        e.bytes(TD::kName, t.name);
        if (t.bytes_counter) {
            e.begin(TD::kCounter);
            e.varint(pftrace::CounterDescriptor::kUnit, pftrace::CounterDescriptor::UNIT_SIZE_BYTES);
            e.end();
        }
    }
    e.end();
    e.end();
    if (std::string& last = described_[t.uuid]; last != packet) {
        out += packet;
        last = std::move(packet);
    }
}

std::string PftraceWriter::pending_descriptors(bool all) {
    if (all) described_.clear();
    std::string out;
    for (const auto& [pid, uuid] : process_uuids_) {
        const ProcessInfo* p = model_.find(pid);
        std::string packet;
        proto::Encoder e(packet);
        e.begin(kTracePacket);
        e.varint(kSequenceId, kMetadataSequence);
        e.begin(kTrackDescriptor);
        e.varint(TD::kUuid, uuid);
        e.begin(TD::kProcess);
        e.varint(PD::kPid, pid);
        if (p) {
            if (!p->cmdline.empty()) e.bytes(PD::kCmdline, p->cmdline);
            e.bytes(PD::kProcessName, p->label());
            e.varint(PD::kLegacySortIndex, p->ranks.rank ? static_cast<uint64_t>(p->sort_index()) : (uint64_t{1} << 30) + pid);
            e.bytes(PD::kProcessLabels, fmt::format("ppid={}", p->ppid));
            if (p->ranks.rank) e.bytes(PD::kProcessLabels, fmt::format("rank={}", *p->ranks.rank));
            if (p->ranks.local_rank) e.bytes(PD::kProcessLabels, fmt::format("local_rank={}", *p->ranks.local_rank));
            if (p->ranks.world_size) e.bytes(PD::kProcessLabels, fmt::format("world_size={}", *p->ranks.world_size));
            if (p->forked_from) e.bytes(PD::kProcessLabels, fmt::format("forked_from={}", *p->forked_from));
        }
        e.end();
        e.end();
        e.end();
        if (std::string& last = described_[uuid]; last != packet) {
            out += packet;
            last = std::move(packet);
        }
    }
    for (const auto& [key, t] : tracks_) {
        auto [kind, pid, id, stream] = key;
        describe(out, t, pid, id, kind == Kind::Thread);
    }
    return out;
}

proto::Encoder& PftraceWriter::begin_event(Track& t, uint64_t ts, uint32_t type) {
    if (!described_.contains(t.uuid)) buf_ += pending_descriptors(false);
    if (!t.started) {
        // The sequence's first packet: its incremental state starts here; its events go on its
        // track, timed by a clock that counts from `ts` in deltas.
        enc_.begin(kTracePacket);
        enc_.varint(kTimestamp, ts);
        enc_.varint(kTimestampClockId, kClockMonotonic);
        enc_.varint(kSequenceId, t.sequence);
        enc_.varint(kSequenceFlags, kSeqIncrementalStateCleared);
        enc_.boolean(kFirstOnSequence, true);
        enc_.begin(kPacketDefaults);
        enc_.varint(kTimestampClockId, kClockIncremental);
        enc_.begin(pftrace::TracePacketDefaults::kTrackEventDefaults);
        enc_.varint(pftrace::TrackEventDefaults::kTrackUuid, t.uuid);
        enc_.end();
        enc_.end();
        enc_.begin(kClockSnapshot);
        clock(enc_, kClockMonotonic, ts);
        for (uint32_t i = 0; i < kIncrementalClocks; ++i) clock(enc_, kClockIncremental + i, ts, true);
        enc_.end();
        enc_.end();
        t.started = true;
        t.clock_ts.fill(ts);
    }
    enc_.begin(kTracePacket);
    uint32_t nearest = kIncrementalClocks; // the clock with the latest value not after ts
    for (uint32_t i = 0; i < kIncrementalClocks; ++i)
        if (t.clock_ts[i] <= ts && (nearest == kIncrementalClocks || t.clock_ts[i] > t.clock_ts[nearest])) nearest = i;
    if (nearest < kIncrementalClocks) {
        enc_.varint(kTimestamp, ts - t.clock_ts[nearest]);
        if (nearest != 0) enc_.varint(kTimestampClockId, kClockIncremental + nearest);
        t.clock_ts[nearest] = ts;
    } else { // before every clock's value: absolute
        enc_.varint(kTimestamp, ts);
        enc_.varint(kTimestampClockId, kClockMonotonic);
    }
    enc_.varint(kSequenceId, t.sequence);
    enc_.varint(kSequenceFlags, kSeqNeedsIncrementalState);
    enc_.begin(kTrackEvent);
    enc_.varint(kType, type);
    // After a failed write nothing more reaches the file.
    if (!sink_.failed()) cut_ends_.event(t.uuid, ts, type == kSliceBegin, type == kSliceEnd);
    return enc_;
}

void PftraceWriter::end_event(Track& t) {
    enc_.end(); // TrackEvent
    std::string& interned = t.interning.pending();
    if (!interned.empty()) {
        enc_.message(kInternedData, interned);
        interned.clear();
    }
    enc_.end(); // TracePacket
}

void PftraceWriter::commit_with_metadata() {
    if (buf_.empty()) return;
    sink_.append(buf_);
    cut_ends_.committed(sink_, sink_.commit());
    buf_.clear();
}

void PftraceWriter::annotation_string(Track& t, std::string_view name, std::string_view value) {
    uint64_t n = t.interning.annotation_name(name), v = t.interning.string_value(value);
    enc_.begin(kDebugAnnotations);
    enc_.varint(DA::kNameIid, n);
    enc_.varint(DA::kStringValueIid, v);
    enc_.end();
}

void PftraceWriter::annotation_uint(Track& t, std::string_view name, uint64_t value) {
    uint64_t n = t.interning.annotation_name(name);
    enc_.begin(kDebugAnnotations);
    enc_.varint(DA::kNameIid, n);
    enc_.varint(DA::kUintValue, value);
    enc_.end();
}

void PftraceWriter::annotation_double(Track& t, std::string_view name, double value) {
    uint64_t n = t.interning.annotation_name(name);
    enc_.begin(kDebugAnnotations);
    enc_.varint(DA::kNameIid, n);
    enc_.float64(DA::kDoubleValue, value);
    enc_.end();
}

// One argument (output/event_args.h) as a debug annotation: texts interned, pointers as pointer
// values, dims as one "[x,y,z]" text, a Time as NAME_ns.
void PftraceWriter::annotation(Track& t, const EventArg& a) {
    switch (a.type) {
    case ArgType::Text: return annotation_string(t, a.name, a.text);
    case ArgType::Uint: return annotation_uint(t, a.name, a.unsigned_value());
    case ArgType::Double: return annotation_double(t, a.name, a.real);
    case ArgType::Dims: return annotation_string(t, a.name, fmt::format("[{},{},{}]", a.dims[0], a.dims[1], a.dims[2]));
    case ArgType::Time: return annotation_uint(t, fmt::format("{}_ns", a.name), a.unsigned_value());
    case ArgType::Stack: return; // the event's callstack (stack_fields)
    case ArgType::Int:
    case ArgType::Pointer:
    case ArgType::Flag: {
        uint64_t n = t.interning.annotation_name(a.name);
        enc_.begin(kDebugAnnotations);
        enc_.varint(DA::kNameIid, n);
        if (a.type == ArgType::Int) enc_.int64(DA::kIntValue, a.number);
        else if (a.type == ArgType::Pointer) enc_.varint(DA::kPointerValue, a.unsigned_value());
        else enc_.varint(DA::kBoolValue, 1);
        enc_.end();
        return;
    }
    }
}

// The callstack, and the user's line as a source location where it is not the callstack's
// innermost frame (under torch's or ctypes' frames); where it is, readers take that frame's
// (docs/trace-formats.md): 3 bytes a call (issue 28.3's budget) for a repeat of the stack's top.
void PftraceWriter::stack_fields(proto::Encoder& e, Track& t, const PyStackRef& stack) {
    e.varint(kCallstackIid, t.interning.callstack(stack));
    if (stack->source_index > 0) e.varint(kSourceLocationIid, t.interning.source_location(*stack->source_frame()));
}

void PftraceWriter::call(const ApiCall& c) {
    Track& t = track(Kind::Thread, c.pid, c.tid);
    auto& e = begin_event(t, c.start_ns, kSliceBegin);
    // Which calls the agent recorded: in the category (an annotation per call cost 6 bytes).
    e.varint(kCategoryIids, t.interning.category(c.by_agent ? "cuda_api,agent" : "cuda_api"));
    e.varint(kNameIid, t.interning.event_name(api_name(c.api)));
    // A flow only where GPU work follows: a synchronization, allocation or failed call makes none.
    const bool flow = c.correlation && c.ret == 0 && api_issues_gpu_work(c.api);
    if (flow) e.fixed64(kFlowIds, flows_.call_written(c.pid, c.tid, c.start_ns, c.end_ns, c.correlation));
    // The arguments every writer shares (output/event_args.h), encoded for bytes: the correlation in
    // the flow where there is one, ret only when not 0, the launch's grid, block and shared memory
    // as one interned text, pointers as pointer values, the stack as an interned callstack.
    std::array<int64_t, 3> grid{}, block{};
    for_each_call_arg(c, [&](const EventArg& a) {
        if (a.name == "recorded_by") return; // in the category
        if (a.name == "correlation" && (flow || c.ret != 0)) return; // the flow's; a failed call launched nothing to join
        if (a.name == "ret" && a.number == 0) return;
        if (a.name == "grid") {
            grid = a.dims;
            return;
        }
        if (a.name == "block") {
            block = a.dims;
            return;
        }
        if (a.name == "shared_mem")
            return annotation_string(t, "launch", fmt::format("grid [{},{},{}] block [{},{},{}] shared_mem {}", grid[0], grid[1], grid[2],
                                                              block[0], block[1], block[2], a.unsigned_value()));
        if (a.type == ArgType::Stack) return stack_fields(e, t, c.stack);
        annotation(t, a);
    });
    end_event(t);
    begin_event(t, std::max(c.end_ns, c.start_ns), kSliceEnd);
    end_event(t);
    end_flows(flows_.take_given_up());
    commit_with_metadata();
}

void PftraceWriter::end_flows(const std::vector<PftraceFlows::Dangling>& flows) {
    for (const auto& d : flows) {
        Track& t = track(Kind::Thread, d.pid, d.tid);
        auto& e = begin_event(t, d.start_ns + (d.end_ns - d.start_ns) / 2, kInstant);
        e.varint(kCategoryIids, t.interning.category("ac2g"));
        e.varint(kNameIid, t.interning.event_name("GPU work not recorded"));
        e.fixed64(kTerminatingFlowIds, d.id);
        end_event(t);
    }
}

void PftraceWriter::torch_range(const TorchRange& r) {
    // Off-CPU time on a track of its own under the thread: its clock (BPF's) and the agent's
    // calls' need not agree to the nanosecond, and slices on one track must nest exactly.
    Track& t = track(r.off_cpu ? Kind::OffCpu : Kind::Thread, r.pid, r.tid);
    auto& e = begin_event(t, r.start_ns, kSliceBegin);
    e.varint(kCategoryIids, t.interning.category(range_category(r)));
    e.varint(kNameIid, t.interning.event_name(r.name));
    if (r.stack) stack_fields(e, t, r.stack);
    if (r.nvtx) for_each_nvtx_arg(*r.nvtx, r.tid, [&](const EventArg& a) { annotation(t, a); });
    end_event(t);
    begin_event(t, std::max(r.end_ns, r.start_ns), kSliceEnd);
    end_event(t);
    commit_with_metadata();
}

void PftraceWriter::collective(const Collective& c) {
    Track& t = track(Kind::Thread, c.pid, c.tid);
    auto& e = begin_event(t, c.start_ns, kSliceBegin);
    e.varint(kCategoryIids, t.interning.category("collective"));
    e.varint(kNameIid, t.interning.event_name(c.name));
    for_each_collective_arg(c, [&](const EventArg& a) { annotation(t, a); });
    end_event(t);
    begin_event(t, c.end_ns, kSliceEnd);
    end_event(t);
    commit_with_metadata();
}

void PftraceWriter::gpu_op(const GpuOp& op) {
    if (op.kind == GpuOpKind::Sync) return; // the synchronizing call's slice shows the wait
    Track& t = track(Kind::Gpu, op.pid, op.device, op.stream);
    auto& e = begin_event(t, op.start_ns, kSliceBegin);
    e.varint(kCategoryIids, t.interning.category(gpu_op_category(op.kind)));
    e.varint(kNameIid, t.interning.event_name(op.name));
    // The vocabulary's arguments (output/event_args.h), the device and stream in the track, the
    // correlation in the flow where the op has one, the launch's shape as one interned text.
    const bool flow = pending_flow_ && op.correlation && pending_flow_->first == PftraceFlows::op_key(op);
    if (flow) e.fixed64(kTerminatingFlowIds, pending_flow_->second);
    else if (op.correlation) flows_.op_written_unlinked(op);
    pending_flow_.reset();
    for_each_gpu_op_arg(op, [&](const EventArg& a) {
        if (a.name == "device" || a.name == "context" || a.name == "stream" || (a.name == "correlation" && flow)) return;
        if (a.name == "grid") return annotation_string(t, "launch", launch_texts_.text(op));
        if (a.name == "block" || a.name.starts_with("registers") || a.name.starts_with("shared_memory") || a.name == "graph") return;
        annotation(t, a);
    });
    end_event(t);
    begin_event(t, std::max(op.end_ns, op.start_ns), kSliceEnd);
    end_event(t);
    commit_with_metadata();
}

void PftraceWriter::flow(const CallRef& call, const GpuOp& op) {
    PftraceFlows::Join flow = flows_.join(call, op);
    if (flow.needs_start) {
        // The call's slice went out without this flow (its id came later from CUPTI's API
        // record, or another op of it took the slice's flow): it starts at an instant inside.
        Track& t = track(Kind::Thread, call.pid, call.tid);
        auto& e = begin_event(t, call.start_ns + (call.end_ns - call.start_ns) / 2, kInstant);
        e.varint(kCategoryIids, t.interning.category("ac2g"));
        e.varint(kNameIid, t.interning.event_name(api_name(call.api)));
        e.fixed64(kFlowIds, flow.id);
        end_event(t);
    }
    if (flows_.take_written_unlinked(op)) {
        // The GPU op's slice is written already: the flow ends at an instant at its start.
        Track& t = track(Kind::Gpu, op.pid, op.device, op.stream);
        auto& e = begin_event(t, op.start_ns, kInstant);
        e.varint(kCategoryIids, t.interning.category("ac2g"));
        e.varint(kNameIid, t.interning.event_name(api_name(call.api)));
        e.fixed64(kTerminatingFlowIds, flow.id);
        end_event(t);
    } else {
        pending_flow_.emplace(PftraceFlows::op_key(op), flow.id);
    }
    commit_with_metadata();
}

void PftraceWriter::memory(const MemorySample& m) {
    // One counter track per process, device and counter.
    Track& t = track(Kind::Memory, m.pid, m.device < 0 ? 0 : static_cast<uint32_t>(m.device) + 1, static_cast<uint32_t>(m.counter));
    if (t.name.empty()) t.name = memory_counter_name(m), t.bytes_counter = true;
    auto& e = begin_event(t, m.ts_ns, kCounter);
    e.int64(kCounterValue, static_cast<int64_t>(m.allocated_bytes));
    if (m.at_attach && m.counter == MemoryCounter::Allocated) annotation_uint(t, "at_attach", 1); // the curve's start
    end_event(t);
    commit_with_metadata();
}

void PftraceWriter::sample_frame_begin(const SampleFrame& f, uint64_t ts_ns) {
    Track& t = track(Kind::Samples, f.pid, f.tid);
    if (t.name.empty()) {
        t.name = fmt::format("{} (samples)", f.thread);
        Track& thread = track(Kind::Thread, f.pid, f.tid);
        if (thread.name.empty()) thread.name = f.thread;
    }
    auto& e = begin_event(t, ts_ns, kSliceBegin);
    e.varint(kCategoryIids, t.interning.category("sample"));
    e.varint(kNameIid, t.interning.event_name(f.frame.text()));
    end_event(t);
    commit_with_metadata();
}

void PftraceWriter::sample_frame_end(uint32_t pid, uint32_t tid, size_t, uint64_t ts_ns) {
    Track& t = track(Kind::Samples, pid, tid);
    begin_event(t, ts_ns, kSliceEnd);
    end_event(t);
    commit_with_metadata();
}

void PftraceWriter::forget_process(uint32_t pid) {
    end_flows(flows_.take_process(pid)); // its GPU work would have come by now
    commit_with_metadata();
    // Its tracks' descriptors are in the file already; each track's sequence (and its interned
    // names and stacks) is dropped, and no longer described again at every metadata pass.
    for (auto it = tracks_.begin(); it != tracks_.end();) {
        if (std::get<1>(it->first) != pid) {
            ++it;
            continue;
        }
        described_.erase(it->second.uuid);
        it = tracks_.erase(it);
    }
    if (auto p = process_uuids_.find(pid); p != process_uuids_.end()) {
        described_.erase(p->second);
        process_uuids_.erase(p);
    }
}

void PftraceWriter::metadata(const TraceModel&) {
    if (write_failed()) return;
    buf_ += pending_descriptors(false);
    if (uint64_t now = monotonic_now_ns(); now - last_clocks_ns_ >= kClockSnapshotEveryNs) {
        ClockReading c = read_clocks();
        buf_ += pftrace_clock_packet(c);
        last_clocks_ns_ = c.monotonic_ns;
    }
    commit_with_metadata();
}

Result<std::optional<TraceCut>> PftraceWriter::finish(const TraceModel&, const nlohmann::json& facts) {
    end_flows(flows_.take_all());
    commit_with_metadata();
    const uint64_t units = sink_.units();
    auto closing = [&](const SinkCut* sink_cut) {
        // After a cut, descriptors written into the stream may be gone with the packets cut off,
        // and the slices open at the cut (sampled frames) end at its last event.
        std::string tail = pending_descriptors(sink_cut != nullptr);
        if (sink_cut) tail += pftrace_slice_ends(cut_ends_.at(sink_, sink_cut->units_kept));
        tail += pftrace_clock_packet(read_clocks());
        nlohmann::json other = facts;
        if (sink_cut)
            other["cut"] = {{"error", sink_cut->error}, {"events_kept", sink_cut->units_kept}, {"events_dropped", units - sink_cut->units_kept}};
        return tail + pftrace_facts_packet(other);
    };
    auto cut = sink_.finish(closing);
    if (!cut) return cut.error();
    if (!*cut) return std::optional<TraceCut>();
    return std::optional<TraceCut>(TraceCut{(*cut)->error, (*cut)->units_kept, units - (*cut)->units_kept});
}

} // namespace gtrace
