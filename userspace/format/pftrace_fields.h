// Field numbers and constants of the Perfetto trace format that gtrace writes (the subset in
// format/pftrace.proto, whose comments cite Perfetto's published schema for each number), and
// the small messages both the writer and the standalone packets encode.
#pragma once
#include <cstdint>
#include <string_view>

#include "format/proto_encoder.h"
#include "pftrace_field_numbers.h" // generated from pftrace.proto (CMakeLists.txt)

namespace gtrace::pftrace_out {

// Field numbers and enum values: generated from pftrace.proto by protoc at build time
// (gen/pftrace_field_numbers.h); the short names the writer uses, below, are those.
using TP = pftrace::TracePacket;
using TE = pftrace::TrackEvent;
enum : uint32_t {
    kTracePacket = pftrace::Trace::kPacket,
    // TracePacket
    kTimestamp = TP::kTimestamp,
    kTimestampClockId = TP::kTimestampClockId,
    kTrackEvent = TP::kTrackEvent,
    kTrackDescriptor = TP::kTrackDescriptor,
    kClockSnapshot = TP::kClockSnapshot,
    kTraceAttributes = TP::kTraceAttributes,
    kSequenceId = TP::kTrustedPacketSequenceId,
    kInternedData = TP::kInternedData,
    kSequenceFlags = TP::kSequenceFlags,
    kPacketDefaults = TP::kTracePacketDefaults,
    kFirstOnSequence = TP::kFirstPacketOnSequence,
    // TrackEvent
    kCategoryIids = TE::kCategoryIids,
    kNameIid = TE::kNameIid,
    kType = TE::kType,
    kTrackUuid = TE::kTrackUuid,
    kCounterValue = TE::kCounterValue,
    kFlowIds = TE::kFlowIds,
    kTerminatingFlowIds = TE::kTerminatingFlowIds,
    kCallstackIid = TE::kCallstackIid,
    kDebugAnnotations = TE::kDebugAnnotations,
    kSourceLocationIid = TE::kSourceLocationIid,
};
enum : uint32_t { kSliceBegin = TE::TYPE_SLICE_BEGIN, kSliceEnd = TE::TYPE_SLICE_END, kInstant = TE::TYPE_INSTANT, kCounter = TE::TYPE_COUNTER };
enum : uint32_t { kSeqIncrementalStateCleared = TP::SEQ_INCREMENTAL_STATE_CLEARED, kSeqNeedsIncrementalState = TP::SEQ_NEEDS_INCREMENTAL_STATE };
using Clock = pftrace::BuiltinClock;
enum : uint32_t {
    kClockRealtime = Clock::BUILTIN_CLOCK_REALTIME,
    kClockMonotonic = Clock::BUILTIN_CLOCK_MONOTONIC,
    kClockBoottime = Clock::BUILTIN_CLOCK_BOOTTIME,
    kClockIncremental = 64, // the first sequence-scoped clock id (clock_snapshot.proto: 64 to 127)
};
// Delta clocks per sequence, ids kClockIncremental and up: an event takes the one just below its
// time, so that events written out of order (a range written when it ends, begun before the
// calls already written; the agent's calls behind the uprobes' ranges) stay deltas.
constexpr uint32_t kIncrementalClocks = 4;
constexpr uint32_t kMetadataSequence = 1;
constexpr uint32_t kClosingSequence = 0x7FFFFFFF; // a cut trace's slice ends; tracks' sequences count up from 2
constexpr uint64_t kClockSnapshotEveryNs = 10'000'000'000ull;

inline void attribute(proto::Encoder& e, std::string_view key, std::string_view value) {
    using A = pftrace::TraceAttributes::Attribute;
    e.begin(pftrace::TraceAttributes::kAttribute);
    e.bytes(A::kKey, key);
    e.bytes(A::kStringValue, value);
    e.end();
}

inline void clock(proto::Encoder& e, uint32_t id, uint64_t ts, bool incremental = false) {
    using C = pftrace::ClockSnapshot::Clock;
    e.begin(pftrace::ClockSnapshot::kClocks);
    e.varint(C::kClockId, id);
    e.varint(C::kTimestamp, ts);
    if (incremental) e.boolean(C::kIsIncremental, true);
    e.end();
}

} // namespace gtrace::pftrace_out
