#include "output/pftrace_merge.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/pftrace_scan.h"
#include "format/pftrace_clocks.h"
#include "format/proto_wire.h"
#include "format/trace_file.h"
#include "foundation/output_file.h"
#include "format/pftrace_fields.h"
#include "output/pftrace_packets.h"

namespace gtrace {
namespace {

using namespace pftrace_out;
using proto::WireReader;
using TD = pftrace::TrackDescriptor;
using CL = pftrace::ClockSnapshot::Clock;

constexpr uint32_t kPidSpan = 1u << 22; // above PID_MAX_LIMIT: a raised PID is no real one

// The field as it was: tag and value bytes.
void copy_field(std::string& out, uint32_t field, uint32_t type, WireReader& r) {
    const char* from = r.position();
    r.skip(type);
    if (r.failed()) return;
    proto::append_varint(out, (uint64_t{field} << 3) | type);
    out.append(from, static_cast<size_t>(r.position() - from));
}

uint64_t shifted(uint64_t t, int64_t offset) {
    int64_t v = static_cast<int64_t>(t) + offset;
    return v < 0 ? 0 : static_cast<uint64_t>(v);
}

// The whole packets of a gtrace .pftrace (a partial one's up to its last whole packet).
Result<std::string_view> whole_packets(const TraceFile& f, const std::string& path) {
    std::string_view bytes(f.begin(), f.size());
    auto end = looks_like_pftrace(bytes) ? find_pftrace_end(bytes) : std::nullopt;
    if (!end)
        return make_error(ExitCode::BadTrace, fmt::format("{} is not a .pftrace gtrace wrote; gtrace merge joins Perfetto traces: "
                                                          "capture each node with -o NAME.pftrace", path));
    return bytes.substr(0, end->cut);
}

// Calls `on_packet` with each TracePacket's bytes; false: malformed.
template <typename F>
bool for_each_packet(std::string_view trace, F&& on_packet) {
    WireReader r(trace);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (field != kTracePacket || type != 2) {
            r.skip(type);
            continue;
        }
        if (!on_packet(r.bytes())) return false;
    }
    return !r.failed();
}

// The PIDs and TIDs a trace's track descriptors name.
bool collect_pids(std::string_view trace, std::set<uint32_t>& pids) {
    return for_each_packet(trace, [&](std::string_view packet) {
        WireReader p(packet);
        uint32_t field, type;
        while (p.next(field, type)) {
            if (field != kTrackDescriptor || type != 2) {
                p.skip(type);
                continue;
            }
            WireReader d(p.bytes());
            while (d.next(field, type)) {
                if ((field != TD::kProcess && field != TD::kThread) || type != 2) {
                    d.skip(type);
                    continue;
                }
                WireReader ids(d.bytes());
                uint32_t f, t;
                while (ids.next(f, t))
                    if (f == pftrace::ProcessDescriptor::kPid || (f == pftrace::ThreadDescriptor::kTid && field == TD::kThread)) pids.insert(static_cast<uint32_t>(ids.varint_of(t)));
                    else ids.skip(t);
                if (ids.failed()) return false;
            }
            if (d.failed()) return false;
        }
        return !p.failed();
    });
}

// One input's packets, rewritten.
class Rewriter {
public:
    Rewriter(const MergeInput& in, uint32_t index, uint32_t pid_shift) : in_(in), k_(index), pid_shift_(pid_shift) {}

    std::string facts; // the first input's capture facts (other_data), held back for the merged ones

