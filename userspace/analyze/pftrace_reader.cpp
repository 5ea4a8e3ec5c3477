#include "analyze/pftrace_reader.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/pftrace_sequence.h"
#include "format/proto_wire.h"
#include "pftrace_field_numbers.h"
#include "format/trace_file.h"

namespace gtrace {
namespace {

using proto::WireReader;
using TP = pftrace::TracePacket;
using TE = pftrace::TrackEvent;
using TD = pftrace::TrackDescriptor;
using pftrace_in::Ann;
using pftrace_in::Cat;
using pftrace_in::Sequence;
using pftrace_in::get;
using pftrace_in::kClockMonotonic;

constexpr uint32_t kSliceBegin = TE::TYPE_SLICE_BEGIN, kSliceEnd = TE::TYPE_SLICE_END, kCounter = TE::TYPE_COUNTER;
enum class TrackKind : uint8_t { Unknown, Process, Thread, Samples, Gpu, Counter };

struct Open {
    uint64_t start = 0;
    Cat cat = Cat::Other;
    std::string_view name, source, kind, phase;
    uint64_t bytes = 0, issued_ns = 0, comm = 0, nranks = 0, group_depth = 0, result = 0;
    uint32_t correlation = 0;
    bool at_attach = false;
};

struct Track {
    TrackKind kind = TrackKind::Unknown;
    uint32_t pid = 0, tid = 0, device = 0;
    std::vector<Open> open;
};

class PftraceReader {
public:
    PftraceReader(TraceData& t) : t_(t) {}

    // `file`, when the bytes are its mapping: pages read are dropped as the reading goes.
    bool read(std::string_view bytes, const TraceFile* file) {
        WireReader trace(bytes);
        std::optional<TraceFile::Dropper> drop;
        if (file) drop.emplace(*file, bytes.data());
        uint32_t field, type;
        while (trace.next(field, type)) {
            if (field != pftrace::Trace::kPacket || type != 2) {
                trace.skip(type);
                continue;
            }
            if (!packet(trace.bytes())) return false;
            if (drop) drop->done_before(trace.position());
        }
        return !trace.failed();
    }

    std::string tool;
    std::string facts;

private:
    bool packet(std::string_view bytes) {
        pftrace_in::PacketFields p;
        if (!pftrace_in::read_packet_fields(bytes, p)) return false;
        Sequence& s = sequence(p.sequence);
        if (p.flags & TP::SEQ_INCREMENTAL_STATE_CLEARED) s.clear();
        if (!s.read_clocks_of(p)) return false;
        if (!p.clocks.empty() && !t_.realtime_offset_ns) t_.realtime_offset_ns = pftrace_in::realtime_offset(p.clocks);
        if (!p.interned.empty() && !s.read_interned(p.interned, t_.strings)) return false;
        if (!p.attributes.empty() && !attributes(p.attributes)) return false;
        if (!p.descriptor.empty() && !descriptor(p.descriptor)) return false;
        if (p.event.empty()) return true;
        auto time = s.event_time(p);
        if (!time) return true;
        uint64_t ts = *time;
        return event(s, p.event, ts);
    }

    Sequence& sequence(uint32_t id) {
        if (last_ && last_id_ == id) return *last_;
        last_id_ = id;
        return *(last_ = &sequences_[id]);
    }


    bool attributes(std::string_view bytes) {
        return for_each_pftrace_attribute(bytes, [&](std::string_view key, std::string_view value) {
            if (key == "tool") tool = value;
            if (key == "host" && t_.host.empty()) t_.host = value;
            if (key == "other_data") facts = value;
            return true;
        });
    }

    bool descriptor(std::string_view bytes) {
        WireReader r(bytes);
        uint32_t field, type;
        uint64_t uuid = 0, parent = 0;
        std::string_view name, process, thread;
        while (r.next(field, type)) {
            switch (field) {
            case TD::kUuid: uuid = r.varint_of(type); break;
            case TD::kParentUuid: parent = r.varint_of(type); break;
            case TD::kName: name = r.bytes_of(type); break;
            case TD::kProcess: process = r.bytes_of(type); break;
            case TD::kThread: thread = r.bytes_of(type); break;
            default: r.skip(type);
            }
        }
        if (r.failed()) return false;
        Track& tr = tracks_[uuid];
        if (!process.empty()) return process_descriptor(tr, process);
        if (!thread.empty()) {
            WireReader d(thread);
            while (d.next(field, type)) {
                if (field == pftrace::ThreadDescriptor::kPid) tr.pid = static_cast<uint32_t>(d.varint_of(type));
                else if (field == pftrace::ThreadDescriptor::kTid) tr.tid = static_cast<uint32_t>(d.varint_of(type));
                else d.skip(type);
            }
            tr.kind = TrackKind::Thread;
            return !d.failed();
        }
        auto up = tracks_.find(parent);
        if (up == tracks_.end()) return true; // a track gtrace does not write
        tr.pid = up->second.pid;
        if (up->second.kind == TrackKind::Thread) {
            tr.kind = TrackKind::Samples, tr.tid = up->second.tid;
        } else if (name.starts_with("GPU memory")) {
            tr.kind = TrackKind::Counter;
            if (size_t at = name.find("(device "); at != std::string_view::npos)
                std::from_chars(name.data() + at + 8, name.data() + name.size(), tr.device);
        } else {
            tr.kind = TrackKind::Gpu;
        }
        return true;
    }

