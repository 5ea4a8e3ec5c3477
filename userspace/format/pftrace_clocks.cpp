#include "format/pftrace_clocks.h"

#include "format/proto_wire.h"
#include "pftrace_field_numbers.h"

namespace gtrace::pftrace_in {

using proto::WireReader;
using TP = pftrace::TracePacket;

bool read_packet_fields(std::string_view packet, PacketFields& p) {
    WireReader r(packet);
    uint32_t field, type;
    while (r.next(field, type)) {
        switch (field) {
        case TP::kTimestamp: p.timestamp = r.varint_of(type), p.has_timestamp = true; break;
        case TP::kTimestampClockId: p.clock = static_cast<uint32_t>(r.varint_of(type)), p.has_clock = true; break;
        case TP::kTrustedPacketSequenceId: p.sequence = static_cast<uint32_t>(r.varint_of(type)); break;
        case TP::kSequenceFlags: p.flags = static_cast<uint32_t>(r.varint_of(type)); break;
        case TP::kTrackEvent: p.event = r.bytes_of(type); break;
        case TP::kTrackDescriptor: p.descriptor = r.bytes_of(type); break;
        case TP::kClockSnapshot: p.clocks = r.bytes_of(type); break;
        case TP::kTraceAttributes: p.attributes = r.bytes_of(type); break;
        case TP::kInternedData: p.interned = r.bytes_of(type); break;
        case TP::kTracePacketDefaults: p.defaults = r.bytes_of(type); break;
        default: r.skip(type);
        }
    }
    return !r.failed();
}

bool SequenceClocks::read_defaults(std::string_view bytes) {
    WireReader r(bytes);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (field == pftrace::TracePacketDefaults::kTimestampClockId) clock = static_cast<uint32_t>(r.varint_of(type));
        else if (field == pftrace::TracePacketDefaults::kTrackEventDefaults && type == 2) {
            WireReader d(r.bytes());
            while (d.next(field, type)) {
                if (field == pftrace::TrackEventDefaults::kTrackUuid) track = d.varint_of(type);
                else d.skip(type);
            }
            if (d.failed()) return false;
        } else r.skip(type);
    }
    return !r.failed();
}

bool for_each_clock(std::string_view snapshot, const std::function<void(uint32_t id, uint64_t ts)>& on_clock) {
    WireReader r(snapshot);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (field != pftrace::ClockSnapshot::kClocks || type != 2) {
            r.skip(type);
            continue;
        }
        WireReader c(r.bytes());
        uint32_t id = 0;
        uint64_t ts = 0;
        while (c.next(field, type)) {
            if (field == pftrace::ClockSnapshot::Clock::kClockId) id = static_cast<uint32_t>(c.varint_of(type));
            else if (field == pftrace::ClockSnapshot::Clock::kTimestamp) ts = c.varint_of(type);
            else c.skip(type);
        }
        if (c.failed()) return false;
        on_clock(id, ts);
    }
    return !r.failed();
}

std::optional<int64_t> realtime_offset(std::string_view snapshot) {
    std::optional<uint64_t> mono, real;
    bool ok = for_each_clock(snapshot, [&](uint32_t id, uint64_t ts) {
        if (id == kClockMonotonic) mono = ts;
        if (id == kClockRealtime) real = ts;
    });
    if (!ok || !mono || !real) return std::nullopt;
    return static_cast<int64_t>(*real - *mono);
}

bool SequenceClocks::read_clock_snapshot(std::string_view bytes) {
    std::optional<uint64_t> mono, inc[kMaxIncrementalClocks];
    bool ok = for_each_clock(bytes, [&](uint32_t id, uint64_t ts) {
        if (id == kClockMonotonic) mono = ts;
        if (id >= kClockIncremental && id < kClockIncremental + kMaxIncrementalClocks) inc[id - kClockIncremental] = ts;
    });
    for (uint32_t i = 0; i < kMaxIncrementalClocks; ++i)
        if (ok && mono && inc[i]) incremental[i] = {true, *inc[i], static_cast<int64_t>(*mono - *inc[i])};
    return ok;
}

std::optional<uint64_t> SequenceClocks::time_of(uint32_t clock, uint64_t timestamp) {
    if (clock == kClockMonotonic) return timestamp;
    if (clock < kClockIncremental || clock >= kClockIncremental + kMaxIncrementalClocks) return std::nullopt; // gtrace writes no other
    Incremental& inc = incremental[clock - kClockIncremental];
    if (!inc.known) return std::nullopt; // no snapshot defines it: the event cannot be placed
    inc.value += timestamp;
    return inc.value + static_cast<uint64_t>(inc.offset);
}

} // namespace gtrace::pftrace_in
