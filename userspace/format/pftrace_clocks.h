// A .pftrace packet's fields and the clocks of its sequence as gtrace writes them: the sequence's
// defaults (track and clock), the ClockSnapshots that place its incremental clocks, and a packet's
// time from them. What the trace's reader (analyze/pftrace_reader.h) and its scans
// (pftrace_scan.h) share.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "pftrace_field_numbers.h" // generated from format/pftrace.proto (CMakeLists.txt)

namespace gtrace::pftrace_in {

// Perfetto's builtin clock ids (BuiltinClock in clock_snapshot.proto): gtrace writes
// CLOCK_MONOTONIC, and an incremental clock of its own above 63 (sequence-scoped ids).
constexpr uint32_t kClockRealtime = pftrace::BuiltinClock::BUILTIN_CLOCK_REALTIME;
constexpr uint32_t kClockMonotonic = pftrace::BuiltinClock::BUILTIN_CLOCK_MONOTONIC;
constexpr uint32_t kClockIncremental = 64; // the first sequence-scoped clock id (64 to 127)
// gtrace writes up to this many incremental clocks per sequence, kClockIncremental and up (a
// sequence's events written out of order each take the one just below their time).
constexpr uint32_t kMaxIncrementalClocks = 8;

// A ClockSnapshot's CLOCK_REALTIME minus its CLOCK_MONOTONIC; none when it lacks either.
std::optional<int64_t> realtime_offset(std::string_view snapshot);

// Each clock of a ClockSnapshot as (id, time); false: malformed.
bool for_each_clock(std::string_view snapshot, const std::function<void(uint32_t id, uint64_t ts)>& on_clock);

// One TracePacket's fields gtrace's readers use, as views of its bytes.
struct PacketFields {
    bool has_timestamp = false, has_clock = false;
    uint64_t timestamp = 0;
    uint32_t clock = 0, sequence = 0, flags = 0;
    std::string_view event, descriptor, clocks, attributes, interned, defaults;
};
// False: malformed.
bool read_packet_fields(std::string_view packet, PacketFields& p);

struct SequenceClocks {
    uint64_t track = 0; // TrackEventDefaults.track_uuid
    uint32_t clock = 0; // TracePacketDefaults.timestamp_clock_id
    struct Incremental {
        bool known = false;
        uint64_t value = 0; // the incremental clock's value
        int64_t offset = 0; // CLOCK_MONOTONIC minus it
    };
    Incremental incremental[kMaxIncrementalClocks]; // clocks kClockIncremental and up

    // A packet's time on `clock` (its timestamp a delta on an incremental clock); nullopt: not a
    // clock gtrace writes, or an incremental one no snapshot defined.
    std::optional<uint64_t> time_of(uint32_t clock, uint64_t timestamp);
    // A packet's TracePacketDefaults and ClockSnapshot, if it has them; false: malformed. (The
    // sequence's state, when the packet clears it, is its owner's to clear first.)
    bool read_clocks_of(const PacketFields& p) {
        return (p.defaults.empty() || read_defaults(p.defaults)) && (p.clocks.empty() || read_clock_snapshot(p.clocks));
    }
    // A packet's event time, on its own clock or the sequence's default one.
    std::optional<uint64_t> event_time(const PacketFields& p) { return time_of(p.has_clock ? p.clock : clock, p.timestamp); }
    bool read_defaults(std::string_view bytes);
    bool read_clock_snapshot(std::string_view bytes);
};

} // namespace gtrace::pftrace_in
