// One packet sequence's state while reading a .pftrace (analyze/pftrace_reader.h): the interned
// ids the analysis needs (event names, categories, annotation names and string values, source
// locations), the sequence's default track and clock, and its incremental clock.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "analyze/trace_data.h"

namespace gtrace::pftrace_in {

// Perfetto's builtin clock ids (BuiltinClock in clock_snapshot.proto): gtrace writes
// CLOCK_MONOTONIC, and an incremental clock of its own above 63 (sequence-scoped ids).
constexpr uint32_t kClockRealtime = 1, kClockMonotonic = 3, kClockIncremental = 64;
// gtrace writes up to this many incremental clocks per sequence, kClockIncremental and up (a
// sequence's events written out of order each take the one just below their time).
constexpr uint32_t kMaxIncrementalClocks = 8;

// A ClockSnapshot's CLOCK_REALTIME minus its CLOCK_MONOTONIC; none when it lacks either.
std::optional<int64_t> realtime_offset(std::string_view snapshot);

enum class Cat : uint8_t { Other, Call, Range, Kernel, Memcpy, Memset, Sample, Collective, OffCpu };
enum class Ann : uint8_t { Other, Bytes, Kind, Correlation, Phase, IssuedNs, AtAttach };

template <typename T>
T get(const std::vector<T>& table, uint64_t iid) {
    return iid < table.size() ? table[iid] : T{};
}

struct Sequence {
    std::vector<std::string_view> names, strings, sources;
    std::vector<Cat> categories;
    std::vector<Ann> annotations;
    uint64_t track = 0;
    uint32_t clock = 0;
    struct Incremental {
        bool known = false;
        uint64_t value = 0; // the incremental clock's value
        int64_t offset = 0; // CLOCK_MONOTONIC minus it
    };
    Incremental incremental[kMaxIncrementalClocks]; // clocks kClockIncremental and up
    void clear() { *this = Sequence(); }
    // A packet's time on `clock` (its timestamp a delta on an incremental clock); nullopt: not a
    // clock gtrace writes, or an incremental one no snapshot defined.
    std::optional<uint64_t> time_of(uint32_t clock, uint64_t timestamp);

    // TracePacketDefaults, ClockSnapshot and InternedData; false: malformed. Strings kept go
    // into `pool` (the trace data's).
    bool read_defaults(std::string_view bytes);
    bool read_clock_snapshot(std::string_view bytes);
    bool read_interned(std::string_view bytes, StringPool& pool);
};

// Each clock of a ClockSnapshot as (id, time); false: malformed.
bool for_each_clock(std::string_view snapshot, const std::function<void(uint32_t id, uint64_t ts)>& on_clock);

} // namespace gtrace::pftrace_in
