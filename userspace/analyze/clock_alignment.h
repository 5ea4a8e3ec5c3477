// Putting the traces of several nodes on one time line. Each trace's times are its host's
// CLOCK_MONOTONIC, which counts from that host's boot: the traces' clock readings (CLOCK_REALTIME
// minus CLOCK_MONOTONIC) give a first offset, as good as the hosts' wall clocks agree (NTP:
// often a millisecond or worse). The ends of the same collectives then refine it: a collective
// ends on every rank at once (an all_reduce completes together however late a rank arrived),
// while its starts differ by the ranks' lateness, so ends are the anchor. Each node's collective
// ends are matched to the nearest end of a collective of the same name on the nodes already
// aligned; the median difference is the correction (robust to the odd mismatch and to a trace
// that covers more time than the others). It corrects a clock error up to about half the time
// between two collectives of one name; a larger one is left as the clocks say.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyze/step_analysis.h"

namespace gtrace {

// One node of a job, as its trace(s) tell.
struct NodeClock {
    std::string host;                          // "" when the trace does not say
    std::optional<int64_t> realtime_offset_ns; // CLOCK_REALTIME minus CLOCK_MONOTONIC
    std::vector<const std::vector<CollectiveCall>*> ranks; // each rank's calls, sorted by `done`
    std::optional<double> cpu_pressure;        // the share of its capture a runnable task waited for a CPU
};

struct NodeAlignment {
    int64_t clock_offset_ns = 0; // from the clock readings: added to the node's times gives the first node's
    int64_t refined_ns = 0;      // from the collectives' ends, added on top
    size_t matched = 0;          // collective ends matched on the nodes before it
    std::optional<int64_t> residual_ns; // after alignment: median |end − the same collective's end there|
    // How far the collectives' correction may be off: the standard error of their median end
    // difference (1.858 × median absolute deviation / √n). A busy host returns from some
    // collectives late, and with few of them that moves the median.
    std::optional<int64_t> uncertainty_ns;
    // The most contended of this node's and the reference's CPUs (NodeClock::cpu_pressure): where
    // runnable tasks waited, a rank returns from a collective late by a scheduling delay, and
    // that delay is alike from one collective to the next — the ends agree with each other, and
    // still not with the truth (0.8 ms off beside two busy loops on 2 cores, ±25 µs stated).
    std::optional<double> cpu_pressure;
    std::string method;          // how: reference, same host as node N, clocks and collectives, clocks only (why), ...
    int64_t offset_ns() const { return clock_offset_ns + refined_ns; }
    // Why the correction cannot be trusted to kTrustedAlignmentNs, or "" when it can (or none was made).
    std::string doubt() const;
};

// A collectives' correction is trusted when at least this many ends were matched and its
// uncertainty is under this bound; otherwise the report says so beside the offset.
constexpr size_t kMinAlignmentCollectives = 8;
constexpr double kContendedCpuShare = 0.10;
constexpr int64_t kTrustedAlignmentNs = 100'000;

// Node 0 is the reference (offset 0); each other node is aligned to the ones before it.
std::vector<NodeAlignment> align_nodes(const std::vector<NodeClock>& nodes);

// The math, for the tests too. A collective end: its name and time on the reference's clock.
struct CollectiveEnd {
    std::string name;
    int64_t done = 0;
};
// For each of `calls` shifted by `shift_ns`, the difference (reference end − its end) to the
// nearest end of a collective of its name in `reference` (sorted by done) within `window_ns`;
// calls outside the reference's span of time (its first to its last end) are left out: a trace
// that covers more time would otherwise match its extra calls to the reference's first or last.
std::vector<int64_t> end_differences(const std::vector<CollectiveEnd>& reference, const std::vector<CollectiveCall>& calls,
                                     int64_t shift_ns, int64_t window_ns);
int64_t median(std::vector<int64_t> values); // the lower middle one; 0 for none
// The standard error of the median of `values` (robust: from their median absolute deviation).
std::optional<int64_t> median_standard_error(const std::vector<int64_t>& values);

// Adds `offset_ns` to the calls' times (never below 0).
void shift_calls(std::vector<CollectiveCall>& calls, int64_t offset_ns);

} // namespace gtrace