    bool process_descriptor(Track& tr, std::string_view bytes) {
        WireReader d(bytes);
        uint32_t field, type;
        std::string_view label;
        std::optional<int> rank, world_size;
        bool forked = false;
        while (d.next(field, type)) {
            if (field == pftrace::ProcessDescriptor::kPid) tr.pid = static_cast<uint32_t>(d.varint_of(type));
            else if (field == pftrace::ProcessDescriptor::kProcessName) label = d.bytes_of(type);
            else if (field == pftrace::ProcessDescriptor::kProcessLabels) {
                std::string_view l = d.bytes_of(type);
                int v = 0;
                if (l.starts_with("rank=") && std::from_chars(l.data() + 5, l.data() + l.size(), v).ec == std::errc{}) rank = v;
                if (l.starts_with("world_size=") && std::from_chars(l.data() + 11, l.data() + l.size(), v).ec == std::errc{}) world_size = v;
                if (l.starts_with("forked_from=")) forked = true;
            } else d.skip(type);
        }
        if (d.failed()) return false;
        tr.kind = TrackKind::Process;
        ProcessData& p = process(tr.pid);
        if (!label.empty()) p.label = label;
        if (rank) p.rank = rank;
        if (world_size) p.world_size = world_size;
        p.forked = forked;
        return true;
    }

    bool event(Sequence& s, std::string_view bytes, uint64_t ts) {
        WireReader r(bytes);
        uint32_t field, type;
        uint32_t kind = 0;
        uint64_t track = s.track;
        Open o;
        o.start = ts;
        std::string_view stack_source;
        int64_t counter = 0;
        while (r.next(field, type)) {
            switch (field) {
            case TE::kType: kind = static_cast<uint32_t>(r.varint_of(type)); break;
            case TE::kTrackUuid: track = r.varint_of(type); break;
            case TE::kCategoryIids: o.cat = get(s.categories, r.varint_of(type)); break;
            case TE::kNameIid: o.name = get(s.names, r.varint_of(type)); break;
            case TE::kSourceLocationIid: o.source = get(s.sources, r.varint_of(type)); break;
            case TE::kCallstackIid: stack_source = get(s.stack_sources, r.varint_of(type)); break;
            case TE::kCounterValue: counter = static_cast<int64_t>(r.varint_of(type)); break;
            case TE::kFlowIds:
            case TE::kTerminatingFlowIds: o.correlation = static_cast<uint32_t>(r.fixed64_of(type)); break;
            case TE::kDebugAnnotations:
                if (type == 2) annotation(s, r.bytes(), o);
                else r.skip(type);
                break;
            default: r.skip(type);
            }
        }
        if (r.failed()) return false;
        if (o.source.empty()) o.source = stack_source; // the user's line is the stack's top (pftrace_writer's stack_fields)
        auto it = tracks_.find(track);
        if (it == tracks_.end()) return true;
        Track& tr = it->second;
        if (kind == kSliceBegin) {
            tr.open.push_back(o);
        } else if (kind == kSliceEnd && !tr.open.empty()) {
            span(tr, tr.open.back(), ts);
            tr.open.pop_back();
        } else if (kind == kCounter && tr.kind == TrackKind::Counter) {
            process(tr.pid).memory.push_back({ts, tr.device, static_cast<uint64_t>(counter), o.at_attach});
        }
        return true;
    }

    void annotation(Sequence& s, std::string_view bytes, Open& o) {
        WireReader a(bytes);
        uint32_t field, type;
        Ann name = Ann::Other;
        uint64_t value = 0;
        std::string_view text;
        while (a.next(field, type)) {
            if (field == pftrace::DebugAnnotation::kNameIid) name = get(s.annotations, a.varint_of(type));
            else if (field == pftrace::DebugAnnotation::kUintValue) value = a.varint_of(type);
            else if (field == pftrace::DebugAnnotation::kStringValueIid) text = get(s.strings, a.varint_of(type));
            else a.skip(type);
        }
        if (name == Ann::Bytes) o.bytes = value;
        else if (name == Ann::Kind) o.kind = text;
        else if (name == Ann::Correlation) o.correlation = static_cast<uint32_t>(value);
        else if (name == Ann::Phase) o.phase = text;
        else if (name == Ann::IssuedNs) o.issued_ns = value;
        else if (name == Ann::AtAttach) o.at_attach = value != 0;
        else if (name == Ann::Comm) o.comm = value;
        else if (name == Ann::NRanks) o.nranks = value;
        else if (name == Ann::GroupDepth) o.group_depth = value;
        else if (name == Ann::Result) o.result = value;
    }

