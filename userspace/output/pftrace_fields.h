// Field numbers and constants of the Perfetto trace format that gtrace writes (the subset in
// output/pftrace.proto, whose comments cite Perfetto's published schema for each number), and
// the small messages both the writer and the standalone packets encode.
#pragma once
#include <cstdint>
#include <string_view>

#include "output/proto_encoder.h"

namespace gtrace::pftrace_out {

// Field numbers (pftrace.proto).
enum : uint32_t {
    kTracePacket = 1, // Trace.packet
    // TracePacket
    kTimestamp = 8,
    kTimestampClockId = 58,
    kTrackEvent = 11,
    kTrackDescriptor = 60,
    kClockSnapshot = 6,
    kTraceAttributes = 126,
    kSequenceId = 10,
    kInternedData = 12,
    kSequenceFlags = 13,
    kPacketDefaults = 59,
    kFirstOnSequence = 87,
    // TrackEvent
    kCategoryIids = 3,
    kNameIid = 10,
    kType = 9,
    kTrackUuid = 11,
    kCounterValue = 30,
    kFlowIds = 47,
    kTerminatingFlowIds = 48,
    kCallstackIid = 56,
    kDebugAnnotations = 4,
    kSourceLocationIid = 34,
};
enum : uint32_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };
enum : uint32_t { kSeqIncrementalStateCleared = 1, kSeqNeedsIncrementalState = 2 };
enum : uint32_t { kClockRealtime = 1, kClockMonotonic = 3, kClockBoottime = 6, kClockIncremental = 64 };
// Delta clocks per sequence, ids kClockIncremental and up: an event takes the one just below its
// time, so that events written out of order (a range written when it ends, begun before the
// calls already written; the agent's calls behind the uprobes' ranges) stay deltas.
constexpr uint32_t kIncrementalClocks = 4;
constexpr uint32_t kMetadataSequence = 1;
constexpr uint32_t kClosingSequence = 0x7FFFFFFF; // a cut trace's slice ends; tracks' sequences count up from 2
constexpr uint64_t kClockSnapshotEveryNs = 10'000'000'000ull;

inline void attribute(proto::Encoder& e, std::string_view key, std::string_view value) {
    e.begin(1); // TraceAttributes.attribute
    e.bytes(1, key);
    e.bytes(3, value);
    e.end();
}

inline void clock(proto::Encoder& e, uint32_t id, uint64_t ts, bool incremental = false) {
    e.begin(1); // ClockSnapshot.clocks
    e.varint(1, id);
    e.varint(2, ts);
    if (incremental) e.boolean(3, true);
    e.end();
}

} // namespace gtrace::pftrace_out
