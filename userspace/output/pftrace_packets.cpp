#include "output/pftrace_packets.h"

#include "format/pftrace_fields.h"
#include "format/proto_encoder.h"
#include "gtrace_version.h"

namespace gtrace {

using namespace pftrace_out;

std::string pftrace_header(const ClockReading& clocks) {
    std::string out;
    proto::Encoder e(out);
    e.begin(kTracePacket);
    e.varint(kSequenceId, kMetadataSequence);
    e.begin(kTraceAttributes);
    attribute(e, kPftraceToolKey, "gtrace");
    attribute(e, "version", kGtraceVersion);
    attribute(e, "host", host_name());
    attribute(e, "clock", "CLOCK_MONOTONIC");
    e.end();
    e.end();
    out += pftrace_clock_packet(clocks);
    return out;
}

std::string pftrace_clock_packet(const ClockReading& c) {
    std::string out;
    proto::Encoder e(out);
    e.begin(kTracePacket);
    e.varint(kTimestamp, c.monotonic_ns);
    e.varint(kTimestampClockId, kClockMonotonic);
    e.varint(kSequenceId, kMetadataSequence);
    e.begin(kClockSnapshot);
    clock(e, kClockMonotonic, c.monotonic_ns);
    clock(e, kClockBoottime, c.boottime_ns);
    clock(e, kClockRealtime, c.realtime_ns);
    e.varint(pftrace::ClockSnapshot::kPrimaryTraceClock, kClockMonotonic); // the trace's times are CLOCK_MONOTONIC's
    e.end();
    e.end();
    return out;
}

std::string pftrace_facts_packet(const nlohmann::json& facts) {
    std::string out;
    proto::Encoder e(out);
    e.begin(kTracePacket);
    e.varint(kSequenceId, kMetadataSequence);
    e.begin(kTraceAttributes);
    attribute(e, kPftraceFactsKey, facts.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    e.end();
    e.end();
    return out;
}

std::string pftrace_slice_ends(const PftraceOpenSlices& open) {
    std::string out;
    proto::Encoder e(out);
    bool first = true;
    for (auto [uuid, depth] : open.tracks)
        for (size_t i = 0; i < depth; ++i) {
            // A sequence of their own, with absolute times: the cut may have taken the packets
            // that the tracks' own sequences' incremental clocks count from.
            e.begin(kTracePacket);
            e.varint(kTimestamp, open.last_ts);
            e.varint(kTimestampClockId, kClockMonotonic);
            e.varint(kSequenceId, kClosingSequence);
            e.varint(kSequenceFlags, first ? kSeqIncrementalStateCleared | kSeqNeedsIncrementalState : kSeqNeedsIncrementalState);
            e.begin(kTrackEvent);
            e.varint(kType, kSliceEnd);
            e.varint(kTrackUuid, uuid);
            e.end();
            e.end();
            first = false;
        }
    return out;
}

} // namespace gtrace