    bool packet(std::string_view bytes, std::string& out) {
        // First the packet's sequence state: its flags, defaults and interned names apply to itself.
        WireReader r(bytes);
        uint32_t field, type, sequence = 0, flags = 0;
        std::optional<uint32_t> clock;
        std::string_view defaults, interned;
        while (r.next(field, type)) {
            if (field == kSequenceId) sequence = static_cast<uint32_t>(r.varint_of(type));
            else if (field == kSequenceFlags) flags = static_cast<uint32_t>(r.varint_of(type));
            else if (field == kTimestampClockId) clock = static_cast<uint32_t>(r.varint_of(type));
            else if (field == kPacketDefaults) defaults = r.bytes_of(type);
            else if (field == kInternedData) interned = r.bytes_of(type);
            else if (field == kTraceAttributes && type == 2) return attributes(r.bytes(), bytes, out);
            else if (field == kClockSnapshot && type == 2 && k_ > 0) {
                if (!sequence_scoped(r.bytes())) return true; // the first input's clocks only
            } else r.skip(type);
        }
        if (r.failed()) return false;
        Sequence& s = sequences_[sequence];
        if (flags & kSeqIncrementalStateCleared) s = Sequence();
        if (!defaults.empty() && !read_defaults(defaults, s)) return false;
        if (!interned.empty() && !read_interned(interned, s)) return false;
        const bool incremental = clock.value_or(s.clock) >= 64; // sequence-scoped: deltas, unshifted

        std::string body;
        WireReader w(bytes);
        while (w.next(field, type)) {
            if (field == kTimestamp && type == 0) {
                uint64_t ts = w.varint();
                proto::Encoder(body).varint(kTimestamp, incremental ? ts : shifted(ts, in_.offset_ns));
            } else if (field == kSequenceId && type == 0) {
                proto::Encoder(body).varint(kSequenceId, sequence_id(static_cast<uint32_t>(w.varint())));
            } else if (field == kClockSnapshot && type == 2) {
                proto::Encoder(body).message(kClockSnapshot, clock_snapshot(w.bytes()));
            } else if (field == kTrackDescriptor && type == 2) {
                proto::Encoder(body).message(kTrackDescriptor, descriptor(w.bytes()));
            } else if (field == kTrackEvent && type == 2) {
                proto::Encoder(body).message(kTrackEvent, event(w.bytes(), s));
            } else if (field == kPacketDefaults && type == 2) {
                proto::Encoder(body).message(kPacketDefaults, packet_defaults(w.bytes()));
            } else {
                copy_field(body, field, type, w);
            }
        }
        if (w.failed() || failed_) return false;
        proto::Encoder(out).message(kTracePacket, body);
        return true;
    }

private:
    struct Sequence {
        uint32_t clock = 0;
        std::unordered_set<uint64_t> issued_ns; // interned annotation names "issued_ns": times, moved too
    };

    uint64_t uuid(uint64_t u) const { return u && k_ ? u ^ (uint64_t{k_} << 48) : u; }
    uint64_t flow(uint64_t id) const { return k_ ? id ^ (uint64_t{k_} << 56) : id; }
    uint32_t sequence_id(uint32_t id) const { return id && k_ ? (k_ << 24) | (id & 0xFFFFFF) : id; }

    // A snapshot with a sequence-scoped clock (id 64 or more) belongs to its sequence.
    static bool sequence_scoped(std::string_view snapshot) {
        bool scoped = false;
        pftrace_in::for_each_clock(snapshot, [&](uint32_t id, uint64_t) { scoped |= id >= 64; });
        return scoped;
    }

    static bool read_defaults(std::string_view bytes, Sequence& s) {
        WireReader r(bytes);
        uint32_t field, type;
        while (r.next(field, type))
            if (field == kTimestampClockId) s.clock = static_cast<uint32_t>(r.varint_of(type));
            else r.skip(type);
        return !r.failed();
    }

    static bool read_interned(std::string_view bytes, Sequence& s) {
        WireReader r(bytes);
        uint32_t field, type;
        while (r.next(field, type)) {
            if (field != pftrace::InternedData::kDebugAnnotationNames || type != 2) {
                r.skip(type);
                continue;
            }
            WireReader e(r.bytes());
            uint64_t iid = 0;
            std::string_view name;
            while (e.next(field, type))
                if (field == pftrace::DebugAnnotationName::kIid) iid = e.varint_of(type);
                else if (field == pftrace::DebugAnnotationName::kName) name = e.bytes_of(type);
                else e.skip(type);
            if (e.failed()) return false;
            if (name == "issued_ns") s.issued_ns.insert(iid);
            else s.issued_ns.erase(iid);
        }
        return !r.failed();
    }

