// The clocks a trace is aligned by: CLOCK_MONOTONIC (the trace's clock: BPF's bpf_ktime_get_ns
// and the agents' records), CLOCK_BOOTTIME and CLOCK_REALTIME read back to back, so that traces
// of several nodes (or a trace and a log) can be put on one time line; and the host's name.
#pragma once
#include <cstdint>
#include <string>

namespace gtrace {

struct ClockReading {
    uint64_t monotonic_ns = 0, boottime_ns = 0, realtime_ns = 0;
};

// The tightest of several back-to-back readings: BOOTTIME and REALTIME between two MONOTONIC
// reads, the pair closest together, MONOTONIC taken as their midpoint.
ClockReading read_clocks();
uint64_t monotonic_now_ns();
std::string host_name();

} // namespace gtrace
