#include "format/pftrace_scan.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "format/pftrace_clocks.h"
#include "format/proto_wire.h"
#include "pftrace_field_numbers.h"

namespace gtrace {
namespace {

using proto::WireReader;
using TP = pftrace::TracePacket;
using TE = pftrace::TrackEvent;

constexpr uint32_t kSliceBegin = TE::TYPE_SLICE_BEGIN, kSliceEnd = TE::TYPE_SLICE_END;

// The header's first packet: TraceAttributes with tool = gtrace.
bool starts_like_gtrace(std::string_view first_packet) {
    WireReader r(first_packet);
    uint32_t field, type;
    bool gtrace = false;
    while (!gtrace && r.next(field, type)) {
        if (field != TP::kTraceAttributes || type != 2) {
            r.skip(type);
            continue;
        }
        for_each_pftrace_attribute(r.bytes(), [&](std::string_view key, std::string_view value) {
            gtrace = key == "tool" && value == "gtrace";
            return !gtrace;
        });
    }
    return gtrace;
}

bool holds_facts(std::string_view packet) {
    // gtrace's facts packet is TraceAttributes with the key "other_data"; a cheap look suffices
    // for telling a closed trace from one cut before its end.
    return packet.find("other_data") != std::string_view::npos && packet.size() > 12;
}

} // namespace

bool looks_like_pftrace(std::string_view bytes) { return !bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x0a; }

std::optional<PftraceEnd> find_pftrace_end(std::string_view bytes) {
    WireReader r(bytes);
    PftraceEnd end;
    std::string_view last;
    for (;;) {
        const char* at = r.position();
        uint32_t field, type;
        if (!r.next(field, type) || field != pftrace::Trace::kPacket || type != 2) break;
        std::string_view packet = r.bytes();
        if (r.failed()) break;
        if (end.packets == 0 && !starts_like_gtrace(packet)) return std::nullopt;
        ++end.packets;
        end.cut = static_cast<size_t>(r.position() - bytes.data());
        last = packet;
        (void)at;
    }
    if (end.packets == 0) return std::nullopt;
    end.complete = end.cut == bytes.size() && holds_facts(last);
    return end;
}

bool for_each_pftrace_attribute(std::string_view attributes,
                                const std::function<bool(std::string_view key, std::string_view value)>& entry) {
    proto::WireReader r(attributes);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (field != pftrace::TraceAttributes::kAttribute || type != 2) {
            r.skip(type);
            continue;
        }
        proto::WireReader a(r.bytes());
        std::string_view key, value;
        while (a.next(field, type)) {
            if (field == pftrace::TraceAttributes::Attribute::kKey) key = a.bytes_of(type);
            else if (field == pftrace::TraceAttributes::Attribute::kStringValue) value = a.bytes_of(type);
            else a.skip(type);
        }
        if (a.failed()) return false;
        if (!entry(key, value)) return true;
    }
    return !r.failed();
}

std::optional<PftraceOpenSlices> pftrace_open_slices(std::string_view whole_packets) {
    // As analyze/pftrace_reader.h reads them: an event on a track no descriptor named, or at a
    // time its sequence's clocks cannot place, is left out; an end on a track with none open too.
    std::unordered_map<uint32_t, pftrace_in::SequenceClocks> sequences;
    std::unordered_set<uint64_t> described;
    std::map<uint64_t, size_t> open;
    uint64_t last_ts = 0;
    WireReader trace(whole_packets);
    uint32_t field, type;
    while (trace.next(field, type)) {
        if (field != pftrace::Trace::kPacket || type != 2) {
            trace.skip(type);
            continue;
        }
        pftrace_in::PacketFields p;
        if (!pftrace_in::read_packet_fields(trace.bytes(), p)) return std::nullopt;
        pftrace_in::SequenceClocks& s = sequences[p.sequence];
        if (p.flags & TP::SEQ_INCREMENTAL_STATE_CLEARED) s = {};
        if (!s.read_clocks_of(p)) return std::nullopt;
        if (!p.descriptor.empty()) {
            WireReader d(p.descriptor);
            while (d.next(field, type))
                if (field == pftrace::TrackDescriptor::kUuid) described.insert(d.varint_of(type));
                else d.skip(type);
            if (d.failed()) return std::nullopt;
        }
        if (p.event.empty()) continue;
        auto time = s.event_time(p);
        if (!time) continue;
        last_ts = std::max(last_ts, *time);
        WireReader e(p.event);
        uint32_t kind = 0;
        uint64_t track = s.track;
        while (e.next(field, type))
            if (field == TE::kType) kind = static_cast<uint32_t>(e.varint_of(type));
            else if (field == TE::kTrackUuid) track = e.varint_of(type);
            else e.skip(type);
        if (e.failed()) return std::nullopt;
        if (!described.contains(track)) continue;
        if (kind == kSliceBegin) ++open[track];
        else if (kind == kSliceEnd && open[track] > 0) --open[track];
    }
    if (trace.failed()) return std::nullopt;
    PftraceOpenSlices result;
    result.last_ts = last_ts;
    for (const auto& [uuid, n] : open)
        if (n) result.tracks.emplace_back(uuid, n);
    return result;
}

} // namespace gtrace
