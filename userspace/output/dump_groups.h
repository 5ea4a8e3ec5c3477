// Which rank fell behind on a process group when every rank's stack looks alike: the collectives
// each rank entered per group, as a capture running on this host counted them
// (model/collective_counts.h, published in the registry: output/capture_registry.h). Groups are
// matched across ranks by their order in each process (group 0, 1, ...: by address); on each group, what each
// rank issued after the last collective of the group every rank completed is compared with what
// most of its ranks issued: a rank with fewer skipped one (behind), with more went on without the
// others (ahead) — either way the odd one out.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "output/dump_standing.h"

namespace gtrace {

struct GroupCount {
    std::string backend, last;
    uint64_t last_completed_ns = 0;
    std::vector<uint64_t> recent_issues_ns;
    uint64_t hole_until_ns = 0; // the process had calls it could not record until then (UINT64_MAX: still)
};

struct PublishedCounts {
    std::map<uint32_t, std::vector<GroupCount>> groups; // pid -> its groups in order
    std::string since;           // when the capture that counted them started ("" when none did)
    uint64_t last_change_ns = 0; // CLOCK_MONOTONIC of its last collective
    uint64_t read_until_ns = 0;  // the capture had read every collective before this (the earliest of several)
    uint64_t unrecorded = 0;     // collective events the capture's ring had no room for
    // Whether the job has stood still long enough by the dump's clock, but the capture has yet to
    // publish that it saw it so (it does within a second): worth reading again.
    bool awaiting_capture(uint64_t now_ns) const;
};

// What running captures published for these processes (empty when no capture counted them).
PublishedCounts published_group_counts(const std::set<uint32_t>& pids);

// Sets each lagging rank's RankStanding::lag ("one behind on process group 1 (gloo)") and returns
// the lines that say what each group's ranks entered ("" without counts). Counts still changing
// (within CollectiveCounts::kStillNs of `now_ns`, or of what the capture had read: the job still
// makes progress), counts the capture could not record whole (its ring full; on one group, a
// rank's hole that had not closed by the group's reference point), or ranks whose groups differ
// in number or backend (a rank that has not used a group since the capture began shifts the
// order) are not compared, and the lines say so.
std::string judge_group_lags(std::vector<RankStanding>& ranks, const PublishedCounts& counts, uint64_t now_ns);

} // namespace gtrace