    void span(const Track& tr, const Open& o, uint64_t end) {
        ProcessData& p = process(tr.pid);
        switch (o.cat) {
        case Cat::Call: {
            CallSpan c;
            c.start_ns = o.start, c.end_ns = end, c.name = o.name, c.tid = tr.tid;
            c.source = o.source, c.kind = o.kind, c.bytes = o.bytes, c.correlation = o.correlation;
            p.calls.push_back(c);
            break;
        }
        case Cat::Kernel:
        case Cat::Memcpy:
        case Cat::Memset: {
            GpuSpan g;
            g.start_ns = o.start, g.end_ns = end, g.name = o.name, g.bytes = o.bytes, g.copy_kind = o.kind;
            g.correlation = o.correlation;
            g.kind = o.cat == Cat::Kernel ? GpuKind::Kernel : o.cat == Cat::Memcpy ? GpuKind::Memcpy : GpuKind::Memset;
            p.gpu.push_back(g);
            break;
        }
        case Cat::Sample:
            if (tr.kind == TrackKind::Samples && tr.tid == tr.pid) {
                CallSpan s;
                s.start_ns = o.start, s.end_ns = end, s.name = o.name, s.tid = tr.pid;
                p.main_samples.push_back(s);
            }
            break;
        case Cat::Collective: {
            CollectiveSpan c;
            c.start_ns = o.start, c.end_ns = end, c.name = o.name, c.tid = tr.tid;
            c.wait = o.phase == "wait", c.issued_ns = o.issued_ns;
            if ((c.nccl = o.phase == "nccl")) {
                c.bytes = o.bytes, c.comm = o.comm, c.nranks = static_cast<uint32_t>(std::min<uint64_t>(o.nranks, UINT32_MAX));
                c.group_depth = static_cast<uint8_t>(std::min<uint64_t>(o.group_depth, 255));
                c.result = static_cast<uint32_t>(std::min<uint64_t>(o.result, UINT32_MAX));
            }
            p.collectives.push_back(c);
            break;
        }
        case Cat::Range: {
            RangeSpan rg;
            rg.start_ns = o.start, rg.end_ns = end, rg.name = o.name, rg.tid = tr.tid;
            p.ranges.push_back(rg);
            break;
        }
        case Cat::OffCpu: {
            RangeSpan rg;
            rg.start_ns = o.start, rg.end_ns = end, rg.name = o.name, rg.source = o.source, rg.tid = tr.tid;
            p.off_cpu.push_back(rg);
            break;
        }
        default: break;
        }
    }

    ProcessData& process(uint32_t pid) {
        if (!last_process_ || last_process_->pid != pid) {
            last_process_ = &t_.processes[pid];
            last_process_->pid = pid;
        }
        return *last_process_;
    }

    std::string_view pool(std::string_view s) { return t_.strings.intern(s); }

    TraceData& t_;
    std::unordered_map<uint32_t, Sequence> sequences_;
    Sequence* last_ = nullptr;
    uint32_t last_id_ = 0;
    std::unordered_map<uint64_t, Track> tracks_;
    ProcessData* last_process_ = nullptr;
};

Error not_valid(const std::string& path) {
    return make_error(ExitCode::BadTrace, fmt::format("{} is not a valid Perfetto trace (truncated or corrupted?); re-capture it", path));
}

} // namespace

Result<void> read_pftrace(const TraceFile& file, size_t length, const std::string& path, TraceData& t) {
    PftraceReader reader(t);
    if (!reader.read({file.begin(), std::min(length, file.size())}, &file)) return not_valid(path);
    if (reader.tool != "gtrace")
        return make_error(ExitCode::BadTrace, fmt::format("{} was not written by gtrace (no tool attribute); "
                                                          "gtrace report reads gtrace's own traces", path));
    if (!reader.facts.empty()) {
        auto facts = nlohmann::json::parse(reader.facts, nullptr, false);
        if (facts.is_object() && facts.contains("gpu") && facts["gpu"].is_object() && facts["gpu"].contains("enabled") &&
            facts["gpu"]["enabled"].is_boolean())
            t.has_gpu = facts["gpu"]["enabled"].get<bool>();
        if (facts.is_object() && facts.contains("cpu_pressure") && facts["cpu_pressure"].is_object() &&
            facts["cpu_pressure"].contains("some") && facts["cpu_pressure"]["some"].is_number()) {
            double some = facts["cpu_pressure"]["some"].get<double>();
            if (some >= 0 && some <= 1) t.cpu_pressure = some;
        }
    }
    return {};
}

} // namespace gtrace