    // CLOCK_MONOTONIC moves; a sequence's own incremental clock keeps its values; the other
    // builtin clocks are the first input's alone (a later input's snapshot of them is dropped).
    std::string clock_snapshot(std::string_view bytes) {
        std::string out;
        WireReader r(bytes);
        uint32_t field, type;
        while (r.next(field, type)) {
            if (field != pftrace::ClockSnapshot::kClocks || type != 2) {
                copy_field(out, field, type, r);
                continue;
            }
            WireReader c(r.bytes());
            std::string clock;
            uint32_t id = 0;
            while (c.next(field, type)) {
                if (field == CL::kClockId && type == 0) proto::Encoder(clock).varint(CL::kClockId, id = static_cast<uint32_t>(c.varint()));
                else if (field == CL::kTimestamp && type == 0) {
                    uint64_t ts = c.varint();
                    proto::Encoder(clock).varint(CL::kTimestamp, id == kClockMonotonic ? shifted(ts, in_.offset_ns) : ts);
                } else copy_field(clock, field, type, c);
            }
            if (c.failed()) failed_ = true;
            if (k_ == 0 || id >= kClockIncremental || id == kClockMonotonic) proto::Encoder(out).message(pftrace::ClockSnapshot::kClocks, clock);
        }
        failed_ |= r.failed();
        return out;
    }

    std::string descriptor(std::string_view bytes) {
        std::string out;
        WireReader r(bytes);
        uint32_t field, type;
        while (r.next(field, type)) {
            if ((field == TD::kUuid || field == TD::kParentUuid) && type == 0) proto::Encoder(out).varint(field, uuid(r.varint()));
            else if ((field == TD::kProcess || field == TD::kThread) && type == 2) proto::Encoder(out).message(field, process_or_thread(r.bytes(), field == TD::kProcess));
            else copy_field(out, field, type, r);
        }
        failed_ |= r.failed();
        return out;
    }

    std::string process_or_thread(std::string_view bytes, bool process) {
        std::string out;
        WireReader r(bytes);
        uint32_t field, type;
        bool named = false;
        while (r.next(field, type)) {
            if ((field == pftrace::ProcessDescriptor::kPid || (field == pftrace::ThreadDescriptor::kTid && !process)) && type == 0) {
                proto::Encoder(out).varint(field, r.varint() + pid_shift_);
            } else if (process && field == pftrace::ProcessDescriptor::kProcessName && type == 2) {
                proto::Encoder(out).bytes(pftrace::ProcessDescriptor::kProcessName, fmt::format("[{}] {}", in_.node, r.bytes()));
                named = true;
            } else {
                copy_field(out, field, type, r);
            }
        }
        if (process) {
            if (!named) proto::Encoder(out).bytes(pftrace::ProcessDescriptor::kProcessName, fmt::format("[{}]", in_.node));
            proto::Encoder(out).bytes(pftrace::ProcessDescriptor::kProcessLabels, "host=" + in_.node);
        }
        failed_ |= r.failed();
        return out;
    }

    std::string event(std::string_view bytes, const Sequence& s) {
        std::string out;
        WireReader r(bytes);
        uint32_t field, type;
        while (r.next(field, type)) {
            if (field == kTrackUuid && type == 0) proto::Encoder(out).varint(kTrackUuid, uuid(r.varint()));
            else if ((field == kFlowIds || field == kTerminatingFlowIds) && type == 1) proto::Encoder(out).fixed64(field, flow(r.fixed64()));
            else if ((field == kFlowIds || field == kTerminatingFlowIds) && type == 0) proto::Encoder(out).varint(field, flow(r.varint()));
            else if (field == kDebugAnnotations && type == 2 && !s.issued_ns.empty()) proto::Encoder(out).message(field, annotation(r.bytes(), s));
            else copy_field(out, field, type, r);
        }
        failed_ |= r.failed();
        return out;
    }

    std::string annotation(std::string_view bytes, const Sequence& s) {
        uint64_t name = 0;
        WireReader peek(bytes);
        uint32_t field, type;
        while (peek.next(field, type))
            if (field == pftrace::DebugAnnotation::kNameIid) name = peek.varint_of(type);
            else peek.skip(type);
        if (!s.issued_ns.contains(name)) return std::string(bytes);
        std::string out;
        WireReader r(bytes);
        while (r.next(field, type))
            if (field == pftrace::DebugAnnotation::kUintValue && type == 0) proto::Encoder(out).varint(pftrace::DebugAnnotation::kUintValue, shifted(r.varint(), in_.offset_ns));
            else copy_field(out, field, type, r);
        failed_ |= r.failed();
        return out;
    }

    std::string packet_defaults(std::string_view bytes) {
        std::string out;
        WireReader r(bytes);
        uint32_t field, type;
        while (r.next(field, type)) {
            if (field != pftrace::TracePacketDefaults::kTrackEventDefaults || type != 2) {
                copy_field(out, field, type, r);
                continue;
            }
            std::string defaults;
            WireReader d(r.bytes());
            while (d.next(field, type))
                if (field == kTrackUuid && type == 0) proto::Encoder(defaults).varint(kTrackUuid, uuid(d.varint()));
                else copy_field(defaults, field, type, d);
            failed_ |= d.failed();
            proto::Encoder(out).message(pftrace::TracePacketDefaults::kTrackEventDefaults, defaults);
        }
        failed_ |= r.failed();
        return out;
    }

    // The first input's attributes stay (tool, host), but its facts, which end the merged trace;
    // the others' are dropped.
    bool attributes(std::string_view attrs, std::string_view packet, std::string& out) {
        if (k_ > 0) return true;
        bool is_facts = false;
        for_each_pftrace_attribute(attrs, [&](std::string_view key, std::string_view value) {
            if (key != kPftraceFactsKey) return true;
            facts = value;
            is_facts = true;
            return false; // the facts packet is held back, not copied
        });
        if (!is_facts) proto::Encoder(out).message(kTracePacket, packet);
        return true;
    }

    const MergeInput& in_;
    uint32_t k_;
    uint32_t pid_shift_;
    std::unordered_map<uint32_t, Sequence> sequences_;
    bool failed_ = false;
};

} // namespace

Result<MergeSummary> merge_pftraces(const std::vector<MergeInput>& inputs, const std::string& output, bool force,
                                    const std::string& merged_facts_json) {
    if (inputs.size() > kMaxMergeInputs)
        return make_error(ExitCode::Usage, fmt::format("{} traces: gtrace merge joins at most {}", inputs.size(), kMaxMergeInputs));
    std::vector<TraceFile> files;
    std::vector<std::string_view> traces;
    files.reserve(inputs.size()); // the views stay on the files' bytes
    for (const auto& in : inputs) {
        auto f = TraceFile::open(in.path);
        if (!f) return f.error();
        files.push_back(std::move(*f));
        auto packets = whole_packets(files.back(), in.path);
        if (!packets) return packets.error();
        traces.push_back(*packets);
    }
    MergeSummary summary;
    std::set<uint32_t> taken;
    for (size_t k = 0; k < traces.size(); ++k) {
        std::set<uint32_t> pids;
        if (!collect_pids(traces[k], pids))
            return make_error(ExitCode::BadTrace, fmt::format("{} has malformed packets; re-capture it", inputs[k].path));
        bool collides = std::any_of(pids.begin(), pids.end(), [&](uint32_t p) { return taken.contains(p); });
        uint32_t shift = collides ? static_cast<uint32_t>(k) * kPidSpan : 0;
        for (uint32_t p : pids) taken.insert(p + shift);
        summary.pid_shift.push_back(shift);
    }
    std::string out;
    nlohmann::json facts;
    for (size_t k = 0; k < traces.size(); ++k) {
        Rewriter rw(inputs[k], static_cast<uint32_t>(k), summary.pid_shift[k]);
        bool ok = for_each_packet(traces[k], [&](std::string_view packet) {
            ++summary.packets;
            return rw.packet(packet, out);
        });
        if (!ok) return make_error(ExitCode::BadTrace, fmt::format("{} has malformed packets; re-capture it", inputs[k].path));
        if (k == 0) facts = nlohmann::json::parse(rw.facts, nullptr, false);
    }
    if (!facts.is_object()) facts = {{"tool", "gtrace"}};
    facts["merged"] = nlohmann::json::parse(merged_facts_json, nullptr, false);
    out += pftrace_facts_packet(facts);
    if (auto written = write_output(output, out, force); !written) return written.error();
    return summary;
}

} // namespace gtrace
